import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// Quirks known from the start: named in settings, or selected by the controller's identity.
@Suite(.tags(.unit)) struct ControllerQuirksTests {
    static func openHost(_ controller: ScriptedController, knownQuirks: ControllerQuirks = []) async throws -> LEHost {
        var configuration = LEHost.Configuration()
        configuration.knownQuirks = knownQuirks
        return try await LEHost.open(
            transport: controller, databaseForLink: { _ in try GATTDatabase(services: []) }, configuration: configuration)
    }

    @Test func settingNamesParseAndRoundTrip() throws {
        let quirks = try ControllerQuirks(settingNames: " cancel-taken-without-ending-attempt ,")
        #expect(quirks == [.cancelTakenWithoutEndingAttempt])
        #expect(try ControllerQuirks(settingNames: quirks.settingValue) == quirks)
        #expect(try ControllerQuirks(settingNames: "") == [])
        #expect(ControllerQuirks.settingNames.count == ControllerQuirks.names.count)
        #expect(Set(ControllerQuirks.settingNames).count == ControllerQuirks.settingNames.count, "one name per quirk")
    }

    @Test func unknownNameIsRefusedNamingTheKnownOnes() {
        #expect(throws: UnknownControllerQuirk(name: "floods")) { try ControllerQuirks(settingNames: "cancel-taken-without-ending-attempt, floods") }
        let message = UnknownControllerQuirk(name: "floods").description
        #expect(message.contains("\"floods\""))
        for name in ControllerQuirks.settingNames { #expect(message.contains(name)) }
    }

    /// A setting written when more behaviours were quirks still parses: each retired name, plain or
    /// turning a quirk off, changes nothing and is kept for the node to say it can go.
    @Test func retiredNamesAreAcceptedAndChangeNothing() throws {
        #expect(Set(ControllerQuirks.retiredSettingNames).isDisjoint(with: ControllerQuirks.settingNames))
        #expect(Set(ControllerQuirks.retiredSettingNames).count == ControllerQuirks.retiredSettingNames.count)
        for name in ControllerQuirks.retiredSettingNames {
            for written in [name, "-\(name)"] {
                let choice = try ControllerQuirkChoice(settingNames: written)
                #expect(choice == ControllerQuirkChoice(namesHandledAlways: [name]), "\(written)")
            }
        }
        let older = try ControllerQuirkChoice(settingNames:
            "commands-left-unanswered, cancel-taken-without-ending-attempt, -attempt-dropped-without-end, commands-left-unanswered")
        #expect(older.added == [.cancelTakenWithoutEndingAttempt], "a current quirk in the same list still counts")
        #expect(older.removed == [])
        #expect(older.namesHandledAlways == ["commands-left-unanswered", "attempt-dropped-without-end"], "each once, in order")
        #expect(try ControllerQuirkChoice(settingNames: "none, cancel-taken-without-ending-attempt").namesHandledAlways == [])
        // The old names are no quirks: a set of quirks refuses them.
        #expect(throws: UnknownControllerQuirk(name: "commands-left-unanswered")) {
            try ControllerQuirks(settingNames: "commands-left-unanswered")
        }
    }

    @Test func quirkNamedInTheConfigurationReachesTheHost() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller, knownQuirks: [.cancelTakenWithoutEndingAttempt])
        #expect(await host.quirks == [.cancelTakenWithoutEndingAttempt])
        await host.close()
    }

    /// Company 0x00E0, HCI 5.3, LMP subversion 0 (a virtual controller's default identity), as a
    /// table row for the tests: the project's table has none.
    static let testModel = ControllerModel(
        companyIdentifier: 0x00E0, hciVersion: 0x0C, lmpSubversion: 0, quirks: [.cancelTakenWithoutEndingAttempt])
    static let testModelVersion: [UInt8] = [0x0C, 0x00, 0x00, 0x0C, 0xE0, 0x00, 0x00, 0x00]

    @Test func controllerIdentitySelectsItsKnownQuirks() async throws {
        var configuration = LEHost.Configuration()
        configuration.controllerModels = [Self.testModel]
        let unknownModel = ScriptedController()
        let plain = try await LEHost.open(
            transport: unknownModel, databaseForLink: { _ in try GATTDatabase(services: []) }, configuration: configuration)
        #expect(await plain.quirks == [], "a controller of a registered maker is not presumed quirky")
        await plain.close()

        let testModel = ScriptedController()
        testModel.state.withLock { $0.localVersion = Self.testModelVersion }
        let host = try await LEHost.open(
            transport: testModel, databaseForLink: { _ in try GATTDatabase(services: []) }, configuration: configuration)
        #expect(await host.quirks == [.cancelTakenWithoutEndingAttempt])
        await host.close()

        // The project's table selects nothing for that identity, nor for company 0xFFFF, which
        // real development firmware reports too.
        for version in [Self.testModelVersion, [0x09, 0x00, 0x00, 0x09, 0xFF, 0xFF, 0x00, 0x00]] {
            let controller = ScriptedController()
            controller.state.withLock { $0.localVersion = version }
            let unpresumed = try await Self.openHost(controller)
            #expect(await unpresumed.quirks == [])
            await unpresumed.close()
        }
    }

    @Test func settingsTurnOffWhatTheTableSelects() throws {
        let table: ControllerQuirks = [.cancelTakenWithoutEndingAttempt]
        #expect(try ControllerQuirkChoice(settingNames: "none").applied(to: table) == [])
        #expect(try ControllerQuirkChoice(settingNames: " -cancel-taken-without-ending-attempt ").applied(to: table) == [])
        #expect(try ControllerQuirkChoice(settingNames: "none, cancel-taken-without-ending-attempt").applied(to: table) == table)
        #expect(try ControllerQuirkChoice(settingNames: "cancel-taken-without-ending-attempt").applied(to: []) == table)
        #expect(try ControllerQuirkChoice(settingNames: "").applied(to: table) == table)
        #expect(try ControllerQuirkChoice(settingNames: "-commands-left-unanswered").applied(to: table) == table, "a retired name turns nothing off")
        #expect(throws: UnknownControllerQuirk(name: "floods")) { try ControllerQuirkChoice(settingNames: "-floods") }
        #expect(throws: UnknownControllerQuirk(name: "nothing")) { try ControllerQuirkChoice(settingNames: "nothing") }
        #expect(throws: UnknownControllerQuirk(name: "-")) { try ControllerQuirkChoice(settingNames: "-") }
        #expect(throws: UnknownControllerQuirk(name: "-none")) { try ControllerQuirkChoice(settingNames: "-none") }
        #expect(UnknownControllerQuirk(name: "x").description.contains("\"none\""), "the error says how to turn quirks off")
    }

    @Test func hostLeavesOutTheTableQuirksTheSettingsTurnOff() async throws {
        let testModel = ScriptedController()
        testModel.state.withLock { $0.localVersion = Self.testModelVersion }
        var configuration = LEHost.Configuration()
        configuration.controllerModels = [Self.testModel]
        let choice = try ControllerQuirkChoice(settingNames: "-cancel-taken-without-ending-attempt")
        configuration.knownQuirks = choice.added
        configuration.tableQuirksTurnedOff = choice.removed
        let host = try await LEHost.open(
            transport: testModel, databaseForLink: { _ in try GATTDatabase(services: []) }, configuration: configuration)
        #expect(await host.quirks == [])
        await host.close()
    }

    @Test func modelsMatchOnEveryFieldTheyName() throws {
        func version(_ bytes: [UInt8]) throws -> ReadLocalVersionInformation.ReturnParameters {
            try ReadLocalVersionInformation.ReturnParameters(decoding: bytes)
        }
        #expect(ControllerQuirks.known(for: try version(Self.testModelVersion), in: [Self.testModel]) == [.cancelTakenWithoutEndingAttempt])
        // Same maker, a real chip's subversion.
        #expect(ControllerQuirks.known(for: try version([0x0C, 0, 0, 0x0C, 0xE0, 0x00, 0x34, 0x12]), in: [Self.testModel]) == [])
        #expect(ControllerQuirks.known(for: try version([0x0B, 0, 0, 0x0B, 0xE0, 0x00, 0, 0]), in: [Self.testModel]) == [])
    }
}
