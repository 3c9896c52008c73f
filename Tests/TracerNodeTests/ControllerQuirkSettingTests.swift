import BLEHost
import Foundation
import Testing
import TestTiers
@testable import TracerNode

/// `node.controller_quirks` written when more behaviours were quirks: the node still starts with
/// it, and says once that the retired names change nothing and can be removed.
@Suite(.tags(.unit)) struct ControllerQuirkSettingTests {
    static func settings(controllerQuirks: String) throws -> NodeSettings {
        let home = NSTemporaryDirectory() + "tracer-quirk-setting-\(UUID().uuidString)"
        return try NodeSettings.resolve(
            configFlag: nil, flags: ["node.controller_quirks": controllerQuirks], environment: ["HOME": home]
        ).settings
    }

    @Test func retiredNamesAreAcceptedAndReachTheHostAsNothing() throws {
        let settings = try Self.settings(controllerQuirks: "commands-left-unanswered, -attempt-dropped-without-end, cancel-taken-without-ending-attempt")
        #expect(settings.controllerQuirks.namesHandledAlways == ["commands-left-unanswered", "attempt-dropped-without-end"])
        let radio = RunningNode.exchangeConfiguration(settings).radio
        #expect(radio.knownQuirks == [.cancelTakenWithoutEndingAttempt], "the current quirk in the same list still counts")
        #expect(radio.tableQuirksTurnedOff == [])
    }

    @Test func theWarningNamesWhatCanBeRemoved() throws {
        #expect(RunningNode.quirksHandledAlwaysWarning(try Self.settings(controllerQuirks: "cancel-taken-without-ending-attempt").controllerQuirks) == nil)
        #expect(RunningNode.quirksHandledAlwaysWarning(ControllerQuirkChoice()) == nil, "unset: nothing to say")
        let one = try #require(RunningNode.quirksHandledAlwaysWarning(try Self.settings(controllerQuirks: "advertising-outlives-host").controllerQuirks))
        #expect(one.description == "node.controller_quirks names advertising-outlives-host, which the node handles on every controller: it changes nothing and can be removed from the setting")
        let two = try #require(RunningNode.quirksHandledAlwaysWarning(
            try Self.settings(controllerQuirks: "initiator-stuck-on-unanswered-request,none,advertising-floods-without-parameters").controllerQuirks))
        #expect(two.description == "node.controller_quirks names initiator-stuck-on-unanswered-request, advertising-floods-without-parameters, which the node handles on every controller: they change nothing and can be removed from the setting")
    }
}
