import BLEHost
import BLEHostTestSupport
import GATTExchange

extension ScriptedController {
    /// One connectable advertising event of a Tracer node at `peer`, as the scanner reports it
    /// (LE Advertising Report, ADV_IND). The controller does not connect to it by itself: a test
    /// that wants the attempt to succeed calls `connectInitiatedConnection`.
    func advertise(from peer: BluetoothAddress, rssi: Int8 = -60) {
        advertise(from: peer, data: TracerService.advertisingData(txPower: 0), rssi: rssi)
    }
}
