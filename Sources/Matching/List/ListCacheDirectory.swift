import Foundation
import PositiveListFormat
import TracerCore
#if canImport(Glibc)
import Glibc
#endif

/// The directory that holds one list a node follows: the list log (`log/`), the state of its
/// updates (`state.json`, what `tracer status` reads) and the lock that keeps a scheduled check
/// in `tracer run` and a `tracer check` typed by the user from interleaving.
public struct ListCacheDirectory: Sendable {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    var statePath: String { directory + "/state.json" }

    /// What tracer kept here while a node could still follow the signed index and its batch
    /// files (before the list log was the only list): removed once the log has been followed,
    /// so no stale copy of an old list stays on disk.
    static let retiredIndexFiles = ["index.tpli", "index.etag", "batches", "keys"]

    /// Removes the retired index, batch and key files; a failure costs only disk space, so it is
    /// logged by the caller and the update it follows stands.
    func removeRetiredIndexFiles() throws(ListUpdateError) {
        for name in Self.retiredIndexFiles {
            let path = directory + "/" + name
            guard FileManager.default.fileExists(atPath: path) else { continue }
            do { try FileManager.default.removeItem(atPath: path) } catch {
                throw .cannotWriteCache(path: path, reason: (error as NSError).localizedDescription)
            }
        }
    }

    /// Creates the directory (0700: what a user downloads reveals nothing, but it is theirs).
    func prepare() throws(ListUpdateError) {
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .cannotWriteCache(path: directory, reason: (error as NSError).localizedDescription)
        }
    }

    // MARK: State

    /// What the node knows about its list's freshness, kept beside the log.
    public struct State: Codable, Sendable, Equatable {
        /// When the server last confirmed the held list current (a verified checkpoint or a 304).
        public var lastUpdated: UnixSeconds?
        public var lastAttempt: UnixSeconds?
        /// The last update's failure, in plain words; nil after a success.
        public var lastFailure: String?

        public init(lastUpdated: UnixSeconds? = nil, lastAttempt: UnixSeconds? = nil, lastFailure: String? = nil) {
            self.lastUpdated = lastUpdated
            self.lastAttempt = lastAttempt
            self.lastFailure = lastFailure
        }
    }

    public var state: State {
        guard let data = FileManager.default.contents(atPath: statePath),
              let state = try? JSONDecoder().decode(State.self, from: data)
        else { return State() }
        return state
    }

    func saveState(_ state: State) throws(ListUpdateError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try AtomicFile.write(Array(try encoder.encode(state)), to: statePath, mode: 0o600)
        } catch {
            throw .cannotWriteCache(path: statePath, reason: "\(error)")
        }
    }

    /// Takes the directory's exclusive lock, so that a scheduled check in `tracer run` and a
    /// `tracer check` typed by the user never interleave: one updates while the other reads.
    public func lock() async throws(ListUpdateError) -> CacheLock {
        try prepare()
        let path = directory + "/lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .cannotWriteCache(path: path, reason: String(cString: strerror(errno))) }
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw .cannotWriteCache(path: path, reason: reason)
            }
            do { try await Task.sleep(for: .milliseconds(100)) } catch {
                close(descriptor)
                throw .cancelled
            }
        }
        return CacheLock(descriptor: descriptor)
    }
}

/// The held lock of a `ListCacheDirectory`; released by `release()` or when it goes away.
public final class CacheLock {
    private var descriptor: Int32

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    public func release() {
        guard descriptor >= 0 else { return }
        // Closing the descriptor drops the flock.
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
