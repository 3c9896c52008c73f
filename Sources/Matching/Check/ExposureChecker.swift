import Dispatch
import Foundation
import IDRotation
import PositiveListFormat
import TracerCore

/// One exposure check: update the list log (unless offline), match it against the encounters of
/// the retention period, score the matches, and remember the result.
///
/// A failed update does not stop the check when an earlier verified list is held: the report
/// then says the list is stale and since when, and the caller must not present "no exposure"
/// as final. With no verified list at all there is no result.
public struct ExposureChecker: Sendable {
    public let store: NodeStore
    public let cache: ListCacheDirectory
    /// The home authority's list log (`server.*`, `list.*`).
    public let log: FollowedListLog
    /// nil for an offline check.
    public let updater: ListLogUpdater?
    public let model: RiskModel
    public let clockSkewTolerance: UnixSeconds
    /// How long a derived id's window may last (the largest rotation jitter nodes use).
    public let keyWindowRule: DerivedWindowRule
    public let retention: RetentionPolicy
    /// The further authorities' lists (`[lists.<name>]`), matched together with this one and
    /// reported each on its own; empty for a node following one list.
    public let furtherLists: [AuthorityList]
    let clock: any WallClock

    static let lastReportKey = "exposure.last_check"
    static let notifiedKey = "exposure.notified"

    public init(
        store: NodeStore, cache: ListCacheDirectory, log: FollowedListLog, updater: ListLogUpdater?,
        model: RiskModel = .standard, clockSkewTolerance: UnixSeconds = PositiveListMatcher.defaultClockSkewTolerance,
        retention: RetentionPolicy = .standard, clock: any WallClock = SystemWallClock(),
        keyWindowRule: DerivedWindowRule = DerivedWindowRule(), furtherLists: [AuthorityList] = []
    ) {
        self.furtherLists = furtherLists
        self.log = log
        self.keyWindowRule = keyWindowRule
        self.store = store
        self.cache = cache
        self.updater = updater
        self.model = model
        self.clockSkewTolerance = clockSkewTolerance
        self.retention = retention
        self.clock = clock
    }

    public func check() async throws(ExposureCheckError) -> ExposureCheckReport {
        // Held through the match too: another process must not replace files while they are read.
        let lock = try await lockCache()
        defer { lock.release() }
        var updateFailure: ListUpdateError?
        do { _ = try await update(holding: lock) } catch {
            if error == .cancelled { throw .cancelled }
            updateFailure = error
        }
        guard !furtherLists.isEmpty else { return try await matchHoldingLock(updateFailure: updateFailure) }
        let further = try await updateFurtherLists()
        return try await matchSeveralHoldingLock(homeUpdateFailure: updateFailure, furtherUpdateFailures: further.failures)
    }

    /// True for a check asked not to contact the server.
    var isOffline: Bool { updater == nil }

    /// Updates the home list's log; false offline.
    private func update(holding lock: CacheLock) async throws(ListUpdateError) -> Bool {
        guard let updater else { return false }
        return try await updater.update(holding: lock).changed
    }

    /// What a revalidation found.
    public enum RefreshOutcome: Sendable {
        /// The server confirmed the held list (a 304, or the same checkpoint again): no check needed.
        case unchanged
        /// The list changed; the new list was checked.
        case checked(ExposureCheckReport)
        /// The list could not be revalidated; the held one stays, and nothing was checked.
        case failed(ListUpdateError)
    }

    /// The cheap, frequent step: revalidates the list (conditional requests, answered 304 while
    /// nothing changed) and matches only when it changed, which is when a verdict can change
    /// for encounters already checked. An offline checker has nothing to revalidate.
    public func refresh() async throws(ExposureCheckError) -> RefreshOutcome {
        guard !isOffline else { return .unchanged }
        let lock = try await lockCache()
        defer { lock.release() }
        if !furtherLists.isEmpty {
            var homeFailure: ListUpdateError?
            var changed = false
            do { changed = try await update(holding: lock) } catch {
                if error == .cancelled { throw .cancelled }
                homeFailure = error
            }
            let further = try await updateFurtherLists()
            let failures = further.failures
            changed = changed || further.changed
            // A list that changed can change the verdict: all are matched again, failures named.
            guard changed else { return (homeFailure ?? failures.compactMap { $0 }.first).map { .failed($0) } ?? .unchanged }
            return .checked(try await matchSeveralHoldingLock(homeUpdateFailure: homeFailure, furtherUpdateFailures: failures))
        }
        do {
            guard try await update(holding: lock) else { return .unchanged }
        } catch {
            if error == .cancelled { throw .cancelled }
            return .failed(error)
        }
        return .checked(try await matchHoldingLock(updateFailure: nil))
    }

