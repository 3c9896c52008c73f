#!/usr/bin/env python3
"""Hostile Bumble peers to test a Tracer node's robustness against (one behaviour per --mode).

Usage: tracer_attacker.py --mode MODE --transport tcp-client:127.0.0.1:PORT [--address ADDR] [--target ADDR]
           [--duration S] [--timeout S] [-v] [mode options]

Central modes (scan for the Tracer service, or connect to --target):
  garbage-writer  discover, then wrong-length / garbage writes, writes to the id characteristic, writes and reads
                  of random handles and raw malformed ATT PDUs on CID 4; records every answer.
  link-holder     connect and do nothing; measure how long until the peer drops the link (up to --duration).
  flooder         connect + disconnect as fast as possible for --duration seconds.
Peripheral modes (advertise exactly like an honest Tracer node; run --duration seconds or until --connections
connections have ended):
  silent-peripheral  Tracer service whose id read never gets an answer.
  no-service         Tracer AD, but only Bumble's default GAP/GATT services.
  replayer           honest Tracer service returning a fixed --id (a recorded id of another node).

Prints exactly one JSON object on stdout (described in README.md); logs on stderr; exit 0 on success, 1 when a
step failed, 2 when the overall --timeout expired.
"""
import argparse
import asyncio
import collections
import logging
import random
import sys
import time

from bumble import att, hci
from bumble.device import Device, Peer
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.transport import open_transport

from tracer_central import advertises_tracer
from tracer_common import (
    ID_CHARACTERISTIC_UUID,
    SERVICE_UUID,
    WRITE_CHARACTERISTIC_UUID,
    configure_legacy_advertising,
    connect_with_legacy_commands,
    run_with_timeout,
    setup_logging,
    tracer_advertising_data,
    within,
)
from tracer_peripheral import LegacyAdvertisingDevice, TracerPeripheral

logger = logging.getLogger("tracer_attacker")

MODES = ["garbage-writer", "silent-peripheral", "link-holder", "flooder", "no-service", "replayer"]
# A distinct static random address per mode (C0:00:00:00:0A:01 .. 06), so a node's logs tell the attackers apart.
DEFAULT_ADDRESSES = {mode: f"C0:00:00:00:0A:{index + 1:02X}" for index, mode in enumerate(MODES)}

ADVERTISING_INTERVAL_MS = 100

# ATT opcodes the attacker builds by hand.
OP_ERROR_RESPONSE = 0x01
OP_EXCHANGE_MTU_REQUEST = 0x02
OP_FIND_INFORMATION_REQUEST = 0x04
OP_FIND_BY_TYPE_VALUE_REQUEST = 0x06
OP_READ_BY_TYPE_REQUEST = 0x08
OP_READ_REQUEST = 0x0A
OP_READ_RESPONSE = 0x0B
OP_READ_BY_GROUP_TYPE_REQUEST = 0x10
OP_WRITE_REQUEST = 0x12
OP_WRITE_COMMAND = 0x52
OP_PREPARE_WRITE_REQUEST = 0x16
OP_EXECUTE_WRITE_REQUEST = 0x18
OP_HANDLE_VALUE_CONFIRMATION = 0x1E
OP_SIGNED_WRITE_COMMAND = 0xD2
DISCOVERY_OPCODES = {
    OP_FIND_INFORMATION_REQUEST: "find_information",
    OP_FIND_BY_TYPE_VALUE_REQUEST: "find_by_type_value",
    OP_READ_BY_TYPE_REQUEST: "read_by_type",
    OP_READ_BY_GROUP_TYPE_REQUEST: "read_by_group_type",
}
SERVER_TO_CLIENT_ANSWERS = {int(opcode) for opcode in att.ATT_RESPONSES}


def now_ms() -> float:
    return time.perf_counter() * 1000.0


def le16(value: int) -> bytes:
    return (value & 0xFFFF).to_bytes(2, "little")


