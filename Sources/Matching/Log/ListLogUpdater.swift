import CurlHTTP
import Foundation
import IDRotation
import Logging
import TracerCore
import TransparencyLog

/// One authority's list log as a node follows it: whose log it is (`source`) and where the
/// node keeps it.
public struct FollowedListLog: Sendable {
    public let source: FollowedLogSource
    public let store: FollowedLogStore

    public init(source: FollowedLogSource, store: FollowedLogStore) {
        self.source = source
        self.store = store
    }
}

/// What one update of a followed log did.
public struct LogUpdate: Sendable, Equatable {
    /// False when the checkpoint was confirmed (a 304, or the same tree again).
    public var changed: Bool
    public var treeSize: UInt64
    public var newEntries: Int
    /// When the log signed the checkpoint now held, by its own timestamp.
    public var signedAt: UnixSeconds?

    public init(changed: Bool, treeSize: UInt64, newEntries: Int, signedAt: UnixSeconds?) {
        self.changed = changed
        self.treeSize = treeSize
        self.newEntries = newEntries
        self.signedAt = signedAt
    }

    /// The update in a line for people (`tracer doctor`).
    public var summary: String { "the list log verifies (\(treeSize) entries, \(newEntries) new)" }
}

/// Brings the node's copy of a list log up to date: one conditional request for the checkpoint,
/// and on a new one `LogFollower`'s checks and only the new entries; then the entries and the
/// state are saved, the freshness recorded in the cache's state (what `tracer status` reads)
/// and the signing time held to `maximumListAge`. The caller holds the cache's lock, so a
/// `tracer check` and `tracer run` never update one copy at once. The first successful update
/// also removes what an older tracer kept of the signed index in the same directory.
public struct ListLogUpdater: Sendable {
    public let log: FollowedListLog
    public let files: HTTPLogFiles
    /// The cache whose lock guards the log's directory and whose state says when the list was
    /// last confirmed current.
    public let cache: ListCacheDirectory
    public let maximumListAge: UnixSeconds?
    /// Which entries the node still needs (`ListLogRetention`): the rest are never downloaded by
    /// a node starting afresh and are dropped by one following.
    public let retention: RetentionPolicy
    let clock: any WallClock
    let logger: Logger

    public init(
        log: FollowedListLog, files: HTTPLogFiles, cache: ListCacheDirectory, maximumListAge: UnixSeconds?,
        retention: RetentionPolicy = .standard, clock: any WallClock = SystemWallClock(), logger: Logger = Logger(label: "tracer.list")
    ) {
        self.log = log
        self.files = files
        self.cache = cache
        self.maximumListAge = maximumListAge
        self.retention = retention
        self.clock = clock
        self.logger = logger
    }

    /// Updates the held log and records the outcome in the cache's state. Throws
    /// `.logNotPublished` only while nothing is held and the node never followed this log.
    public func update(holding _: CacheLock) async throws(ListUpdateError) -> LogUpdate {
        var state = cache.state
        state.lastAttempt = clock.now()
        do throws(ListUpdateError) {
            let update = try await updateHoldingLock()
            removeRetiredIndexFiles()
            // An outdated log is held (newer than nothing) but does not count as confirmed
            // current.
            try refuseIfOutdated(update.signedAt)
            state.lastUpdated = clock.now()
            state.lastFailure = nil
            try cache.saveState(state)
            return update
        } catch {
            // An interrupted update says nothing about the list; it is not recorded as a failure.
            if error != .cancelled {
                state.lastFailure = error.description
                try? cache.saveState(state)
            }
            throw error
        }
    }

    /// Once the log is held, the index files an older tracer kept beside it are stale bytes of
    /// a list this node no longer reads; a failure to remove them costs disk only.
    private func removeRetiredIndexFiles() {
        do { try cache.removeRetiredIndexFiles() } catch {
            logger.warning("the list files of an older tracer could not be removed: \(error.description)")
        }
    }

    private typealias Held = (state: FollowedLogState, firstIndex: UInt64, entries: HeldLogEntries)

