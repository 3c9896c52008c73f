import Foundation
import PositiveListFormat
import ServerStorage
import TransparencyLog
import Waits

/// What the long-poll route (`GET /v1/generation`) announces: the published list log's tree
/// size, read from its verified checkpoint. A node on a campus or in a company waits on it and
/// revalidates its list the moment a publication appends to the log, instead of at its next
/// refresh.
///
/// The answer keeps the shape it had when it named the retired indexes' generations
/// (`generation`, `keyGeneration`), so nodes from before read it: `generation` is the tree size,
/// `keyGeneration` always 0 (the log holds both kinds of batch).
///
/// The scheduler calls ``publishedDirectoryChanged()`` after each publication (and sync); the
/// size is read back from the checkpoint, verified with the log's key, so the answer names only
/// what a node can download. A waiting request costs one suspended task and its connection, which
/// the server's connection limits bound (per address and in all). The server does not notice a
/// client that hangs up while its poll waits, so such polls keep their connections until their
/// timeout: `maxWaiters` keeps them from taking every connection the server has.
public actor GenerationWatch {
    public struct Generations: Sendable, Equatable, Codable {
        /// The log's tree size.
        public var generation: UInt64
        /// 0 from this server; from a node, nonzero when it last followed a server that still
        /// published the retired key index.
        public var keyGeneration: UInt64

        public init(generation: UInt64, keyGeneration: UInt64) {
            self.generation = generation
            self.keyGeneration = keyGeneration
        }
    }

    public enum WaitOutcome: Sendable, Equatable {
        case newer(Generations)
        case nothingNew
        /// `maxWaiters` polls already wait; this one was not taken.
        case full
    }

    private let directory: PublishedDirectory
    private let identity: ListLogIdentity
    private let maxWaiters: Int
    private var current: Generations
    private var stopped = false
    /// Announced when a generation moves and when the server stops: each wakes every poll.
    private let changes = EventCount()
    private var waiting = 0

    public init(directory: PublishedDirectory, identity: ListLogIdentity, maxWaiters: Int = .max) {
        self.directory = directory
        self.identity = identity
        self.maxWaiters = max(1, maxWaiters)
        current = Self.read(directory, identity: identity)
    }

    /// The generations now; 0 for a log not (yet) published.
    public var generations: Generations { current }

    /// Re-reads the checkpoint and wakes every waiter when the tree size moved.
    public func publishedDirectoryChanged() {
        let fresh = Self.read(directory, identity: identity)
        guard fresh != current else { return }
        current = fresh
        changes.announce()
    }

    /// Polls held now, waiting for a newer generation (metrics).
    package var heldPolls: Int { waiting }

    /// Wakes every waiter for good: the server is stopping, and a long poll must not hold
    /// its graceful shutdown.
    public func stop() {
        stopped = true
        changes.announce()
    }

    /// The generations once the tree size is above what the node holds, or nothing new at
    /// `deadline` (on the caller's clock: the continuous one in `serve`), or when the server
    /// stops or the request's task is cancelled. A node holding a
    /// key generation followed a server that still published the retired indexes, whose
    /// generations say nothing of the log's size: it is answered at once, and then holds this
    /// server's.
    public func wait(after held: Generations, until deadline: Deadline) async -> WaitOutcome {
        func isNewer() -> Bool { current.generation > held.generation || held.keyGeneration != 0 }
        if isNewer() { return .newer(current) }
        guard !stopped, !Task.isCancelled else { return .nothingNew }
        guard waiting < maxWaiters else { return .full }
        waiting += 1
        defer { waiting -= 1 }
        // Read on the actor with the checks above: a change is announced only on the actor, so
        // none falls between them and the wait.
        await changes.wait(past: changes.count, until: deadline)
        return isNewer() ? .newer(current) : .nothingNew
    }

    private static func read(_ directory: PublishedDirectory, identity: ListLogIdentity) -> Generations {
        let checkpoint = FileManager.default.contents(atPath: directory.logCheckpointPath).flatMap {
            try? Checkpoint.open($0, origin: identity.origin, logKey: identity.verifierKey, witnesses: [identity.timestampKey]).checkpoint
        }
        return Generations(generation: checkpoint?.treeSize ?? 0, keyGeneration: 0)
    }
}