# ---------------------------------------------------------------------------------------------------------------
# Shared pieces: address, scanning, connecting, legacy advertising, disconnection tracking.


def random_address(text: str) -> hci.Address:
    return hci.Address(text, hci.Address.RANDOM_DEVICE_ADDRESS)


async def find_target(device: Device, arguments) -> hci.Address:
    """--target if given, else the first advertiser of the Tracer service (passive legacy scan)."""
    if arguments.target:
        return random_address(arguments.target)
    found = asyncio.get_running_loop().create_future()

    def on_advertisement(advertisement) -> None:
        # Each advertisement arrives twice on the virtual link (NOTES.md quirk 2); the first wins.
        if not found.done() and advertises_tracer(advertisement.data_bytes):
            found.set_result(advertisement.address)

    device.on("advertisement", on_advertisement)
    try:
        await device.start_scanning(legacy=True, active=False, filter_duplicates=False)
        return await within(found, arguments.scan_timeout, "scan for the Tracer service")
    finally:
        device.remove_listener("advertisement", on_advertisement)
        await device.stop_scanning(legacy=True)


async def connect(device: Device, address: hci.Address, timeout: float):
    return await device.connect(address, own_address_type=hci.OwnAddressType.RANDOM, timeout=timeout)


class LinkWatch:
    """Records when and why a connection ended, and whether we asked for it."""

    def __init__(self, connection):
        self.connection = connection
        self.connected_at = now_ms()
        self.we_disconnected = False
        self.reason: int | None = None
        self.ended_at: float | None = None
        self.ended = asyncio.get_running_loop().create_future()
        connection.on("disconnection", self._on_disconnection)

    def _on_disconnection(self, reason) -> None:
        self.reason = int(reason)
        self.ended_at = now_ms()
        if not self.ended.done():
            self.ended.set_result(self.reason)

    @property
    def dropped_by_peer(self) -> bool:
        return self.ended.done() and not self.we_disconnected

    async def disconnect(self, timeout: float) -> None:
        if self.ended.done():
            return
        self.we_disconnected = True
        try:
            await within(self.connection.disconnect(), timeout, "disconnect")
        except Exception as error:  # noqa: BLE001 - the link is gone or going; the report still matters
            logger.warning("disconnect failed: %s", error)


class LegacyAdvertiser:
    """Legacy connectable ADV_IND from our random address, driven by raw HCI commands like tracer_peripheral.py."""

    def __init__(self, device: Device, data: bytes):
        self.device = device
        self.data = data

    async def start(self) -> None:
        # Parameters before enable: an interval of 0 floods the link (NOTES.md quirk 5).
        await configure_legacy_advertising(self.device, self.data, ADVERTISING_INTERVAL_MS)
        await self.enable()

    async def enable(self) -> None:
        await self.device.send_sync_command(hci.HCI_LE_Set_Advertising_Enable_Command(advertising_enable=1))


