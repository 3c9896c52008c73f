import Logging
import TracerCore
import Waits

/// The running node's periodic exposure check: a full check every `interval` plus a random
/// delay of up to `jitter` (so that a million nodes started at 9:00 do not all ask the server
/// at 15:00), with quicker retries while the server cannot be reached or the list cannot be
/// verified; and between them, every `refreshInterval` plus up to `refreshJitter`, a cheap
/// revalidation of the list (conditional requests, 304 while nothing changed) that checks at
/// once when the list changed, so a verdict follows a publication within minutes. With a
/// `longPoll`, the server also says when it publishes, and the node revalidates then.
public struct ExposureCheckSchedule: Sendable {
    public let checker: ExposureChecker
    public let hook: ExposureHook?
    public let interval: UnixSeconds
    public let jitter: UnixSeconds
    /// 0: no revalidation between full checks (as before refreshes existed).
    public let refreshInterval: UnixSeconds
    public let refreshJitter: UnixSeconds
    public let longPoll: GenerationLongPoll?
    /// Told every report a check or a revalidation made (the one the checker keeps in the
    /// store), so that whoever follows the checks (the node's metrics file) need not read the
    /// store for it.
    public let onReport: (@Sendable (ExposureCheckReport) async -> Void)?
    /// The first retry after a failed update; doubled after every further failure, up to `interval`.
    public let firstRetryDelay: UnixSeconds
    let logger: Logger
    /// One check or revalidation at a time, in the order asked, so that the on-exposure command
    /// runs once per new exposure even when the long poll and the timer wake together. A turn is
    /// waited for through a cancellation, as before the kit: a check asked for keeps its place.
    private let turn = FIFOLock()

    public init(
        checker: ExposureChecker, hook: ExposureHook?, interval: UnixSeconds, jitter: UnixSeconds,
        refreshInterval: UnixSeconds = 0, refreshJitter: UnixSeconds = 0, longPoll: GenerationLongPoll? = nil,
        onReport: (@Sendable (ExposureCheckReport) async -> Void)? = nil, firstRetryDelay: UnixSeconds = 15, logger: Logger
    ) {
        self.checker = checker
        self.hook = hook
        self.interval = interval
        self.jitter = jitter
        self.refreshInterval = refreshInterval
        self.refreshJitter = refreshJitter
        self.longPoll = longPoll
        self.onReport = onReport
        self.firstRetryDelay = firstRetryDelay
        self.logger = logger
    }

