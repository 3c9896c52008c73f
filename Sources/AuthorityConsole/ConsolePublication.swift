import Foundation
import PositiveListFormat
import PositiveListServer
import ServerHTTPAPI
import ServerStorage
import TracerCore
import TransparencyLog

/// Where the console reads publication's state from: the published list log's checkpoint,
/// the last publication's record and, when an object store is configured, the last sync's record.
/// Read only; publishing is the publisher's alone.
public struct ConsolePublication: Sendable {
    let directory: PublishedDirectory
    let logIdentity: ListLogIdentity
    /// nil when no object store is configured.
    let objectStoreSyncRecord: String?
    /// Where each publication, by `serve` or from cron, records its outcome; nil for none.
    let publicationRecord: String?

    public init(directory: PublishedDirectory, logIdentity: ListLogIdentity, objectStoreSyncRecord: String?, publicationRecord: String?) {
        self.directory = directory
        self.logIdentity = logIdentity
        self.objectStoreSyncRecord = objectStoreSyncRecord
        self.publicationRecord = publicationRecord
    }
}

/// What the operator's status page shows.
struct PublicationStatus {
    /// The published log's checkpoint, verified.
    struct Log {
        var treeSize: UInt64
        /// When the server last signed it (its timestamped cosignature); nil without one.
        var signedAt: UnixSeconds?
    }

    /// Keys waiting for their publication delay, by when they become due.
    struct WaitingKeys {
        var dueAt: UnixSeconds
        var count: Int
    }

    enum ObjectStore {
        case notConfigured
        case neverSynced
        case synced(OutcomeRecord)
    }

    var log: Log?
    var summary: StoreSummary
    var waitingKeys: [WaitingKeys]
    /// Pending keys already past their delay, published at the next publication (or when the
    /// batch minimum is reached).
    var dueKeys: Int
    var objectStore: ObjectStore
    /// The last publication's outcome: a publication that keeps failing (a full disk, the
    /// database gone) leaves the checkpoint above as it was, so only this says so.
    var lastPublication: OutcomeRecord?

    static func read(
        publication: ConsolePublication?, store: any SubmissionStore, keySettings: KeyPublicationSettings, now: UnixSeconds
    ) async throws -> PublicationStatus {
        let summary = try await store.summary(now: now)
        // Every pending key: no key can be for a day after tomorrow (uploads refuse future days).
        let pending = try await store.dueKeys(before: UTCDay(containing: now + 2 * 86_400))
        var byDueTime: [UnixSeconds: Int] = [:]
        var due = 0
        for record in pending {
            let dueAt = keySettings.dueTime(of: record)
            if dueAt <= now { due += 1 } else { byDueTime[dueAt, default: 0] += 1 }
        }
        var log: Log?
        var objectStore = ObjectStore.notConfigured
        var lastPublication: OutcomeRecord?
        if let publication {
            lastPublication = publication.publicationRecord.flatMap(OutcomeRecord.read(from:))
            let identity = publication.logIdentity
            if let bytes = FileManager.default.contents(atPath: publication.directory.logCheckpointPath),
               let opened = try? Checkpoint.open(bytes, origin: identity.origin, logKey: identity.verifierKey, witnesses: [identity.timestampKey]) {
                let signedAt = opened.cosignatures.first { $0.key == identity.timestampKey }?.cosignatureTime
                log = Log(treeSize: opened.checkpoint.treeSize, signedAt: signedAt.flatMap { UnixSeconds(exactly: $0) })
            }
            if let path = publication.objectStoreSyncRecord {
                objectStore = OutcomeRecord.read(from: path).map(ObjectStore.synced) ?? .neverSynced
            }
        }
        return PublicationStatus(
            log: log, summary: summary,
            waitingKeys: byDueTime.sorted { $0.key < $1.key }.map { WaitingKeys(dueAt: $0.key, count: $0.value) },
            dueKeys: due, objectStore: objectStore, lastPublication: lastPublication)
    }
}
