import ServerStorage
import Testing
import TestTiers

/// The waits of `serve` between retries of a failed publication or sync: short at first (most
/// outages are a restart), never longer than the cap however long the outage (the server must
/// catch up within it of the cause going), and short again after a success.
@Suite(.tags(.unit)) struct RetryBackoffTests {
    @Test func waitsDoubleUpToTheCapAndStartAgainAfterASuccess() {
        var backoff = RetryBackoff(first: .seconds(1), longest: .seconds(10))
        let waits = (0..<6).map { _ in backoff.next() }
        #expect(waits == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
        backoff.reset()
        #expect(backoff.next() == .seconds(1))
        // A cap below the first wait is the first wait: never a retry sooner than asked.
        var capped = RetryBackoff(first: .seconds(5), longest: .seconds(1))
        #expect(capped.next() == .seconds(5) && capped.next() == .seconds(5))
    }
}
