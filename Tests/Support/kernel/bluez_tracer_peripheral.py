#!/usr/bin/env python3
"""A Tracer peer made of BlueZ: registers, through bluetoothd's D-Bus API, a GATT application
offering the Tracer service (GattManager1.RegisterApplication) and a connectable advertisement
naming it (LEAdvertisingManager1.RegisterAdvertisement), on one adapter. Its id characteristic
serves a fixed 8-byte id; every value written to its write characteristic is appended, in hex, to
the record file, one line per write. Runs until SIGTERM or SIGINT.

The kernel bed's BlueZ scenario (Tests/Support/kernel/scenario-bluez.sh) uses it to check that a
Tracer node finds a foreign peripheral, reads its id and writes its own.

Usage: bluez_tracer_peripheral.py --adapter hci1 --id 16HEXDIGITS --record FILE
"""
import argparse
import signal
import sys
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

# Sources/GATTExchange/TracerProfile/TracerService.swift; phone apps depend on them, they never change.
SERVICE_UUID = "a09a0000-5aaa-47f2-9c7f-93bdb3a65376"
ID_CHARACTERISTIC_UUID = "a09a0001-5aaa-47f2-9c7f-93bdb3a65376"
WRITE_CHARACTERISTIC_UUID = "a09a0002-5aaa-47f2-9c7f-93bdb3a65376"

BLUEZ = "org.bluez"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
PROPERTIES = "org.freedesktop.DBus.Properties"
GATT_MANAGER = "org.bluez.GattManager1"
ADVERTISING_MANAGER = "org.bluez.LEAdvertisingManager1"
GATT_SERVICE = "org.bluez.GattService1"
GATT_CHARACTERISTIC = "org.bluez.GattCharacteristic1"
ADVERTISEMENT = "org.bluez.LEAdvertisement1"
APPLICATION_PATH = "/org/tracer/bluez"


def say(message: str) -> None:
    print(f"[{time.monotonic():.2f}] {message}", flush=True)


class InvalidArguments(dbus.exceptions.DBusException):
    _dbus_error_name = "org.freedesktop.DBus.Error.InvalidArgs"


class InvalidValueLength(dbus.exceptions.DBusException):
    """BlueZ answers the peer with ATT's Invalid Attribute Value Length for this error name."""
    _dbus_error_name = "org.bluez.Error.InvalidValueLength"


class Exported(dbus.service.Object):
    """A D-Bus object with one BlueZ interface whose properties are fixed at creation."""

    interface = ""

    def __init__(self, bus, path: str):
        self.path = path
        super().__init__(bus, path)

    def properties(self) -> dict:
        raise NotImplementedError

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != self.interface:
            raise InvalidArguments(f"{self.path} has no interface {interface}")
        return self.properties()


class Characteristic(Exported):
    interface = GATT_CHARACTERISTIC

    def __init__(self, bus, path: str, service: "Service", uuid: str, flags: list):
        super().__init__(bus, path)
        self.service, self.uuid, self.flags = service, uuid, flags

    def properties(self) -> dict:
        return {
            "Service": dbus.ObjectPath(self.service.path),
            "UUID": self.uuid,
            "Flags": dbus.Array(self.flags, signature="s"),
        }


class IDCharacteristic(Characteristic):
    def __init__(self, bus, path: str, service: "Service", peer_id: bytes):
        super().__init__(bus, path, service, ID_CHARACTERISTIC_UUID, ["read"])
        self.peer_id = peer_id

    @dbus.service.method(GATT_CHARACTERISTIC, in_signature="a{sv}", out_signature="ay")
    def ReadValue(self, options):
        offset = int(options.get("offset", 0))
        say(f"id read by {options.get('device', '?')} at offset {offset}")
        return dbus.Array(self.peer_id[offset:], signature="y")


