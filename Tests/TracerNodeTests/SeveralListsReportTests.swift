import Foundation
import Testing
import TestTiers
import TracerCore
@testable import Matching
@testable import TracerNode

/// What `tracer check` says with several lists (issue 39 item 5): each authority's list with
/// whether it is up to date and what it matched; never "no exposure" while one is not up to date;
/// a match in any list reported whatever the others' state; one list's reports unchanged.
@Suite(.tags(.unit)) struct SeveralListsReportTests {
    static let now: UnixSeconds = 1_800_000_000

    static func status(_ failure: String? = nil) -> ExposureCheckReport.ListStatus {
        .init(lastUpdated: now - 120, generation: 3, publishedAt: now - 200, batches: 3, updateFailure: failure, offline: false)
    }

    static func report(level: RiskLevel, lists: [AuthorityListStatus]?, homeFailure: String? = nil) -> ExposureCheckReport {
        var assessment = ExposureAssessment(matches: [], model: .standard)
        assessment.level = level
        if level > .none {
            assessment.days = [ExposureDay(
                day: "2027-01-14", dayStart: now - 86_400, diagnosedIDs: 1, minutes: [.near: 20], weightedMinutes: 20, level: level)]
        }
        return ExposureCheckReport(
            checkedAt: now, list: status(homeFailure), idsChecked: 40, encountersChecked: 5, matchedIDs: level > .none ? 1 : 0,
            idsSeenOutsideTheirWindow: 0, assessment: assessment, newExposure: level > .none, lists: lists)
    }

    static func text(_ report: ExposureCheckReport) -> String { CheckReportText(report: report, now: now).render() }

    @Test func allUpToDateAndNothingFoundIsNoExposureInEveryList() {
        let report = Self.report(level: .none, lists: [
            AuthorityListStatus(name: "home", origin: "a", list: Self.status(), problem: nil),
            AuthorityListStatus(name: "campus", origin: "b", list: Self.status(), problem: nil),
        ])
        #expect(!report.listIsStale)
        let text = Self.text(report)
        #expect(text.contains("home (server.url): up to date"), "\(text)")
        #expect(text.contains("campus: up to date"), "\(text)")
        #expect(text.contains("No exposure found in the last 28 days in any of the 2 lists."), "\(text)")
    }

    @Test func aListNotUpToDateIsNamedAndThereIsNoNoExposure() {
        let report = Self.report(level: .none, lists: [
            AuthorityListStatus(name: "home", origin: "a", list: Self.status(), problem: nil),
            AuthorityListStatus(name: "campus", origin: "b", list: Self.status("The server did not answer."), problem: "The server did not answer."),
            AuthorityListStatus(name: "travel", origin: "c", list: nil, problem: "no verified list is held, and it could not be updated: refused."),
        ])
        #expect(report.listIsStale, "the exit code is then 1, never 0")
        #expect(report.listsNotUpToDate.map(\.name) == ["campus", "travel"])
        let text = Self.text(report)
        #expect(!text.lowercased().contains("no exposure"), "\(text)")
        #expect(text.contains("campus: NOT UP TO DATE: it could not be updated: The server did not answer."), "\(text)")
        #expect(text.contains("travel: NOT CHECKED: no verified list"), "\(text)")
        #expect(text.contains("Nothing found in the up-to-date list of home (server.url); the lists of campus, travel could not be brought up to date"), "\(text)")
    }

    @Test func aMatchInOneListIsReportedWithItsAuthorityWhateverTheOthers() {
        let report = Self.report(level: .high, lists: [
            AuthorityListStatus(name: "home", origin: "a", list: nil, problem: "no verified list is held, and it could not be updated: refused."),
            AuthorityListStatus(name: "campus", origin: "b", list: Self.status(), problem: nil, matchedIDs: 1, matchDays: ["2027-01-14"]),
        ], homeFailure: "no verified list")
        #expect(report.exposureFound && report.listIsStale)
        let text = Self.text(report)
        #expect(text.contains("campus: up to date"), "\(text)")
        #expect(text.contains("    met 1 diagnosed id of this list, on 2027-01-14"), "\(text)")
        #expect(text.contains("Exposure found: HIGH risk."), "\(text)")
        #expect(text.contains("(Not up to date: home (server.url);"), "\(text)")
    }

    @Test func oneListReportsAsBefore() throws {
        let report = Self.report(level: .none, lists: nil)
        #expect(!report.listIsStale)
        let text = Self.text(report)
        #expect(text.hasPrefix("Positive list updated"), "\(text)")
        #expect(text.hasSuffix("No exposure found in the last 28 days."), "\(text)")
        // The JSON of one list has no `lists`: scripts reading it see what they saw before.
        let json = String(decoding: try JSONEncoder().encode(report), as: UTF8.self)
        #expect(!json.contains("\"lists\""), "\(json)")
        let stale = Self.report(level: .none, lists: nil, homeFailure: "The server did not answer.")
        #expect(Self.text(stale).contains("No exposure found in that older list."))
    }
}
