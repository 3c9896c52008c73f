import PositiveListFormat
import TracerCore

/// A further authority's list a node follows besides the home one (a traveller's, a campus's
/// beside its country's): a log with its own key, origin and witnesses, kept in a cache
/// directory of its own so that its state, evidence and lock never mix with another list's.
public struct AuthorityList: Sendable {
    /// The name the configuration gives it (`[lists.<name>]`), shown in reports.
    public let name: String
    public let cache: ListCacheDirectory
    public let log: FollowedListLog
    /// nil for an offline check.
    public let updater: ListLogUpdater?

    public init(name: String, cache: ListCacheDirectory, log: FollowedListLog, updater: ListLogUpdater?) {
        self.name = name
        self.cache = cache
        self.log = log
        self.updater = updater
    }
}

/// One authority's list in a check of several lists (`ExposureCheckReport.lists`).
public struct AuthorityListStatus: Codable, Sendable, Equatable {
    /// The name the home list (`server.url`) is reported under.
    public static let homeName = "home"

    public var name: String
    /// The origin its checkpoints must name.
    public var origin: String?
    /// The list this check matched; nil when none was held or it could not be used.
    public var list: ExposureCheckReport.ListStatus?
    /// Why the list is not up to date (a failed or refused update, no verified list, an outdated
    /// list); nil when it is.
    public var problem: String?
    /// Diagnosed ids of this list the node met.
    public var matchedIDs: Int
    /// The days (UTC) of the encounters this list matched.
    public var matchDays: [String]

    public init(
        name: String, origin: String?, list: ExposureCheckReport.ListStatus?, problem: String?, matchedIDs: Int = 0, matchDays: [String] = []
    ) {
        self.name = name
        self.origin = origin
        self.list = list
        self.problem = problem
        self.matchedIDs = matchedIDs
        self.matchDays = matchDays
    }

    public var isUpToDate: Bool { problem == nil }
}

extension ExposureChecker {
    /// Updates every further list, each under its own lock: one that cannot be updated stops
    /// none of the others. `failures` follows `furtherLists`' order.
    func updateFurtherLists() async throws(ExposureCheckError) -> (changed: Bool, failures: [ListUpdateError?]) {
        var changed = false
        var failures: [ListUpdateError?] = []
        for list in furtherLists {
            let update = try await update(list)
            changed = changed || update.changed
            failures.append(update.failure)
        }
        return (changed, failures)
    }

    /// Updates one further list under its own lock; a failure is returned, never thrown, so that
    /// it stops none of the other lists (only the node stopping does).
    func update(_ list: AuthorityList) async throws(ExposureCheckError) -> (changed: Bool, failure: ListUpdateError?) {
        guard let updater = list.updater else { return (false, nil) }
        let lock: CacheLock
        do { lock = try await list.cache.lock() } catch {
            if error == .cancelled { throw .cancelled }
            return (false, error)
        }
        defer { lock.release() }
        do { return (try await updater.update(holding: lock).changed, nil) } catch {
            if error == .cancelled { throw .cancelled }
            return (false, error)
        }
    }

    /// Matches the home list (whose lock the caller holds) and every further list together, and
    /// reports each. A match in any list counts whatever the others' state; a list that could
    /// not be used is named in the report. Throws only when no list at all could be matched.
    func matchSeveralHoldingLock(
        homeUpdateFailure: ListUpdateError?, furtherUpdateFailures: [ListUpdateError?]
    ) async throws(ExposureCheckError) -> ExposureCheckReport {
        var outcomes: [(name: String, origin: String?, result: Result<ListMatch, ExposureCheckError>)] = []
        let home: Result<ListMatch, ExposureCheckError>
        do { home = .success(try await homeListMatch(updateFailure: homeUpdateFailure)) } catch {
            if case .cancelled = error { throw .cancelled }
            home = .failure(error)
        }
        outcomes.append((AuthorityListStatus.homeName, log.source.origin, home))
        for (list, failure) in zip(furtherLists, furtherUpdateFailures) {
            outcomes.append((list.name, list.log.source.origin, await match(list, updateFailure: failure)))
        }
        return try combine(outcomes)
    }