    private func lockCache() async throws(ExposureCheckError) -> CacheLock {
        do { return try await cache.lock() } catch {
            if error == .cancelled { throw .cancelled }
            throw .noVerifiedList(updateFailure: error, offline: isOffline)
        }
    }

    /// Matches the held list against the encounters and records the report; the caller holds
    /// the cache's lock.
    private func matchHoldingLock(updateFailure: ListUpdateError?) async throws(ExposureCheckError) -> ExposureCheckReport {
        let matched = try await homeListMatch(updateFailure: updateFailure)
        return report(matched.found, list: matched.list, keysChecked: matched.keysChecked, now: matched.now)
    }

    /// What the home list (`server.*`) matched; the caller holds its cache's lock.
    func homeListMatch(updateFailure: ListUpdateError?) async throws(ExposureCheckError) -> ListMatch {
        try await matchLogHoldingLock(log, updateFailure: updateFailure, lastUpdated: cache.state.lastUpdated)
    }

    /// Matches the entries of the followed log; the caller holds the cache's lock.
    func matchLogHoldingLock(
        _ log: FollowedListLog, updateFailure: ListUpdateError?, lastUpdated: UnixSeconds?
    ) async throws(ExposureCheckError) -> ListMatch {
        let held: (state: FollowedLogState, firstIndex: UInt64, entries: HeldLogEntries)?
        do { held = try log.store.load() } catch {
            // The next update follows the log afresh; until then there is nothing to match.
            throw .noVerifiedList(updateFailure: updateFailure ?? ListLogUpdater.failure(error), offline: isOffline)
        }
        guard let held else { throw .noVerifiedList(updateFailure: updateFailure, offline: isOffline) }
        // Only a log whose checkpoint opens with the configured key and origin is matched: after
        // a key change the copy of the old list is no list of this one.
        guard let verified = try? LogFollower.open(held.state.checkpointNote, source: log.source),
              verified.checkpoint.treeSize == held.state.treeSize, verified.checkpoint.rootHash == held.state.rootHash
        else {
            if isOffline { throw .cachedListNotTrusted }
            throw .noVerifiedList(updateFailure: updateFailure, offline: false)
        }
        let now = clock.now()
        let cutoff = retention.encounterCutoff(now: now)
        let (found, matched) = try await Self.offTheCooperativePool { [self] () throws(ExposureCheckError) in
            try matchLogBlocking(held.entries, since: cutoff, updateFailure: updateFailure)
        }
        let signedAt = LogFollower.timestamp(of: verified, source: log.source)
        var list = ExposureCheckReport.ListStatus(
            lastUpdated: lastUpdated, generation: held.state.treeSize, publishedAt: signedAt.map { UnixSeconds(clamping: $0) } ?? 0,
            batches: matched.idBatches, updateFailure: updateFailure?.description, offline: isOffline,
            keyBatches: matched.keyBatches)
        list.logEntries = held.state.treeSize
        list.unreadableLogEntries = matched.unreadableEntries > 0 ? matched.unreadableEntries : nil
        return ListMatch(found: found, list: list, keysChecked: found.outcome.keysChecked, now: now)
    }

    /// What one list matched, before the report.
    struct ListMatch {
        var found: Found
        var list: ExposureCheckReport.ListStatus
        var keysChecked: Int?
        var now: UnixSeconds
    }

    /// What a match found, for the report.
    struct Found {
        var outcome: MatchOutcome
        var encounterCount: Int
        var matches: [ExposureMatch]
    }

    /// Reads the encounters and matches the log's entries: synchronous work on every core, kept
    /// off Swift's cooperative threads so the node's BLE tasks keep running meanwhile. Ids and
    /// keys both give `TimedMatch`es (a derived id carries the window it was valid in), so the
    /// risk model and the report treat them alike.
    private func matchLogBlocking(
        _ entries: HeldLogEntries, since cutoff: UnixSeconds, updateFailure: ListUpdateError?
    ) throws(ExposureCheckError) -> (Found, LogMatchOutcome) {
        let encounters: [EncounterTimes]
        do { encounters = try store.encounterTimes(since: cutoff) } catch { throw .store(error) }
        let matched: LogMatchOutcome
        do {
            matched = try PositiveListMatcher(encounters: encounters, clockSkewTolerance: clockSkewTolerance)
                .match(heldEntries: entries, windowRule: keyWindowRule)
        } catch {
            // The copy changed or failed under the read: the next update follows the log afresh
            // (or, unreadable, says what to fix).
            throw .noVerifiedList(updateFailure: updateFailure ?? ListLogUpdater.failure(error), offline: isOffline)
        }
        do {
            return (Found(outcome: matched.outcome, encounterCount: encounters.count, matches: try fullMatches(matched.outcome.matches)), matched)
        } catch { throw .store(error) }
    }

