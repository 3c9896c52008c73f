import Foundation
@testable import PositiveListServer
import Settings
import Testing
import TestTiers
import ServerTestSupport
import TracerTestSupport

/// The settings table is the only list of the server's settings: the file reader, the checks and
/// `tracer-server config` follow it, so a setting missing from it would be refused or never shown.
@Suite(.tags(.unit)) struct ServerSettingRegistryTests {
    /// Every setting the file accepted before the table existed, with a valid value other than
    /// its default.
    static let settingsTheFileAccepts: KeyValuePairs<String, String> = [
        "authorities": #"[{"name": "A", "token": "0123456789abcdef0123456789"}, {"name": "B", "token": "0123456789abcdef0123456789b"}]"#,
        "retentionDays": "14", "maxIDsPerHistory": "100", "maxRequestBodyBytes": "2048", "maxWindowSeconds": "120",
        "clockSkewSeconds": "60", "uploadCodeLifetimeSeconds": "3600", "publishIntervalSeconds": "1800",
        "publishSpacingSeconds": "600", "publishRetryMaxSeconds": "5", "longPollSeconds": "30", "failedAttemptsPerMinute": "5", "indexMaxAgeSeconds": "30",
        "indexRefreshSeconds": "3600", "logOrigin": #""example.org/tracer-list""#,
        "witnessedLogs": #"[{"key": "example.org/tracer-list+58d752fd+AddamAGCsQq31Uv+08lkBzoO4XLz2qYjJa8CGmj3B1Ea"}]"#,
        "witnessName": #""witness.example/w1""#,
        "witnesses": #"[{"url": "https://witness.example/v1", "key": "witness.example/w1+04d2d833+BD1AF8PoQ4lakrcKp00bfrycmCzPLsSWjMDNVfEq9GYM"}]"#,
        "witnessTimeoutSeconds": "10", "trustForwardedFor": "true", "trustedProxies": #"["10.0.0.1"]"#, "trustedProxyHops": "2",
        "idleTimeoutSeconds": "10", "requestReadTimeoutSeconds": "30", "maxConnections": "100", "maxConnectionsPerAddress": "10",
        "acceptUploads": #""ids""#, "maxKeysPerHistory": "32", "keyIntervalsSeconds": "[600]", "keyPublicationDelaySeconds": "0",
        "keyPaddingMultiplier": "2.5", "keyBatchMinimumKeys": "10", "keyBatchMaximumHoldSeconds": "3600",
        "database": #"{"url": "postgresql://tracer@127.0.0.1:5432/tracer"}"#,
        "objectStore": #"{"endpoint": "http://127.0.0.1:9000", "bucket": "tracer"}"#,
        "console": #"{"enabled": true, "authority": "A"}"#,
        "metrics": #"{"listen": "127.0.0.1:9465"}"#,
    ]

    func report(_ extra: String = "", overrides: ServerSettingOverrides = .none) throws -> ServerSettingsReport {
        let authority = #""authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}]"#
        let text = extra.hasPrefix(#""authorities""#) ? "{\(extra)}" : "{\(authority)\(extra.isEmpty ? "" : ", " + extra)}"
        return try ServerConfiguration.read(Data(text.utf8), path: "config.json", overrides: overrides)
    }

    @Test func theTableHoldsEachSettingOnce() {
        let keys = ServerSettingRegistry.all.map(\.key)
        #expect(keys.count == Set(keys).count, "a setting has two rows")
        #expect(Set(keys) == Set(Self.settingsTheFileAccepts.map(\.key)))
    }

    /// The settings only the file gives: secrets (tokens, the database's and the object store's
    /// credentials) must never be typed where `ps` shows them, and these are objects.
    static let fileOnly: Set<String> = ["authorities", "database", "objectStore", "console", "metrics", "witnessedLogs", "witnesses"]

    @Test func everyOtherSettingHasAnEnvironmentVariableAndAFlagNamedAfterItsKey() {
        for definition in ServerSettingRegistry.all {
            if Self.fileOnly.contains(definition.key) {
                #expect(definition.environmentVariable == nil && definition.flag == nil, "\(definition.key)")
            } else {
                // The prefix by which the tests keep the runner's settings from their servers.
                #expect(definition.environmentVariable?.hasPrefix(Products.serverVariablePrefix) == true, "\(definition.key)")
                #expect(definition.flag?.hasPrefix("--") == true, "\(definition.key)")
            }
        }
        let maxIDs = ServerSettingRegistry.all.first { $0.key == "maxIDsPerHistory" }
        #expect(maxIDs?.environmentVariable == "TRACER_SERVER_MAX_IDS_PER_HISTORY")
        #expect(maxIDs?.flag == "--max-ids-per-history")
        let variables = ServerSettingRegistry.all.compactMap(\.environmentVariable)
        #expect(Set(variables).count == variables.count, "two settings share a variable")
        // The variables the commands read for themselves are not settings of the file.
        #expect(Set(variables).isDisjoint(with: ["TRACER_SERVER_DATA_DIR", "TRACER_SERVER_CONFIG", "TRACER_SERVER_KEY", "TRACER_SERVER_LOG_LEVEL", "TRACER_SERVER_BIND", "TRACER_SERVER_DATABASE_PASSWORD",
                                                      "TRACER_SERVER_URL", "TRACER_SERVER_PUBLIC_KEY", "TRACER_SERVER_PINNED_KEY", "TRACER_SERVER_TIMEOUT"]))
    }

    /// docs/positive-list-format.md lists every setting's variable and flag as the table names them.
    @Test func theDocumentListsEveryVariableAndFlag() throws {
        let document = try String(contentsOfFile: NginxInstance.repositoryRoot + "/docs/positive-list-format.md", encoding: .utf8)
        let start = try #require(document.range(of: "<!-- server-settings-table"), "the table's start marker is gone")
        let end = try #require(document.range(of: "<!-- end server-settings-table -->"), "the table's end marker is gone")
        let shown = document[start.upperBound..<end.lowerBound].split(separator: "\n").dropFirst().map(String.init)
        let expected = ["| Setting | Environment variable | Flag |", "|---|---|---|"] + ServerSettingRegistry.all.map { definition in
            guard let variable = definition.environmentVariable, let flag = definition.flag else {
                return "| `\(definition.key)` | (file only) | (file only) |"
            }
            return "| `\(definition.key)` | `\(variable)` | `\(flag)` |"
        }
        #expect(shown == expected, "replace the table in docs/positive-list-format.md with:\n\(expected.joined(separator: "\n"))")
    }

    /// Each setting's test value, typed as in the environment or on the command line.
    static func typed(_ json: String) throws -> String {
        guard json.hasPrefix("[") || json.hasPrefix("\"") else { return json }
        let value = try JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed)
        if let list = value as? [Any] { return list.map { "\($0)" }.joined(separator: ",") }
        return "\(value)"
    }

    @Test func everySettingGivenOutsideTheFileReadsAsFromTheFile() throws {
        for (key, json) in Self.settingsTheFileAccepts where !Self.fileOnly.contains(key) {
            let definition = try #require(ServerSettingRegistry.all.first { $0.key == key })
            let fromFile = try report("\"\(key)\": \(json)")
            let expected = try #require(fromFile.rows.first { $0.key == key }).value
            let variable = try #require(definition.environmentVariable)
            let fromEnvironment = try report(overrides: ServerSettingOverrides(environment: [variable: try Self.typed(json)], flags: [:]))
            #expect(fromEnvironment.rows.first { $0.key == key } == .init(key: key, value: expected, source: "env \(variable)"))
            let flag = try #require(definition.flag)
            let (flags, rest) = try ServerSettingFlags.split(["serve", "\(flag)=\(try Self.typed(json))"])
            #expect(rest == ["serve"])
            let fromFlag = try report(overrides: ServerSettingOverrides(environment: [:], flags: flags))
            #expect(fromFlag.rows.first { $0.key == key } == .init(key: key, value: expected, source: "flag \(flag)"))
        }
    }

    @Test func aFlagWinsOverTheEnvironmentWhichWinsOverTheFile() throws {
        let file = #""retentionDays": 14"#
        #expect(try report(file).rows.first { $0.key == "retentionDays" } == .init(key: "retentionDays", value: "14", source: "file"))
        let environment = ["TRACER_SERVER_RETENTION_DAYS": "20"]
        let fromEnvironment = try report(file, overrides: ServerSettingOverrides(environment: environment, flags: [:]))
        #expect(fromEnvironment.configuration.retentionDays == 20)
        #expect(fromEnvironment.rows.first { $0.key == "retentionDays" }?.source == "env TRACER_SERVER_RETENTION_DAYS")
        let flags = try ServerSettingFlags.split(["--retention-days=7"]).settings
        let fromFlag = try report(file, overrides: ServerSettingOverrides(environment: environment, flags: flags))
        #expect(fromFlag.configuration.retentionDays == 7)
        #expect(fromFlag.rows.first { $0.key == "retentionDays" }?.source == "flag --retention-days")
        // An empty variable is no value, as for the node.
        #expect(try report(file, overrides: ServerSettingOverrides(environment: ["TRACER_SERVER_RETENTION_DAYS": ""], flags: [:])).configuration.retentionDays == 14)
    }

    @Test func aBadValueOutsideTheFileNamesWhereItCameFrom() throws {
        let outOfRange = ServerSettingOverrides(environment: ["TRACER_SERVER_RETENTION_DAYS": "29"], flags: [:])
        #expect(throws: ConfigurationError.invalidOverride(
            key: "retentionDays", source: .environment(variable: "TRACER_SERVER_RETENTION_DAYS"), detail: "retentionDays must be between 1 and 28, got 29")
        ) { try report(overrides: outOfRange) }
        #expect(ConfigurationError.invalidOverride(
            key: "retentionDays", source: .environment(variable: "TRACER_SERVER_RETENTION_DAYS"), detail: "retentionDays must be between 1 and 28, got 29"
        ).description == "The value of TRACER_SERVER_RETENTION_DAYS is invalid: retentionDays must be between 1 and 28, got 29; fix or unset TRACER_SERVER_RETENTION_DAYS.")
        let notANumber = ServerSettingOverrides(environment: [:], flags: ["retentionDays": "two weeks"])
        #expect(throws: ConfigurationError.invalidOverride(
            key: "retentionDays", source: .flag("--retention-days"), detail: #"retentionDays must be an integer from 1 to 28, got "two weeks""#)
        ) { try report(overrides: notANumber) }
        let badChoice = ServerSettingOverrides(environment: ["TRACER_SERVER_ACCEPT_UPLOADS": "none"], flags: [:])
        #expect(throws: ConfigurationError.invalidOverride(
            key: "acceptUploads", source: .environment(variable: "TRACER_SERVER_ACCEPT_UPLOADS"), detail: #"acceptUploads must be one of ids, keys, both, got "none""#)
        ) { try report(overrides: badChoice) }
    }

    @Test func settingFlagsAreTakenOutOfAnyCommandLine() throws {
        let split = try ServerSettingFlags.split(
            ["serve", "--bind", "127.0.0.1:8080", "--trust-forwarded-for", "--trusted-proxies", "10.0.0.1,10.0.0.2", "--", "--retention-days", "3"])
        #expect(split.settings == ["trustForwardedFor": "true", "trustedProxies": "10.0.0.1,10.0.0.2"])
        #expect(split.rest == ["serve", "--bind", "127.0.0.1:8080", "--", "--retention-days", "3"])
        #expect(try ServerSettingFlags.split(["--trust-forwarded-for=false", "status"]).settings == ["trustForwardedFor": "false"])
        // A switch never takes the next word: it may be a subcommand's argument.
        let account = try ServerSettingFlags.split(["console", "add-account", "--trust-forwarded-for", "on"])
        #expect(account.settings == ["trustForwardedFor": "true"] && account.rest == ["console", "add-account", "on"])
        #expect(throws: SettingFlagSplit.MissingValue(flag: "--retention-days")) { try ServerSettingFlags.split(["serve", "--retention-days"]) }
        #expect(throws: SettingFlagSplit.MissingValue(flag: "--retention-days")) { try ServerSettingFlags.split(["--retention-days", "--bind", "x"]) }
        // The file-only settings have no flag: a database URL could hold a password.
        #expect(try ServerSettingFlags.split(["--database", "postgresql://u:p@h/d"]).rest == ["--database", "postgresql://u:p@h/d"])
    }

    @Test func everySettingIsReadFromTheFileAndShownByConfig() throws {
        let defaults = try report()
        #expect(defaults.rows.map(\.key) == ServerSettingRegistry.all.map(\.key))
        #expect(defaults.rows.allSatisfy { $0.source == ($0.key == "authorities" ? "file" : "default") })
        for (key, value) in Self.settingsTheFileAccepts {
            let given = try report("\"\(key)\": \(value)")
            let row = try #require(given.rows.first { $0.key == key }, "config does not show \(key)")
            #expect(row.source == "file", "\(key)")
            let defaultRow = try #require(defaults.rows.first { $0.key == key })
            #expect(row.value != defaultRow.value, "\(key) was accepted but not read")
            #expect(ServerSettingsReport.help.contains("\(key): "), "config --help does not document \(key)")
        }
    }

    /// What the file may leave to its default: a null, an empty key prefix, as before the settings kit.
    @Test func nullIsLeftOutAndAnEmptyKeyPrefixIsNoPrefix() throws {
        let given = try report(#""longPollSeconds": null, "witnessedLogs": [{"key": "example.org/tracer-list+58d752fd+AddamAGCsQq31Uv+08lkBzoO4XLz2qYjJa8CGmj3B1Ea", "origin": null}], "objectStore": {"endpoint": "https://s3.example", "bucket": "tracer-list", "keyPrefix": ""}"#)
        #expect(given.configuration.longPollSeconds == nil)
        #expect(given.configuration.witnessedLogs.first?.origin == "example.org/tracer-list")
        #expect(given.configuration.objectStore?.location.keyPrefix == "")
        #expect(throws: ConfigurationError.unknownSetting(path: "config.json", name: "database.user")) {
            try report(#""database": {"url": "postgresql://tracer@127.0.0.1/tracer", "user": "tracer"}"#)
        }
    }

    /// A rule between two settings points at the one the user gave where it weighs more, and every
    /// layer is checked: a bad variable is refused even when a flag overrides it.
    @Test func aBrokenRuleBlamesTheFlagAndEveryLayerIsChecked() throws {
        let flags = try ServerSettingFlags.split(["--publish-interval-seconds=86400"]).settings
        #expect(throws: ConfigurationError.invalidOverride(
            key: "publishIntervalSeconds", source: .flag("--publish-interval-seconds"),
            detail: "publishIntervalSeconds + indexRefreshSeconds must be at most 129600 (36 hours), so nodes never see an index older than that")
        ) { try report(#""indexRefreshSeconds": 86400"#, overrides: ServerSettingOverrides(environment: [:], flags: flags)) }
        let hidden = ServerSettingOverrides(environment: ["TRACER_SERVER_RETENTION_DAYS": "99"], flags: ["retentionDays": "7"])
        #expect(throws: ConfigurationError.invalidOverride(
            key: "retentionDays", source: .environment(variable: "TRACER_SERVER_RETENTION_DAYS"), detail: "retentionDays must be between 1 and 28, got 99")
        ) { try report(overrides: hidden) }
        // A file-only setting is never taken from a flag, whatever the caller passes.
        #expect(try report(overrides: ServerSettingOverrides(environment: [:], flags: ["database": "postgresql://u@h/d"])).configuration.database == nil)
        let invalidOrigin = ServerSettingOverrides(environment: ["TRACER_SERVER_LOG_ORIGIN": "two words"], flags: ["logOrigin": "example.org/x"])
        #expect(throws: ConfigurationError.self) { try report(overrides: invalidOrigin) }
    }

    @Test func theHelpSaysWhatLeavingASettingOutMeans() {
        #expect(ServerSettingsReport.help.contains("longPollSeconds: How long GET /v1/generation holds a request before answering 204, in seconds. Accepts an integer from 1 to 300 (leave it out to turn the long poll off); left out: no long poll (404)."))
        #expect(ServerSettingsReport.help.contains("left out: tracer-list/ and 16 hex digits of the public key's SHA-256"))
        #expect(ServerSettingsReport.help.contains("Accepts an integer of at least 300 (and at most publishIntervalSeconds)."))
    }

    /// `config` shows database.url as written, so no form of it may carry the password.
    @Test func aDatabasePasswordInAnyFormOfTheURLIsRefused() throws {
        let detail = "database.url must not hold the password; put it in the environment variable \(DatabaseConfiguration.defaultPasswordEnvironment) or in a 0600 file named by database.passwordFile"
        for url in ["postgresql://tracer:hunter2@127.0.0.1/tracer", "postgresql://tracer@127.0.0.1/tracer?password=hunter2",
                    "host=127.0.0.1 dbname=tracer password=hunter2", "host=127.0.0.1 PASSWORD = hunter2",
                    "postgresql://tracer:hunter 2@127.0.0.1/tracer", "postgresql://tracer:pw@h1:5432,h2:5432/tracer"] {
            #expect(throws: ConfigurationError.invalidValue(path: "config.json", detail: detail), "\(url)") {
                try ServerConfiguration.parseWithOneAuthority(#""database": {"url": "\#(url)"}"#)
            }
        }
        for url in ["postgresql://tracer@127.0.0.1/tracer?sslmode=require", "host=127.0.0.1 dbname=password user=tracer",
                    "postgresql://tracer@h1:5432,h2:5432/tracer"] {
            let shown = try report(#""database": {"url": "\#(url)"}"#).rows.first { $0.key == "database" }?.value
            #expect(shown?.hasPrefix(url) == true)
        }
    }

    /// The messages operators see: the rule, and the value given when it breaks one.
    @Test func outOfRangeValuesKeepTheirMessages() {
        let cases: KeyValuePairs<String, String> = [
            #""retentionDays": 29"#: "retentionDays must be between 1 and 28, got 29",
            #""maxIDsPerHistory": 0"#: "maxIDsPerHistory must be at least 1, got 0",
            #""maxRequestBodyBytes": 1023"#: "maxRequestBodyBytes must be at least 1024, got 1023",
            #""clockSkewSeconds": -1"#: "clockSkewSeconds must be between 0 and 3600, got -1",
            #""uploadCodeLifetimeSeconds": 59"#: "uploadCodeLifetimeSeconds must be between 60 and 2592000, got 59",
            #""publishIntervalSeconds": 299"#: "publishIntervalSeconds must be at least 300 (5 minutes: every publication makes every node fetch the list's new checkpoint and entries), got 299",
            #""publishSpacingSeconds": 3601"#: "publishSpacingSeconds (3601) must be at most publishIntervalSeconds (3600)",
            #""publishSpacingSeconds": 299"#: "publishSpacingSeconds must be at least 300 (and at most publishIntervalSeconds), got 299",
            #""longPollSeconds": 0"#: "longPollSeconds must be between 1 and 300 (leave it out to turn the long poll off), got 0",
            #""indexMaxAgeSeconds": -1"#: "indexMaxAgeSeconds must not be negative, got -1",
            #""trustedProxies": ["proxy"]"#: #"trustedProxies must list IP addresses; "proxy" is not one"#,
            #""trustForwardedFor": true, "trustedProxies": []"#: "trustedProxies must not be empty when trustForwardedFor is true",
            #""maxConnections": 15"#: "maxConnections must be at least 16, got 15",
            #""acceptUploads": "none""#: #"acceptUploads must be one of ids, keys, both, got "none""#,
            #""keyIntervalsSeconds": [4]"#: "keyIntervalsSeconds must list rotation intervals between 5 and 86400 seconds, as node.rotation_interval",
            #""keyPaddingMultiplier": 0.5"#: "keyPaddingMultiplier must be between 1 (no fake keys) and 10, got 0.5",
            #""keyBatchMinimumKeys": 0"#: "keyBatchMinimumKeys must be between 1 (hold nothing) and 100000, got 0",
            #""keyBatchMaximumHoldSeconds": 604801"#: "keyBatchMaximumHoldSeconds must be between 0 and 604800 (a week), got 604801",
            #""indexRefreshSeconds": 86400, "publishIntervalSeconds": 86400"#: "publishIntervalSeconds + indexRefreshSeconds must be at most 129600 (36 hours), so nodes never see an index older than that",
            #""retentionDays": "28""#: "retentionDays must be an integer from 1 to 28, got a string",
            #""database": {"url": 5}"#: "database.url must be a postgresql:// URL such as postgresql://tracer@127.0.0.1:5432/tracer, got an integer",
            #""console": {"sessionIdleSeconds": 0}"#: "console.sessionIdleSeconds must be between 1 and 86400, got 0",
            #""console": {"sessionIdleSeconds": 600, "sessionLifetimeSeconds": 60}"#: "console.sessionLifetimeSeconds must be between sessionIdleSeconds and 604800 (a week)",
            #""objectStore": {"bucket": "b"}"#: "objectStore.endpoint is missing; give the store's http or https address, such as https://s3.eu-central-1.amazonaws.com",
            #""objectStore": {"endpoint": "https://s3.example", "bucket": ""}"#: "objectStore.bucket is missing; give the bucket's name",
            #""database": {}"#: "database.url is missing; give a postgresql:// URL such as postgresql://tracer@127.0.0.1:5432/tracer",
            #""database": {"url": ""}"#: "database.url must be a postgresql:// URL such as postgresql://tracer@127.0.0.1:5432/tracer",
            #""trustedProxies": ["10.0.0.1", null]"#: "trustedProxies holds a null, which no setting takes; leave it out instead",
            #""logOrigin": "two words""#: "logOrigin must be 1 to 255 bytes without spaces, + or control characters",
        ]
        for (extra, detail) in cases {
            #expect(throws: ConfigurationError.invalidValue(path: "config.json", detail: detail), "\(extra)") {
                try ServerConfiguration.parseWithOneAuthority(extra)
            }
        }
        #expect(throws: ConfigurationError.invalidValue(path: "config.json", detail: "authorities is missing")) {
            try ServerConfiguration.parse(Data("{}".utf8), path: "config.json")
        }
    }
}

