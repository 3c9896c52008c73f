import Foundation
import IDRotation
import Testing
import TestTiers
import BLEHost
import BLEHostTestSupport
@testable import GATTExchange
import TracerCore

/// `ExchangeSession` on the host clock it is given. Its sessions on the simulated air, resets
/// included, are in `SimulatedCrowdTests`.
@Suite(.tags(.unit))
struct ExchangeSessionTests {
    /// The first scan burst is placed on the session's clock, a random moment of one burst and
    /// pause after the session is made, as for a node switched on then. The manual clock here
    /// reads a day ahead of the system's, where a schedule begun on the system's clock would have
    /// its first burst a day overdue.
    @Test func theFirstScanBurstIsPlacedOnTheSessionsClock() throws {
        let clock = ManualHostClock(start: .now + .seconds(86_400))
        let directory = NSTemporaryDirectory() + "tracer-session-" + UUID().uuidString
        let store = try NodeStore.open(StoreLocation(path: directory + "/node.db", source: .flag, ownsDirectory: true))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = ExchangeConfiguration(scanPlan: .minuteBursts)
        configuration.scanOnTime = .seconds(10)
        configuration.scanOffTime = .seconds(20)
        let session = ExchangeSession(
            transport: .tcp(host: "127.0.0.1", port: 1),
            rotator: IDRotator(schedule: try RotationSchedule(intervalSeconds: 120), history: store),
            sink: EncounterLog(store: store), configuration: configuration, clock: clock)

        switch session.scanSchedule.phase(at: clock.now) {
        case .pause(until: let firstBurst):
            #expect(firstBurst > clock.now && firstBurst <= clock.now + .seconds(30),
                    "first burst \(clock.now.duration(to: firstBurst)) after the session was made")
        case .burst:
            // Only a first-burst delay of exactly zero (a draw of 0 in 0...1) begins at once.
            Issue.record("the first burst was due the moment the session was made")
        }
    }
}
