import Foundation
import IDRotation
import Logging
import Testing
import TestTiers
@testable import Matching

extension MatchingTests {
    /// `tracer run` keeps the controller's TX power in the store; `tracer check` reads it back.
    @Suite(.tags(.unit)) struct AdvertisingTxPowerRecordTests {
        @Test func theLearnedTxPowerSurvivesReopeningAndNilForgetsIt() throws {
            let directory = NSTemporaryDirectory() + "tracer-txpower-test-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let location = StoreLocation(path: directory + "/node.db", source: .flag, ownsDirectory: false)
            let logger = Logger(label: "test")
            do {
                let store = try NodeStore.open(location)
                #expect(store.advertisingTxPower() == nil)
                store.recordAdvertisingTxPower(-9, logger: logger)
            }
            let reopened = try NodeStore.open(location)
            #expect(reopened.advertisingTxPower() == -9)
            reopened.recordAdvertisingTxPower(nil, logger: logger)
            #expect(reopened.advertisingTxPower() == nil)
        }
    }
}
