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
        let quirks = try ControllerQuirks(settingNames: " commands-left-unanswered ,advertising-outlives-host,")
        #expect(quirks == [.commandsLeftUnanswered, .advertisingOutlivesHost])
        #expect(try ControllerQuirks(settingNames: quirks.settingValue) == quirks)
        #expect(try ControllerQuirks(settingNames: "") == [])
        #expect(ControllerQuirks.settingNames.count == ControllerQuirks.names.count)
        #expect(Set(ControllerQuirks.settingNames).count == ControllerQuirks.settingNames.count, "one name per quirk")
    }

    @Test func unknownNameIsRefusedNamingTheKnownOnes() {
        #expect(throws: UnknownControllerQuirk(name: "floods")) { try ControllerQuirks(settingNames: "commands-left-unanswered, floods") }
        let message = UnknownControllerQuirk(name: "floods").description
        #expect(message.contains("\"floods\""))
        for name in ControllerQuirks.settingNames { #expect(message.contains(name)) }
    }

    @Test func quirkNamedInTheConfigurationReachesTheHost() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller, knownQuirks: [.cancelTakenWithoutEndingAttempt])
        #expect(await host.quirks == [.cancelTakenWithoutEndingAttempt])
        await host.close()
    }

    @Test func controllerIdentitySelectsItsKnownQuirks() async throws {
        let unknownModel = ScriptedController()
        let plain = try await Self.openHost(unknownModel)
        #expect(await plain.quirks == [], "a controller of a registered maker is not presumed quirky")
        await plain.close()

        let testModel = ScriptedController()
        // Company 0x00E0, HCI 5.3, LMP subversion 0: a virtual controller's default identity.
        testModel.state.withLock { $0.localVersion = [0x0C, 0x00, 0x00, 0x0C, 0xE0, 0x00, 0x00, 0x00] }
        let host = try await Self.openHost(testModel, knownQuirks: [.commandsLeftUnanswered])
        let quirks = await host.quirks
        #expect(quirks.contains(.attemptDroppedWithoutEnd))
        #expect(quirks.contains(.initiatorStuckOnUnansweredRequest))
        #expect(quirks.contains(.commandsLeftUnanswered), "settings add to what the model selects")
        await host.close()

        // Company 0xFFFF is also what real development firmware reports: it selects nothing.
        let testCompany = ScriptedController()
        testCompany.state.withLock { $0.localVersion = [0x09, 0x00, 0x00, 0x09, 0xFF, 0xFF, 0x00, 0x00] }
        let unpresumed = try await Self.openHost(testCompany)
        #expect(await unpresumed.quirks == [])
        await unpresumed.close()
    }

    @Test func settingsTurnOffWhatTheTableSelects() throws {
        let table: ControllerQuirks = [.attemptDroppedWithoutEnd, .initiatorStuckOnUnansweredRequest]
        #expect(try ControllerQuirkChoice(settingNames: "none").applied(to: table) == [])
        #expect(try ControllerQuirkChoice(settingNames: " -attempt-dropped-without-end ").applied(to: table) == [.initiatorStuckOnUnansweredRequest])
        #expect(try ControllerQuirkChoice(settingNames: "none, commands-left-unanswered").applied(to: table) == [.commandsLeftUnanswered])
        #expect(try ControllerQuirkChoice(settingNames: "commands-left-unanswered").applied(to: table) == table.union(.commandsLeftUnanswered))
        #expect(try ControllerQuirkChoice(settingNames: "").applied(to: table) == table)
        #expect(throws: UnknownControllerQuirk(name: "floods")) { try ControllerQuirkChoice(settingNames: "-floods") }
        #expect(throws: UnknownControllerQuirk(name: "nothing")) { try ControllerQuirkChoice(settingNames: "nothing") }
        #expect(UnknownControllerQuirk(name: "x").description.contains("\"none\""), "the error says how to turn quirks off")
    }

    @Test func hostLeavesOutTheTableQuirksTheSettingsTurnOff() async throws {
        let testModel = ScriptedController()
        // Company 0x00E0, HCI 5.3, LMP subversion 0: selected by the table (three quirks).
        testModel.state.withLock { $0.localVersion = [0x0C, 0x00, 0x00, 0x0C, 0xE0, 0x00, 0x00, 0x00] }
        var configuration = LEHost.Configuration()
        let choice = try ControllerQuirkChoice(settingNames: "-initiator-stuck-on-unanswered-request")
        configuration.knownQuirks = choice.added
        configuration.tableQuirksTurnedOff = choice.removed
        let host = try await LEHost.open(
            transport: testModel, databaseForLink: { _ in try GATTDatabase(services: []) }, configuration: configuration)
        let quirks = await host.quirks
        #expect(!quirks.contains(.initiatorStuckOnUnansweredRequest))
        #expect(quirks.contains(.attemptDroppedWithoutEnd), "only the quirk named is turned off")
        await host.close()
    }

    @Test func modelsMatchOnEveryFieldTheyName() throws {
        let model = ControllerModel(companyIdentifier: 0x00E0, hciVersion: 0x0C, lmpSubversion: 0, quirks: [.advertisingOutlivesHost])
        func version(_ bytes: [UInt8]) throws -> ReadLocalVersionInformation.ReturnParameters {
            try ReadLocalVersionInformation.ReturnParameters(decoding: bytes)
        }
        #expect(ControllerQuirks.known(for: try version([0x0C, 0, 0, 0x0C, 0xE0, 0x00, 0, 0]), in: [model]) == [.advertisingOutlivesHost])
        // Same maker, a real chip's subversion.
        #expect(ControllerQuirks.known(for: try version([0x0C, 0, 0, 0x0C, 0xE0, 0x00, 0x34, 0x12]), in: [model]) == [])
        #expect(ControllerQuirks.known(for: try version([0x0B, 0, 0, 0x0B, 0xE0, 0x00, 0, 0]), in: [model]) == [])
    }
}
