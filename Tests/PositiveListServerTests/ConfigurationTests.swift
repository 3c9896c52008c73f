import Crypto
import Foundation
@testable import PositiveListServer
import ServerStorage
import Testing
import TestTiers

@Suite(.tags(.unit)) struct ConfigurationTests {
    func parse(_ text: String) throws(ConfigurationError) -> ServerConfiguration {
        try ServerConfiguration.parse(Data(text.utf8), path: "config.json")
    }

    @Test func defaultsFollowTheIssue() throws {
        let configuration = try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}]}"#)
        #expect(configuration.retentionDays == 28)
        #expect(configuration.maxIDsPerHistory >= 28 * 96)
        #expect(configuration.uploadCodeLifetimeSeconds == 86_400)
        #expect(configuration.publishIntervalSeconds == 3_600)
        #expect(configuration.failedAttemptsPerMinute == 10)
        #expect(configuration.indexRefreshSeconds == 86_400)
    }

    @Test func tokensMayBeGivenAsDigestsAndAreKeptOnlyAsDigests() throws {
        let token = "a-long-random-token-for-authority-b"
        let digest = SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
        let configuration = try parse("""
            {"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}, {"name": "B", "tokenSHA256": "\(digest)"}],
             "maxIDsPerHistory": 100}
            """)
        let registry = AuthorityRegistry(configuration.authorities)
        #expect(registry.authenticate(token: token)?.name == "B")
        #expect(registry.authenticate(token: "0123456789abcdef0123456789")?.name == "A")
        #expect(registry.authenticate(token: "0123456789abcdef012345678") == nil)
        #expect(registry.authenticate(token: "") == nil)
        #expect(configuration.maxIDsPerHistory == 100)
    }

    @Test func mistakesAreRefusedWithTheirReason() throws {
        #expect(throws: ConfigurationError.notJSONObject(path: "config.json")) { try parse("[1]") }
        #expect(throws: ConfigurationError.noAuthorities(path: "config.json")) { try parse(#"{"authorities": []}"#) }
        #expect(throws: ConfigurationError.unknownSetting(path: "config.json", name: "retentionDay")) {
            try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}], "retentionDay": 3}"#)
        }
        #expect(throws: ConfigurationError.weakToken(path: "config.json", authority: "A", minimumLength: 24)) {
            try parse(#"{"authorities": [{"name": "A", "token": "short"}]}"#)
        }
        #expect(throws: ConfigurationError.duplicateAuthority(path: "config.json", name: "A")) {
            try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}, {"name": "A", "token": "0123456789abcdef0123456789x"}]}"#)
        }
        #expect(throws: ConfigurationError.self) {
            try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}], "retentionDays": 29}"#)
        }
        // Nodes call a list signed more than two days ago outdated.
        #expect(throws: ConfigurationError.self) {
            try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}], "indexRefreshSeconds": 172800}"#)
        }
        #expect(try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}], "indexRefreshSeconds": 3600}"#)
            .indexRefreshSeconds == 3_600)
        // Publishing daily with a daily refresh would let an index reach two days.
        #expect(throws: ConfigurationError.self) {
            try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}], "publishIntervalSeconds": 86400}"#)
        }
        #expect(try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}], "publishIntervalSeconds": 86400, "indexRefreshSeconds": 43200}"#)
            .publishIntervalSeconds == 86_400)
        // Every publication costs every node a new checkpoint and entries: not more than every 5 minutes.
        #expect(ServerConfiguration.shortestPublishIntervalSeconds == 300)
        #expect(throws: ConfigurationError.self) {
            try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}], "publishIntervalSeconds": 299}"#)
        }
        #expect(try parse(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}], "publishIntervalSeconds": 300}"#)
            .publishIntervalSeconds == 300)
        // Issue 29: uploads trigger publications at most every publishSpacingSeconds, between
        // the same 5 minutes and the interval (which publishes anyway); unset, 5 minutes (issue
        // 39: nodes follow the log, whose cost per publication does not grow with the list).
        let token = #"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}]"#
        #expect(try parse(token + "}").publishSpacingSeconds == 300)
        #expect(try parse(token + #", "publishIntervalSeconds": 600}"#).publishSpacingSeconds == 300)
        #expect(try parse(token + #", "publishSpacingSeconds": 1800}"#).publishSpacingSeconds == 1_800)
        #expect(try parse(token + #", "publishSpacingSeconds": 300}"#).publishSpacingSeconds == 300)
        #expect(throws: ConfigurationError.self) { try parse(token + #", "publishSpacingSeconds": 299}"#) }
        #expect(throws: ConfigurationError.self) { try parse(token + #", "publishSpacingSeconds": 3601}"#) }
        // The long poll is off unless set, and holds a request at most 5 minutes.
        #expect(try parse(token + "}").longPollSeconds == nil)
        #expect(try parse(token + #", "longPollSeconds": 50}"#).longPollSeconds == 50)
        #expect(throws: ConfigurationError.self) { try parse(token + #", "longPollSeconds": 301}"#) }
        #expect(throws: ConfigurationError.self) { try parse(token + #", "longPollSeconds": 0}"#) }
        #expect(throws: ConfigurationError.unreadable(path: "/nonexistent/config.json")) {
            try ServerConfiguration.load(path: "/nonexistent/config.json")
        }
    }
}

