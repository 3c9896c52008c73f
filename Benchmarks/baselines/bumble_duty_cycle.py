#!/usr/bin/env python3
"""A Bumble device doing a Tracer node's radio duty cycle, for the crowd benchmark's CPU baseline.

Usage: bumble_duty_cycle.py tcp-client:127.0.0.1:PORT

Advertises connectable legacy adverts every 250 ms with a Tracer-shaped payload (flags, a 128-bit
service UUID, TX power; the UUID differs from Tracer's in its last byte so that the nodes under test
do not try to exchange with it) and scans in bursts of 10 s every 60 s with a 30 ms window every
60 ms, as `tracer run` does by default. It counts the advertising reports it receives, so that the
host does the same per-report work a node does before it filters. Prints "READY" on stdout once
advertising, and the report count when stdin closes.
"""
import asyncio
import sys

from bumble import hci
from bumble.device import Device
from bumble.transport import open_transport

sys.path.insert(0, __file__.rsplit("/", 3)[0] + "/Tests/Support/bumble")
from tracer_common import configure_legacy_advertising, tracer_advertising_data  # noqa: E402

ADVERTISING_INTERVAL_MS = 250
SCAN_ON_SECONDS = 10
SCAN_OFF_SECONDS = 50


class LegacyAdvertisingDevice(Device):
    @property
    def supports_le_extended_advertising(self) -> bool:
        return False


async def main() -> None:
    reports = 0

    def on_advertisement(_advertisement) -> None:
        nonlocal reports
        reports += 1

    async with await open_transport(sys.argv[1]) as transport:
        device = LegacyAdvertisingDevice.with_hci(
            "DutyCycle", hci.Address("C0:00:00:00:00:DC", hci.Address.RANDOM_DEVICE_ADDRESS), transport.source, transport.sink
        )
        device.on("advertisement", on_advertisement)
        await device.power_on()
        data = bytearray(tracer_advertising_data(0))
        # Flip one byte of the service UUID: same size and shape, but not a Tracer service.
        uuid_start = data.find(bytes([0x11, 0x07])) + 2
        data[uuid_start] ^= 0xFF
        await configure_legacy_advertising(device, data, ADVERTISING_INTERVAL_MS)
        await device.send_sync_command(hci.HCI_LE_Set_Advertising_Enable_Command(advertising_enable=1))
        print("READY", flush=True)

        async def duty_cycle() -> None:
            while True:
                await device.start_scanning(active=False, scan_interval=60, scan_window=30, filter_duplicates=False)
                await asyncio.sleep(SCAN_ON_SECONDS)
                await device.stop_scanning()
                await asyncio.sleep(SCAN_OFF_SECONDS)

        scanning = asyncio.create_task(duty_cycle())
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        scanning.cancel()
        print(f"REPORTS {reports}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