    /// Runs until cancelled. The first check comes after a random part of the jitter, so that a
    /// restart does not line nodes up either.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            if let longPoll { group.addTask { await followLongPoll(longPoll) } }
            group.addTask { await runTimers() }
            await group.next()
            group.cancelAll()
        }
    }

    private func runTimers() async {
        let clock = ContinuousClock()
        var nextCheck = clock.now + .seconds(UnixSeconds.random(in: 0...max(0, jitter)))
        var nextRefresh = nextRefreshTime(after: clock.now)
        var retryDelay = firstRetryDelay
        while !Task.isCancelled {
            let wakeAt = nextRefresh.map { min($0, nextCheck) } ?? nextCheck
            do { try await Task.sleep(until: wakeAt, clock: clock) } catch { return }
            if clock.now >= nextCheck {
                if await turn.withTurnThroughCancellation({ await checkOnce() }) {
                    retryDelay = firstRetryDelay
                    nextCheck = clock.now + .seconds(interval + UnixSeconds.random(in: 0...max(0, jitter)))
                } else {
                    nextCheck = clock.now + .seconds(retryDelay)
                    retryDelay = min(interval, retryDelay * 2)
                }
            } else {
                await turn.withTurnThroughCancellation({ await refreshOnce() })
            }
            nextRefresh = nextRefreshTime(after: clock.now)
        }
    }

    private func nextRefreshTime(after now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        guard refreshInterval > 0 else { return nil }
        return now + .seconds(refreshInterval + UnixSeconds.random(in: 0...max(0, refreshJitter)))
    }

    /// Polls for as long as the node runs; after a failure waits the refresh interval (or a
    /// minute), so a server without the route (404) is not asked in a loop. So does a
    /// revalidation that leaves the held generations where they were (a download failed, the
    /// checkpoint does not verify with the configured key, a cache still serves the old one): the
    /// server would answer the next poll at once, and the node would ask again and again.
    private func followLongPoll(_ longPoll: GenerationLongPoll) async {
        while !Task.isCancelled {
            do {
                if try await longPoll.waitForNewGeneration() {
                    logger.debug("the server published a new generation; revalidating")
                    let held = longPoll.heldGenerations()
                    let revalidation = await turn.withTurnThroughCancellation({ await revalidate() })
                    // A revalidation that succeeded followed the announcement, changed or not: a
                    // node already current when it starts polling is told the current generation
                    // at once and finds nothing new. (A cache still answering 304 for an older
                    // checkpoint is caught up with by the refresh timer.)
                    if revalidation != .failed { longPoll.followedAnnouncement() }
                    if revalidation == .failed || longPoll.heldGenerations() == held {
                        let wait = max(refreshInterval, 60)
                        logger.info("the node could not follow the server's new generation; the long poll waits before asking again",
                                    metadata: ["seconds": "\(wait)"])
                        do { try await Task.sleep(for: .seconds(wait)) } catch { return }
                    }
                }
            } catch .cancelled {
                return
            } catch {
                logger.warning("the long poll failed; the node still revalidates on its timer", metadata: ["reason": "\(error)"])
                do { try await Task.sleep(for: .seconds(max(refreshInterval, 60))) } catch { return }
            }
        }
    }

    /// One revalidation; checks only when the list changed. True unless it failed.
    func refreshOnce() async -> Bool {
        await revalidate() != .failed
    }

    enum Revalidation: Sendable, Equatable {
        case failed, unchanged, changed
    }

    private func revalidate() async -> Revalidation {
        let outcome: ExposureChecker.RefreshOutcome
        do {
            outcome = try await checker.refresh()
        } catch .cancelled {
            return .unchanged
        } catch {
            logger.warning("list revalidation failed; retrying later", metadata: ["reason": "\(error)"])
            return .failed
        }
        switch outcome {
        case .unchanged:
            logger.debug("the list is unchanged")
            return .unchanged
        case .failed(let error):
            // The full check's retries handle an unreachable server; one failed revalidation
            // is not worth a warning every few minutes.
            logger.info("list revalidation failed; the next one retries", metadata: ["reason": "\(error)"])
            return .failed
        case .checked(let report):
            await handle(report)
            return .changed
        }
    }

    /// One check; true when it used an up-to-date list.
    func checkOnce() async -> Bool {
        let report: ExposureCheckReport
        do {
            report = try await checker.check()
        } catch .cancelled {
            // The node is stopping; the loop ends at its next sleep.
            return true
        } catch {
            logger.warning("exposure check failed; retrying later", metadata: ["reason": "\(error)"])
            return false
        }
        await handle(report)
        return !report.listIsStale
    }

    private func handle(_ report: ExposureCheckReport) async {
        await onReport?(report)
        var metadata: Logger.Metadata = [
            "risk": "\(report.assessment.level.rawValue)", "idsChecked": "\(report.idsChecked)",
            "encounters": "\(report.encountersChecked)",
        ]
        if let failure = report.list.updateFailure { metadata["listUpdateFailure"] = "\(failure)" }
        // With several lists, which ones and why: the home list's failure alone would hide a
        // further list stuck for days.
        for list in report.listsNotUpToDate where list.name != AuthorityListStatus.homeName {
            metadata["list.\(list.name)"] = "\(list.problem ?? "not up to date")"
        }
        if report.listIsStale {
            logger.warning("exposure check used the last verified list; it could not be updated", metadata: metadata)
        } else {
            logger.info("exposure check done", metadata: metadata)
        }
        if report.newExposure { await notify(report) }
    }

    private func notify(_ report: ExposureCheckReport) async {
        logger.notice("new exposure found", metadata: [
            "risk": "\(report.assessment.level.rawValue)",
            "days": "\(report.assessment.exposureDays.map(\.day).joined(separator: ","))",
        ])
        if let hook {
            let outcome = await hook.run(for: report)
            guard outcome == .succeeded else {
                logger.warning("the on-exposure command failed; it runs again at the next check", metadata: ["outcome": "\(outcome)"])
                return
            }
        }
        do { try checker.markNotified(report) } catch {
            logger.error("could not record the notification", metadata: ["error": "\(error)"])
        }
    }
}
