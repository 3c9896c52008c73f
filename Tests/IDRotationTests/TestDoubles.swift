import Foundation
import IDRotation
import Synchronization

/// A wall clock the test sets by hand. Sleeping jumps the clock to the wake-up time.
final class ManualClock: WallClock {
    private let time: Mutex<UnixSeconds>
    init(_ start: UnixSeconds) { time = Mutex(start) }
    func now() -> UnixSeconds { time.withLock { $0 } }
    func set(_ value: UnixSeconds) { time.withLock { $0 = value } }
    func advance(_ seconds: Int64) { time.withLock { $0 += seconds } }
    func sleep(until wake: UnixSeconds) async throws {
        try Task.checkCancellation()
        time.withLock { $0 = max($0, wake) }
        await Task.yield()
    }
}

/// An in-memory own-id history with its daily keys.
final class MemoryHistory: OwnIDHistory {
    private let records = Mutex<[OwnID]>([])
    private let keys = Mutex<[DailyKeyRecord]>([])
    var all: [OwnID] { records.withLock { $0 } }
    var dailyKeys: [DailyKeyRecord] { keys.withLock { $0 } }
    /// While set, recording an id fails as on a full disk.
    let refusesWrites = Mutex(false)
    func latestOwnID() throws -> OwnID? { records.withLock { $0.max { $0.window.end < $1.window.end } } }
    func recordOwnID(_ ownID: OwnID) throws {
        if refusesWrites.withLock({ $0 }) { throw StoreError.diskFull(path: "/var/lib/tracer/tracer.db") }
        records.withLock { $0.append(ownID) }
    }
    func dailyKey(for day: UTCDay, intervalSeconds: Int64, recordingIfAbsent newKey: DailyKey) throws -> DailyKey {
        keys.withLock { keys in
            if let stored = keys.first(where: { $0.day == day && $0.intervalSeconds == intervalSeconds }) { return stored.key }
            keys.append(DailyKeyRecord(day: day, intervalSeconds: intervalSeconds, key: newKey))
            return newKey
        }
    }
}

/// A history whose key store fails, as a full disk would make it.
final class KeylessHistory: OwnIDHistory {
    struct DiskFull: Error {}
    private let records = Mutex<[OwnID]>([])
    var all: [OwnID] { records.withLock { $0 } }
    func latestOwnID() throws -> OwnID? { nil }
    func recordOwnID(_ ownID: OwnID) throws { records.withLock { $0.append(ownID) } }
    func dailyKey(for day: UTCDay, intervalSeconds: Int64, recordingIfAbsent newKey: DailyKey) throws -> DailyKey {
        throw DiskFull()
    }
}

/// A fresh directory under /tmp, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() {
        path = NSTemporaryDirectory() + "tracer-test-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }

    func location(_ name: String = "node.db") -> StoreLocation {
        StoreLocation(path: path + "/" + name, source: .flag, ownsDirectory: false)
    }
}
