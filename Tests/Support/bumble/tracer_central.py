#!/usr/bin/env python3
"""A Bumble central that exercises a Tracer peripheral's GATT service, to test the Swift peripheral against.

Usage: tracer_central.py --transport tcp-client:127.0.0.1:PORT [--address C0:00:00:00:00:B1]
           [--write-id 1122334455667788] [--rssi -60] [--tx 4] [--mtu 517] [--rounds N]
           [--scan-timeout 10] [--op-timeout 3] [--establish-timeout 0.3] [--establish-retries 10]
           [--start-delay 0] [--timeout 20] [-v]

Single run: scan, connect, MTU exchange, discovery, read id, write 8 bytes (with response), 10 bytes (with
response), 8 bytes (without response), 7 bytes (expect ATT 0x0D), read the write characteristic (expect ATT 0x02),
disconnect. --rounds N: scan once, then N times connect, discover, read, write 10 bytes, disconnect (no MTU
exchange, no error cases). The JSON printed on stdout is described in README.md.
"""
import argparse
import asyncio
import logging
import statistics
import struct
import sys
import time

from bumble import hci
from bumble.att import ATT_Error
from bumble.device import Device, Peer
from bumble.transport import open_transport

from tracer_common import (
    AD_COMPLETE_128_BIT_UUIDS,
    AD_TX_POWER_LEVEL,
    ID_CHARACTERISTIC_UUID,
    SERVICE_UUID,
    WRITE_CHARACTERISTIC_UUID,
    StepTimeout,
    connect_with_legacy_commands,
    parse_ad_structures,
    run_with_timeout,
    setup_logging,
    within,
)

logger = logging.getLogger("tracer_central")


def now_ms() -> float:
    return time.perf_counter() * 1000.0


def round_ms(value: float) -> float:
    return round(value, 3)


def advertises_tracer(data: bytes) -> bool:
    service = bytes(SERVICE_UUID.to_bytes())
    for ad_type, value in parse_ad_structures(data):
        if ad_type == AD_COMPLETE_128_BIT_UUIDS and any(
            value[i : i + 16] == service for i in range(0, len(value) - 15, 16)
        ):
            return True
    return False


def ad_tx_power(data: bytes) -> int | None:
    for ad_type, value in parse_ad_structures(data):
        if ad_type == AD_TX_POWER_LEVEL and len(value) == 1:
            return struct.unpack("b", value)[0]
    return None


