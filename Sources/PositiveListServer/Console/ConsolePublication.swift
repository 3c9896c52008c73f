import Foundation
import IDRotation
import PositiveListFormat
import TracerCore

/// Where the console reads publication's state from: the published directory's signed indexes,
/// the last publication's record and, when an object store is configured, the last sync's record.
/// Read only; publishing is the publisher's alone.
public struct ConsolePublication: Sendable {
    let directory: PublishedDirectory
    let publicKey: PositiveListPublicKey
    /// nil when no object store is configured.
    let objectStoreSyncRecord: String?
    /// Where each publication, by `serve` or from cron, records its outcome; nil for none.
    let publicationRecord: String?

    public init(directory: PublishedDirectory, publicKey: PositiveListPublicKey, objectStoreSyncRecord: String?, publicationRecord: String?) {
        self.directory = directory
        self.publicKey = publicKey
        self.objectStoreSyncRecord = objectStoreSyncRecord
        self.publicationRecord = publicationRecord
    }
}

/// What the operator's status page shows.
struct PublicationStatus {
    struct Index {
        var generation: UInt64
        var publishedAt: UnixSeconds
        var batches: Int
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

    var idIndex: Index?
    var keyIndex: Index?
    var summary: StoreSummary
    var waitingKeys: [WaitingKeys]
    /// Pending keys already past their delay, published at the next publication (or when the
    /// batch minimum is reached).
    var dueKeys: Int
    var objectStore: ObjectStore
    /// The last publication's outcome: a publication that keeps failing (a full disk, the
    /// database gone) leaves the indexes above as they were, so only this says so.
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
        var idIndex: Index?
        var keyIndex: Index?
        var objectStore = ObjectStore.notConfigured
        var lastPublication: OutcomeRecord?
        if let publication {
            lastPublication = publication.publicationRecord.flatMap(OutcomeRecord.read(from:))
            if let bytes = FileManager.default.contents(atPath: publication.directory.indexPath),
               let index = try? PositiveListIndex(verifying: Array(bytes), publicKey: publication.publicKey) {
                idIndex = Index(generation: index.generation, publishedAt: index.publishedAt, batches: index.batches.count)
            }
            if let bytes = FileManager.default.contents(atPath: publication.directory.keyIndexPath),
               let index = try? PositiveListKeyIndex(verifying: Array(bytes), publicKey: publication.publicKey) {
                keyIndex = Index(generation: index.generation, publishedAt: index.publishedAt, batches: index.batches.count)
            }
            if let path = publication.objectStoreSyncRecord {
                objectStore = OutcomeRecord.read(from: path).map(ObjectStore.synced) ?? .neverSynced
            }
        }
        return PublicationStatus(
            idIndex: idIndex, keyIndex: keyIndex, summary: summary,
            waitingKeys: byDueTime.sorted { $0.key < $1.key }.map { WaitingKeys(dueAt: $0.key, count: $0.value) },
            dueKeys: due, objectStore: objectStore, lastPublication: lastPublication)
    }
}
