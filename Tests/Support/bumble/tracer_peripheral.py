#!/usr/bin/env python3
"""A Bumble peripheral hosting the Tracer GATT service, to test the Swift central against.

Usage: tracer_peripheral.py --transport tcp-client:127.0.0.1:PORT [--address C0:00:00:00:00:B2]
           [--id a1a2a3a4a5a6a7a8] [--tx-power 4] [--connections 1] [--silent-link-timeout 2] [--timeout 20] [-v]

Prints "READY <address>" on stderr once advertising; after --connections connections have come and gone prints
{"address", "connections", "writes": [{"value", "with_response"}], "reads", "rejected_writes", "rejected_reads",
"silent_links_dropped", "advertising_data"} on stdout.
"""
import argparse
import asyncio
import collections
import logging
import sys

from bumble import hci
from bumble.att import ATT_Error
from bumble.device import Device
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.gatt_server import GATT_MAX_ATTRIBUTE_VALUE_SIZE
from bumble.transport import open_transport

from tracer_common import (
    ATT_INVALID_ATTRIBUTE_VALUE_LENGTH,
    ATT_READ_NOT_PERMITTED,
    ID_CHARACTERISTIC_UUID,
    SERVICE_UUID,
    WRITE_CHARACTERISTIC_UUID,
    configure_legacy_advertising,
    run_with_timeout,
    setup_logging,
    tracer_advertising_data,
)

logger = logging.getLogger("tracer_peripheral")

ADVERTISING_INTERVAL_MS = 100


class LegacyAdvertisingDevice(Device):
    """A Device that never uses extended advertising.

    The virtual controller reports the extended advertising feature, and then Bumble, as a peripheral, holds back
    the "connection" event until an LE Advertising Set Terminated event, which legacy advertising never produces.
    """

    @property
    def supports_le_extended_advertising(self) -> bool:
        return False


