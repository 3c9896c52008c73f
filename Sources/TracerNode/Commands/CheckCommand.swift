import ArgumentParser
import Foundation
import IDRotation
import Matching
#if canImport(Glibc)
import Glibc
import TracerCore
#endif

struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Fetch the positive list and check it against your encounters, on this machine.",
        discussion: """
            Downloads what is new in the signed positive list (unless --offline), verifies it, and \
            matches it against the encounters of the last 28 days. Nothing about whom you met leaves \
            this machine. Exit codes: 0 no exposure found, 3 exposure found, 1 error (for example the \
            list could not be verified, or could not be updated and it found nothing in the old one), \
            2 usage error. docs/risk-model.md explains how contact becomes a risk level.
            """)

    static let exposureExitCode: Int32 = 3

    @OptionGroup var config: ConfigOptions
    @OptionGroup var store: StoreOptions
    @OptionGroup var server: ListServerOptions
    @Flag(help: "Use the list already downloaded; do not contact the server.") var offline = false
    @Flag(help: "Print the result as JSON.") var json = false
    /// Kept so that scripts written for the index's batch downloads still run: the check shows
    /// no progress bar since it follows the list log (a few new entries at a time).
    @Flag(help: "Accepted for older scripts; the check shows no progress bar.") var quiet = false
    @Option(name: .customLong("on-exposure"), help: ArgumentHelp(
        "A shell command to run when a new exposure is found (check.on_exposure); see `tracer check --help`.",
        discussion: "It gets TRACER_RISK, TRACER_EXPOSURE_DAYS, TRACER_WEIGHTED_MINUTES and the JSON report on stdin.",
        valueName: "command"))
    var onExposure: String?

    func run() async throws {
        var flags = server.settingFlags
        flags["node.database"] = store.db
        flags["check.on_exposure"] = onExposure
        let resolved = try config.resolve(flags: flags)
        let settings = resolved.settings
        let parts = MatchingParts(settings: settings)
        guard let opened = try StoreOptions.openExisting(resolved.storeLocation) else {
            throw CommandFailure.noDatabaseToCheck
        }
        if let warning = settings.retiredListFormatWarning { Output.standardError("Warning: \(warning).") }
        let checker = try parts.checker(store: opened, offline: offline)
        let report = try await checker.check()

        if json { try Output.printJSON(report) } else { print(CheckReportText(report: report).render()) }
        if report.newExposure {
            // The exposure's exit code must survive a store that cannot record the notification.
            do { try await notify(report, checker: checker, hookCommand: settings.onExposure) } catch {
                Output.standardError("Warning: could not record that this exposure was notified (\(UserMessage.describe(error))); the next check will notify it again.")
            }
        }
        if report.exposureFound { throw ExitCode(Self.exposureExitCode) }
        // Never a plain "no exposure" on a list that could not be brought up to date.
        if report.listIsStale { throw ExitCode.failure }
    }

    private func notify(_ report: ExposureCheckReport, checker: ExposureChecker, hookCommand: String?) async throws {
        guard let hookCommand else {
            // The printed result was the notification.
            try checker.markNotified(report)
            return
        }
        switch await ExposureHook(command: hookCommand).run(for: report) {
        case .succeeded:
            try checker.markNotified(report)
        case .failed(let status):
            Output.standardError("Warning: the --on-exposure command exited with status \(status); it will run again at the next check.")
        case .timedOut:
            Output.standardError("Warning: the --on-exposure command did not finish within 60 s and was stopped; it will run again at the next check.")
        case .couldNotStart(let reason):
            Output.standardError("Warning: the --on-exposure command could not start (\(reason)); fix it, it will run again at the next check.")
        }
    }
}

/// The plain-language result of a check.
struct CheckReportText {
    let report: ExposureCheckReport
    var now: UnixSeconds = SystemWallClock().now()

    func render() -> String {
        if let lists = report.lists { return renderSeveral(lists) }
        var lines = [listLine()]
        if let failure = report.list.updateFailure {
            lines.append("Warning: the list could not be updated: \(failure)")
            lines.append("This check used the list \(confirmedPhrase()); diagnoses published since then are not included.")
        }
        let assessment = report.assessment
        if assessment.level == .none {
            lines += noExposureLines()
            return lines.joined(separator: "\n")
        }
        lines += exposureLines()
        return lines.joined(separator: "\n")
    }

