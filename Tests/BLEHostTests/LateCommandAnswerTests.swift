import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// A controller can answer a command after the host gave up on it. That late answer carries only
/// an opcode, so it must not be taken for the answer to the next command with the same opcode.
@Suite(.tags(.unit), .timeLimit(.minutes(1))) struct LateCommandAnswerTests {
    let controller = ScriptedController()
    let clock = ManualHostClock()
    let hci: HostControllerInterface

    init() {
        hci = HostControllerInterface(transport: controller, clock: clock)
    }

    /// Sends LE Set Scan Parameters while scanning, so that the controller's answer is Command
    /// Disallowed, holds that answer back until the command times out, and returns it.
    func timeOutScanParametersWhileScanning() async throws -> [UInt8] {
        try await hci.send(LESetScanEnable(true))
        controller.state.withLock { $0.holdAnswerTo = LESetScanParameters.opcode }
        let unanswered = Task { try await hci.send(LESetScanParameters()) }
        #expect(await eventually { controller.isHoldingAnswer && !clock.pendingDeadlines.isEmpty })
        clock.advance(by: .seconds(2))
        await #expect(throws: HCIError.commandTimedOut(opcode: LESetScanParameters.opcode, after: .seconds(2))) {
            try await unanswered.value
        }
        try await hci.send(LESetScanEnable(false))
        return try #require(controller.takeHeldAnswer())
    }

    var scanParametersSent: Int {
        controller.state.withLock { $0.commands.filter { $0 == LESetScanParameters.opcode }.count }
    }

    @Test func lateAnswerIsNotTakenForTheNextCommandWithItsOpcode() async throws {
        let lateRefusal = try await timeOutScanParametersWhileScanning()

        // Scanning is off now: the controller accepts the parameters, once its answer is released.
        controller.state.withLock { $0.holdAnswerTo = LESetScanParameters.opcode }
        let next = Task { try await hci.send(LESetScanParameters()) }
        // Either the command went out (its timeout armed) or it waits for the late answer (so does that wait).
        #expect(await eventually { !clock.pendingDeadlines.isEmpty })
        controller.inject(lateRefusal)
        #expect(await eventually { controller.isHoldingAnswer })
        controller.releaseHeldAnswer()
        try await next.value
        #expect(scanParametersSent == 2)
        await hci.close()
    }

    @Test func commandWhoseOpcodeOwesALateAnswerWaitsThenGoesOutWhenNoneComes() async throws {
        _ = try await timeOutScanParametersWhileScanning()
        let next = Task { try await hci.send(LESetScanParameters()) }
        #expect(await eventually { !clock.pendingDeadlines.isEmpty })
        // Other opcodes are not held up meanwhile.
        try await hci.send(LESetScanEnable(true))
        try await hci.send(LESetScanEnable(false))
        #expect(scanParametersSent == 1, "a command that could take the late answer for its own is not sent")
        // A further timeout without the late answer: it is taken as lost, the command goes out
        // and is answered (holding the opcode until a Reset would stop a node for good).
        clock.advance(by: .seconds(2))
        try await next.value
        #expect(scanParametersSent == 2)
        await hci.close()
    }

    /// A controller may answer with Num_HCI_Command_Packets = 0 and owes a later event that gives
    /// a credit back; one that never sends it held every later command, and so every procedure of
    /// the node, for ever (issue 38: the node stayed "running" while it could do nothing).
    @Test func aCreditTheControllerNeverGivesBackIsTakenAfterOneCommandTimeout() async throws {
        controller.state.withLock { $0.holdAnswerTo = LESetScanEnable.opcode }
        let answered = Task { try await hci.send(LESetScanEnable(false)) }
        #expect(await eventually { controller.isHoldingAnswer })
        var noCredit = try #require(controller.takeHeldAnswer())
        noCredit[3] = 0  // Command Complete's Num_HCI_Command_Packets
        controller.inject(noCredit)
        try await answered.value

        let next = Task { try await hci.send(LESetScanParameters()) }
        #expect(await eventually { await hci.commandsWaitingForCredit == 1 })
        #expect(scanParametersSent == 0, "a command went out without a credit")
        clock.advance(by: .seconds(1))
        #expect(await hci.commandsWaitingForCredit == 1, "the credit was taken before a whole command timeout")
        clock.advance(by: .seconds(1))
        #expect(await eventually(timeout: .seconds(3)) { scanParametersSent == 1 }, "the command still waits for a credit that never comes")
        try await next.value
        await hci.close()
    }

    @Test func resetEndsTheWaitForLateAnswers() async throws {
        _ = try await timeOutScanParametersWhileScanning()
        try await hci.send(Reset())
        // A controller that was reset answers nothing sent before: the next command goes out at once.
        try await hci.send(LESetScanParameters())
        #expect(scanParametersSent == 2)
        await hci.close()
    }
}
