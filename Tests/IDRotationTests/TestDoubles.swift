import Foundation
import IDRotation
import Synchronization
import TracerCore

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

/// A wall clock that only the test moves, forward or back, as NTP or a resume from suspend would:
/// a sleeper wakes when a step carries the clock to its time, not before, or when cancelled.
final class SteppedClock: WallClock {
    private struct Sleeper {
        var wake: UnixSeconds
        var continuation: CheckedContinuation<Void, Never>
    }
    private struct State {
        var time: UnixSeconds
        var sleepers: [Int: Sleeper] = [:]
        /// How many sleeps have begun: a test waits for the run loop to be asleep before stepping.
        var sleepsBegun = 0
    }
    private let state: Mutex<State>
    init(_ start: UnixSeconds) { state = Mutex(State(time: start)) }

    func now() -> UnixSeconds { state.withLock { $0.time } }
    var sleepsBegun: Int { state.withLock { $0.sleepsBegun } }

    func set(_ value: UnixSeconds) {
        let woken = state.withLock { state in
            state.time = value
            let due = state.sleepers.filter { $0.value.wake <= value }
            due.keys.forEach { state.sleepers[$0] = nil }
            return due.values.map(\.continuation)
        }
        woken.forEach { $0.resume() }
    }

    func advance(_ seconds: Int64) { set(now() + seconds) }

    func sleep(until wake: UnixSeconds) async throws {
        let ticket = state.withLock { state in
            state.sleepsBegun += 1
            return state.sleepsBegun
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state in
                    guard state.time < wake, !Task.isCancelled else { return true }
                    state.sleepers[ticket] = Sleeper(wake: wake, continuation: continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: ticket) }?.continuation.resume()
        }
        try Task.checkCancellation()
    }

    /// Waits (at most 5 s of real time) until `count` sleeps have begun.
    func waitForSleeps(_ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while sleepsBegun < count {
            guard ContinuousClock.now < deadline else { throw WaitTimedOut(sleeps: count) }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    struct WaitTimedOut: Error { let sleeps: Int }
}
