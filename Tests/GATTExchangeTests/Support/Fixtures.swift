import BLEHost
import BLEHostTestSupport
import GATTExchange

let sampleID = PeerIDBytes([0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])!

/// The Tracer service with a fixed id and a recorder of accepted writes.
func tracerService(id: PeerIDBytes = sampleID, writes: CallbackRecorder<PeerIDWrite>) -> GATTServiceDefinition {
    TracerService.definition(currentID: { id }, onPeerWrite: { await writes.record($0) })
}

/// Handles of the database built from the GAP and GATT services followed by the Tracer service.
enum TracerLayout {
    static let gapService: UInt16 = 1
    static let deviceNameValue: UInt16 = 3
    static let appearanceValue: UInt16 = 5
    static let gattService: UInt16 = 6
    static let tracerService: UInt16 = 7
    static let idDeclaration: UInt16 = 8
    static let idValue: UInt16 = 9
    static let writeDeclaration: UInt16 = 10
    static let writeValue: UInt16 = 11
    static let last: UInt16 = 11
}
