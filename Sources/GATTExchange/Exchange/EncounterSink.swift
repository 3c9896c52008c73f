import BLEHost
import IDRotation

/// Where the exchange reports what it learned. The node's `EncounterLog` is one.
public protocol EncounterSink: Sendable {
    func record(_ sighting: Sighting) async
}

extension EncounterLog: EncounterSink {}
