import BLEHost
import BLEHostTestSupport

extension ScriptedController {
    /// An advertisement of a node's shape (Flags, one 128-bit service UUID, TX power level): what
    /// the host advertises and hears in these tests. Its content means nothing to the host.
    static var nodeAdvertisingData: AdvertisingData {
        AdvertisingData([
            .flags(AdvertisingDataStructure.generalDiscoverableLEOnlyFlags),
            .completeList128BitServiceUUIDs([tracerServiceUUID]),
            .txPowerLevel(0),
        ])
    }

    /// One connectable advertising event at `peer`, as the scanner reports it (LE Advertising
    /// Report, ADV_IND). The controller does not connect to it by itself: a test that wants the
    /// attempt to succeed calls `connectInitiatedConnection`.
    func advertise(from peer: BluetoothAddress, rssi: Int8 = -60) {
        advertise(from: peer, data: Self.nodeAdvertisingData, rssi: rssi)
    }
}