    private func updateHoldingLock() async throws(ListUpdateError) -> LogUpdate {
        var held: Held?
        // A copy about to be replaced by a fresh start: the checkpoint it verified still bounds
        // what may be taken instead (never a smaller tree; at its size, its root).
        var replaced: FollowedLogState.Stored?
        do {
            held = try log.store.load()
        } catch .damaged(_, let reason) {
            // Followed again from the log; the damaged copy goes once the new one is proved.
            logger.warning("the list log kept at \(log.store.directory) is damaged (\(reason)); following it afresh")
            replaced = log.store.heldState()
        } catch {
            // A copy that cannot be read now (permissions, I/O) is kept for when it can.
            throw Self.failure(error)
        }
        let answer: HTTPLogFiles.CheckpointAnswer
        do {
            // A 304 confirms the held checkpoint only when it is one of the configured log: after
            // a key or origin change the node must see what the server serves now.
            let confirmable = held.map { (try? LogFollower.open($0.state.checkpointNote, source: log.source)) != nil } ?? false
            answer = try await files.checkpoint(ifNoneMatch: confirmable ? log.store.checkpointETag : nil)
        } catch {
            throw Self.failure(error)
        }
        let note: Data
        var etag: String?
        switch answer {
        case .notPublished:
            // "No log here" only to a node that never followed this one: after that a 404 is a
            // failing server or cache.
            if held == nil, replaced == nil, !log.store.hasFollowed { throw .logNotPublished(url: files.checkpointURL) }
            throw .unexpectedStatus(url: files.checkpointURL, status: 404)
        case .notModified:
            // Asked only with a held checkpoint, which the server says it still serves.
            guard let held else { throw .unexpectedStatus(url: files.checkpointURL, status: 304) }
            note = held.state.checkpointNote
            etag = log.store.checkpointETag
        case .checkpoint(let body, let served):
            note = body
            etag = served
        }
        let live = ListLogRetention(retention: retention, now: clock.now())
        let fetcher = PrefetchedCheckpoint(note: note, files: files)
        var advance: LogAdvance?
        var firstIndex = held?.firstIndex ?? 0
        if let current = held {
            do {
                advance = try await LogFollower.advance(current.state, source: log.source, fetcher: fetcher)
            } catch .heldStateDamaged(let reason) {
                // The offered checkpoint opened with the configured key (the follower checks it
                // first), the held one does not: the node was moved to another list, or its copy
                // is damaged. Either way the configured list is followed afresh, now. (A held
                // copy that the configured key cannot open while the server's cannot be opened
                // either is kept: the configuration, not the copy, may be what is wrong.)
                logger.notice("the list log held does not open with the configured key and origin (\(reason)); following the configured one afresh")
                replaced = log.store.heldState()
                held = nil
            } catch .unreachable(let reason) where !Self.holdsLiveEntries(current.entries, live) {
                // Every entry held has expired and the bundle after them is gone: a node that was
                // off longer than the server keeps history starts afresh, as a new node does.
                logger.notice("the list log's next entries cannot be fetched (\(reason)) and every entry held has expired; following it afresh")
                replaced = log.store.heldState()
                held = nil
            } catch {
                throw refusal(error)
            }
        }
        if held == nil {
            do {
                let started = try await LogFollower.start(source: log.source, fetcher: fetcher, isLive: live.isLive)
                try refuseIfBehind(replaced, offered: started.advance)
                (advance, firstIndex) = (started.advance, started.firstIndex)
            } catch {
                throw refusal(error)
            }
            try reset()
        }
        guard let advance else { throw .logRefused("no checkpoint was followed") }

        let changed = advance.state != held?.state
        if changed {
            do {
                try log.store.save(advance.state, appending: advance.newEntries, firstIndex: firstIndex)
            } catch {
                throw Self.failure(error)
            }
            // Entries whose records have all expired are dropped, a bundle at a time; a failure
            // costs disk only, and the update it follows stands.
            do {
                if let keep = try live.firstKeptIndex(firstIndex: firstIndex, held: held?.entries, new: advance.newEntries) {
                    try log.store.keepEntries(from: keep)
                }
            } catch {
                logger.warning("expired list entries could not be dropped: \(error.description)")
            }
        }
        log.store.saveCheckpointETag(etag)
        return LogUpdate(changed: changed, treeSize: advance.state.treeSize, newEntries: advance.newEntries.count,
                         signedAt: advance.signedAt.map { UnixSeconds(clamping: $0) })
    }

