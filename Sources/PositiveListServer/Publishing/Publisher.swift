import Crypto
import Foundation
import Logging
import PositiveListFormat
import ServerStorage
import TracerCore
import TransparencyLog

/// The steps of a publication at which a test may inject a crash.
public enum PublishStep: String, Sendable, CaseIterable {
    /// The due ids are read from the store, nothing written yet.
    case pendingEntriesRead
    /// The id batch is recorded with what it publishes.
    case batchRecorded
    /// The key batch is recorded with what it publishes.
    case keyBatchRecorded
    /// The log (format version 3): the new tiles and bundles are written, the checkpoint not yet.
    case logTilesWritten
    /// The new checkpoint is in place, the log state (log-state.json) not yet written.
    case logCheckpointReplaced
    /// Old history (Publisher+LogHistory.swift): the new boundary is recorded, nothing deleted yet.
    case logHistoryBoundaryRecorded
    /// One more old entry bundle or level-0 tile is deleted.
    case logHistoryFileDeleted

    public static let idSteps: [PublishStep] = [.batchRecorded]
    public static let keySteps: [PublishStep] = [.keyBatchRecorded]
    public static let logSteps: [PublishStep] = [.logTilesWritten, .logCheckpointReplaced]
    /// A fault in these stops the deletion of old history, never the publication.
    public static let historySteps: [PublishStep] = [.logHistoryBoundaryRecorded, .logHistoryFileDeleted]
}

/// What one publication did.
public struct PublishReport: Sendable, Equatable {
    public var newBatch: BatchRecord?
    public var expiredBatches: [UInt64] = []
    /// Submissions whose stored ids were damaged: not published, moved to
    /// `damaged_pending_histories`.
    public var quarantinedSubmissions: [Int64] = []
    public var liveBatches: Int = 0
    public var newKeyBatch: KeyBatchRecord?
    public var expiredKeyBatches: [UInt64] = []
    public var liveKeyBatches: Int = 0
    /// Accepted keys whose day has not yet ended plus the publication delay.
    public var waitingKeys: Int = 0
    /// Accepted ids still valid, or valid until less than the id publication delay ago.
    public var waitingIDs: Int = 0
    /// What the log step did (format version 3); nil when it did not run.
    public var log: ListLogReport?
    /// Why the log was not appended although the rest was published: a live batch whose content
    /// the database does not hold yet (``ServerStoreError/batchContentMissing(batch:)``).
    public var logWaiting: String?
    /// When this publication ran.
    public var publishedAt: UnixSeconds = 0
    /// The earliest time a held id or key becomes publishable (ids past their validity plus the
    /// clock-skew allowance, keys after their delay or their hold); nil when nothing waits.
    public var nextDueAt: UnixSeconds?

    mutating func noteDue(at time: UnixSeconds) {
        nextDueAt = min(nextDueAt ?? time, time)
    }
}

public enum PublishError: Error, Sendable, CustomStringConvertible {
    case store(ServerStoreError)
    case file(FileWriteError)
    case signing(String)
    /// The pending entries do not make a batch (a bug: the store hands over only entries a batch
    /// can hold).
    case invalidEntries(PositiveListFormatError)
    case concurrentPublisher
    /// Another instance on the same PostgreSQL database holds the publication lock.
    case anotherInstancePublishing
    case injectedFault(PublishStep)
    /// The log (format version 3) could not be appended to; the batches were recorded.
    case log(String)

    public var description: String {
        switch self {
        case .store(let error): return error.description
        case .file(.diskFull(let path)):
            // Said for the operator of `serve`, whose schedule retries by itself; a `publish`
            // run from cron is run again by cron.
            return "The disk holding the published files (\((path as NSString).deletingLastPathComponent)) is full, so nothing new was published; the files already published are unchanged and still served whole, and no accepted upload is lost. Free some space there: `serve` publishes again by itself once there is (it tries again at most `publishRetryMaxSeconds` apart, 60 s by default), or run `tracer-server publish`."
        case .file(let error): return error.description
        case .signing(let detail): return "Signing failed (\(detail)); check the signing key with `tracer-server status`."
        case .invalidEntries(let error):
            return "The pending ids could not be written as a batch (\(error)); nothing was published. Please report this with the server's log."
        case .concurrentPublisher: return "Another publisher recorded a batch at the same time; publish again."
        case .anotherInstancePublishing:
            return "Another tracer-server instance is publishing right now; it publishes what is due, so nothing needs doing (or publish again later)."
        case .injectedFault(let step): return "Publication stopped after step \(step.rawValue) (injected fault)."
        case .log(let detail): return detail
        }
    }
}