    private func match(_ list: AuthorityList, updateFailure: ListUpdateError?) async -> Result<ListMatch, ExposureCheckError> {
        let lock: CacheLock
        do { lock = try await list.cache.lock() } catch { return .failure(.noVerifiedList(updateFailure: updateFailure ?? error, offline: isOffline)) }
        defer { lock.release() }
        do {
            return .success(try await matchLogHoldingLock(list.log, updateFailure: updateFailure, lastUpdated: list.cache.state.lastUpdated))
        } catch { return .failure(error) }
    }

    /// One report from every list's match: the matches together (an encounter listed by two
    /// authorities counted once), and each list's own status and matches.
    func combine(
        _ outcomes: [(name: String, origin: String?, result: Result<ListMatch, ExposureCheckError>)]
    ) throws(ExposureCheckError) -> ExposureCheckReport {
        struct EncounterKey: Hashable {
            var peer: UserID
            var ownWindowStart: UnixSeconds
        }
        let matched = outcomes.compactMap { try? $0.result.get() }
        guard let first = matched.first else {
            // No list at all: the home list's reason (it is first) is the one to tell.
            if case .failure(let error) = outcomes.first?.result { throw error }
            throw .noVerifiedList(updateFailure: nil, offline: isOffline)
        }
        var combined = Found(
            outcome: MatchOutcome(matches: [], idsChecked: 0, idsSeenOutsideTheirWindow: 0), encounterCount: 0, matches: [])
        var seenTimed = Set<EncounterKey>()
        var seenFull = Set<EncounterKey>()
        var keysChecked: Int?
        for listMatch in matched {
            let found = listMatch.found
            for timed in found.outcome.matches where seenTimed.insert(EncounterKey(peer: timed.times.peer, ownWindowStart: timed.times.ownWindowStart)).inserted {
                combined.outcome.matches.append(timed)
            }
            for full in found.matches where seenFull.insert(EncounterKey(peer: full.encounter.peer, ownWindowStart: full.encounter.ownWindowStart)).inserted {
                combined.matches.append(full)
            }
            combined.outcome.idsChecked += found.outcome.idsChecked
            combined.outcome.idsSeenOutsideTheirWindow += found.outcome.idsSeenOutsideTheirWindow
            combined.encounterCount = max(combined.encounterCount, found.encounterCount)
            if let keys = listMatch.keysChecked { keysChecked = (keysChecked ?? 0) + keys }
        }
        let statuses = outcomes.map { outcome -> AuthorityListStatus in
            switch outcome.result {
            case .success(let listMatch):
                let days = Set(listMatch.found.matches.map { ExposureAssessment.dayName($0.encounter.firstSeen) }).sorted()
                return AuthorityListStatus(
                    name: outcome.name, origin: outcome.origin, list: listMatch.list, problem: listMatch.list.updateFailure,
                    matchedIDs: Set(listMatch.found.outcome.matches.map(\.times.peer)).count, matchDays: days)
            case .failure(.noVerifiedList(let updateFailure?, _)):
                return AuthorityListStatus(
                    name: outcome.name, origin: outcome.origin, list: nil, problem: "no verified list is held, and it could not be updated: \(updateFailure)")
            case .failure(let error):
                return AuthorityListStatus(name: outcome.name, origin: outcome.origin, list: nil, problem: error.description)
            }
        }
        // `list` stays the home list's, as with one list; without one, a stand-in that says why.
        let homeList: ExposureCheckReport.ListStatus
        switch outcomes.first?.result {
        case .success(let listMatch)?: homeList = listMatch.list
        case .failure(let error)?:
            homeList = ExposureCheckReport.ListStatus(
                lastUpdated: nil, generation: 0, publishedAt: 0, batches: 0, updateFailure: error.description, offline: isOffline)
        case nil: homeList = first.list
        }
        return report(combined, list: homeList, keysChecked: keysChecked, now: first.now, lists: statuses)
    }
}
