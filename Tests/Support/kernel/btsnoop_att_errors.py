#!/usr/bin/env python3
"""Prints every ATT Error Response one adapter's host sent, from a btmon trace (btmon -w, BTSnoop
monitor format): one line "SECONDS REQUEST HANDLE ERROR" per response (hex: the opcode of the
request it answers, the attribute handle, the ATT error code), in order. With --after SECONDS only
those sent later. The kernel bed uses it to see how a node's GATT server answered BlueZ (btmon
5.66's own reader crashes on the ATT traffic of a user-channel connection).

Usage: btsnoop_att_errors.py [--after SECONDS] TRACE [INDEX]   (INDEX: the adapter, 0 for hci0)
"""
import argparse
import struct

from btsnoop_addresses import records

ACL_TX_PACKET = 4  # the monitor's opcode for ACL data the host sends
ATT_CHANNEL = 0x0004
ATT_ERROR_RESPONSE = 0x01
PACKET_BOUNDARY_CONTINUATION = 0x1


def error_responses(path: str, index: int):
    for seconds, adapter, opcode, packet in records(path):
        if adapter != index or opcode != ACL_TX_PACKET or len(packet) < 8:
            continue
        handle_and_flags, _acl_length, _l2cap_length, channel = struct.unpack("<HHHH", packet[:8])
        # An error response (5 octets) always fits in a first fragment; continuations carry no header.
        if (handle_and_flags >> 12) & 0x3 == PACKET_BOUNDARY_CONTINUATION or channel != ATT_CHANNEL:
            continue
        pdu = packet[8:]
        if len(pdu) >= 5 and pdu[0] == ATT_ERROR_RESPONSE:
            request, attribute, error = struct.unpack("<BHB", pdu[1:5])
            yield seconds, request, attribute, error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--after", type=float, default=0)
    parser.add_argument("trace")
    parser.add_argument("index", type=int, nargs="?", default=0)
    arguments = parser.parse_args()
    for seconds, request, attribute, error in error_responses(arguments.trace, arguments.index):
        if seconds > arguments.after:
            print(f"{seconds:.3f} 0x{request:02x} 0x{attribute:04x} 0x{error:02x}")


if __name__ == "__main__":
    main()
