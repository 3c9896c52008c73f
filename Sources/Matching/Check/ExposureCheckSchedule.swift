import IDRotation
import Logging

/// The running node's periodic exposure check: every `interval` plus a random delay of up to
/// `jitter` (so that a million nodes started at 9:00 do not all ask the server at 15:00), with
/// quicker retries while the server cannot be reached or the list cannot be verified.
public struct ExposureCheckSchedule: Sendable {
    public let checker: ExposureChecker
    public let hook: ExposureHook?
    public let interval: UnixSeconds
    public let jitter: UnixSeconds
    /// The first retry after a failed update; doubled after every further failure, up to `interval`.
    public let firstRetryDelay: UnixSeconds
    let logger: Logger

    public init(
        checker: ExposureChecker, hook: ExposureHook?, interval: UnixSeconds, jitter: UnixSeconds,
        firstRetryDelay: UnixSeconds = 15, logger: Logger
    ) {
        self.checker = checker
        self.hook = hook
        self.interval = interval
        self.jitter = jitter
        self.firstRetryDelay = firstRetryDelay
        self.logger = logger
    }

    /// Runs until cancelled. The first check comes after a random part of the jitter, so that a
    /// restart does not line nodes up either.
    public func run() async {
        var delay = UnixSeconds.random(in: 0...max(0, jitter))
        var retryDelay = firstRetryDelay
        while !Task.isCancelled {
            do { try await Task.sleep(for: .seconds(delay)) } catch { return }
            if await checkOnce() {
                retryDelay = firstRetryDelay
                delay = interval + UnixSeconds.random(in: 0...max(0, jitter))
            } else {
                delay = retryDelay
                retryDelay = min(interval, retryDelay * 2)
            }
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
        var metadata: Logger.Metadata = [
            "risk": "\(report.assessment.level.rawValue)", "idsChecked": "\(report.idsChecked)",
            "encounters": "\(report.encountersChecked)",
        ]
        if let failure = report.list.updateFailure { metadata["listUpdateFailure"] = "\(failure)" }
        if report.listIsStale {
            logger.warning("exposure check used the last verified list; it could not be updated", metadata: metadata)
        } else {
            logger.info("exposure check done", metadata: metadata)
        }
        if report.newExposure { await notify(report) }
        return !report.listIsStale
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
