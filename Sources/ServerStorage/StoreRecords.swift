import Foundation
import PositiveListFormat
import TracerCore

/// Who is appending a history.
public enum SubmissionCredential: Sendable, Equatable {
    case authority(name: String)
    case uploadCode(UploadCode)

    package var isUploadCode: Bool {
        if case .uploadCode = self { return true }
        return false
    }

    /// Idempotency keys are scoped per credential, so two clients cannot collide on a key.
    package var idempotencyScope: String {
        switch self {
        case .authority(let name): return "authority:" + name
        case .uploadCode(let code): return "code:" + Hex.encode(code.digest)
        }
    }
}

/// A client's `Idempotency-Key` and a digest of the request body it came with.
public struct IdempotencyKey: Sendable, Equatable {
    public static let maximumLength = 200

    public let key: String
    public let requestDigest: [UInt8]

    public init(key: String, requestDigest: [UInt8]) {
        self.key = key
        self.requestDigest = requestDigest
    }
}

/// An accepted submission: how many ids it carried and how many were new.
public struct SubmissionReceipt: Sendable, Equatable, Codable {
    public let submission: Int64
    public let received: Int
    public let stored: Int

    package init(submission: Int64, received: Int, stored: Int) {
        self.submission = submission
        self.received = received
        self.stored = stored
    }
}

public enum SubmissionOutcome: Sendable, Equatable {
    case stored(SubmissionReceipt)
    /// The same request was accepted before under this idempotency key: nothing new was stored.
    case replayed(SubmissionReceipt)
    case refused(SubmissionRefusal)
}

/// Reasons the store itself refuses an otherwise valid history; nothing is stored.
public enum SubmissionRefusal: Sendable, Equatable {
    case unknownCode
    case expiredCode
    case revokedCode
    case usedCode
    case idempotencyKeyReused
}

/// A published key batch as the database records it.
public struct KeyBatchRecord: Sendable, Equatable {
    public let number: UInt64
    public let timeRange: PublishedTimeRange
    public let keyCount: Int
    public let fakeKeyCount: Int
    public let publishedAt: UnixSeconds

    package init(number: UInt64, timeRange: PublishedTimeRange, keyCount: Int, fakeKeyCount: Int, publishedAt: UnixSeconds) {
        self.number = number
        self.timeRange = timeRange
        self.keyCount = keyCount
        self.fakeKeyCount = fakeKeyCount
        self.publishedAt = publishedAt
    }
}

/// What the store knows about a presented upload code.
public enum UploadCodeStatus: Sendable, Equatable {
    case unknown
    case expired
    /// Ended early by the staff who issued it (the console's revoke).
    case revoked
    case alreadyUsed
    case valid(authority: String, expiresAt: UnixSeconds)
}

/// Ids accepted since the last batch, sorted by id, and what a batch of them records.
public struct PendingEntries: Sendable {
    public let entries: [PositiveListEntry]
    /// The newest submission these entries come from: the batch's `lastSubmission`.
    public let lastSubmission: Int64
    /// Submissions whose stored ids could not be read: not published, and kept aside for the
    /// authority (the publisher reports them). Only a store that keeps an upload's ids in one
    /// blob can find any; PostgreSQL keeps one row per id and never does.
    public let damagedSubmissions: [Int64]
    /// Accepted ids not handed over because some are still valid, or were until the clock-skew
    /// allowance ago (they wait for a later publication).
    public let waitingIDs: Int
    /// The least `dueBy` at which the first waiting id would be handed over (its submission's
    /// latest `validUntil` on SQLite; the earliest waiting id's on PostgreSQL, which publishes
    /// per id); nil when none waits. The scheduler wakes then rather than at its hourly tick.
    public let nextDueBy: UnixSeconds?
    /// The reading store's mark, which its `recordBatch(_:publishing:)` needs (SQLite: the
    /// watermark it refuses to record past once another publisher moved it). Nil from
    /// PostgreSQL, which checks the ids themselves when recording.
    package let read: PendingRead?

    package init(
        entries: [PositiveListEntry], lastSubmission: Int64, damagedSubmissions: [Int64] = [], waitingIDs: Int, nextDueBy: UnixSeconds?,
        read: PendingRead? = nil
    ) {
        self.entries = entries
        self.lastSubmission = lastSubmission
        self.damagedSubmissions = damagedSubmissions
        self.waitingIDs = waitingIDs
        self.nextDueBy = nextDueBy
        self.read = read
    }
}

/// A store's mark on the pending entries it read. `reader` is the store's own, drawn at random
/// when it was opened and kept inside it, so entries read by another store, by the other back
/// end, or put together by hand cannot carry it: that store refuses them with
/// ``ServerStoreError/pendingEntriesReadElsewhere`` rather than take them for its own read or
/// for another publisher's batch.
package struct PendingRead: Sendable, Equatable {
    package let reader: UInt64
    /// What the reader saw at the read (SQLite: its submission watermark).
    package let mark: Int64

    package init(reader: UInt64, mark: Int64) {
        self.reader = reader
        self.mark = mark
    }
}

/// A published batch as the database records it.
public struct BatchRecord: Sendable, Equatable {
    public let number: UInt64
    public let timeRange: PublishedTimeRange
    public let idCount: Int
    public let lastSubmission: Int64
    public let publishedAt: UnixSeconds

    package init(number: UInt64, timeRange: PublishedTimeRange, idCount: Int, lastSubmission: Int64, publishedAt: UnixSeconds) {
        self.number = number
        self.timeRange = timeRange
        self.idCount = idCount
        self.lastSubmission = lastSubmission
        self.publishedAt = publishedAt
    }
}

/// Counts for `tracer-server status`.
public struct StoreSummary: Sendable, Equatable {
    public let submissions: Int
    public let storedIDs: Int
    public let unpublishedIDs: Int
    public let liveBatches: Int
    public let lastPublishedAt: UnixSeconds?
    public let openUploadCodes: Int
    /// Keys pending or in live key batches, real ones only.
    public let storedKeys: Int
    public let unpublishedKeys: Int
    public let liveKeyBatches: Int

    package init(
        submissions: Int, storedIDs: Int, unpublishedIDs: Int, liveBatches: Int, lastPublishedAt: UnixSeconds?, openUploadCodes: Int,
        storedKeys: Int, unpublishedKeys: Int, liveKeyBatches: Int
    ) {
        self.submissions = submissions
        self.storedIDs = storedIDs
        self.unpublishedIDs = unpublishedIDs
        self.liveBatches = liveBatches
        self.lastPublishedAt = lastPublishedAt
        self.openUploadCodes = openUploadCodes
        self.storedKeys = storedKeys
        self.unpublishedKeys = unpublishedKeys
        self.liveKeyBatches = liveKeyBatches
    }
}