class PeripheralBase:
    """Connection bookkeeping shared by the hostile peripherals: counts links, how long each stayed, re-advertises
    after each disconnection, and finishes after --connections ended links (if given)."""

    def __init__(self, device: Device, arguments):
        self.device = device
        self.arguments = arguments
        self.advertising_data = tracer_advertising_data(arguments.tx_power)
        self.advertiser = LegacyAdvertiser(device, self.advertising_data)
        self.connections = 0
        self.held_ms: list[float] = []
        self.open_links: dict[int, float] = {}
        self.finished = asyncio.get_running_loop().create_future()
        device.on("connection", self._on_connection)

    def _on_connection(self, connection) -> None:
        self.connections += 1
        started = now_ms()
        key = id(connection)
        self.open_links[key] = started
        logger.info("connection %d from %s", self.connections, connection.peer_address)

        def on_disconnection(reason) -> None:
            self.open_links.pop(key, None)
            self.held_ms.append(round(now_ms() - started, 1))
            logger.info("disconnection after %.1f ms, reason %s", self.held_ms[-1], reason)
            self.on_link_end(connection)
            if self.arguments.connections and len(self.held_ms) >= self.arguments.connections:
                if not self.finished.done():
                    self.finished.set_result(None)
                return
            asyncio.get_running_loop().create_task(self._re_enable())

        connection.on("disconnection", on_disconnection)

    def on_link_end(self, connection) -> None:
        pass

    async def _re_enable(self) -> None:
        try:
            await self.advertiser.enable()
        except Exception as error:  # noqa: BLE001 - surface as the script's error rather than a lost task
            if not self.finished.done():
                self.finished.set_exception(error)

    async def serve(self) -> None:
        await self.device.power_on()
        connect_with_legacy_commands(self.device)
        await self.advertiser.start()
        print(f"READY {self.device.random_address}", file=sys.stderr, flush=True)
        try:
            await asyncio.wait_for(asyncio.shield(self.finished), self.arguments.duration)
        except asyncio.TimeoutError:
            pass
        if self.finished.done():
            self.finished.result()  # re-raise a failure to re-enable advertising

    def base_result(self) -> dict:
        return {
            "address": str(self.device.random_address),
            "connections": self.connections,
            "held_ms": self.held_ms,
            "open_at_end": len(self.open_links),
            "advertising_data": self.advertising_data.hex(),
        }


def make_device(arguments, transport, peripheral: bool) -> Device:
    # Legacy peripherals need the no-extended-advertising Device, or Bumble never emits "connection"
    # (see tracer_peripheral.py). Centrals use the stock Device, as tracer_central.py does, connecting with legacy commands.
    device_class = LegacyAdvertisingDevice if peripheral else Device
    return device_class.with_hci(
        f"TracerAttacker-{arguments.mode}", random_address(arguments.address), transport.source, transport.sink
    )


# ---------------------------------------------------------------------------------------------------------------
# 1. garbage-writer