class WriteCharacteristic(Characteristic):
    def __init__(self, bus, path: str, service: "Service", record: str):
        super().__init__(bus, path, service, WRITE_CHARACTERISTIC_UUID, ["write", "write-without-response"])
        self.record = record

    @dbus.service.method(GATT_CHARACTERISTIC, in_signature="aya{sv}")
    def WriteValue(self, value, options):
        written = bytes(value)
        say(f"written by {options.get('device', '?')}: {written.hex()}")
        # The same length rule as a Tracer node's own server (PeerIDWrite): the id, or id, RSSI, TX power.
        if len(written) not in (8, 10):
            raise InvalidValueLength(f"a peer id write has 8 or 10 octets, not {len(written)}")
        with open(self.record, "a") as record:
            record.write(written.hex() + "\n")


class Service(Exported):
    interface = GATT_SERVICE

    def __init__(self, bus, path: str, peer_id: bytes, record: str):
        super().__init__(bus, path)
        self.characteristics = [
            IDCharacteristic(bus, path + "/char0", self, peer_id),
            WriteCharacteristic(bus, path + "/char1", self, record),
        ]

    def properties(self) -> dict:
        return {"UUID": SERVICE_UUID, "Primary": True}


class Application(dbus.service.Object):
    """The root BlueZ asks (GetManagedObjects) for every service and characteristic of the app."""

    def __init__(self, bus, peer_id: bytes, record: str):
        super().__init__(bus, APPLICATION_PATH)
        self.services = [Service(bus, APPLICATION_PATH + "/service0", peer_id, record)]

    @dbus.service.method(OBJECT_MANAGER, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        objects = {}
        for service in self.services:
            objects[dbus.ObjectPath(service.path)] = {service.interface: service.properties()}
            for characteristic in service.characteristics:
                objects[dbus.ObjectPath(characteristic.path)] = {characteristic.interface: characteristic.properties()}
        return objects


class Advertisement(Exported):
    interface = ADVERTISEMENT

    def __init__(self, bus, path: str):
        super().__init__(bus, path)

    def properties(self) -> dict:
        # Connectable ("peripheral"), the service UUID alone, as a Tracer node advertises.
        return {"Type": "peripheral", "ServiceUUIDs": dbus.Array([SERVICE_UUID], signature="s")}

    @dbus.service.method(ADVERTISEMENT)
    def Release(self):
        say("advertisement released by bluetoothd")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adapter", default="hci1")
    parser.add_argument("--id", required=True, help="the id served, 16 hex digits")
    parser.add_argument("--record", required=True, help="file that receives every written value, in hex")
    arguments = parser.parse_args()
    try:
        peer_id = bytes.fromhex(arguments.id)
    except ValueError:
        peer_id = b""
    if len(peer_id) != 8:
        print(f"--id must be 16 hex digits (8 octets), not {arguments.id!r}", file=sys.stderr)
        return 2

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    adapter_path = "/org/bluez/" + arguments.adapter
    adapter = bus.get_object(BLUEZ, adapter_path)
    application = Application(bus, peer_id, arguments.record)
    advertisement = Advertisement(bus, APPLICATION_PATH + "/advertisement0")
    loop = GLib.MainLoop()
    status = [0]

    def failed(step: str):
        def report(error):
            say(f"{step} failed on {adapter_path}: {error}")
            status[0] = 1
            loop.quit()
        return report

    def advertise():
        dbus.Interface(adapter, ADVERTISING_MANAGER).RegisterAdvertisement(
            advertisement.path, {},
            reply_handler=lambda: say("advertisement registered"),
            error_handler=failed("RegisterAdvertisement"))

    def registered():
        say("application registered")
        advertise()

    dbus.Interface(adapter, GATT_MANAGER).RegisterApplication(
        APPLICATION_PATH, {}, reply_handler=registered, error_handler=failed("RegisterApplication"))
    for number in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, number, loop.quit)
    loop.run()
    say("stopped")
    return status[0]


if __name__ == "__main__":
    sys.exit(main())
