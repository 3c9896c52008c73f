import GATTExchange
import Testing
import TestTiers

/// The wait before the session after a controller reset.
@Suite(.tags(.unit)) struct ResetBackoffTests {
    /// Resets of sessions that never exchanged come faster than the controller recovers: they
    /// slow down, doubling up to the maximum.
    @Test func barrenSessionsDoubleTheWaitUpToTheMaximum() {
        var backoff = ResetBackoff(maximum: .milliseconds(1500))
        let waits = (0..<6).map { _ in backoff.wait(afterSessionOf: .seconds(2), exchanges: 0) }
        #expect(waits == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .milliseconds(1500), .milliseconds(1500)])
    }

    /// A session that completed an exchange, or ran 10 s, showed the controller working: the
    /// wait after it is the shortest again (a node reset four times in ten seconds, exchanging
    /// between the resets, was silent for 2.5 s when these counted as a reset loop).
    @Test func aSessionThatExchangedOrRanLongStartsTheWaitOver() {
        var backoff = ResetBackoff(maximum: .milliseconds(1500))
        for _ in 0..<4 { _ = backoff.wait(afterSessionOf: .seconds(1), exchanges: 0) }
        #expect(backoff.wait(afterSessionOf: .seconds(3), exchanges: 12) == .milliseconds(100))
        #expect(backoff.wait(afterSessionOf: .seconds(3), exchanges: 1) == .milliseconds(100))
        #expect(backoff.wait(afterSessionOf: .seconds(1), exchanges: 0) == .milliseconds(200))
        #expect(backoff.wait(afterSessionOf: .seconds(11), exchanges: 0) == .milliseconds(100))
    }
}
