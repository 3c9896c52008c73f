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

/// An in-memory own-id history.
final class MemoryHistory: OwnIDHistory {
    private let records = Mutex<[OwnID]>([])
    var all: [OwnID] { records.withLock { $0 } }
    func latestOwnID() throws -> OwnID? { records.withLock { $0.max { $0.window.end < $1.window.end } } }
    func recordOwnID(_ ownID: OwnID) throws { records.withLock { $0.append(ownID) } }
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
