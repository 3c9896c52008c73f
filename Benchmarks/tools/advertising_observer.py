#!/usr/bin/env python3
"""A passive listener on the crowd benchmark's phy: when was each address heard advertising?

Usage: advertising_observer.py tcp-client:127.0.0.1:PORT OUTPUT_FILE

Scans passively (legacy scanning, window = interval, no duplicate filter) for as long as it runs and
writes one line per advertising report to OUTPUT_FILE: "UNIX_TIME ADDRESS KIND", KIND 1 for a Tracer
advertisement (the Tracer service UUID), 2 for the duty-cycle baseline device (the same UUID with its
first byte flipped, see Benchmarks/baselines/bumble_duty_cycle.py), 0 for anything else. It never
advertises, so the nodes do not see it. Passive because Bumble as a host on RootCanal reports the
empty scan response instead of the advertising data when scanning actively (shared/rootcanal/NOTES.md).

Prints "READY" on stdout once scanning, and "REPORTS n" when stdin closes, then exits.
"""
import asyncio
import os
import sys
import time

from bumble import hci
from bumble.device import Device
from bumble.transport import open_transport

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "Support")
sys.path[:0] = [os.path.join(SUPPORT, "bumble"), SUPPORT]
from launcher_support import block_until_stdin_closes  # noqa: E402
from tracer_common import SERVICE_UUID  # noqa: E402

TRACER = bytes(SERVICE_UUID.to_bytes())
BASELINE = bytes([TRACER[0] ^ 0xFF]) + TRACER[1:]


async def main() -> None:
    reports = 0
    output = open(sys.argv[2], "w", buffering=1 << 16)

    def on_advertisement(advertisement) -> None:
        nonlocal reports
        reports += 1
        data = advertisement.data_bytes
        kind = 1 if TRACER in data else 2 if BASELINE in data else 0
        output.write(f"{time.time():.3f} {advertisement.address.to_string(False)} {kind}\n")

    async with await open_transport(sys.argv[1]) as transport:
        device = Device.with_hci(
            "Observer", hci.Address("C0:00:00:00:00:0B", hci.Address.RANDOM_DEVICE_ADDRESS), transport.source, transport.sink
        )
        device.on("advertisement", on_advertisement)
        await device.power_on()
        await device.start_scanning(legacy=True, active=False, scan_interval=100, scan_window=100, filter_duplicates=False)
        print("READY", flush=True)

        await asyncio.get_running_loop().run_in_executor(None, block_until_stdin_closes)
        output.close()
        print(f"REPORTS {reports}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