    /// Scores the matches, builds the report and keeps it for `tracer status`.
    func report(
        _ found: Found, list: ExposureCheckReport.ListStatus,
        keysChecked: Int?, now: UnixSeconds, lists: [AuthorityListStatus]? = nil
    ) -> ExposureCheckReport {
        var model = model
        // The TX power `tracer run` learned from the controller (it may run in another process,
        // or have learned it after this checker was made): the reverse direction's reference.
        if model.ownTxPower == nil { model.ownTxPower = store.advertisingTxPower() }
        let assessment = ExposureAssessment(matches: found.matches, model: model)

        let notified = notifiedLevels()
        let newExposure = assessment.exposureDays.contains { $0.level > (notified[$0.day] ?? .none) }
        let report = ExposureCheckReport(
            checkedAt: now, list: list,
            idsChecked: found.outcome.idsChecked, keysChecked: keysChecked, encountersChecked: found.encounterCount,
            matchedIDs: Set(found.outcome.matches.map(\.times.peer)).count,
            idsSeenOutsideTheirWindow: found.outcome.idsSeenOutsideTheirWindow, assessment: assessment, newExposure: newExposure,
            lists: lists)
        // Best effort: the result is returned (and shown) even when the store cannot keep it.
        if let text = try? Self.json(report.withoutPlaces) { try? store.setStateValue(text, forKey: Self.lastReportKey) }
        return report
    }

    private static func offTheCooperativePool<T: Sendable>(
        _ work: @escaping @Sendable () throws(ExposureCheckError) -> T
    ) async throws(ExposureCheckError) -> T {
        // Not a kit wait: the continuation only carries the dispatch queue's result back, once.
        let result: Result<T, ExposureCheckError> = await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                do throws(ExposureCheckError) { continuation.resume(returning: .success(try work())) } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Reads the whole rows (signal strength, TX power) of the matched encounters only.
    private func fullMatches(_ matches: [TimedMatch]) throws(StoreError) -> [ExposureMatch] {
        struct Key: Hashable {
            var peer: UserID
            var ownWindowStart: UnixSeconds
        }
        // Keyed without the times: a running node may have extended the row since it was read.
        let rows = try store.encounters(at: matches.map(\.times))
        let byKey = Dictionary(rows.map { (Key(peer: $0.peer, ownWindowStart: $0.ownWindowStart), $0) }, uniquingKeysWith: { first, _ in first })
        return matches.compactMap { match in
            byKey[Key(peer: match.times.peer, ownWindowStart: match.times.ownWindowStart)].map { ExposureMatch(encounter: $0, listed: match.listed) }
        }
    }

    /// Records that the user was told about `report`'s exposure days, so the next check does
    /// not notify them again unless a day's level rises.
    public func markNotified(_ report: ExposureCheckReport) throws(StoreError) {
        var levels = notifiedLevels()
        for day in report.assessment.exposureDays { levels[day.day] = max(levels[day.day] ?? .none, day.level) }
        // Forget days that left the retention period with the encounters they came from.
        let oldest = ExposureAssessment.dayName(retention.encounterCutoff(now: clock.now()))
        levels = levels.filter { $0.key >= oldest }
        guard let text = try? Self.json(levels) else { return }
        try store.setStateValue(text, forKey: Self.notifiedKey)
    }

    public static func lastReport(in store: NodeStore) throws(StoreError) -> ExposureCheckReport? {
        guard let text = try store.stateValue(forKey: lastReportKey) else { return nil }
        return try? JSONDecoder().decode(ExposureCheckReport.self, from: Data(text.utf8))
    }

    private func notifiedLevels() -> [String: RiskLevel] {
        guard let text = try? store.stateValue(forKey: Self.notifiedKey),
              let levels = try? JSONDecoder().decode([String: RiskLevel].self, from: Data(text.utf8))
        else { return [:] }
        return levels
    }

    static func json<Value: Encodable>(_ value: Value) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