extension PublishError {
    /// A store's refusal of the publication lock, as a publication or a sync reports it: the
    /// same case, so the same words.
    public init(_ error: PublicationLockError) {
        switch error {
        case .store(let error): self = .store(error)
        case .file(let error): self = .file(error)
        case .anotherInstancePublishing: self = .anotherInstancePublishing
        }
    }
}

/// Cuts batches from newly accepted ids and due keys, expires old batches and appends the live
/// ones to the list log (format version 3), the only thing published.
///
/// Order of the steps, and why a crash anywhere leaves a valid directory:
/// 1. the batch is recorded in the database with what it publishes, and its ids leave the
///    pending ones, in one transaction (the watermark moves; uploads now find the ids in the
///    batch's record);
/// 2. batches whose ids all passed retention are marked expired;
/// 3. the same for key batches (Publisher+Keys.swift);
/// 4. the log appends the live batches it does not hold yet, from the database: tiles and
///    bundles first, the checkpoint last (Publisher+Log.swift).
/// A crash before 4 leaves the previous checkpoint, which names only tiles that exist; the next
/// run appends what is missing, because the log compares its state with the database rather
/// than trusting that the previous run finished.
///
/// Formats 1 and 2 (`index.tpli`, `batches/`, `keys/`) are retired: nothing here writes them.
public actor Publisher {
    public typealias FaultInjection = @Sendable (PublishStep) throws -> Void

    let store: any SubmissionStore
    let directory: PublishedDirectory
    let signingKey: Curve25519.Signing.PrivateKey
    public nonisolated let publicKey: PositiveListPublicKey
    let retentionSeconds: Int64
    /// How long after its `validUntil` an id may be published: the clock-skew allowance
    /// (`clockSkewSeconds`), within which a node still counts an encounter with it.
    private let idPublicationDelaySeconds: Int64
    let indexRefreshSeconds: Int64
    let keySettings: KeyPublicationSettings
    private let clock: any WallClock
    let logger: Logger
    private let faultInjection: FaultInjection?
    /// A test's hold between two steps of a running `serve` (debug builds only); nil otherwise.
    private let pause: PublicationPause?
    /// Where each publication leaves its outcome (``OutcomeRecord``) for `status` and `doctor`;
    /// none if nil.
    package nonisolated let recordPath: String?
    /// The log's origin and keys (format version 3).
    public nonisolated let logIdentity: ListLogIdentity
    /// Which batches the log holds (``ListLogState``): in the data directory, not published.
    let logStatePath: String
    /// Asks the configured witnesses to cosign each checkpoint (`witnesses`); nil: none configured.
    let cosigner: CheckpointCosigner?

    public init(
        store: any SubmissionStore, directory: PublishedDirectory, signingKey: Curve25519.Signing.PrivateKey,
        retentionSeconds: Int64, indexRefreshSeconds: Int64 = 86_400, keySettings: KeyPublicationSettings = KeyPublicationSettings(),
        idPublicationDelaySeconds: Int64 = 300, clock: any WallClock, logger: Logger, faultInjection: FaultInjection? = nil,
        recordPath: String? = nil, logOrigin: String? = nil, logStatePath: String? = nil, cosigner: CheckpointCosigner? = nil,
        pause: PublicationPause? = nil
    ) {
        self.pause = pause
        self.cosigner = cosigner
        self.recordPath = recordPath
        // A configured origin is checked by the configuration; a bad one here is a caller's bug.
        self.logIdentity = (try? ListLogIdentity(origin: logOrigin, publicKey: signingKey.publicKey))
            ?? (try! ListLogIdentity(origin: nil, publicKey: signingKey.publicKey))
        self.logStatePath = logStatePath ?? ListLogState.defaultPath(for: directory)
        self.idPublicationDelaySeconds = idPublicationDelaySeconds
        self.keySettings = keySettings
        self.store = store
        self.directory = directory
        self.signingKey = signingKey
        self.publicKey = PositiveListPublicKey(signingKey.publicKey)
        self.retentionSeconds = retentionSeconds
        self.indexRefreshSeconds = indexRefreshSeconds
        self.clock = clock
        self.logger = logger
        self.faultInjection = faultInjection
    }


    /// Publishes what is due now.
    ///
    /// Ids are published once they can no longer be broadcast: `idPublicationDelaySeconds` after
    /// their `validUntil`; keys once their day has ended plus the key delay.
    ///
    /// `demoKeyClock` is for demos and tests only: daily keys and ids are released as if the
    /// time were then (never earlier than now), so a key or an id can be published before it is
    /// due, while ids may still be valid on air and could be replayed. Nothing else
    /// moves: batches, indexes and retention keep the real time. Only `tracer-server publish
    /// --demo-key-clock` passes it (with a warning); the schedule in `serve` and the
    /// configuration cannot.
    @discardableResult
    public func publish() async throws(PublishError) -> PublishReport {
        try await publish(demoKeyClock: nil)
    }

    /// ``publish()`` with the keys' and ids' release time moved to `demoKeyClock` (see above).
    @discardableResult
    public func publish(demoKeyClock: UnixSeconds?) async throws(PublishError) -> PublishReport {
        do throws(PublishError) {
            let report = try await publishUnderLock(demoKeyClock: demoKeyClock)
            record(
                succeeded: true, detail: report.newBatch.map { "batch \($0.number) with \($0.idCount) ids published" } ?? "nothing new to publish",
                warning: report.logWaiting.map { "the list log was not appended: \($0)" })
            return report
        } catch .anotherInstancePublishing {
            throw .anotherInstancePublishing
        } catch {
            record(succeeded: false, detail: error.description)
            throw error
        }
    }

    private func record(succeeded: Bool, detail: String, warning: String? = nil) {
        guard let recordPath else { return }
        OutcomeRecord(at: clock.now(), succeeded: succeeded, detail: detail, warning: warning).write(to: recordPath)
    }

    private func publishUnderLock(demoKeyClock: UnixSeconds?) async throws(PublishError) -> PublishReport {
        do {
            try directory.prepare()
            let lock: any PublicationLock
            do { lock = try await store.lockPublication() } catch { throw PublishError(error) }
            do {
                let report = try await publishHoldingLock(demoKeyClock: demoKeyClock)
                await lock.release()
                return report
            } catch {
                await lock.release()
                throw error
            }
        } catch let error as PublishError {
            logger.error("publication failed", metadata: ["reason": "\(error)"])
            throw error
        } catch let error as FileWriteError {
            logger.error("publication failed", metadata: ["reason": "\(error)"])
            throw .file(error)
        } catch {
            logger.error("publication failed", metadata: ["reason": "\(error)"])
            throw .signing(String(describing: error))
        }
    }

    private func publishHoldingLock(demoKeyClock: UnixSeconds?) async throws(PublishError) -> PublishReport {
        let now = clock.now()
        let cutoff = now - retentionSeconds
        var report = PublishReport(publishedAt: now)
        let keyReleaseTime = max(demoKeyClock ?? now, now)
        if keyReleaseTime > now {
            logger.warning("releasing daily keys and ids early, for a demo or test: ids may still be valid and could be replayed", metadata: [
                "asIfAt": "\(keyReleaseTime)", "secondsAhead": "\(keyReleaseTime - now)",
            ])
        }
        do {
            let pending = try await store.pendingEntries(endingAfter: cutoff, dueBy: keyReleaseTime - idPublicationDelaySeconds)
            try await reach(.pendingEntriesRead)
            report.waitingIDs = pending.waitingIDs
            if let nextDueBy = pending.nextDueBy { report.noteDue(at: nextDueBy + idPublicationDelaySeconds) }
            if !pending.damagedSubmissions.isEmpty {
                // One damaged row must not stop every publication (and with it the daily
                // checkpoint that tells nodes the list is alive).
                logger.error("pending ids damaged; not published", metadata: [
                    "submissions": "\(pending.damagedSubmissions.map(String.init).joined(separator: ","))",
                    "keptIn": "damaged_pending_histories",
                    "next": "ask the authority to send these histories again",
                ])
                report.quarantinedSubmissions = pending.damagedSubmissions
            }
            if !pending.entries.isEmpty {
                report.newBatch = try await cutBatch(pending, now: now)
            }
            report.expiredBatches = try await store.expireBatches(endingBy: cutoff, now: now)
            let live = try await store.liveBatches()
            report.liveBatches = live.count
            directory.removeStaleTemporaryFiles()
            try await publishKeys(now: now, releaseTime: keyReleaseTime, cutoff: cutoff, into: &report)
            // Last: the log takes the live batches the steps above recorded.
            do {
                var log = try await publishLog(now: now)
                // Then what no node can need any more is deleted; never fails the publication.
                await pruneLogHistory(now: now, report: &log)
                report.log = log
            } catch ServerStoreError.batchContentMissing(let batch) {
                // A batch recorded by an older tracer-server whose file no open could copy in
                // yet (another instance's, or missing here): the batches are recorded; the log,
                // which takes batches in order, waits until an open fills the content, never
                // appending from anything else.
                let reason = ServerStoreError.batchContentMissing(batch: batch).description
                logger.error("log not appended", metadata: ["batch": "\(batch)", "reason": "\(reason)"])
                report.logWaiting = reason
            }
            try await store.purge(endingBefore: cutoff, now: now)
        } catch let error as ServerStoreError {
            throw .store(error)
        } catch let error as PublishError {
            throw error
        } catch let error as FileWriteError {
            throw .file(error)
        } catch let error as PositiveListFormatError {
            throw .invalidEntries(error)
        } catch let error as ListLogError {
            throw .log(error.description)
        } catch let error as TileError {
            throw .log(ListLogError.damaged(error.description).description)
        } catch let error as MerkleProofError {
            throw .log(ListLogError.damaged("its tiles do not lead to the checkpoint's root: \(error)").description)
        } catch {
            // What remains is swift-crypto refusing to sign.
            throw .signing(String(describing: error))
        }
        logger.info("published", metadata: [
            "batch": "\(report.newBatch.map { String($0.number) } ?? "none")",
            "ids": "\(report.newBatch?.idCount ?? 0)",
            "waitingIDs": "\(report.waitingIDs)",
            "expiredBatches": "\(report.expiredBatches.count)",
            "liveBatches": "\(report.liveBatches)",
            "keyBatch": "\(report.newKeyBatch.map { String($0.number) } ?? "none")",
            "keys": "\(report.newKeyBatch?.keyCount ?? 0)",
            "fakeKeys": "\(report.newKeyBatch?.fakeKeyCount ?? 0)",
            "waitingKeys": "\(report.waitingKeys)",
            "logSize": "\(report.log.map { String($0.treeSize) } ?? "none")",
            "logEntriesAppended": "\(report.log?.appendedEntries ?? 0)",
        ])
        return report
    }

    private func cutBatch(_ pending: PendingEntries, now: UnixSeconds) async throws -> BatchRecord {
        let number = try await store.nextBatchNumber()
        // What the log will append, checked before anything is recorded: entries the log would
        // refuse must stay pending, not become a batch the log can never take.
        _ = try ListLogEntry.entries(idBatch: number, entries: pending.entries).map { try $0.encode() }
        let record = BatchRecord(
            number: number, timeRange: PublishedTimeRange(covering: pending.entries)!, idCount: pending.entries.count,
            lastSubmission: pending.lastSubmission, publishedAt: now)
        guard try await store.recordBatch(record, publishing: pending) else {
            throw PublishError.concurrentPublisher
        }
        try await reach(.batchRecorded)
        return record
    }

    /// A step between two awaits: the fault a test injects there, then the hold a test's
    /// ``PublicationPause`` puts there.
    func reach(_ step: PublishStep) async throws {
        try inject(step)
        await pause?.hold(at: step)
    }

    func inject(_ step: PublishStep) throws {
        do {
            try faultInjection?(step)
        } catch {
            throw PublishError.injectedFault(step)
        }
    }
}
