import Foundation
import PositiveListFormat
import Testing
import TestTiers
import TransparencyLog
@testable import TracerNode

/// Further lists (`[lists.<name>]`, issue 39 item 5) in the configuration file: how they are
/// read, what they default to, and the message for each mistake.
@Suite(.tags(.unit)) struct SeveralListsConfigurationTests {
    static let homeKey = Data(repeating: 1, count: 32).base64EncodedString()
    static let campusKey = Data(repeating: 2, count: 32).base64EncodedString()
    static let travelKey = Data(repeating: 3, count: 32).base64EncodedString()

    /// The settings resolved from a file holding `text`, with no flag and no TRACER_* variable.
    static func resolve(_ text: String) throws(ConfigurationError) -> NodeSettings {
        let directory = NSTemporaryDirectory() + "tracer-lists-config-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/tracer.toml"
        FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return try NodeSettings.resolve(configFlag: path, flags: [:], environment: ["HOME": directory]).settings
    }

    /// The message resolving `text` fails with.
    static func problem(_ text: String) -> String? {
        do { _ = try resolve(text) } catch { return error.description }
        return nil
    }

    static let home = """
        [server]
        url = "https://list.example.org"
        public_key = "\(homeKey)"

        """

    @Test func namedTablesAreReadInFileOrderWithTheirDefaults() throws {
        let witness = try NoteSigner.generate(name: "witness.test/w1", type: .cosignatureV1).verifierKey.text
        let settings = try Self.resolve(Self.home + """
            [lists.campus]
            url = "https://campus.example.edu/"
            public_key = "\(Self.campusKey)"
            witnesses = "\(witness)"
            witnesses_required = 1

            [lists.travel-2]
            url = "http://127.0.0.1:8080"
            public_key = "\(Self.travelKey)"
            origin = "abroad.example/tracer-list"
            """)
        #expect(settings.furtherLists.map(\.name) == ["campus", "travel-2"])
        let campus = settings.furtherLists[0]
        #expect(campus.url.absoluteString == "https://campus.example.edu/")
        #expect(campus.publicKey == Data(repeating: 2, count: 32))
        #expect(campus.origin == nil, "unset: derived from the key, as list.origin is")
        #expect(campus.effectiveOrigin == (try PositiveListPublicKey(base64: Self.campusKey)).defaultLogOrigin)
        #expect(campus.witnesses.map(\.text) == [witness] && campus.witnessesRequired == 1)
        let travel = settings.furtherLists[1]
        #expect(travel.origin == "abroad.example/tracer-list" && travel.witnesses.isEmpty && travel.witnessesRequired == 0)
        // The home list is untouched by the tables.
        #expect(settings.serverURL?.absoluteString == "https://list.example.org" && settings.listOrigin == nil)
        // Each list's state lives in a directory of its own, beside (never inside) the home list's paths.
        let parts = MatchingParts(settings: settings)
        #expect(parts.furtherCache(campus).directory == settings.cacheDirectory + "/lists/campus")
        #expect(parts.furtherLogStore(campus).directory == settings.cacheDirectory + "/lists/campus/log")
        #expect(parts.logStore.directory == settings.cacheDirectory + "/log", "the home list's log does not move")
        let logs = try parts.furtherLists(offline: true)
        #expect(logs.map(\.log.store.directory) == ["campus", "travel-2"].map { settings.cacheDirectory + "/lists/" + $0 + "/log" })
        #expect(logs[1].log.source.origin == "abroad.example/tracer-list" && logs[0].log.source.requiredCosignatures == 1)
        #expect(logs.allSatisfy { $0.updater == nil }, "offline: no updater")
    }

    /// `server.pinned_key` is the home server's certificate; pinned on another authority's
    /// server it would fail every update of that list.
    @Test func theHomeServersPinIsNotAppliedToFurtherLists() throws {
        let pin = "sha256//" + Data(repeating: 7, count: 32).base64EncodedString()
        let settings = try Self.resolve(Self.home + """
            pinned_key = "\(pin)"

            [lists.campus]
            url = "https://campus.example.edu/"
            public_key = "\(Self.campusKey)"

            """)
        let parts = MatchingParts(settings: settings)
        #expect(parts.httpClient().configuration.pinnedPublicKey == pin)
        #expect(parts.furtherListsHTTPConfiguration.pinnedPublicKey == nil)
        #expect(parts.furtherListsHTTPConfiguration.baseTimeout == parts.httpClient().configuration.baseTimeout)
    }

    @Test func aFileWithoutTablesFollowsOneList() throws {
        #expect(try Self.resolve(Self.home).furtherLists.isEmpty)
    }

    struct Mistake: Sendable, CustomTestStringConvertible {
        var file: String
        var phrases: [String]
        var testDescription: String { phrases.joined(separator: " / ") }
    }

    static let mistakes: [Mistake] = [
        Mistake(file: "[lists.Campus]\nurl = \"https://a.example\"\npublic_key = \"\(campusKey)\"\n",
                phrases: ["line 4", "[lists.Campus]", "plain lowercase word", "rename the table"]),
        Mistake(file: "[lists.home]\nurl = \"https://a.example\"\npublic_key = \"\(campusKey)\"\n", phrases: ["line 4", "home is taken"]),
        Mistake(file: "[lists.campus]\npublic_key = \"\(campusKey)\"\n", phrases: ["line 4", "[lists.campus] has no url", "add url ="]),
        Mistake(file: "[lists.campus]\nurl = \"https://a.example\"\n", phrases: ["line 4", "no public_key", "add public_key ="]),
        Mistake(file: "[lists.campus]\nurl = \"https://a.example\"\nserver = \"x\"\n",
                phrases: ["line 6", "server is not a setting of a list", "url, public_key, origin, witnesses, witnesses_required"]),
        Mistake(file: "[lists.campus]\nurl = \"ftp://a.example\"\npublic_key = \"\(campusKey)\"\n", phrases: ["line 5", "lists.campus.url", "http or https"]),
        Mistake(file: "[lists.campus]\nurl = \"https://a.example\"\npublic_key = \"\(campusKey)\"\nwitnesses_required = 1\n",
                phrases: ["line 4", "witnesses_required (1) must be at most the number of witnesses (0)"]),
        Mistake(file: "[lists.campus]\nurl = \"https://a.example\"\npublic_key = \"\(campusKey)\"\n[lists.campus]\n",
                phrases: ["line 7", "already defined on line 4"]),
        Mistake(file: "[lists.campus]\nurl = \"https://a.example\"\npublic_key = \"\(homeKey)\"\n",
                phrases: ["line 4", "same log as the home list", "remove the table"]),
        Mistake(file: "[lists.a]\nurl = \"https://a.example\"\npublic_key = \"\(campusKey)\"\n[lists.b]\nurl = \"https://b.example\"\npublic_key = \"\(travelKey)\"\norigin = \"\((try? PositiveListPublicKey(base64: campusKey))?.defaultLogOrigin ?? "")\"\n",
                phrases: ["line 7", "[lists.b] follows the same log as [lists.a]", "keep one of the two tables"]),
        Mistake(file: "[lists]\nurl = \"https://a.example\"\n", phrases: ["line 4", "[lists] holds no settings itself", "[lists.campus]"]),
        Mistake(file: "[lists.campus.more]\n", phrases: ["line 4", "nested tables"]),
    ]

    @Test(arguments: mistakes)
    func eachMistakeIsOneSentenceWithTheLineAndWhatToDo(_ mistake: Mistake) {
        let message = Self.problem(Self.home + mistake.file)
        for phrase in mistake.phrases { #expect(message?.contains(phrase) == true, "\(phrase) not in \(message ?? "(no error)")") }
    }

    @Test func theReaderTakesSubtablesOnlyUnderLists() throws {
        let document = try TOMLReader.parse(Array("[lists.campus]\nurl = \"x\"\n".utf8))
        #expect(document.tables.map(\.name) == ["", "lists.campus"])
        #expect(throws: TOMLSyntaxError.self) { try TOMLReader.parse(Array("[check.nested]\n".utf8)) }
        #expect(throws: TOMLSyntaxError.self) { try TOMLReader.parse(Array("[lists.a.b]\n".utf8)) }
    }

    @Test func configShowsEachList() throws {
        let directory = NSTemporaryDirectory() + "tracer-lists-config-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/tracer.toml"
        try Data((Self.home + "[lists.campus]\nurl = \"https://campus.example.edu\"\npublic_key = \"\(Self.campusKey)\"\n").utf8)
            .write(to: URL(fileURLWithPath: path))
        let resolved = try NodeSettings.resolve(configFlag: path, flags: [:], environment: ["HOME": directory])
        let text = ConfigCommand.text(resolved)
        #expect(text.contains("lists.campus.url") && text.contains("https://campus.example.edu"), "\(text)")
        #expect(text.contains("(derived from its key)"), "\(text)")
        #expect(text.contains(path + ":4"), "the table's line, as the other settings from the file: \(text)")
    }
}