/// `tracer-server config` as an operator runs it (the built binary).
@Suite(.tags(.endToEnd)) struct ServerConfigCommandTests {
    @Test func configShowsEverySettingWithItsSourceAndHelpDocumentsEach() throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try fixture.writeConfiguration(extra: #", "retentionDays": 14"#)
        let shown = try ServerCLI.run(["config"], fixture: fixture)
        #expect(shown.exitCode == 0, "\(shown)")
        let rows = shown.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        for definition in ServerSettingRegistry.all {
            #expect(rows.contains { $0.first == definition.key }, "config does not show \(definition.key)\n\(shown)")
        }
        #expect(rows.contains(["retentionDays", "14", "file"]), "\(shown)")
        #expect(rows.contains(["maxIDsPerHistory", "3000", "default"]), "\(shown)")
        let help = try ServerCLI.run(["config", "--help"], fixture: fixture)
        for definition in ServerSettingRegistry.all {
            #expect(help.stdout.contains("\(definition.key): "), "config --help does not document \(definition.key)")
        }
        try fixture.writeConfiguration(extra: #", "retentionDays": 29"#)
        let refused = try ServerCLI.run(["config"], fixture: fixture)
        #expect(refused.exitCode == 1 && refused.stderr.contains("retentionDays must be between 1 and 28"), "\(refused)")
    }

    /// The environment and a flag override the file, for `config` and for the commands that use
    /// the configuration: `publish` reads it first and fails as `config` does on a bad value.
    @Test func environmentAndFlagsOverrideTheFile() throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try fixture.writeConfiguration(extra: #", "retentionDays": 14, "maxIDsPerHistory": 100"#)
        let environment = ["TRACER_SERVER_RETENTION_DAYS": "20", "TRACER_SERVER_MAX_IDS_PER_HISTORY": "200"]
        let shown = try ServerCLI.run(["config", "--retention-days", "7"], fixture: fixture, environment: environment)
        #expect(shown.exitCode == 0, "\(shown)")
        let rows = shown.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(rows.contains(["retentionDays", "7", "flag", "--retention-days"]), "\(shown)")
        #expect(rows.contains(["maxIDsPerHistory", "200", "env", "TRACER_SERVER_MAX_IDS_PER_HISTORY"]), "\(shown)")
        #expect(rows.contains(["maxWindowSeconds", "3600", "default"]), "\(shown)")

        let badFlag = try ServerCLI.run(["--retention-days=29", "publish"], fixture: fixture)
        #expect(badFlag.exitCode == 1 && badFlag.stderr.contains("--retention-days is invalid: retentionDays must be between 1 and 28"), "\(badFlag)")
        let badVariable = try ServerCLI.run(["publish"], fixture: fixture, environment: ["TRACER_SERVER_RETENTION_DAYS": "0"])
        #expect(badVariable.exitCode == 1 && badVariable.stderr.contains("fix or unset TRACER_SERVER_RETENTION_DAYS"), "\(badVariable)")
        // status reads the configuration too: a bad variable is reported, not a fallback to the SQLite file.
        let badStatus = try ServerCLI.run(["status"], fixture: fixture, environment: ["TRACER_SERVER_RETENTION_DAYS": "30"])
        #expect(badStatus.exitCode == 1 && badStatus.stderr.contains("TRACER_SERVER_RETENTION_DAYS"), "\(badStatus)")
        let missing = try ServerCLI.run(["config", "--retention-days"], fixture: fixture)
        #expect(missing.exitCode == 2 && missing.stderr.contains("--retention-days needs a value"), "\(missing)")
        let help = try ServerCLI.run(["config", "--help"], fixture: fixture)
        #expect(help.stdout.contains("TRACER_SERVER_RETENTION_DAYS") && help.stdout.contains("--retention-days"), "\(help)")
    }

    /// Setting flags are taken out of the command line before a subcommand parses its own: a
    /// subcommand option of the same name would never reach it.
    @Test func noSubcommandOptionSharesANameWithASettingFlag() throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        func listed(_ section: String, in help: String) -> [String] {
            var inSection = false
            var found: [String] = []
            for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasSuffix(":"), !line.hasPrefix(" ") { inSection = line == "\(section):"; continue }
                guard inSection, line.hasPrefix("  "), !line.hasPrefix("    ") else { continue }
                let words = line.split(separator: " ").map(String.init)
                if section == "SUBCOMMANDS" {
                    // A name is lower-case letters and dashes ("See 'tracer-server help ...'" is not one).
                    if let name = words.first, name.allSatisfy({ $0.isLowercase || $0 == "-" }), name != "help" { found.append(name) }
                } else {
                    found += words.prefix(3).filter { $0.hasPrefix("--") }.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: ",")) }
                }
            }
            return found
        }
        var commands: [[String]] = [[]]
        var options: [String: [String]] = [:]
        while let command = commands.popLast(), options.count < 100 {
            let help = try ServerCLI.run(command + ["--help"], fixture: fixture)
            #expect(help.exitCode == 0, "\(help)")
            let name = command.joined(separator: " ")
            guard options[name] == nil else { continue }
            options[name] = listed("OPTIONS", in: help.stdout)
            commands += listed("SUBCOMMANDS", in: help.stdout).map { command + [$0] }
        }
        #expect(options.count > 10, "the subcommands were not found in the help: \(options.keys.sorted())")
        let settingFlags = Set(ServerSettingRegistry.all.compactMap(\.flag))
        for (command, names) in options {
            #expect(Set(names).isDisjoint(with: settingFlags), "tracer-server \(command) has an option named like a setting flag: \(names)")
        }
    }
}