class TracerPeripheral:
    def __init__(self, device: Device, node_id: bytes, advertising_data: bytes, wanted_connections: int,
                 silent_link_timeout: float = 0.0):
        self.device = device
        self.silent_link_timeout = silent_link_timeout
        # Handle -> serial number of the link now on it: a handle can return for a later link, and a check
        # scheduled for the earlier one must not judge the later one.
        self.open_links: dict[int, int] = {}
        self.link_serial = 0
        self.heard_links: set[int] = set()  # serial numbers of links whose central sent an ATT PDU
        self.silent_links_dropped = 0
        self.node_id = node_id
        self.advertising_data = advertising_data
        self.wanted_connections = wanted_connections
        self.connections = 0
        self.disconnections = 0
        self.writes: list[dict] = []
        self.rejected_writes: list[dict] = []
        self.reads = 0
        self.rejected_reads = 0
        self.finished = asyncio.get_running_loop().create_future()
        # The value callback cannot tell a Write Request from a Write Command, so the ATT handlers push the kind
        # of each write to this handle in arrival order and the callback pops it (both run in arrival order).
        self.pending_write_kinds: collections.deque[bool] = collections.deque()

        self.id_characteristic = Characteristic(
            ID_CHARACTERISTIC_UUID,
            Characteristic.Properties.READ,
            Characteristic.READABLE,
            CharacteristicValue(read=self.read_id),
        )
        self.write_characteristic = Characteristic(
            WRITE_CHARACTERISTIC_UUID,
            Characteristic.Properties.WRITE | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
            # READABLE so the server lets the read reach our callback, which answers Read Not Permitted
            # (without a read callback Bumble sends no response at all: NOTES.md quirk 12).
            Characteristic.READABLE | Characteristic.WRITEABLE,
            CharacteristicValue(read=self.read_write_characteristic, write=self.write_peer_id),
        )
        device.add_service(Service(SERVICE_UUID, [self.id_characteristic, self.write_characteristic]))
        self._tag_write_kinds()
        self._note_heard_links()

        device.on("connection", self.on_connection)

    def _tag_write_kinds(self) -> None:
        server = self.device.gatt_server
        original_request = server.on_att_write_request
        original_command = server.on_att_write_command

        def tag(original, with_response: bool):
            def handler(bearer, pdu):
                # Mirror the server's own early exits so the queue stays aligned with callback invocations.
                if (
                    pdu.attribute_handle == self.write_characteristic.handle
                    and len(pdu.attribute_value) <= GATT_MAX_ATTRIBUTE_VALUE_SIZE
                ):
                    self.pending_write_kinds.append(with_response)
                return original(bearer, pdu)

            return handler

        # GATT server dispatch looks handlers up by name on the instance, so instance attributes take precedence.
        server.on_att_write_request = tag(original_request, True)
        server.on_att_write_command = tag(original_command, False)

    def _note_heard_links(self) -> None:
        server = self.device.gatt_server
        original = server.on_gatt_pdu

        def handler(bearer, pdu):
            connection = bearer if hasattr(bearer, "handle") else getattr(bearer, "connection", None)
            serial = self.open_links.get(connection.handle) if connection is not None else None
            if serial is not None:
                self.heard_links.add(serial)
            return original(bearer, pdu)

        server.on_gatt_pdu = handler

    async def _drop_if_silent(self, connection, serial: int) -> None:
        """Ends a link whose central never speaks, as a real controller would.

        On air a peripheral that hears nothing from the central in the first six connection events ends the link
        (Connection Failed to be Established, 0x3E), and later silence ends it at the supervision timeout. RootCanal
        models neither: a central whose controller went away (a node resetting it) between its CONNECT_IND and the
        connection leaves this phone connected, and so silent and invisible, for good.
        """
        await asyncio.sleep(self.silent_link_timeout)
        if serial in self.heard_links or self.open_links.get(connection.handle) != serial:
            return
        logger.info("no ATT PDU on link 0x%04X within %.1f s; disconnecting", connection.handle,
                    self.silent_link_timeout)
        self.silent_links_dropped += 1
        try:
            await connection.disconnect()
        except Exception as error:  # noqa: BLE001 - a link that ended meanwhile is what we wanted
            logger.info("disconnect of a silent link: %s", error)

    def read_id(self, _connection) -> bytes:
        self.reads += 1
        return self.node_id

    def read_write_characteristic(self, _connection) -> bytes:
        self.rejected_reads += 1
        raise ATT_Error(ATT_READ_NOT_PERMITTED)

    def write_peer_id(self, _connection, value: bytes) -> None:
        with_response = self.pending_write_kinds.popleft() if self.pending_write_kinds else None
        record = {"value": bytes(value).hex(), "with_response": with_response}
        if len(value) not in (8, 10):
            self.rejected_writes.append(record)
            # For a Write Command Bumble logs this exception and sends nothing, which is what the spec wants.
            raise ATT_Error(ATT_INVALID_ATTRIBUTE_VALUE_LENGTH)
        self.writes.append(record)
        logger.info("write %s", record)

    async def start_advertising(self) -> None:
        # Raw legacy commands so the exact parameters and their order are ours: parameters first, since enabling
        # with an interval of 0 floods the link (NOTES.md quirk 5).
        await configure_legacy_advertising(self.device, self.advertising_data, ADVERTISING_INTERVAL_MS)
        await self.enable_advertising()

    async def enable_advertising(self) -> None:
        await self.device.send_sync_command(hci.HCI_LE_Set_Advertising_Enable_Command(advertising_enable=1))

    def on_connection(self, connection) -> None:
        self.connections += 1
        logger.info("connection %d from %s", self.connections, connection.peer_address)
        handle = connection.handle
        self.link_serial += 1
        serial = self.link_serial
        self.open_links[handle] = serial

        def on_disconnection(reason) -> None:
            if self.open_links.get(handle) == serial:
                del self.open_links[handle]
            self.heard_links.discard(serial)
            self.on_disconnection(reason)

        # Bumble emits disconnection on the Connection object, not on the Device.
        connection.on("disconnection", on_disconnection)
        if self.silent_link_timeout > 0:
            asyncio.get_running_loop().create_task(self._drop_if_silent(connection, serial))

    def on_disconnection(self, reason) -> None:
        self.disconnections += 1
        logger.info("disconnection %d, reason %s", self.disconnections, reason)
        if self.disconnections >= self.wanted_connections:
            if not self.finished.done():
                self.finished.set_result(None)
            return
        # A connection ends advertising, so turn it back on for the next central.
        asyncio.get_running_loop().create_task(self._re_enable())

    async def _re_enable(self) -> None:
        try:
            await self.enable_advertising()
        except Exception as error:  # noqa: BLE001 - surface as the script's error rather than a lost task
            if not self.finished.done():
                self.finished.set_exception(error)

    def result(self) -> dict:
        return {
            "address": str(self.device.random_address),
            "connections": self.connections,
            "writes": self.writes,
            "reads": self.reads,
            "rejected_writes": self.rejected_writes,
            "rejected_reads": self.rejected_reads,
            "silent_links_dropped": self.silent_links_dropped,
            "advertising_data": self.advertising_data.hex(),
        }


async def run(arguments) -> dict:
    node_id = bytes.fromhex(arguments.id)
    if len(node_id) != 8:
        raise ValueError("--id must be 8 bytes of hex")
    async with await open_transport(arguments.transport) as transport:
        device = LegacyAdvertisingDevice.with_hci(
            "TracerPeripheral",
            hci.Address(arguments.address, hci.Address.RANDOM_DEVICE_ADDRESS),
            transport.source,
            transport.sink,
        )
        peripheral = TracerPeripheral(
            device, node_id, tracer_advertising_data(arguments.tx_power), arguments.connections,
            arguments.silent_link_timeout,
        )
        await device.power_on()
        await peripheral.start_advertising()
        print(f"READY {device.random_address}", file=sys.stderr, flush=True)
        await peripheral.finished
        return peripheral.result()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", required=True, help="e.g. tcp-client:127.0.0.1:PORT")
    parser.add_argument("--address", default="C0:00:00:00:00:B2", help="static random address")
    parser.add_argument("--id", default="a1a2a3a4a5a6a7a8", help="8-byte node id, hex")
    parser.add_argument("--tx-power", type=int, default=4, help="TX Power Level AD value, dBm")
    parser.add_argument("--connections", type=int, default=1, help="exit after this many connections ended")
    parser.add_argument("--silent-link-timeout", type=float, default=2.0,
                        help="seconds a central may stay silent on a new link before we end it (0: never)")
    parser.add_argument("--timeout", type=float, default=20.0, help="overall deadline, seconds")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    arguments = parser.parse_args()
    setup_logging(arguments.verbose)
    return run_with_timeout(lambda: run(arguments), arguments.timeout)


if __name__ == "__main__":
    sys.exit(main())
