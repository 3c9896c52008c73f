import Crypto
import Foundation
import IDRotation
import PositiveListFormat
@testable import Matching
import TracerCore

/// A temporary directory removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "/tracer-matching-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// A throwaway signing key for the list, as a server holds one.
struct BatchSigner {
    let key = Curve25519.Signing.PrivateKey()
    var publicKey: PositiveListPublicKey { PositiveListPublicKey(key.publicKey) }
}

func encounter(
    _ peer: UInt64, from firstSeen: UnixSeconds, to lastSeen: UnixSeconds, rssi: Int8? = -50, txPower: Int8? = 0,
    reportedRSSI: Int8? = nil
) -> Encounter {
    var value = Encounter(Sighting(
        peer: UserID(rawValue: peer), ownWindowStart: firstSeen - firstSeen % 900, time: firstSeen, rssi: rssi,
        txPower: txPower, reportedRSSI: reportedRSSI, learnedBy: .read))
    value.lastSeen = lastSeen
    return value
}

func listed(_ id: UInt64, from validFrom: UnixSeconds, to validUntil: UnixSeconds) -> PositiveListEntry {
    PositiveListEntry(id: UserID(rawValue: id), validFrom: validFrom, validUntil: validUntil)
}