    /// With several lists: a line per authority (up to date or why not, what it matched), then
    /// the verdict over all of them. A list not brought up to date is named, and then there is no
    /// "no exposure": only what the lists that were checked did not contain.
    private func renderSeveral(_ lists: [AuthorityListStatus]) -> String {
        let keys = report.keysChecked.map { " (including those of \($0) published daily \($0 == 1 ? "key" : "keys"))" } ?? ""
        var lines = ["Positive lists of \(lists.count) authorities: \(report.idsChecked) ids\(keys) checked against \(report.encountersChecked) encounters of the last 28 days."]
        for list in lists {
            let name = Self.displayName(list)
            let state: String
            switch (list.list, list.problem) {
            case (let held?, nil) where held.offline:
                // Nothing was asked of its server: as fresh as its last update, no more.
                state = "used as downloaded (offline)" + (held.lastUpdated.map { ", last updated \(Output.localTime($0)) (\(age($0)))" } ?? "")
            case (let held?, nil):
                state = held.lastUpdated.map { "up to date, updated \(Output.localTime($0)) (\(age($0)))" } ?? "used as downloaded (offline)"
            case (let held?, let problem?):
                let confirmed = held.lastUpdated.map { "last confirmed \(Output.localTime($0)), \(age($0))" } ?? "never confirmed with its server"
                state = "NOT UP TO DATE: it could not be updated: \(problem) This check used its list \(confirmed)."
            case (nil, let problem):
                state = "NOT CHECKED: \(problem ?? "no verified list.")"
            }
            lines.append("  \(name): \(state)")
            if list.matchedIDs > 0 {
                let ids = list.matchedIDs == 1 ? "1 diagnosed id" : "\(list.matchedIDs) diagnosed ids"
                lines.append("    met \(ids) of this list, on \(list.matchDays.joined(separator: ", "))")
            }
        }
        if report.assessment.level > .none {
            lines += exposureLines()
            if !report.listsNotUpToDate.isEmpty {
                lines.append("(Not up to date: \(names(report.listsNotUpToDate)); run `tracer check` again when their servers can be reached.)")
            }
            return lines.joined(separator: "\n")
        }
        let stale = report.listsNotUpToDate
        if stale.isEmpty, report.list.offline {
            lines.append("No exposure found in the last 28 days in the \(lists.count) lists as downloaded; diagnoses published since each one's last update are not included.")
        } else if stale.isEmpty {
            lines.append("No exposure found in the last 28 days in any of the \(lists.count) lists.")
        } else {
            let checked = lists.filter(\.isUpToDate)
            let found = checked.isEmpty ? "" : "Nothing found in the up-to-date \(checked.count == 1 ? "list" : "lists") of \(names(checked)); "
            lines.append(found + "the \(stale.count == 1 ? "list" : "lists") of \(names(stale)) could not be brought up to date, so this check cannot rule out an exposure published there. Run `tracer check` again when \(stale.count == 1 ? "its server" : "their servers") can be reached.")
        }
        let brief = report.assessment.days.filter { $0.level == .none }
        if !brief.isEmpty {
            lines.append("(Brief or distant contact with diagnosed ids on \(brief.map(\.day).joined(separator: ", ")), below the risk threshold.)")
        }
        return lines.joined(separator: "\n")
    }

    private func names(_ lists: [AuthorityListStatus]) -> String {
        lists.map(Self.displayName).joined(separator: ", ")
    }

    /// A list as the user knows it: the home list by the setting that names it.
    private static func displayName(_ list: AuthorityListStatus) -> String {
        list.name == AuthorityListStatus.homeName ? "home (server.url)" : list.name
    }

    /// One list's verdict when it found no exposure.
    private func noExposureLines() -> [String] {
        var lines: [String] = []
        if report.listIsStale {
            lines.append("No exposure found in that older list. Run `tracer check` again when the server can be reached.")
        } else {
            lines.append("No exposure found in the last 28 days.")
        }
        let brief = report.assessment.days.filter { $0.level == .none }
        if !brief.isEmpty {
            lines.append("(Brief or distant contact with diagnosed ids on \(brief.map(\.day).joined(separator: ", ")), below the risk threshold.)")
        }
        return lines
    }

    private func exposureLines() -> [String] {
        let assessment = report.assessment
        var lines = [""]
        lines.append("Exposure found: \(assessment.level == .high ? "HIGH" : "low") risk.")
        for day in assessment.days where day.level > .none {
            let ids = day.diagnosedIDs == 1 ? "1 diagnosed id" : "\(day.diagnosedIDs) diagnosed ids"
            lines.append("  \(day.day): \(minutes(day.totalMinutes)) of contact with \(ids): \(closeness(day)); \(day.level.rawValue) risk")
            if let places = day.places { lines.append("    where this node was: \(Place.listText(places))") }
        }
        lines.append("")
        lines.append("""
            What to do now: follow your health authority's advice for contacts of a confirmed case, \
            for example watch for symptoms, get tested, and limit close contact with others until \
            then. This result was computed on this machine and has not been shared with anyone.
            """)
        return lines
    }

    private func listLine() -> String {
        let list = report.list
        let updated = list.lastUpdated.map { "updated \(Output.localTime($0)) (\(age($0)))" } ?? "never confirmed with the server"
        // Derived ids are counted with the listed ones: to the user both are ids of diagnosed people.
        let keys = report.keysChecked.map { " (including those of \($0) published daily \($0 == 1 ? "key" : "keys"))" } ?? ""
        return "Positive list \(updated): \(report.idsChecked) ids\(keys) checked against \(report.encountersChecked) encounters of the last 28 days."
    }

    private func confirmedPhrase() -> String {
        guard let updated = report.list.lastUpdated else { return "published at \(Output.localTime(report.list.publishedAt))" }
        return "last confirmed \(Output.localTime(updated)), \(age(updated))"
    }

    private func age(_ time: UnixSeconds) -> String {
        let seconds = max(0, now - time)
        return seconds < 60 ? "just now" : Output.duration(seconds) + " ago"
    }

    private func minutes(_ value: Double) -> String {
        let rounded = Int(value.rounded())
        return rounded == 1 ? "1 minute" : "\(rounded) minutes"
    }

    private func closeness(_ day: ExposureDay) -> String {
        let parts = RiskModel.Proximity.allCases.compactMap { proximity -> String? in
            guard let value = day.minutes[proximity], value > 0 else { return nil }
            let label = switch proximity {
            case .near: "close (strong signal)"
            case .medium: "at medium range"
            case .far: "far (weak signal)"
            case .unknown: "at unmeasured range"
            }
            return "\(minutes(value)) \(label)"
        }
        return parts.joined(separator: ", ")
    }
}
