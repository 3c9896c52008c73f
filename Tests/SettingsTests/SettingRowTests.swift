import Foundation
import Settings
import Testing
import TestTiers

/// The row type both programs build their registries from: a value's way from the file, a
/// variable or a flag to a typed property, and the words of each refusal.
@Suite(.tags(.unit)) struct SettingRowTests {
    struct Sample: Sendable {
        var interval: Int64 = 0
        var weight: Double = 0
        var verbose = false
        var hosts: [String] = []
        var limit: Int?
        var server: Server?
    }

    struct Server: Decodable, Sendable, Equatable {
        var url: String
        var poolSize: Int?
    }

    static let rows: [SettingRow<Sample>] = [
        .integer("check.interval", \.interval, .integer(minimum: 60, maximum: 86_400, unit: "seconds"), default: 120,
                 env: "SAMPLE_INTERVAL", flag: "--interval", help: "Seconds between checks."),
        .number("risk.weight", \.weight, .number(minimum: 0, minimumIncluded: false, maximum: 1), default: 0.5,
                env: nil, flag: "--weight", help: "A weight."),
        .boolean("log.verbose", \.verbose, default: false, env: "SAMPLE_VERBOSE", flag: "--verbose", help: "More."),
        .textList("hosts", \.hosts, .textList(describe: "a list of hosts", problem: { $0.contains("") ? "must not hold an empty host" : nil }),
                  env: "SAMPLE_HOSTS", flag: "--hosts", help: "Hosts."),
        .optionalInteger("limit", \.limit, .integer(SettingBounds(16, hint: "leave it out for no limit")), absent: "no limit",
                         env: nil, flag: "--limit", help: "A limit."),
        .structured("server", Server.self, describe: "an object: url, poolSize", help: "A server.", show: { $0.server?.url ?? "(unset)" },
                    apply: { (server, sample) throws(SettingProblem) in
                        guard server.url.hasPrefix("https://") else { throw SettingProblem("must be an https:// address", field: "url") }
                        sample.server = server
                    }),
    ]

    static let constraints = [
        SettingConstraint<Sample>(blamed: "limit", other: "check.interval") { sample in
            (sample.limit ?? .max) >= Int(sample.interval / 60) ? nil : "limit must be at least check.interval in minutes"
        },
    ]

    func resolve(
        file: [String: SettingInput] = [:], flags: [String: String] = [:], environment: [String: String] = [:]
    ) throws(SettingError) -> SettingResolution<Sample> {
        var values: [String: SettingResolution<Sample>.FileValue] = [:]
        for (key, input) in file {
            let row = Self.rows.first { $0.key == key }!
            switch row.kind.check(input, paths: PathContext(baseDirectory: "/", home: nil)) {
            case .success(let value): values[key] = .init(value: value, source: .file(path: "t.toml", line: 1))
            case .failure(let problem): throw .invalidValue(key: key, source: .file(path: "t.toml", line: 1), problem: problem)
            }
        }
        return try SettingResolution(
            rows: Self.rows, constraints: Self.constraints, start: Sample(), file: values, flags: flags, environment: environment,
            paths: PathContext(baseDirectory: "/", home: nil))
    }

    @Test func aFlagWinsOverItsVariableWhichWinsOverTheFileWhichWinsOverTheDefault() throws {
        #expect(try resolve().settings.interval == 120)
        #expect(try resolve().source(of: "check.interval") == .builtIn(detail: nil))
        #expect(try resolve(file: ["check.interval": .integer(300)]).settings.interval == 300)
        let fromVariable = try resolve(file: ["check.interval": .integer(300)], environment: ["SAMPLE_INTERVAL": "600"])
        #expect(fromVariable.settings.interval == 600 && fromVariable.source(of: "check.interval") == .environment(variable: "SAMPLE_INTERVAL"))
        let fromFlag = try resolve(file: ["check.interval": .integer(300)], flags: ["check.interval": "900"], environment: ["SAMPLE_INTERVAL": "600"])
        #expect(fromFlag.settings.interval == 900 && fromFlag.source(of: "check.interval") == .flag("--interval"))
        // A bad variable is refused even when a flag hides it today.
        #expect(throws: SettingError.invalidValue(
            key: "check.interval", source: .environment(variable: "SAMPLE_INTERVAL"),
            problem: SettingProblem("must be between 60 and 86400 seconds, got 5"))) {
            try resolve(flags: ["check.interval": "900"], environment: ["SAMPLE_INTERVAL": "5"])
        }
    }

    @Test func refusalsNameTheRuleAndTheValueGiven() {
        let paths = PathContext(baseDirectory: "/", home: nil)
        func problem(_ kind: SettingKind, _ input: SettingInput) -> String? {
            if case .failure(let problem) = kind.check(input, paths: paths) { return problem.text }
            return nil
        }
        #expect(problem(.integer(minimum: 60, maximum: 86_400, unit: "seconds"), .integer(5)) == "must be between 60 and 86400 seconds, got 5")
        #expect(problem(.integer(minimum: 16), .integer(15)) == "must be at least 16, got 15")
        #expect(problem(.integer(SettingBounds(0)), .integer(-1)) == "must not be negative, got -1")
        #expect(problem(.integer(SettingBounds(1, 10, lowerNote: "hold nothing", upperNote: "ten")), .integer(11))
            == "must be between 1 (hold nothing) and 10 (ten), got 11")
        #expect(problem(.number(SettingBounds(1.0, 10.0, lowerNote: "no fake keys")), .number(0.5)) == "must be between 1 (no fake keys) and 10, got 0.5")
        #expect(problem(.number(minimum: 0, minimumIncluded: false, maximum: 1), .integer(0)) == "must be above 0 and at most 1, got 0")
        #expect(problem(.integer(minimum: 1, maximum: 28), .text("28")) == "must be an integer from 1 to 28, got a string")
        #expect(problem(.choice(["ids", "keys"]), .text("none")) == #"must be one of ids, keys, got "none""#)
        #expect(problem(.boolean, .integer(1)) == "must be true or false, got an integer")
        #expect(problem(.integer(minimum: 1), .integer(1)) == nil)
        // Typed outside the file, the same rules and words.
        if case .failure(let problem) = SettingKind.integer(minimum: 1, maximum: 28).check(text: "two weeks", paths: paths) {
            #expect(problem.text == #"must be an integer from 1 to 28, got "two weeks""#)
        } else {
            Issue.record("two weeks was taken for an integer")
        }
    }

    @Test func listsComeFromTheFileOrFromCommas() throws {
        #expect(try resolve(file: ["hosts": .list([.text("a"), .text("b")])]).settings.hosts == ["a", "b"])
        #expect(try resolve(environment: ["SAMPLE_HOSTS": "a, b"]).settings.hosts == ["a", "b"])
        #expect(throws: SettingError.invalidValue(
            key: "hosts", source: .file(path: "t.toml", line: 1), problem: SettingProblem("must be a list of hosts, got an integer in it"))) {
            try resolve(file: ["hosts": .list([.text("a"), .integer(3)])])
        }
    }

    @Test func anObjectIsConvertedByItsRowAndOnlyTheFileGivesIt() throws {
        let given = try resolve(file: ["server": .object(["url": .text("https://h"), "poolSize": .integer(4)])])
        #expect(given.settings.server == Server(url: "https://h", poolSize: 4))
        #expect(given.entries.first { $0.row.key == "server" }?.shown(in: given.settings) == "https://h")
        #expect(throws: SettingError.invalidValue(
            key: "server", source: .file(path: "t.toml", line: 1), problem: SettingProblem("must be an https:// address", field: "url"))) {
            try resolve(file: ["server": .object(["url": .text("http://h")])])
        }
        #expect(SettingProblem("must be an https:// address", field: "url").named("server") == "server.url must be an https:// address")
        do {
            _ = try resolve(file: ["server": .object(["poolSize": .integer(4)])])
            Issue.record("an object without its url was taken")
        } catch {
            guard case .invalidValue(_, _, let problem) = error else { Issue.record("\(error)"); return }
            #expect(problem.named("server") == "server.url is missing")
        }
        #expect(Self.rows.first { $0.key == "server" }?.kind.hasTextForm == false)
    }

    @Test func aRuleBetweenTwoSettingsBlamesTheOneGiven() throws {
        #expect(throws: SettingError.conflict(
            key: "limit", source: .flag("--limit"), problem: "limit must be at least check.interval in minutes")) {
            try resolve(file: ["check.interval": .integer(3_600)], flags: ["limit": "30"])
        }
        #expect(try resolve(flags: ["limit": "30"]).settings.limit == 30)
        #expect(try resolve().entries.first { $0.row.key == "limit" }?.shown(in: Sample()) == "(unset: no limit)")
    }

    @Test func aSectionIsReadFieldByFieldInTheKitsWords() throws {
        let section = SettingSection<Sample>([
            .integer("interval", \.interval, .integer(minimum: 1, maximum: 10), env: nil, flag: nil, help: ""),
            .boolean("verbose", \.verbose, env: nil, flag: nil, help: ""),
        ])
        let paths = PathContext(baseDirectory: "/", home: nil)
        #expect(section.describe == "an object: interval, verbose")
        let read = try section.read(.object(["interval": .integer(3), "verbose": .boolean(true)]), into: Sample(), paths: paths)
        #expect(read.interval == 3 && read.verbose)
        #expect(try section.read(.object([:]), into: Sample(), paths: paths).interval == 0, "a field left out keeps the start value")
        #expect(throws: SettingProblem("must be between 1 and 10, got 11", field: "interval")) {
            try section.read(.object(["interval": .integer(11)]), into: Sample(), paths: paths)
        }
        #expect(SettingProblem("must be between 1 and 10, got 11", field: "interval").named("console") == "console.interval must be between 1 and 10, got 11")
        #expect(throws: SettingProblem("must be an object: interval, verbose, got a list")) {
            try section.read(.list([]), into: Sample(), paths: paths)
        }
    }

    @Test func settingFlagsAreTakenOutOfACommandLine() throws {
        let split = try SettingFlagSplit.split(["run", "--interval", "120", "--verbose", "on", "--weight=0.5", "--", "--interval", "3"], rows: Self.rows)
        #expect(split.settings == ["check.interval": "120", "log.verbose": "true", "risk.weight": "0.5"])
        #expect(split.rest == ["run", "on", "--", "--interval", "3"])
        #expect(throws: SettingFlagSplit.MissingValue(flag: "--interval")) { try SettingFlagSplit.split(["--interval", "--verbose"], rows: Self.rows) }
        #expect(throws: SettingFlagSplit.MissingValue(flag: "--interval")) { try SettingFlagSplit.split(["--interval"], rows: Self.rows) }
    }

    @Test func jsonBecomesTheNarrowestInput() throws {
        let decoded = try JSONDecoder().decode([String: SettingInput].self, from: Data(#"{"a": true, "b": 3, "c": 2.5, "d": "x", "e": [1], "f": {"g": "h"}}"#.utf8))
        #expect(decoded["a"] == .boolean(true) && decoded["b"] == .integer(3) && decoded["c"] == .number(2.5) && decoded["d"] == .text("x"))
        #expect(decoded["e"] == .list([.integer(1)]) && decoded["f"] == .object(["g": .text("h")]))
        // null is no value: the setting is to be left out.
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([String: SettingInput].self, from: Data(#"{"a": null}"#.utf8)) }
    }
}
