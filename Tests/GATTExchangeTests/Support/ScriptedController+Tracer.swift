import BLEHost
import BLEHostTestSupport
import GATTExchange
import TestTiers

extension ScriptedController {
    /// One connectable advertising event of a Tracer node at `peer`, as the scanner reports it
    /// (LE Advertising Report, ADV_IND). The controller does not connect to it by itself: a test
    /// that wants the attempt to succeed calls `connectInitiatedConnection`.
    func advertise(from peer: BluetoothAddress, rssi: Int8 = -60) {
        advertise(from: peer, data: TracerService.advertisingData(txPower: 0), rssi: rssi)
    }

    /// Advertises `peer` every `interval`, as a peer on the air does, until `condition` holds;
    /// false if it never does within `eventually`'s limit. A single advertisement could arrive
    /// before the exchange listens, and a test waiting on it then hung on timing.
    func advertise(
        from peer: BluetoothAddress, every interval: Duration = .milliseconds(20), until condition: () async -> Bool
    ) async -> Bool {
        await eventually {
            advertise(from: peer)
            try? await Task.sleep(for: interval)
            return await condition()
        }
    }
}