class TracerCentral:
    def __init__(self, device: Device, arguments):
        self.device = device
        self.arguments = arguments
        self.peer_id = bytes.fromhex(arguments.write_id)
        if len(self.peer_id) != 8:
            raise ValueError("--write-id must be 8 bytes of hex")
        self.long_form = self.peer_id + struct.pack("bb", arguments.rssi, arguments.tx)

    async def operation(self, awaitable, what: str):
        # Bumble's own ATT timeout is 30 s; a peer that never answers (e.g. NOTES.md quirk 12) must not eat the
        # whole budget, so each ATT operation gets a shorter deadline of its own.
        return await within(awaitable, self.arguments.op_timeout, what)

    async def scan(self):
        """Return the first advertisement carrying the Tracer service UUID (from --target, if given)."""
        found = asyncio.get_running_loop().create_future()
        target = self.arguments.target.upper() if self.arguments.target else None

        def on_advertisement(advertisement) -> None:
            # The virtual controller reports each advertisement twice (legacy scan still gets extended reports,
            # NOTES.md quirk 2); the first one wins.
            if target and advertisement.address.to_string(False).upper() != target:
                return
            if not found.done() and advertises_tracer(advertisement.data_bytes):
                found.set_result(advertisement)

        self.device.on("advertisement", on_advertisement)
        try:
            # Legacy scan commands, as the Swift host uses; passive, since the virtual controller never sends scan
            # responses (NOTES.md quirk 4).
            await self.device.start_scanning(legacy=True, active=False, filter_duplicates=False)
            return await within(found, self.arguments.scan_timeout, "scan for the Tracer service")
        finally:
            self.device.remove_listener("advertisement", on_advertisement)
            # Bumble stops with the extended command unless told the scan was legacy; match the start command.
            await self.device.stop_scanning(legacy=True)

    async def connect(self, address: hci.Address):
        return await self.device.connect(
            address, own_address_type=hci.OwnAddressType.RANDOM, timeout=self.arguments.scan_timeout
        )

    async def discover(self, peer: Peer):
        services = await self.operation(peer.discover_services([SERVICE_UUID]), "service discovery")
        if not services:
            return None, {}
        service = services[0]
        characteristics = await self.operation(service.discover_characteristics(), "characteristic discovery")
        by_uuid = {characteristic.uuid: characteristic for characteristic in characteristics}
        return service, by_uuid

    async def write(self, peer: Peer, characteristic, value: bytes, with_response: bool) -> dict:
        record = {"value": value.hex(), "with_response": with_response, "result": "ok", "att_error": None}
        try:
            await self.operation(peer.write_value(characteristic, value, with_response=with_response), "write")
        except ATT_Error as error:
            record.update(result="error", att_error=error.error_code)
        except StepTimeout:
            record.update(result="timeout")
        return record

    async def read_error(self, peer: Peer, characteristic) -> tuple[int | None, str]:
        try:
            value = await self.operation(peer.read_value(characteristic), "read of the write characteristic")
        except ATT_Error as error:
            return error.error_code, "error"
        except StepTimeout:
            return None, "timeout"
        logger.warning("read of the write characteristic returned %s", bytes(value).hex())
        return None, "ok"

    async def connect_established(self, address: hci.Address):
        """Connect and exchange MTUs, retrying links the peripheral never took; returns (connection, connected_at,
        peer, mtu, phantom_links).

        When two initiators answer the same advertising event, a real controller that loses the race reports
        Connection Failed to be Established (0x3E) and its host tries again. Bumble's virtual controller reports
        success to every initiator at once while the advertiser takes only the first CONNECT_IND (README.md,
        "Phantom links"): the loser holds a link nobody answers on. So a link whose first ATT request (the MTU
        exchange) goes unanswered within --establish-timeout counts as not established, as a real controller's
        supervision of a new link would: disconnect and connect again, --establish-retries times at most.
        """
        phantom_links = 0
        while True:
            connection = await self.connect(address)
            connected_at = now_ms()
            peer = Peer(connection)
            try:
                mtu = await within(peer.request_mtu(self.arguments.mtu), self.arguments.establish_timeout,
                                   "MTU exchange")
                return connection, connected_at, peer, mtu, phantom_links
            except StepTimeout:
                await self.disconnect(connection)
                phantom_links += 1
                if phantom_links > self.arguments.establish_retries:
                    raise
                logger.warning("no answer on a new link (phantom %d); connecting again", phantom_links)
            except BaseException:
                await self.disconnect(connection)
                raise

    async def single(self) -> dict:
        start = now_ms()
        advertisement = await self.scan()
        connection, connected, peer, mtu, phantom_links = await self.connect_established(advertisement.address)
        try:
            discovery_start = now_ms()
            service, characteristics = await self.discover(peer)
            discovery = now_ms() - discovery_start

            id_characteristic = characteristics.get(ID_CHARACTERISTIC_UUID)
            write_characteristic = characteristics.get(WRITE_CHARACTERISTIC_UUID)
            read_id = None
            read_time = write_time = None
            writes = []
            read_write_error = None
            read_write_result = None
            if id_characteristic is not None:
                read_start = now_ms()
                read_id = bytes(await self.operation(peer.read_value(id_characteristic), "read id")).hex()
                read_time = now_ms() - read_start
            if write_characteristic is not None:
                write_start = now_ms()
                writes.append(await self.write(peer, write_characteristic, self.peer_id, True))
                write_time = now_ms() - write_start
                writes.append(await self.write(peer, write_characteristic, self.long_form, True))
                writes.append(await self.write(peer, write_characteristic, self.peer_id, False))
                writes.append(await self.write(peer, write_characteristic, self.peer_id[:7], True))
                read_write_error, read_write_result = await self.read_error(peer, write_characteristic)
        finally:
            await self.disconnect(connection)
        total = now_ms() - start

        return {
            "advertiser": advertisement.address.to_string(False),
            "advertiser_address_type": advertisement.address.address_type,
            "adv_data": bytes(advertisement.data_bytes).hex(),
            "tx_power": ad_tx_power(advertisement.data_bytes),
            "mtu": mtu,
            "phantom_links": phantom_links,
            "service_found": service is not None,
            "service": None if service is None else {"start_handle": service.handle,
                                                     "end_handle": service.end_group_handle},
            "characteristics": {
                name: describe(characteristic)
                for name, characteristic in (("id", id_characteristic), ("write", write_characteristic))
                if characteristic is not None
            },
            "read_id": read_id,
            "writes": writes,
            "read_write_char_error": read_write_error,
            "read_write_char_result": read_write_result,
            "timings_ms": {
                "scan_to_connected": round_ms(connected - start),
                "discovery": round_ms(discovery),
                "read": None if read_time is None else round_ms(read_time),
                "write": None if write_time is None else round_ms(write_time),
                "total": round_ms(total),
            },
        }

    async def rounds(self, count: int) -> dict:
        advertisement = await self.scan()
        rounds = []
        for index in range(count):
            start = now_ms()
            connection = await self.connect(advertisement.address)
            connected = now_ms()
            try:
                peer = Peer(connection)
                _, characteristics = await self.discover(peer)
                discovered = now_ms()
                missing = {ID_CHARACTERISTIC_UUID, WRITE_CHARACTERISTIC_UUID} - characteristics.keys()
                if missing:
                    raise RuntimeError(f"round {index}: characteristics not found: {sorted(map(str, missing))}")
                read_id = bytes(
                    await self.operation(peer.read_value(characteristics[ID_CHARACTERISTIC_UUID]), "read id")
                )
                read_done = now_ms()
                write = await self.write(peer, characteristics[WRITE_CHARACTERISTIC_UUID], self.long_form, True)
                written = now_ms()
                if write["result"] != "ok":
                    raise RuntimeError(f"round {index}: write failed: {write}")
            finally:
                await self.disconnect(connection)
            done = now_ms()
            rounds.append({
                "connect": round_ms(connected - start),
                "discovery": round_ms(discovered - connected),
                "read": round_ms(read_done - discovered),
                "write": round_ms(written - read_done),
                "disconnect": round_ms(done - written),
                "total": round_ms(done - start),
                "read_id": read_id.hex(),
            })
        totals = [entry["total"] for entry in rounds]
        return {
            "advertiser": advertisement.address.to_string(False),
            "adv_data": bytes(advertisement.data_bytes).hex(),
            "tx_power": ad_tx_power(advertisement.data_bytes),
            "rounds": count,
            "round_total_ms": totals,
            "median_ms": round_ms(statistics.median(totals)),
            # Connect time swings between ~1 ms and one advertising interval depending on whether the peripheral
            # re-enabled advertising before or after our Create Connection; the rest of a round is the stable part.
            "median_exchange_ms": round_ms(statistics.median(entry["total"] - entry["connect"] for entry in rounds)),
            "median_phase_ms": {
                phase: round_ms(statistics.median(entry[phase] for entry in rounds))
                for phase in ("connect", "discovery", "read", "write", "disconnect")
            },
            "round_timings_ms": rounds,
        }

    async def disconnect(self, connection) -> None:
        # Wait for Disconnection Complete so the next round's connect does not race the old link.
        try:
            await within(connection.disconnect(), self.arguments.op_timeout, "disconnect")
        except Exception as error:  # noqa: BLE001 - a failed disconnect is logged, not fatal to the report
            logger.warning("disconnect failed: %s", error)


