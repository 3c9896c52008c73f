"""Shared constants and helpers for the Tracer Bumble test scripts (tracer_central.py, tracer_peripheral.py).

Every script prints exactly one JSON object on stdout and logs to stderr, so a test harness can parse stdout
without filtering.
"""
import asyncio
import json
import logging
import signal
import struct
import sys

from bumble import hci
from bumble.core import UUID

# A process inherits its parent's blocked signals, and the Swift test process starts the scripts from threads that
# block nearly all of them: SIGTERM (BumblePeer.stop) then never arrived, and a peer ran on until its --timeout.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

SERVICE_UUID = UUID("a09a0000-5aaa-47f2-9c7f-93bdb3a65376")
ID_CHARACTERISTIC_UUID = UUID("a09a0001-5aaa-47f2-9c7f-93bdb3a65376")
WRITE_CHARACTERISTIC_UUID = UUID("a09a0002-5aaa-47f2-9c7f-93bdb3a65376")

ATT_READ_NOT_PERMITTED = 0x02
ATT_INVALID_ATTRIBUTE_VALUE_LENGTH = 0x0D

# AD type codes, written out so the advertising bytes are exactly what the Tracer spec lists.
AD_FLAGS = 0x01
AD_COMPLETE_128_BIT_UUIDS = 0x07
AD_TX_POWER_LEVEL = 0x0A


def tracer_advertising_data(tx_power: int) -> bytes:
    """Flags 0x06 (LE General Discoverable, BR/EDR not supported), the service UUID, TX power. Nothing else."""
    service = bytes(SERVICE_UUID.to_bytes())  # little-endian, as on the air
    return (
        bytes([2, AD_FLAGS, 0x06])
        + bytes([1 + len(service), AD_COMPLETE_128_BIT_UUIDS]) + service
        + bytes([2, AD_TX_POWER_LEVEL]) + struct.pack("b", tx_power)
    )


def parse_ad_structures(data: bytes) -> list[tuple[int, bytes]]:
    """Plain length-type-value walk; stops at a zero length or a truncated structure, as a scanner should."""
    structures = []
    offset = 0
    while offset < len(data):
        length = data[offset]
        if length == 0 or offset + 1 + length > len(data):
            break
        structures.append((data[offset + 1], data[offset + 2 : offset + 1 + length]))
        offset += 1 + length
    return structures


class StepTimeout(Exception):
    """One step ran out of its own time; kept apart from the overall deadline so the error names the step."""


async def within(awaitable, seconds: float, what: str):
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except asyncio.TimeoutError:
        raise StepTimeout(f"{what}: no answer within {seconds} s") from None


def connect_with_legacy_commands(device) -> None:
    """Makes `device.connect` use LE Create Connection, never LE Extended Create Connection; call after power_on.

    The scripts scan and advertise with legacy commands. Bumble's connect picks the extended command whenever the
    controller's Supported Commands flag it: Bumble's own virtual controller does not (NOTES.md quirk 11), RootCanal's
    DEFAULT and LAIRD_BL654 models do, and a spec-faithful controller refuses to mix the two command sets (Core Vol 4
    Part E 3.1.1): RootCanal answers Command Disallowed, "extended advertising command rejected because legacy
    advertising is being used".
    """
    host = device.host
    supports_command = host.supports_command
    host.supports_command = lambda op_code: (
        op_code != hci.HCI_LE_EXTENDED_CREATE_CONNECTION_COMMAND and supports_command(op_code)
    )


def setup_logging(verbose: bool) -> None:
    # stdout is reserved for the single JSON result.
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )


def emit(result: dict) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def run_with_timeout(coroutine_factory, timeout: float) -> int:
    """Run the script body under an overall deadline; always print one JSON object and return the exit code.

    The body returns its result dict (success) or raises; a timeout or exception becomes {"error": ...}.
    """

    async def guarded() -> int:
        try:
            result = await asyncio.wait_for(coroutine_factory(), timeout)
        except asyncio.TimeoutError:
            emit({"error": f"timeout after {timeout} s"})
            return 2
        except Exception as error:  # noqa: BLE001 - any failure must still produce JSON for the harness
            logging.getLogger(__name__).exception("failed")
            emit({"error": f"{type(error).__name__}: {error}"})
            return 1
        emit(result)
        return 0

    try:
        return asyncio.run(guarded())
    except KeyboardInterrupt:
        emit({"error": "interrupted"})
        return 130


async def configure_legacy_advertising(device, data: bytes, interval_ms: float) -> None:
    """Connectable ADV_IND from the device's random address, set through raw HCI commands so the
    parameters and their order are ours: parameters before data and enable, since enabling with an
    interval of 0 floods the link (NOTES.md quirk 5). The caller enables advertising."""
    interval = int(interval_ms / 0.625)
    await device.send_sync_command(
        hci.HCI_LE_Set_Advertising_Parameters_Command(
            advertising_interval_min=interval,
            advertising_interval_max=interval,
            advertising_type=hci.HCI_LE_Set_Advertising_Parameters_Command.AdvertisingType.ADV_IND,
            own_address_type=hci.OwnAddressType.RANDOM,
            peer_address_type=hci.Address.PUBLIC_DEVICE_ADDRESS,
            peer_address=hci.Address.ANY,
            advertising_channel_map=0x07,
            advertising_filter_policy=0x00,
        )
    )
    await device.send_sync_command(hci.HCI_LE_Set_Advertising_Data_Command(advertising_data=bytes(data)))

