import Crypto
import Foundation
import PositiveListFormat
import ServerStorage
import TracerCore

/// The key side of publication, set by the authority in the server configuration.
public struct KeyPublicationSettings: Sendable, Equatable {
    /// Published as the upload policy (`log/uploads`) so that nodes know what to offer their users.
    public var accepts: AcceptedUploads
    /// How long after the end of a key's day it may be published.
    public var delaySeconds: Int64
    /// Published keys per real key; the excess are fake.
    public var paddingMultiplier: Double
    /// Due keys wait until this many are due, or until the first has waited `maximumHoldSeconds`.
    public var minimumBatchKeys: Int
    public var maximumHoldSeconds: Int64

    public init(
        accepts: AcceptedUploads = .both, delaySeconds: Int64 = 7_200, paddingMultiplier: Double = 1.0, minimumBatchKeys: Int = 1,
        maximumHoldSeconds: Int64 = 86_400
    ) {
        self.accepts = accepts
        self.delaySeconds = delaySeconds
        self.paddingMultiplier = paddingMultiplier
        self.minimumBatchKeys = minimumBatchKeys
        self.maximumHoldSeconds = maximumHoldSeconds
    }

    public init(_ configuration: ServerConfiguration) {
        self.init(
            accepts: configuration.acceptUploads, delaySeconds: configuration.keyPublicationDelaySeconds,
            paddingMultiplier: configuration.keyPaddingMultiplier, minimumBatchKeys: configuration.keyBatchMinimumKeys,
            maximumHoldSeconds: configuration.keyBatchMaximumHoldSeconds)
    }

    /// Whether `due` (keys due at `now`) make a batch now: enough of them, or the first has
    /// been held long enough.
    func shouldPublish(_ due: [DailyKeyRecord], now: UnixSeconds) -> Bool {
        guard let firstDue = due.lazy.map(dueTime(of:)).min() else { return false }
        return due.count >= minimumBatchKeys || now - firstDue >= maximumHoldSeconds
    }

    /// When a key may be published: once every id it derives has expired, plus the delay. The
    /// last window of the day ends at its slot's boundary (midnight when the interval divides a
    /// day; up to one interval later when it does not), and a node's rotation jitter can keep it
    /// for less than half an interval more (`RotationSchedule`). For 15-minute windows that is
    /// 7.5 minutes after midnight, so with the default delay a key is due at 02:07:30 UTC.
    public func dueTime(of record: DailyKeyRecord) -> UnixSeconds { dueTime(day: record.day, intervalSeconds: record.intervalSeconds) }

    public func dueTime(day: UTCDay, intervalSeconds: Int64) -> UnixSeconds {
        let interval = max(intervalSeconds, 1)
        // The first slot boundary at or after midnight: the nominal end of the day's last window
        // (docs/daily-keys.md, "Day of a window").
        let lastWindowEnd = (day.end + interval - 1) / interval * interval
        return lastWindowEnd + interval / 2 + delaySeconds
    }

    /// The first day none of whose keys can be due at `now` (a cheap filter before `dueTime`).
    public func firstUndueDay(at now: UnixSeconds) -> UTCDay { UTCDay(containing: now - delaySeconds) }

    /// How many fake keys pad a batch of `realCount` keys.
    public func fakeKeyCount(forRealKeys realCount: Int) -> Int {
        Int((Double(realCount) * (paddingMultiplier - 1)).rounded())
    }
}

extension Publisher {
    /// Cuts a key batch from the due keys and expires old key batches, in the id steps' order.
    /// Keys are due by `releaseTime`: now, except in a demo or test (`publish(demoKeyClock:)`).
    func publishKeys(now: UnixSeconds, releaseTime: UnixSeconds, cutoff: UnixSeconds, into report: inout PublishReport) async throws {
        let due = try await store.dueKeys(before: keySettings.firstUndueDay(at: releaseTime))
            .filter { $0.day.end > cutoff && keySettings.dueTime(of: $0) <= releaseTime }
        if keySettings.shouldPublish(due, now: releaseTime) {
            report.newKeyBatch = try await cutKeyBatch(due, now: now)
        } else if let firstDue = due.lazy.map(keySettings.dueTime(of:)).min() {
            report.noteDue(at: firstDue + keySettings.maximumHoldSeconds)
        }
        for held in try await store.heldKeyDays() {
            let dueAt = keySettings.dueTime(day: held.day, intervalSeconds: held.intervalSeconds)
            if dueAt > releaseTime { report.noteDue(at: dueAt) }
        }
        report.expiredKeyBatches = try await store.expireKeyBatches(endingBy: cutoff, now: now)
        let live = try await store.liveKeyBatches()
        report.liveKeyBatches = live.count
        report.waitingKeys = try await store.pendingKeyCount()
    }

    private func cutKeyBatch(_ due: [DailyKeyRecord], now: UnixSeconds) async throws -> KeyBatchRecord {
        let number = try await store.nextKeyBatchNumber()
        let fakes = Self.fakeKeys(count: keySettings.fakeKeyCount(forRealKeys: due.count), like: due)
        let published = due + fakes
        // What the log will append, checked before anything is recorded (see `cutBatch`).
        _ = try ListLogEntry.entries(keyBatch: number, records: published).map { try $0.encode() }
        let record = KeyBatchRecord(
            number: number, timeRange: PositiveListKeyBatch.timeRange(of: published), keyCount: due.count, fakeKeyCount: fakes.count,
            publishedAt: now)
        guard try await store.recordKeyBatch(record, keys: due.map(\.key), published: published) else { throw PublishError.concurrentPublisher }
        try await reach(.keyBatchRecorded)
        return record
    }

    /// Fresh random keys, each with the day and interval of a randomly chosen real key, so that
    /// the groups' sizes keep the real keys' proportions. Fake keys are never stored: they are
    /// indistinguishable from real ones only as long as nobody can tell them apart.
    static func fakeKeys(count: Int, like real: [DailyKeyRecord]) -> [DailyKeyRecord] {
        guard count > 0, !real.isEmpty else { return [] }
        var generator = SystemRandomNumberGenerator()
        var taken = Set(real.map(\.key))
        var fakes: [DailyKeyRecord] = []
        fakes.reserveCapacity(count)
        while fakes.count < count {
            let model = real.randomElement(using: &generator)!
            let key = DailyKey.random(using: &generator)
            // A collision with 128-bit random keys does not happen; the check keeps the batch
            // encoder's no-duplicates rule true by construction anyway.
            guard taken.insert(key).inserted else { continue }
            fakes.append(DailyKeyRecord(day: model.day, intervalSeconds: model.intervalSeconds, key: key))
        }
        return fakes
    }
}
