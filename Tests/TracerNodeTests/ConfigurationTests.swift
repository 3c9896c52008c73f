import Foundation
import Testing
import TestTiers
import TracerTestSupport

extension TracerNodeTests {
    /// The configuration layer through `tracer config`: defaults, then the TOML file, then TRACER_*
    /// variables, then flags; and the one-line errors for bad files, values and syntax.
    @Suite(.tags(.endToEnd)) struct ConfigurationTests {
        /// A scratch home whose XDG config and cache directories are its own, with every TRACER_*
        /// variable of the test's own environment blanked (an empty variable counts as unset).
        struct Home {
            let scratch: Scratch
            var configDirectory: String { scratch.path + "/xdg-config/tracer" }
            var defaultFile: String { configDirectory + "/tracer.toml" }

            init() throws { scratch = try Scratch() }

            func remove() { scratch.remove() }

            func writeDefaultFile(_ text: String) throws {
                try FileManager.default.createDirectory(atPath: configDirectory, withIntermediateDirectories: true)
                try Data(text.utf8).write(to: URL(fileURLWithPath: defaultFile))
            }

            func tracer(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
                var overrides = ProcessInfo.processInfo.environment.filter { $0.key.hasPrefix("TRACER_") }.mapValues { _ in "" }
                overrides["XDG_CONFIG_HOME"] = scratch.path + "/xdg-config"
                overrides["XDG_CACHE_HOME"] = scratch.path + "/xdg-cache"
                overrides.merge(environment) { _, new in new }
                return try Products.tracer(arguments, home: scratch.path, environment: overrides)
            }

            /// `tracer config --json …`, required to succeed, as key → (value, source).
            func settings(_ arguments: [String] = [], environment: [String: String] = [:]) throws -> ConfigJSON {
                let result = try tracer(["config", "--json"] + arguments, environment: environment)
                try #require(result.exitCode == 0 && !result.signaled, "\(result)")
                return try ConfigJSON(result.stdout)
            }
        }

        struct ConfigJSON {
            var configFile: [String: Any]
            var settings: [String: [String: Any]]

            init(_ text: String) throws {
                let object = try Check.json(text)
                configFile = try #require(object["configFile"] as? [String: Any], "no configFile in \(text)")
                settings = try #require(object["settings"] as? [String: [String: Any]], "no settings in \(text)")
            }

            func value(_ key: String) -> Any? { settings[key]?["value"] }
            func source(_ key: String) -> [String: Any] { settings[key]?["source"] as? [String: Any] ?? [:] }
            func sourceKind(_ key: String) -> String? { source(key)["kind"] as? String }
        }

        static let allKeys = [
            "node.transport", "node.database", "node.rotation_interval", "node.rotation_jitter", "node.scan_schedule", "node.continuous_scan",
            "node.take_adapter", "node.watchdog_dark_limit", "node.metrics_file", "node.metrics_listen", "node.controller_quirks", "log.level", "log.format", "server.url", "server.public_key", "server.pinned_key", "server.timeout", "check.cache_dir",
            "check.interval", "check.jitter", "check.refresh_interval", "check.refresh_jitter", "check.long_poll", "check.on_exposure",
            "check.clock_skew", "check.max_list_age", "list.format", "list.origin", "list.witnesses", "list.witnesses_required", "risk.near_attenuation",
            "risk.far_attenuation", "risk.near_weight", "risk.medium_weight", "risk.far_weight", "risk.low_minutes",
            "risk.high_minutes", "risk.assumed_tx_power", "risk.sampling_period", "risk.attenuation_summary",
            "risk.directions", "risk.rssi_correction", "risk.weight_curve", "risk.score", "risk.min_contact_minutes",
            "place.name", "place.source", "place.gpsd_host", "place.gpsd_port", "place.precision", "place.max_fix_age",
        ]

        /// JSON values compare by type: JSONSerialization gives NSNumber for both numbers and booleans.
        static func same(_ found: Any?, _ expected: Any) -> Bool {
            switch expected {
            case let expected as Bool: return (found as? Bool) == expected
            case let expected as Int: return (found as? Int) == expected
            case let expected as Double: return (found as? Double) == expected
            case let expected as String: return (found as? String) == expected
            default: return false
            }
        }

        @Test func defaultsApplyWithoutAFile() throws {
            let home = try Home()
            defer { home.remove() }
            let config = try home.settings()
            #expect(config.configFile["path"] as? String == home.defaultFile)
            #expect(config.configFile["exists"] as? Bool == false)
            #expect(Set(config.settings.keys) == Set(Self.allKeys))
            for key in Self.allKeys { #expect(config.sourceKind(key) == "default", "\(key): \(config.source(key))") }
            #expect(config.value("node.rotation_interval") as? Int == 900)
            #expect(config.value("node.rotation_jitter") as? Int == 0)
            #expect(config.value("node.scan_schedule") as? String == "standard")
            #expect(config.value("node.continuous_scan") as? Bool == false)
            #expect(config.value("node.take_adapter") as? Bool == false)
            #expect(config.value("log.level") as? String == "info")
            #expect(config.value("log.format") as? String == "text")
            #expect(config.value("check.interval") as? Int == 21_600)
            #expect(config.value("check.jitter") as? Int == 3_600)
            #expect(config.value("check.clock_skew") as? Int == 300)
            #expect(config.value("check.max_list_age") as? Int == 172_800)
            #expect(config.value("risk.medium_weight") as? Double == 0.5)
            #expect(config.value("risk.far_attenuation") as? Int == 56)
            #expect(config.value("risk.attenuation_summary") as? String == "strongest")
            #expect(config.value("risk.directions") as? String == "both")
            #expect(config.value("risk.weight_curve") as? String == "steps")
            #expect(config.value("risk.score") as? String == "total")
            #expect(config.value("risk.min_contact_minutes") as? Double == 10)
            #expect(config.value("node.database") as? String == home.scratch.path + "/xdg-data/tracer/tracer.db")
            #expect(config.value("check.cache_dir") as? String == home.scratch.path + "/xdg-cache/tracer")
            // Places are off unless asked for; a gpsd source reads the usual local gpsd, rounded to 100 m.
            #expect(config.value("place.source") as? String == "none")
            #expect(config.value("place.gpsd_host") as? String == "127.0.0.1")
            #expect(config.value("place.gpsd_port") as? Int == 2947)
            #expect(config.value("place.precision") as? Int == 100)
            #expect(config.value("place.max_fix_age") as? Int == 30)
            for unset in ["node.transport", "server.url", "server.public_key", "server.pinned_key", "check.on_exposure", "place.name", "list.format"] {
                #expect(config.value(unset) is NSNull, "\(unset) should be unset: \(String(describing: config.value(unset)))")
            }

            // Without XDG_CACHE_HOME the cache is under ~/.cache.
            let homeCache = try home.settings(environment: ["XDG_CACHE_HOME": ""])
            #expect(homeCache.value("check.cache_dir") as? String == home.scratch.path + "/.cache/tracer")
        }

        @Test func textListsEverySettingAligned() throws {
            let home = try Home()
            defer { home.remove() }
            try home.writeDefaultFile("[check]\ninterval = 7200\n")
            let result = try home.tracer(["config"])
            try #require(result.exitCode == 0 && !result.signaled, "\(result)")
            #expect(result.stdout.contains(home.defaultFile), "\(result)")
            let rows = result.stdout.split(separator: "\n").map(String.init).filter { line in
                Self.allKeys.contains { line.hasPrefix($0 + " ") }
            }
            #expect(rows.count == Self.allKeys.count, "\(result)")
            let interval = try #require(rows.first { $0.hasPrefix("check.interval ") })
            #expect(interval.contains("7200") && interval.hasSuffix(home.defaultFile + ":2"), "\(interval)")
            // Aligned: every value starts in the same column.
            let valueColumns = Set(rows.map { row in row.firstRange(of: "  ").map { range in
                row[range.lowerBound...].firstIndex { $0 != " " }.map { row.distance(from: row.startIndex, to: $0) } ?? -1
            } ?? -1 })
            #expect(valueColumns.count == 1, "\(result)")
        }

        @Test func fileValuesCarryTheirLine() throws {
            let home = try Home()
            defer { home.remove() }
            let key = Data((0..<32).map { UInt8($0) }).base64EncodedString()
            try home.writeDefaultFile("""
                # Tracer settings
                [node]
                transport = "tcp:127.0.0.1:9000"   # a virtual controller
                rotation_interval = 1_800
                continuous_scan = true

                [server]
                url = 'https://tracer.example.org/list'
                public_key = "\(key)"

                [check]
                on_exposure = "notify-send \\"exposed\\"\\tnow \\u00e9"
                cache_dir = "cache"
                [risk]
                near_weight = 0.75
                low_minutes = 2.5
                score = "total"
                """)
            let config = try home.settings()
            #expect(config.configFile["exists"] as? Bool == true)
            let expected: [(String, Any, Int)] = [
                ("node.transport", "tcp:127.0.0.1:9000", 3), ("node.rotation_interval", 1800, 4),
                ("node.continuous_scan", true, 5), ("server.url", "https://tracer.example.org/list", 8),
                ("server.public_key", key, 9), ("check.on_exposure", "notify-send \"exposed\"\tnow é", 12),
                ("check.cache_dir", home.configDirectory + "/cache", 13), ("risk.near_weight", 0.75, 15),
                ("risk.low_minutes", 2.5, 16), ("risk.score", "total", 17),
            ]
            for (key, value, line) in expected {
                #expect(Self.same(config.value(key), value), "\(key): \(String(describing: config.value(key)))")
                #expect(config.sourceKind(key) == "file", "\(key): \(config.source(key))")
                #expect(config.source(key)["path"] as? String == home.defaultFile, "\(key)")
                #expect(config.source(key)["line"] as? Int == line, "\(key): \(config.source(key))")
            }
            #expect(config.sourceKind("check.interval") == "default")
        }

        @Test func environmentOverridesFileAndFlagOverridesEnvironment() throws {
            let home = try Home()
            defer { home.remove() }
            try home.writeDefaultFile("[check]\ninterval = 600\njitter = 60\n[log]\nlevel = \"warning\"\n")
            let environment = ["TRACER_CHECK_INTERVAL": "1200", "TRACER_LOG_LEVEL": "error"]

            let fromEnvironment = try home.settings(environment: environment)
            #expect(fromEnvironment.value("check.interval") as? Int == 1200)
            #expect(fromEnvironment.source("check.interval")["variable"] as? String == "TRACER_CHECK_INTERVAL")
            #expect(fromEnvironment.value("log.level") as? String == "error")
            #expect(fromEnvironment.value("check.jitter") as? Int == 60)
            #expect(fromEnvironment.source("check.jitter")["line"] as? Int == 3)

            let fromFlags = try home.settings(
                ["--check-interval", "120", "--log-level=debug", "--continuous-scan", "--take-adapter", "--scan-schedule", "low-power"],
                environment: environment)
            #expect(fromFlags.value("check.interval") as? Int == 120)
            #expect(fromFlags.sourceKind("check.interval") == "flag")
            #expect(fromFlags.source("check.interval")["flag"] as? String == "--check-interval")
            #expect(fromFlags.value("log.level") as? String == "debug")
            #expect(fromFlags.value("node.continuous_scan") as? Bool == true)
            #expect(fromFlags.source("node.continuous_scan")["flag"] as? String == "--continuous-scan")
            #expect(fromFlags.value("node.take_adapter") as? Bool == true)
            #expect(fromFlags.value("node.scan_schedule") as? String == "low-power")
            #expect(fromFlags.source("node.scan_schedule")["flag"] as? String == "--scan-schedule")
            #expect(fromFlags.source("node.take_adapter")["flag"] as? String == "--take-adapter")
            #expect(fromFlags.sourceKind("check.jitter") == "file")

            // Flags before --json work too, and the text output names the flag as the source.
            let text = try home.tracer(["config", "--check-interval", "120"], environment: environment)
            let row = try #require(text.stdout.split(separator: "\n").first { $0.hasPrefix("check.interval ") }, "\(text)")
            #expect(row.contains("120") && row.hasSuffix("flag --check-interval"), "\(row)")
        }

        /// Quirks named in settings reach the host's configuration (`RunningNode.exchangeConfiguration`
        /// sets `knownQuirks`; ControllerQuirksTests follows them into the host). Names of quirks
        /// the host now handles on every controller are still accepted (ControllerQuirkSettingTests).
        @Test func controllerQuirksAreNamedInOneSetting() throws {
            let home = try Home()
            defer { home.remove() }
            #expect(try home.settings().value("node.controller_quirks") as? String == nil, "unset: none named")
            try home.writeDefaultFile("[node]\ncontroller_quirks = \"advertising-outlives-host\"\n")
            #expect(try home.settings().value("node.controller_quirks") as? String == "advertising-outlives-host", "a retired name")
            let fromEnvironment = try home.settings(environment: ["TRACER_CONTROLLER_QUIRKS": "commands-left-unanswered"])
            #expect(fromEnvironment.value("node.controller_quirks") as? String == "commands-left-unanswered")
            let fromFlag = try home.settings(["--controller-quirks", "cancel-taken-without-ending-attempt"])
            #expect(fromFlag.value("node.controller_quirks") as? String == "cancel-taken-without-ending-attempt")
            let turnedOff = try home.settings(["--controller-quirks", "none,-attempt-dropped-without-end"])
            #expect(turnedOff.value("node.controller_quirks") as? String == "none,-attempt-dropped-without-end")
            let unknown = try home.tracer(["config", "--controller-quirks", "-floods"])
            #expect(unknown.exitCode != 0 && unknown.stderr.contains("\"floods\"") && unknown.stderr.contains("\"none\""), "\(unknown)")
        }

        /// `list.format` is retired: a file or variable that still names the log (auto, log) loads,
        /// and `tracer run` and `tracer check` warn that it changes nothing
        /// (ExposureCheckCycleTests); index is refused (badValuesNameKeyAndLine).
        @Test func aRetiredListFormatNamingTheLogStillLoads() throws {
            let home = try Home()
            defer { home.remove() }
            try home.writeDefaultFile("[list]\nformat = \"log\"\n")
            #expect(try home.settings().value("list.format") as? String == "log")
            #expect(try home.settings(environment: ["TRACER_LIST_FORMAT": "auto"]).value("list.format") as? String == "auto")
        }

        @Test func configFileFromFlagOrVariable() throws {
            let home = try Home()
            defer { home.remove() }
            try home.writeDefaultFile("[check]\ninterval = 600\n")
            let other = home.scratch.file("other.toml")
            try Data("[check]\ninterval = 900\n".utf8).write(to: URL(fileURLWithPath: other))
            let third = home.scratch.file("third.toml")
            try Data("[check]\n\ninterval = 1500\n".utf8).write(to: URL(fileURLWithPath: third))

            let byVariable = try home.settings(environment: ["TRACER_CONFIG": other])
            #expect(byVariable.value("check.interval") as? Int == 900)
            #expect(byVariable.source("check.interval")["path"] as? String == other)
            // --config wins over TRACER_CONFIG; relative paths are taken from the working directory.
            let byFlag = try home.settings(["--config", "third.toml"], environment: ["TRACER_CONFIG": other])
            #expect(byFlag.value("check.interval") as? Int == 1500)
            #expect(byFlag.source("check.interval")["path"] as? String == third)
            #expect(byFlag.source("check.interval")["line"] as? Int == 3)
        }

        @Test func missingNamedFileIsAnError() throws {
            let home = try Home()
            defer { home.remove() }
            let missing = home.scratch.file("nowhere.toml")
            let byFlag = try home.tracer(["config", "--config", missing])
            UserFacingFailures.expectOneErrorLine(byFlag, mentioning: [missing, "--config", "does not exist"])
            let byVariable = try home.tracer(["config"], environment: ["TRACER_CONFIG": missing])
            UserFacingFailures.expectOneErrorLine(byVariable, mentioning: [missing, "TRACER_CONFIG"])
            let directory = try home.tracer(["config", "--config", home.scratch.path])
            UserFacingFailures.expectOneErrorLine(directory, mentioning: ["directory"])
        }

        @Test func unknownKeyOrSectionNamesKeyFileAndLine() throws {
            let home = try Home()
            defer { home.remove() }
            try home.writeDefaultFile("# comment\n[check]\ninterval = 600\nfrequency = 5\n")
            let key = try home.tracer(["config"])
            UserFacingFailures.expectOneErrorLine(key, mentioning: ["check.frequency", home.defaultFile, "line 4"])
            #expect(key.stdout.isEmpty, "\(key)")

            try home.writeDefaultFile("[check]\ninterval = 600\n\n[nodes]\ntransport = \"hci0\"\n")
            let section = try home.tracer(["config"])
            UserFacingFailures.expectOneErrorLine(section, mentioning: ["[nodes]", home.defaultFile, "line 4"])

            try home.writeDefaultFile("interval = 600\n")
            let outside = try home.tracer(["config"])
            UserFacingFailures.expectOneErrorLine(outside, mentioning: ["interval", "line 1", "section"])
        }

        /// A bad value: the file text (or environment, or flags) and the phrases the error must contain.
        struct BadValue: Sendable, CustomTestStringConvertible {
            var file: String = ""
            var environment: [String: String] = [:]
            var flags: [String] = []
            var phrases: [String]
            var testDescription: String { phrases.joined(separator: " / ") }
        }

        @Test(arguments: [
            BadValue(file: "[check]\ninterval = 5\n",
                     phrases: ["tracer.toml line 2: check.interval must be between 60 and 2419200 seconds, got 5"]),
            BadValue(file: "[check]\n\ninterval = \"600\"\n", phrases: ["line 3", "check.interval", "must be an integer", "string"]),
            BadValue(file: "[log]\nlevel = \"loud\"\n", phrases: ["line 2", "log.level", "trace, debug, info", "loud"]),
            BadValue(file: "[node]\nrotation_interval = 100000\n", phrases: ["line 2", "node.rotation_interval", "between 5 and 86400"]),
            BadValue(file: "[node]\nrotation_interval = 60\nrotation_jitter = 30\n",
                     phrases: ["line 3", "node.rotation_jitter", "half", "node.rotation_interval"]),
            BadValue(file: "[node]\ntransport = \"bluetooth\"\n", phrases: ["line 2", "node.transport", "bluetooth"]),
            BadValue(file: "[node]\ncontroller_quirks = \"commands-left-unanswered, floods\"\n",
                     phrases: ["line 2", "node.controller_quirks", "\"floods\"", "cancel-taken-without-ending-attempt"]),
            BadValue(file: "[server]\nurl = \"ftp://example.org\"\n", phrases: ["line 2", "server.url", "http or https"]),
            BadValue(file: "[server]\npublic_key = \"AAAA\"\n", phrases: ["line 2", "server.public_key", "32-byte", "3 bytes"]),
            BadValue(file: "[server]\npinned_key = \"sha1//abc\"\n", phrases: ["line 2", "server.pinned_key", "sha256//"]),
            BadValue(file: "[risk]\nnear_attenuation = 80\n", phrases: ["line 2", "risk.far_attenuation", "greater than"]),
            BadValue(file: "[risk]\nlow_minutes = 0\n", phrases: ["line 2", "risk.low_minutes", "above 0"]),
            BadValue(file: "[risk]\nnear_weight = 1.5\n", phrases: ["line 2", "risk.near_weight", "must be between 0 and 1, got 1.5"]),
            BadValue(file: "[node]\ncontinuous_scan = \"yes\"\n", phrases: ["line 2", "node.continuous_scan", "true or false"]),
            BadValue(file: "[node]\nscan_schedule = \"eco\"\n", phrases: ["line 2", "node.scan_schedule", "standard, low-power, continuous, minute-bursts"]),
            BadValue(file: "[list]\nformat = \"batches\"\n", phrases: ["line 2", "list.format", "auto or log", "retired"]),
            BadValue(file: "[list]\nformat = \"index\"\n", phrases: ["line 2", "list.format", "follows only the list log", "remove the list.format line"]),
            BadValue(file: "[list]\norigin = \"example.org list\"\n", phrases: ["line 2", "list.origin", "without spaces"]),
            BadValue(file: "[list]\nwitnesses = \"w1+12345678+AAAA\"\n", phrases: ["line 2", "list.witnesses", "w1+12345678+AAAA"]),
            // A log's own key (type 0x01) where a witness's cosignature key (0x04) belongs.
            BadValue(file: "[list]\nwitnesses = \"example.org/w1+6e0c0a82+AQ==\"\n", phrases: ["line 2", "list.witnesses"]),
            BadValue(file: "[list]\nwitnesses_required = 1\n", phrases: ["line 2", "list.witnesses_required", "at most the number of list.witnesses (0)"]),
            BadValue(environment: ["TRACER_CHECK_INTERVAL": "soon"], phrases: ["TRACER_CHECK_INTERVAL", "check.interval", "soon"]),
            BadValue(environment: ["TRACER_LOG_FORMAT": "xml"], phrases: ["TRACER_LOG_FORMAT", "log.format", "text, json"]),
            BadValue(environment: ["TRACER_CHECK_INTERVAL": "30\nline two"], phrases: ["TRACER_CHECK_INTERVAL", "\\u{a}"]),
            BadValue(flags: ["--rotation-interval", "3"], phrases: ["--rotation-interval", "node.rotation_interval", "got 3"]),
            BadValue(file: "[check]\ninterval = 600\n", flags: ["--check-interval", "59"], phrases: ["--check-interval", "between 60 and 2419200"]),
        ])
        func badValueIsOneSentence(_ bad: BadValue) throws {
            let home = try Home()
            defer { home.remove() }
            if !bad.file.isEmpty { try home.writeDefaultFile(bad.file) }
            let result = try home.tracer(["config"] + bad.flags, environment: bad.environment)
            UserFacingFailures.expectOneErrorLine(result, mentioning: bad.phrases)
            #expect(result.stdout.isEmpty, "\(result)")
        }

        /// A syntax error: the file and the phrases the error must contain.
        struct SyntaxCase: Sendable, CustomTestStringConvertible {
            var file: String
            var phrases: [String]
            var testDescription: String { file.debugDescription }
        }

        @Test(arguments: [
            SyntaxCase(file: "[node]\ntransport = \"hci0\n", phrases: ["line 2", "unterminated string"]),
            SyntaxCase(file: "[node]\n\ntransport = 'hci0\n", phrases: ["line 3", "unterminated string"]),
            SyntaxCase(file: "[check]\ninterval = [60, 120]\n", phrases: ["line 2", "arrays"]),
            SyntaxCase(file: "[check]\ninterval = { seconds = 60 }\n", phrases: ["line 2", "inline tables"]),
            SyntaxCase(file: "check.interval = 60\n", phrases: ["line 1", "dotted keys"]),
            SyntaxCase(file: "[check.nested]\n", phrases: ["line 1", "nested tables"]),
            SyntaxCase(file: "[[check]]\n", phrases: ["line 1", "arrays of tables"]),
            SyntaxCase(file: "[check]\ninterval = 60\ninterval = 120\n", phrases: ["line 3", "already set on line 2"]),
            SyntaxCase(file: "[check]\ninterval = 60\n[check]\n", phrases: ["line 3", "already defined on line 1"]),
            SyntaxCase(file: "[check]\non_exposure = \"\"\"\nrun\n\"\"\"\n", phrases: ["line 2", "multi-line"]),
            SyntaxCase(file: "[check]\ninterval = 1979-05-27\n", phrases: ["line 2", "dates"]),
            SyntaxCase(file: "[check]\ninterval = 60 120\n", phrases: ["line 2", "unexpected"]),
            SyntaxCase(file: "[check]\non_exposure = run-this\n", phrases: ["line 2", "quotes"]),
            SyntaxCase(file: "[check]\non_exposure = \"bad \\q escape\"\n", phrases: ["line 2", "escape"]),
            SyntaxCase(file: "[check]\non_exposure = \"\\uD800\"\n", phrases: ["line 2", "Unicode"]),
            SyntaxCase(file: "[check]\ninterval = 99999999999999999999\n", phrases: ["line 2", "too large"]),
            SyntaxCase(file: "[check]\ninterval = 0600\n", phrases: ["line 2", "leading zero"]),
            SyntaxCase(file: "[check]\ninterval\n", phrases: ["line 2", "no value"]),
            SyntaxCase(file: "[check\n", phrases: ["line 1", "closing ]"]),
            SyntaxCase(file: "[check]\n\"interval\" = 60\n", phrases: ["line 2", "quoted keys"]),
            SyntaxCase(file: "[check]\ninterval = 60 # ok\non_exposure = \"a\u{0}b\"\n", phrases: ["line 3", "control character"]),
        ])
        func syntaxErrorNamesTheLine(_ syntax: SyntaxCase) throws {
            let home = try Home()
            defer { home.remove() }
            try home.writeDefaultFile(syntax.file)
            let result = try home.tracer(["config"])
            UserFacingFailures.expectOneErrorLine(result, mentioning: [home.defaultFile] + syntax.phrases)
        }

        /// Whatever bytes the file holds, `tracer config` either accepts them or fails with one
        /// line; it never crashes.
        @Test func hostileFilesNeverCrash() throws {
            let home = try Home()
            defer { home.remove() }
            var generator = SystemRandomNumberGenerator()
            let pieces = ["[", "]", "[check]", "=", "\"", "'", "\\", "\\u", "\\U0010FFFF", "#", "\n", "\r\n", " ", "\t",
                          "interval", "60", "-", "+", "_", ".", "e", "1e999", "9223372036854775808", "true", "{", "}",
                          "\u{FEFF}", "é", "\r", "\0", "\u{7F}", "node", "on_exposure", ","]
            var files: [Data] = [Data([0xFF, 0xFE, 0x00]), Data([0xEF, 0xBB, 0xBF]), Data(), Data("[check]\ninterval = 60".utf8)]
            for _ in 0..<30 {
                let text = (0..<Int.random(in: 1...40, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }
                files.append(Data(text.joined().utf8))
                files.append(Data((0..<Int.random(in: 1...200, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }))
            }
            let path = home.scratch.file("hostile.toml")
            for bytes in files {
                try bytes.write(to: URL(fileURLWithPath: path))
                let result = try home.tracer(["config", "--config", path])
                if result.exitCode == 0 && !result.signaled { continue }
                UserFacingFailures.expectOneErrorLine(result, mentioning: [path])
                if result.exitCode != 1 || result.stderrLines.count != 1 {
                    Issue.record("input that failed: \(bytes.map { String(format: "%02x", $0) }.joined())")
                    break
                }
            }
        }

        @Test func unknownSettingFlagIsAUsageError() throws {
            let home = try Home()
            defer { home.remove() }
            let result = try home.tracer(["config", "--check-intervals", "120"])
            #expect(result.exitCode == 2, "\(result)")
            #expect(result.stderr.contains("--check-intervals"), "\(result)")
            let missingValue = try home.tracer(["config", "--check-interval"])
            #expect(missingValue.exitCode == 2, "\(missingValue)")
        }
    }
}
