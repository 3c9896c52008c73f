import BLEHost
import Foundation
import IDRotation
import Testing
import TestTiers
@testable import TracerNode

/// A node whose disk is full overwrites its status file in place (`NodeStatusRecorder`), which
/// works only while the new status fits in the old file: whole blocks of 4096 bytes, so the
/// status must stay well inside one block whatever it holds. The largest a status gets: every
/// outage at once with the longest messages, a long database path, and the radio's account with
/// a day of figures at their longest.
@Suite(.tags(.unit)) struct NodeStatusFileSizeTests {
    @Test func theLargestStatusFitsInOneBlockWithRoomToSpare() throws {
        let path = "/var/lib/" + String(repeating: "a-long-directory-name/", count: 6) + "tracer.db"
        let readOnly = StoreError.readOnlyFileSystem(path: path)
        var status = NodeRuntimeStatus(
            pid: Int32.max, startedAt: 4_102_444_800, updatedAt: 4_102_444_800, transport: "serial:/dev/serial/by-id/usb-Nordic_Semiconductor_nRF52_USB-if00,1000000",
            state: .reconnecting)
        status.controller = .init(address: "F0:00:00:00:00:01", hciVersion: 255, manufacturer: 65_535)
        status.lastError = "controller stuck: " + String(repeating: "x", count: 200)
        var radio = RadioCondition()
        radio.advertising = .init(since: 4_102_444_800, reason: "controller: HCI command LE Set Advertising Enable failed: Command Disallowed (0x0C)")
        radio.scanning = .init(since: 4_102_444_800, reason: "controller: HCI command LE Set Scan Enable failed: Command Disallowed (0x0C)")
        status.radio = radio
        status.controllerResets = .init(count: Int.max, lastAt: 4_102_444_800, lastReason: "the initiator stayed deaf to peers that kept advertising")
        status.idNotRecorded = .init(since: 4_102_444_800, problem: readOnly.whileRunning(.ids))
        status.encountersNotWritten = .init(since: 4_102_444_800, problem: readOnly.whileRunning(.encounters))
        status.reconnectingSince = 4_102_444_800
        var day = RadioTimeSummary()
        for field in [\RadioTimeSummary.observedSeconds, \.receiverSeconds, \.scanningSeconds, \.initiatingSeconds,
                      \.linkListeningSeconds, \.advertisingSeconds] {
            day[keyPath: field] = 86_459.999
        }
        day.linkSeconds = 345_839.999
        day.advertisingEvents = 339_059
        day.connectionAttempts = 999_999
        day.connections = 999_999
        status.radioTime = .init(lastHour: day, lastDay: day)

        let size = try #require(NodeStatusRecorder.encoded(status)).count
        // A quarter of the block spare, for what later versions add.
        #expect(size <= NodeStatusRecorder.block * 3 / 4, "the largest status is \(size) bytes")
    }
}