    /// True when an entry held can still match (or cannot be read: a copy that cannot be read
    /// is not thrown away for that reason here).
    private static func holdsLiveEntries(_ entries: HeldLogEntries, _ live: ListLogRetention) -> Bool {
        do { return try entries.firstPosition(where: live.isLive) != nil } catch { return true }
    }

    /// A fresh start must not take less than the copy it replaces verified, when that copy was
    /// of this log: a smaller tree is refused, and one of the same size with another root is a
    /// split view, kept as evidence like any other.
    private func refuseIfBehind(_ replaced: FollowedLogState.Stored?, offered: LogAdvance) throws(LogFollowError) {
        guard let replaced, let verified = try? LogFollower.open(replaced.checkpointNote, source: log.source) else { return }
        let held = verified.checkpoint
        let size = offered.state.treeSize
        if size < held.treeSize { throw .olderTree(held: held.treeSize, offered: size) }
        if size == held.treeSize, offered.state.rootHash != held.rootHash {
            throw .fork(size: size, heldNote: replaced.checkpointNote, offeredNote: offered.state.checkpointNote)
        }
    }

    /// The update error for a refusal; a split view's two checkpoints are kept first.
    private func refusal(_ error: LogFollowError) -> ListUpdateError {
        if Task.isCancelled { return .cancelled }
        guard case .fork(let size, _, _) = error else { return .logRefused(error.description) }
        let kept: String?
        do { kept = try log.store.keepEvidence(of: error, at: clock.now()) } catch {
            logger.error("the evidence of a split view could not be kept: \(error.description)")
            kept = nil
        }
        return .logForked(size: size, evidenceDirectory: kept)
    }

    private func reset() throws(ListUpdateError) {
        do { try log.store.reset() } catch { throw Self.failure(error) }
    }

    /// A log signed too long ago means the server, or a mirror in front of it, stopped: without
    /// this bound a frozen mirror answering 304 forever would look current. A checkpoint without a timestamp the node can verify counts as signed at 0.
    private func refuseIfOutdated(_ signedAt: UnixSeconds?) throws(ListUpdateError) {
        guard let maximumListAge else { return }
        let now = clock.now()
        let signed = signedAt ?? 0
        if signed < now - maximumListAge { throw .outdated(publishedAt: signed, ageSeconds: now - signed) }
    }

    static func failure(_ error: FollowedLogStoreError) -> ListUpdateError {
        switch error {
        case .damaged: .listLogDamaged(error.description)
        case .unreadable(let path, let reason): .cannotReadCache(path: path, reason: reason)
        case .cannotWrite(let path, let reason): .cannotWriteCache(path: path, reason: reason)
        case .diskFull(let path): .cannotWriteCache(path: path, reason: "the disk is full")
        }
    }

    private static func failure(_ error: any Error) -> ListUpdateError {
        if let error = error as? HTTPClientError { return listError(error) }
        if let error = error as? HTTPLogFilesError, case .unexpectedStatus(let url, let status) = error {
            return .unexpectedStatus(url: url, status: status)
        }
        return .logRefused(String(describing: error))
    }
}

extension ListLogUpdater {
    private static func listError(_ error: HTTPClientError) -> ListUpdateError {
        if case .cancelled = error { return .cancelled }
        if case .responseTooLarge(let url, let limit) = error { return .tooLarge(url: url, limit: limit) }
        return .network(error)
    }
}

/// The files of a log whose checkpoint was already fetched (conditionally, by the updater).
struct PrefetchedCheckpoint: LogFileFetching {
    let note: Data
    let files: HTTPLogFiles

    func checkpoint() async throws -> Data { note }

    func file(_ path: String, fromByte offset: Int) async throws -> Data {
        try await files.file(path, fromByte: offset)
    }
}
