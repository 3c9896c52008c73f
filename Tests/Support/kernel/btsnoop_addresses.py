#!/usr/bin/env python3
"""Prints every random address a host set on one adapter, from a btmon trace (btmon -w, BTSnoop
monitor format): one line "SECONDS ADDRESS" per LE Set Random Address or LE Set Advertising Set
Random Address command, in order. btmon 5.66's own reader (btmon -r) crashes decoding the ATT
traffic of a user-channel connection, so the kernel bed reads the commands itself.

Usage: btsnoop_addresses.py TRACE [INDEX]   (INDEX: the adapter, 0 for hci0; default 0)
"""
import struct
import sys

MONITOR_DATALINK = 2001
COMMAND_PACKET = 2  # the monitor's opcode for a command sent to the controller
LE_SET_RANDOM_ADDRESS = 0x2005
LE_SET_ADVERTISING_SET_RANDOM_ADDRESS = 0x2035
EPOCH_OFFSET_US = 0x00DCDDB30F2F8000  # BTSnoop timestamps count microseconds from year 0


def records(path: str):
    """Every record of a btmon trace: (seconds since the epoch, adapter index, monitor opcode, packet)."""
    with open(path, "rb") as trace:
        data = trace.read()
    if data[:8] != b"btsnoop\0":
        raise SystemExit(f"{path}: not a BTSnoop file")
    _version, datalink = struct.unpack(">II", data[8:16])
    if datalink != MONITOR_DATALINK:
        raise SystemExit(f"{path}: datalink {datalink}, expected btmon's monitor format ({MONITOR_DATALINK})")
    offset = 16
    while offset + 24 <= len(data):
        _original, included, flags, _drops, timestamp = struct.unpack(">IIIIq", data[offset:offset + 24])
        packet = data[offset + 24:offset + 24 + included]
        offset += 24 + included
        if len(packet) < included:
            break  # the last record of a trace still being written
        yield (timestamp - EPOCH_OFFSET_US) / 1e6, flags >> 16, flags & 0xFFFF, packet


def addresses(path: str, index: int):
    for seconds, adapter, opcode, packet in records(path):
        if adapter != index or opcode != COMMAND_PACKET or len(packet) < 3:
            continue
        command = struct.unpack("<H", packet[:2])[0]
        parameters = packet[3:]
        if command == LE_SET_RANDOM_ADDRESS and len(parameters) >= 6:
            address = parameters[:6]
        elif command == LE_SET_ADVERTISING_SET_RANDOM_ADDRESS and len(parameters) >= 7:
            address = parameters[1:7]
        else:
            continue
        yield seconds, ":".join(f"{octet:02X}" for octet in reversed(address))


def main() -> None:
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    for seconds, address in addresses(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 0):
        print(f"{seconds:.3f} {address}")


if __name__ == "__main__":
    main()