class RawAtt:
    """Raw ATT on the fixed channel (CID 4): sends arbitrary bytes and catches the next server answer.

    Bumble's L2CAP manager dispatches CID 4 to a handler registered per fixed channel; we wrap it so every incoming
    ATT PDU is seen first, answers to our raw requests are taken here, and everything else (the node's own GATT
    client requests, notifications) still reaches Bumble's GATT layers.
    """

    def __init__(self, device: Device, connection, ended: asyncio.Future):
        self.device = device
        self.connection = connection
        self.ended = ended
        self.waiter: asyncio.Future | None = None
        self.unsolicited: list[str] = []
        manager = device.l2cap_channel_manager
        self.original = manager.fixed_channels[att.ATT_CID]
        manager.register_fixed_channel(att.ATT_CID, self._on_pdu)

    def close(self) -> None:
        self.device.l2cap_channel_manager.register_fixed_channel(att.ATT_CID, self.original)

    def _on_pdu(self, connection_handle: int, pdu: bytes) -> None:
        if connection_handle == self.connection.handle and pdu and pdu[0] in SERVER_TO_CLIENT_ANSWERS:
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(bytes(pdu))
                return
            self.unsolicited.append(bytes(pdu).hex())
            logger.warning("answer with no raw request pending: %s", bytes(pdu).hex())
            return
        self.original(connection_handle, pdu)

    async def exchange(self, pdu: bytes, wait_s: float) -> bytes | None:
        """Send one raw ATT PDU; the next server answer within wait_s, or None (also when the link ends)."""
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            self.connection.send_l2cap_pdu(att.ATT_CID, pdu)
            await asyncio.wait([self.waiter, self.ended], timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
            return self.waiter.result() if self.waiter.done() else None
        finally:
            self.waiter = None


def describe_read(answer: bytes | None) -> str | None:
    """The value of a Read Response as hex, "error 0xNN" for an Error Response, None for silence."""
    if answer is None:
        return None
    if answer[0] == OP_READ_RESPONSE:
        return answer[1:].hex()
    if answer[0] == OP_ERROR_RESPONSE and len(answer) >= 5:
        return f"error 0x{answer[4]:02x}"
    return f"opcode 0x{answer[0]:02x}"


class GarbageWriter:
    def __init__(self, device: Device, arguments):
        self.device = device
        self.arguments = arguments
        self.rng = random.Random(arguments.seed)
        self.errors: collections.Counter[str] = collections.Counter()
        self.ok = 0
        self.no_answer = 0
        self.silent_commands = 0
        self.answered_commands = 0
        self.attempts = 0
        self.log: list[dict] = []

    def plan(self, mtu: int, id_handle: int | None, write_handle: int | None) -> list[tuple[str, bytes, bool]]:
        """(label, raw ATT PDU, expects an answer). Requests expect one; commands must be answered by silence."""
        rng = self.rng
        steps: list[tuple[str, bytes, bool]] = []

        def garbage(length: int) -> bytes:
            return bytes(rng.randrange(256) for _ in range(length))

        if write_handle is not None:
            for length in (0, 1, 7, 9, 11, 20, 200):
                value = garbage(length)
                steps.append((f"write-req len {length}", bytes([OP_WRITE_REQUEST]) + le16(write_handle) + value, True))
                steps.append((f"write-cmd len {length}", bytes([OP_WRITE_COMMAND]) + le16(write_handle) + value, False))
            for _ in range(4):
                value = garbage(rng.randrange(0, min(mtu - 3, 60) + 1))
                steps.append((f"write-req garbage len {len(value)}",
                              bytes([OP_WRITE_REQUEST]) + le16(write_handle) + value, True))
                steps.append((f"write-cmd garbage len {len(value)}",
                              bytes([OP_WRITE_COMMAND]) + le16(write_handle) + value, False))
            steps.append(("read write-char", bytes([OP_READ_REQUEST]) + le16(write_handle), True))
            steps.append(("prepare-write write-char", bytes([OP_PREPARE_WRITE_REQUEST]) + le16(write_handle)
                          + le16(0) + garbage(8), True))
            steps.append(("execute-write commit", bytes([OP_EXECUTE_WRITE_REQUEST, 0x01]), True))
        if id_handle is not None:
            for length in (8, 10, 3):
                value = garbage(length)
                steps.append((f"write-req id-char len {length}", bytes([OP_WRITE_REQUEST]) + le16(id_handle) + value,
                              True))
                steps.append((f"write-cmd id-char len {length}", bytes([OP_WRITE_COMMAND]) + le16(id_handle) + value,
                              False))
        handles = [0x0000, 0xFFFF] + [rng.randrange(1, 0x10000) for _ in range(self.arguments.samples)]
        for handle in handles:
            value = garbage(8)
            steps.append((f"write-req handle 0x{handle:04x}", bytes([OP_WRITE_REQUEST]) + le16(handle) + value, True))
            steps.append((f"write-cmd handle 0x{handle:04x}", bytes([OP_WRITE_COMMAND]) + le16(handle) + value, False))
            steps.append((f"read handle 0x{handle:04x}", bytes([OP_READ_REQUEST]) + le16(handle), True))
        if not self.arguments.no_malformed:
            target = write_handle if write_handle is not None else 0x0001
            steps += [
                ("malformed empty PDU", b"", False),
                ("malformed read truncated handle", bytes([OP_READ_REQUEST, 0x01]), True),
                ("malformed write-req no handle", bytes([OP_WRITE_REQUEST]), True),
                ("malformed write-req over MTU", bytes([OP_WRITE_REQUEST]) + le16(target) + garbage(mtu + 10), True),
                ("malformed find-info start 0", bytes([OP_FIND_INFORMATION_REQUEST]) + le16(0) + le16(0xFFFF), True),
                ("malformed find-info start>end", bytes([OP_FIND_INFORMATION_REQUEST]) + le16(0x20) + le16(0x01),
                 True),
                ("malformed read-by-type 3-byte uuid",
                 bytes([OP_READ_BY_TYPE_REQUEST]) + le16(1) + le16(0xFFFF) + b"\x03\x28\x00", True),
                ("malformed read-by-group-type start>end",
                 bytes([OP_READ_BY_GROUP_TYPE_REQUEST]) + le16(0x30) + le16(0x01) + b"\x00\x28", True),
                ("malformed mtu 0 (second exchange)", bytes([OP_EXCHANGE_MTU_REQUEST]) + le16(0), True),
                ("malformed execute-write bad flags", bytes([OP_EXECUTE_WRITE_REQUEST, 0x02]), True),
                ("malformed unsolicited read response", bytes([OP_READ_RESPONSE]) + garbage(4), False),
                ("malformed unsolicited confirmation", bytes([OP_HANDLE_VALUE_CONFIRMATION]), False),
                ("malformed signed write cmd", bytes([OP_SIGNED_WRITE_COMMAND]) + le16(target) + garbage(20), False),
                ("malformed unknown command 0x7f", bytes([0x7F]) + garbage(3), False),
                ("malformed unknown request 0x3f", bytes([0x3F]) + garbage(3), True),
            ]
        return steps

    def record(self, label: str, pdu: bytes, expects_answer: bool, answer: bytes | None) -> None:
        entry = {"step": label, "sent": pdu[:24].hex() + ("…" if len(pdu) > 24 else ""), "len": len(pdu)}
        if answer is None:
            entry["answer"] = None
            if expects_answer:
                self.no_answer += 1
            else:
                self.silent_commands += 1
        else:
            if not expects_answer:
                self.answered_commands += 1
            if answer[0] == OP_ERROR_RESPONSE and len(answer) >= 5:
                code = f"0x{answer[4]:02x}"
                self.errors[code] += 1
                entry["answer"] = f"error {code}"
                entry["request_opcode_in_error"] = f"0x{answer[1]:02x}"
            else:
                self.ok += 1
                entry["answer"] = f"opcode 0x{answer[0]:02x} ({len(answer)} bytes)"
        self.log.append(entry)

    async def run(self) -> dict:
        arguments = self.arguments
        await self.device.power_on()
        connect_with_legacy_commands(self.device)
        address = await find_target(self.device, arguments)
        connection = await connect(self.device, address, arguments.scan_timeout)
        watch = LinkWatch(connection)
        peer = Peer(connection)
        mtu = 23
        service_found = False
        id_handle = write_handle = None
        setup_error = None
        raw = None
        id_after = None
        try:
            try:
                if arguments.mtu:
                    mtu = await within(peer.request_mtu(arguments.mtu), arguments.op_timeout, "MTU exchange")
                services = await within(peer.discover_services([SERVICE_UUID]), arguments.op_timeout,
                                        "service discovery")
                if services:
                    service_found = True
                    characteristics = await within(services[0].discover_characteristics(), arguments.op_timeout,
                                                   "characteristic discovery")
                    for characteristic in characteristics:
                        if characteristic.uuid == ID_CHARACTERISTIC_UUID:
                            id_handle = characteristic.handle
                        elif characteristic.uuid == WRITE_CHARACTERISTIC_UUID:
                            write_handle = characteristic.handle
            except (asyncio.CancelledError, Exception) as error:  # noqa: BLE001
                # Bumble cancels a pending GATT request when the link drops; any other cancellation is the
                # overall deadline and must propagate.
                if isinstance(error, asyncio.CancelledError) and not watch.ended.done():
                    raise
                # A hostile run keeps going on a broken setup: random handles and malformed PDUs need no discovery.
                setup_error = f"{type(error).__name__}: {error}"
                logger.warning("setup step failed: %s", setup_error)
            raw = RawAtt(self.device, connection, watch.ended)
            for label, pdu, expects_answer in self.plan(mtu, id_handle, write_handle):
                if watch.ended.done():
                    break
                self.attempts += 1
                wait_s = arguments.op_timeout if expects_answer else arguments.command_wait
                try:
                    answer = await raw.exchange(pdu, wait_s)
                except Exception:  # noqa: BLE001 - sending on a link that just went down
                    if watch.ended.done():
                        break
                    raise
                if watch.ended.done() and answer is None:
                    self.log.append({"step": label, "answer": "link ended"})
                    break
                self.record(label, pdu, expects_answer, answer)
            if id_handle is not None and not watch.ended.done():
                answer = await raw.exchange(bytes([OP_READ_REQUEST]) + le16(id_handle), arguments.op_timeout)
                id_after = describe_read(answer)
            # Late answers (e.g. to requests we stopped waiting for) land in raw.unsolicited.
            await asyncio.sleep(0.2)
        finally:
            dropped = watch.dropped_by_peer
            if raw is not None:
                raw.close()
            await watch.disconnect(arguments.op_timeout)
        return {
            "target": address.to_string(False),
            "mtu": mtu,
            "service_found": service_found,
            "handles": {"id": id_handle, "write": write_handle},
            "setup_error": setup_error,
            "attempts": self.attempts,
            "errors": dict(sorted(self.errors.items())),
            "ok": self.ok,
            "no_answer": self.no_answer,
            "silent_commands": self.silent_commands,
            "answered_commands": self.answered_commands,
            "late_or_unsolicited_answers": raw.unsolicited if raw else [],
            "id_read_after": id_after,
            "link_dropped_by_peer": dropped,
            "disconnect_reason": watch.reason if dropped else None,
            "log": self.log,
        }


# ---------------------------------------------------------------------------------------------------------------
# 2. silent-peripheral


class SilentPeripheral(PeripheralBase):
    def __init__(self, device: Device, arguments):
        super().__init__(device, arguments)
        self.reads_received = 0
        self.writes: list[str] = []
        self.never = asyncio.get_running_loop().create_future()  # never completed: reads wait on it forever
        id_characteristic = Characteristic(
            ID_CHARACTERISTIC_UUID, Characteristic.Properties.READ, Characteristic.READABLE,
            CharacteristicValue(read=self.read_forever),
        )
        write_characteristic = Characteristic(
            WRITE_CHARACTERISTIC_UUID,
            Characteristic.Properties.WRITE | Characteristic.Properties.WRITE_WITHOUT_RESPONSE,
            Characteristic.WRITEABLE,
            CharacteristicValue(write=self.on_write),
        )
        device.add_service(Service(SERVICE_UUID, [id_characteristic, write_characteristic]))

    async def read_forever(self, _connection) -> bytes:
        # Bumble runs Read Request handling in a task and sends the response only when this returns, so awaiting
        # a future that never completes holds the answer back for good (checked: nothing goes out on the link).
        self.reads_received += 1
        logger.info("read %d received; never answering", self.reads_received)
        await asyncio.shield(self.never)
        return b""

    def on_write(self, _connection, value: bytes) -> None:
        self.writes.append(bytes(value).hex())

    async def run(self) -> dict:
        await self.serve()
        result = self.base_result()
        result.update(reads_received=self.reads_received, writes=self.writes)
        return result


# ---------------------------------------------------------------------------------------------------------------
# 3. link-holder


async def link_holder(device: Device, arguments) -> dict:
    await device.power_on()
    connect_with_legacy_commands(device)
    address = await find_target(device, arguments)
    try:
        connection = await connect(device, address, arguments.scan_timeout)
    except Exception as error:  # noqa: BLE001 - "could not connect" is a result here, not a crash
        return {"target": address.to_string(False), "connected": False, "disconnected_after_ms": None,
                "reason": None, "connect_error": f"{type(error).__name__}: {error}"}
    watch = LinkWatch(connection)
    # Nothing at all on the link: no MTU exchange, no discovery, only wait.
    try:
        await asyncio.wait_for(asyncio.shield(watch.ended), arguments.duration)
    except asyncio.TimeoutError:
        pass
    dropped = watch.dropped_by_peer
    after = round(watch.ended_at - watch.connected_at, 1) if dropped else None
    reason = watch.reason if dropped else None
    await watch.disconnect(arguments.op_timeout)
    return {
        "target": address.to_string(False),
        "connected": True,
        "disconnected_after_ms": after,
        "reason": reason,
        "waited_s": arguments.duration,
    }


# ---------------------------------------------------------------------------------------------------------------
# 4. flooder


async def flooder(device: Device, arguments) -> dict:
    await device.power_on()
    connect_with_legacy_commands(device)
    address = await find_target(device, arguments)
    successes = failures = stray = 0
    failure_kinds: collections.Counter[str] = collections.Counter()
    connect_ms: list[float] = []
    current = {"connection": None}

    def on_connection(connection) -> None:
        # A connect we gave up on can still complete later (LE Create Connection Cancel does not cancel on the
        # virtual controller, NOTES.md quirk 7): drop such stray links at once.
        nonlocal stray
        if current["connection"] is None:
            stray += 1
            asyncio.get_running_loop().create_task(LinkWatch(connection).disconnect(arguments.op_timeout))

    device.on("connection", on_connection)
    end = time.monotonic() + arguments.duration
    while time.monotonic() < end:
        started = now_ms()
        try:
            timeout = max(0.1, min(arguments.connect_timeout, end - time.monotonic()))
            current["connection"] = "pending"
            connection = await connect(device, address, timeout)
        except Exception as error:  # noqa: BLE001 - every kind of failed attempt is counted, not fatal
            current["connection"] = None
            failures += 1
            failure_kinds[type(error).__name__] += 1
            continue
        current["connection"] = connection
        successes += 1
        connect_ms.append(now_ms() - started)
        # A real link outlives two connection events: LL_TERMINATE_IND goes out in one and is acknowledged in the
        # next (7.5 ms apart at the shortest interval). A virtual link ends in under a millisecond, which would let
        # the flooder initiate again before the node's host has even seen the last link open.
        await asyncio.sleep(arguments.hold_ms / 1000)
        await LinkWatch(connection).disconnect(arguments.op_timeout)
        current["connection"] = None
    await asyncio.sleep(0.2)  # let a late stray completion arrive and be dropped
    return {
        "target": address.to_string(False),
        "connections": successes,
        "failures": failures,
        "failure_kinds": dict(failure_kinds),
        "stray_connections": stray,
        "duration_s": arguments.duration,
        "median_connect_ms": round(sorted(connect_ms)[len(connect_ms) // 2], 1) if connect_ms else None,
    }


# ---------------------------------------------------------------------------------------------------------------
# 5. no-service


class NoServicePeripheral(PeripheralBase):
    def __init__(self, device: Device, arguments):
        super().__init__(device, arguments)
        self.requests: collections.Counter[str] = collections.Counter()
        server = device.gatt_server
        original = server.on_gatt_pdu

        def counting(bearer, pdu) -> None:
            self.requests[DISCOVERY_OPCODES.get(pdu.op_code, f"0x{pdu.op_code:02x}")] += 1
            return original(bearer, pdu)

        # Device dispatches to connection.gatt_server.on_gatt_pdu, so an instance attribute wins.
        server.on_gatt_pdu = counting

    async def run(self) -> dict:
        await self.serve()
        result = self.base_result()
        result.update(
            discovery_requests=sum(self.requests[name] for name in DISCOVERY_OPCODES.values()),
            requests=dict(self.requests),
        )
        return result


# ---------------------------------------------------------------------------------------------------------------
# 6. replayer


async def replayer(device: Device, arguments) -> dict:
    replayed = bytes.fromhex(arguments.id)
    if len(replayed) != 8:
        raise ValueError("--id must be 8 bytes of hex")
    # The honest peripheral's own class, so everything but the id is exactly what an honest node does.
    wanted = arguments.connections or 1_000_000
    peripheral = TracerPeripheral(device, replayed, tracer_advertising_data(arguments.tx_power), wanted)
    await device.power_on()
    connect_with_legacy_commands(device)
    await peripheral.start_advertising()
    print(f"READY {device.random_address}", file=sys.stderr, flush=True)
    try:
        await asyncio.wait_for(asyncio.shield(peripheral.finished), arguments.duration)
    except asyncio.TimeoutError:
        pass
    result = peripheral.result()
    result["replayed_id"] = replayed.hex()
    return result


# ---------------------------------------------------------------------------------------------------------------


async def run(arguments) -> dict:
    peripheral = arguments.mode in ("silent-peripheral", "no-service", "replayer")
    async with await open_transport(arguments.transport) as transport:
        device = make_device(arguments, transport, peripheral)
        if arguments.mode == "garbage-writer":
            result = await GarbageWriter(device, arguments).run()
        elif arguments.mode == "silent-peripheral":
            result = await SilentPeripheral(device, arguments).run()
        elif arguments.mode == "link-holder":
            result = await link_holder(device, arguments)
        elif arguments.mode == "flooder":
            result = await flooder(device, arguments)
        elif arguments.mode == "no-service":
            result = await NoServicePeripheral(device, arguments).run()
        else:
            result = await replayer(device, arguments)
        return {"mode": arguments.mode, **result}


DEFAULT_DURATION = {"link-holder": 30.0, "flooder": 10.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", required=True, choices=MODES)
    parser.add_argument("--transport", required=True, help="e.g. tcp-client:127.0.0.1:PORT")
    parser.add_argument("--address", help="own static random address (default C0:00:00:00:0A:0N per mode)")
    parser.add_argument("--target", help="central modes: connect to this random address instead of scanning")
    parser.add_argument("--duration", type=float,
                        help="seconds: link-holder max wait (30), flooder run time (10), peripherals run time (20)")
    parser.add_argument("--connections", type=int, default=0,
                        help="peripheral modes: also stop after this many connections ended (0 = run --duration)")
    parser.add_argument("--id", default="a1a2a3a4a5a6a7a8", help="replayer: the recorded 8-byte id to serve, hex")
    parser.add_argument("--tx-power", type=int, default=4, help="peripheral modes: TX Power Level AD value")
    parser.add_argument("--mtu", type=int, default=247, help="garbage-writer: ATT MTU to request first (0 = none)")
    parser.add_argument("--samples", type=int, default=16, help="garbage-writer: random handles to hit")
    parser.add_argument("--seed", type=int, default=1, help="garbage-writer: RNG seed for garbage and handles")
    parser.add_argument("--no-malformed", action="store_true", help="garbage-writer: skip the malformed raw PDUs")
    parser.add_argument("--op-timeout", type=float, default=2.0, help="seconds to wait for an answer to a request")
    parser.add_argument("--command-wait", type=float, default=0.05,
                        help="garbage-writer: seconds to watch for a (wrong) answer to a command")
    parser.add_argument("--connect-timeout", type=float, default=2.0, help="flooder: seconds per connect attempt")
    parser.add_argument("--hold-ms", type=float, default=15.0,
                        help="flooder: ms from Connection Complete to Disconnect (a real link's shortest life)")
    parser.add_argument("--scan-timeout", type=float, default=10.0, help="seconds to find the target / connect")
    parser.add_argument("--timeout", type=float, help="overall deadline, seconds (default: --duration + 30)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging on stderr")
    arguments = parser.parse_args()
    arguments.address = arguments.address or DEFAULT_ADDRESSES[arguments.mode]
    if arguments.duration is None:
        arguments.duration = DEFAULT_DURATION.get(arguments.mode, 20.0)
    if arguments.timeout is None:
        arguments.timeout = arguments.duration + 30.0
    setup_logging(arguments.verbose)
    return run_with_timeout(lambda: run(arguments), arguments.timeout)


if __name__ == "__main__":
    sys.exit(main())