def describe(characteristic) -> dict:
    return {
        "uuid": str(characteristic.uuid),
        "value_handle": characteristic.handle,
        "end_group_handle": characteristic.end_group_handle,
        "properties": int(characteristic.properties),
        "property_names": [flag.name for flag in type(characteristic.properties) if flag in characteristic.properties],
    }


async def run(arguments) -> dict:
    async with await open_transport(arguments.transport) as transport:
        device = Device.with_hci(
            "TracerCentral",
            hci.Address(arguments.address, hci.Address.RANDOM_DEVICE_ADDRESS),
            transport.source,
            transport.sink,
        )
        await device.power_on()
        connect_with_legacy_commands(device)
        # Attached to its controller but idle: on RootCanal, a controller's place in the order in which the phy
        # serves initiators is fixed when its host connects (README in Tests/Support/rootcanal).
        await asyncio.sleep(arguments.start_delay)
        central = TracerCentral(device, arguments)
        if arguments.rounds:
            return await central.rounds(arguments.rounds)
        return await central.single()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", required=True, help="e.g. tcp-client:127.0.0.1:PORT")
    parser.add_argument("--address", default="C0:00:00:00:00:B1", help="static random address")
    parser.add_argument("--target", help="only this advertiser (AA:BB:CC:DD:EE:FF), when other Tracer devices advertise")
    parser.add_argument("--write-id", default="1122334455667788", help="8-byte peer id to write, hex")
    parser.add_argument("--rssi", type=int, default=-60, help="int8 RSSI in the 10-byte write")
    parser.add_argument("--tx", type=int, default=4, help="int8 TX power in the 10-byte write")
    parser.add_argument("--mtu", type=int, default=517, help="ATT MTU to request")
    parser.add_argument("--rounds", type=int, default=0, help="benchmark: repeat the exchange N times")
    parser.add_argument("--scan-timeout", type=float, default=10.0, help="seconds to find the peripheral / connect")
    parser.add_argument("--op-timeout", type=float, default=3.0, help="seconds per ATT operation")
    parser.add_argument("--establish-timeout", type=float, default=0.3,
                        help="seconds for the first ATT answer on a new link before it counts as never established")
    parser.add_argument("--establish-retries", type=int, default=10, help="new connections after links never established")
    parser.add_argument("--start-delay", type=float, default=0.0, help="seconds to wait after power-on before scanning")
    parser.add_argument("--timeout", type=float, default=20.0, help="overall deadline, seconds (start delay included)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    arguments = parser.parse_args()
    setup_logging(arguments.verbose)
    return run_with_timeout(lambda: run(arguments), arguments.timeout)


if __name__ == "__main__":
    sys.exit(main())