@Suite(.tags(.unit)) struct UploadCodeTests {
    @Test func codesUseOnlyUnambiguousCharactersAndAreLongEnough() {
        for _ in 0..<200 {
            let code = UploadCode.generate()
            #expect(code.canonical.count >= 10)
            #expect(!code.canonical.contains { "0O1IlL".contains($0) })
            #expect(code.display.count == 14)
            #expect(UploadCode(typed: code.display) == code)
            #expect(UploadCode(typed: code.display.lowercased().replacingOccurrences(of: "-", with: " ")) == code)
        }
    }

    @Test func typedTextThatCannotBeACodeIsRefused() {
        #expect(UploadCode(typed: "ABCD-EFGH-JKM") == nil)
        #expect(UploadCode(typed: "ABCD-EFGH-JKM0") == nil)
        #expect(UploadCode(typed: "") == nil)
    }

    @Test func codesNeverAppearInTheirDescription() {
        let code = UploadCode.generate()
        #expect(!"\(code)".contains(code.canonical))
        #expect("\(code)".hasPrefix("code#"))
    }
}

extension ServerConfiguration {
    /// A configuration file with one authority and `extra` (more members, as JSON), parsed.
    static func parseWithOneAuthority(_ extra: String = "") throws(ConfigurationError) -> ServerConfiguration {
        let authority = #""authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}]"#
        return try parse(Data("{\(authority)\(extra.isEmpty ? "" : ", " + extra)}".utf8), path: "config.json")
    }
}

@Suite(.tags(.unit)) struct KeyConfigurationTests {
    func parse(_ extra: String = "") throws(ConfigurationError) -> ServerConfiguration {
        try ServerConfiguration.parseWithOneAuthority(extra)
    }

    @Test func keyDefaultsFollowTheIssue() throws {
        let configuration = try parse()
        #expect(configuration.acceptUploads == .both)
        #expect(configuration.keyPublicationDelaySeconds == 7_200)
        #expect(configuration.keyPaddingMultiplier == 1.0)
        #expect(configuration.maxKeysPerHistory >= 29)
    }

    @Test func keySettingsAreReadAndChecked() throws {
        #expect(try parse(#""acceptUploads": "ids""#).acceptUploads == .ids)
        #expect(try parse(#""acceptUploads": "keys""#).acceptUploads == .keys)
        #expect(try parse(#""keyPublicationDelaySeconds": 0"#).keyPublicationDelaySeconds == 0)
        #expect(try parse(#""keyPaddingMultiplier": 1.5"#).keyPaddingMultiplier == 1.5)
        for bad in [
            #""acceptUploads": "none""#, #""keyPublicationDelaySeconds": -1"#, #""keyPaddingMultiplier": 0.5"#,
            #""keyPaddingMultiplier": 11"#, #""maxKeysPerHistory": 0"#,
        ] {
            #expect(throws: ConfigurationError.self, "\(bad)") { try parse(bad) }
        }
    }
}
