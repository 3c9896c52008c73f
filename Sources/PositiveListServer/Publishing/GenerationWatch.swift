import Foundation
import PositiveListFormat
import Waits

/// The generations of the published id and key indexes, for the long-poll route
/// (`GET /v1/generation`): a node on a campus or in a company waits on it and revalidates its
/// list the moment a publication changes either index, instead of at its next refresh.
///
/// The scheduler calls ``publishedDirectoryChanged()`` after each publication (and sync); the
/// generations are read back from the verified files, so the answer names only what a node can
/// download. A waiting request costs one suspended task and its connection, which the server's
/// connection limits bound (per address and in all). The server does not notice a client that
/// hangs up while its poll waits, so such polls keep their connections until their timeout:
/// `maxWaiters` keeps them from taking every connection the server has.
public actor GenerationWatch {
    public struct Generations: Sendable, Equatable, Codable {
        public var generation: UInt64
        public var keyGeneration: UInt64
    }

    public enum WaitOutcome: Sendable, Equatable {
        case newer(Generations)
        case nothingNew
        /// `maxWaiters` polls already wait; this one was not taken.
        case full
    }

    private let directory: PublishedDirectory
    private let publicKey: PositiveListPublicKey
    private let maxWaiters: Int
    private var current: Generations
    private var stopped = false
    /// Announced when a generation moves and when the server stops: each wakes every poll.
    private let changes = EventCount()
    private var waiting = 0

    public init(directory: PublishedDirectory, publicKey: PositiveListPublicKey, maxWaiters: Int = .max) {
        self.directory = directory
        self.publicKey = publicKey
        self.maxWaiters = max(1, maxWaiters)
        current = Self.read(directory, publicKey: publicKey)
    }

    /// The generations now; 0 for an index not (yet) published.
    public var generations: Generations { current }

    /// Re-reads the indexes and wakes every waiter when either generation moved.
    public func publishedDirectoryChanged() {
        let fresh = Self.read(directory, publicKey: publicKey)
        guard fresh != current else { return }
        current = fresh
        changes.announce()
    }

    /// Polls held now, waiting for a newer generation (metrics).
    var heldPolls: Int { waiting }

    /// Wakes every waiter for good: the server is stopping, and a long poll must not hold
    /// its graceful shutdown.
    public func stop() {
        stopped = true
        changes.announce()
    }

    /// The generations once either is above what the node holds, or nothing new at `deadline`
    /// (or when the server stops or the request's task is cancelled).
    public func wait(after held: Generations, until deadline: ContinuousClock.Instant) async -> WaitOutcome {
        func isNewer() -> Bool { current.generation > held.generation || current.keyGeneration > held.keyGeneration }
        if isNewer() { return .newer(current) }
        guard !stopped, !Task.isCancelled else { return .nothingNew }
        guard waiting < maxWaiters else { return .full }
        waiting += 1
        defer { waiting -= 1 }
        // Read on the actor with the checks above: a change is announced only on the actor, so
        // none falls between them and the wait.
        await changes.wait(past: changes.count, until: Deadline(deadline, on: ContinuousClock()))
        return isNewer() ? .newer(current) : .nothingNew
    }

    private static func read(_ directory: PublishedDirectory, publicKey: PositiveListPublicKey) -> Generations {
        let index = FileManager.default.contents(atPath: directory.indexPath)
            .flatMap { try? PositiveListIndex(verifying: Array($0), publicKey: publicKey) }
        let keyIndex = FileManager.default.contents(atPath: directory.keyIndexPath)
            .flatMap { try? PositiveListKeyIndex(verifying: Array($0), publicKey: publicKey) }
        return Generations(generation: index?.generation ?? 0, keyGeneration: keyIndex?.generation ?? 0)
    }
}
