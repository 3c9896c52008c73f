import PositiveListServer
import TracerCore
import Waits

/// Counts failed credential attempts per client address over a sliding minute; past the limit
/// the address is refused until its oldest failure leaves the window. Guessing a 59-bit code at
/// 10 tries a minute would take longer than the universe has existed.
///
/// Checking a credential needs an awaited database lookup, so "is there budget left?" and "this
/// attempt failed" cannot be two separate steps: 200 guesses released at once would all pass the
/// first before any reached the second. Instead each check holds one unit of the budget from
/// ``admit(_:)`` until ``settle(_:failed:)``, and the actor is the only owner of that state. A
/// check that finds the budget held by checks still in flight waits for them rather than being
/// refused, so an authority sending many valid requests at once is only slowed, never turned
/// away, while wrong guesses get at most `limit` answers a minute.
package actor FailedAttemptLimiter {
    /// A held unit of an address's budget; settle it exactly once.
    package struct Ticket: Sendable {
        fileprivate let address: String
    }

    package enum Admission: Sendable {
        case admitted(Ticket)
        /// Seconds until the address may try again.
        case refused(retryAfterSeconds: Int)
    }

    private struct AddressState {
        var failures: [UnixSeconds] = []
        var checksInFlight = 0
        /// Announced at each settle: checks waiting for a unit look again then.
        let settled = EventCount()

        var isIdle: Bool { failures.isEmpty && checksInFlight == 0 && settled.waiterCount == 0 }
    }

    private let limit: Int
    private let windowSeconds: UnixSeconds = 60
    private let clock: any WallClock
    private var addresses: [String: AddressState] = [:]
    /// Bounds memory when many addresses fail once: beyond this, idle addresses are dropped.
    private let pruneThreshold = 10_000

    package init(limitPerMinute: Int, clock: any WallClock) {
        self.limit = limitPerMinute
        self.clock = clock
    }

    /// Takes one unit of `address`'s budget for a credential check, waiting while checks in
    /// flight hold the rest; refused once the failures of the last minute used it all up, or
    /// when the request's task is cancelled while it waits (nobody is left to answer).
    package func admit(_ address: String) async -> Admission {
        while true {
            let now = clock.now()
            var state = addresses[address] ?? AddressState()
            state.failures.removeAll { $0 <= now - windowSeconds }
            if state.failures.count >= limit, let oldest = state.failures.first {
                addresses[address] = state
                return .refused(retryAfterSeconds: Int(max(1, oldest + windowSeconds - now)))
            }
            if state.failures.count + state.checksInFlight < limit {
                state.checksInFlight += 1
                addresses[address] = state
                return .admitted(Ticket(address: address))
            }
            // Every unit left is held by a check in flight: whether this one may go depends on
            // how those end. Wait for the next to settle, then look again.
            let seen = state.settled.count
            addresses[address] = state
            guard await state.settled.wait(past: seen) else { return .refused(retryAfterSeconds: 1) }
        }
    }

    /// Ends a check: a failure keeps its unit used for a minute, a success gives it back.
    package func settle(_ ticket: Ticket, failed: Bool) {
        guard var state = addresses[ticket.address] else { return }
        state.checksInFlight -= 1
        if failed { state.failures.append(clock.now()) }
        // All waiters look again; each either takes the freed unit, waits more, or is refused.
        state.settled.announce()
        addresses[ticket.address] = state.isIdle ? nil : state
        pruneIfLarge()
    }

    /// A failure found outside a check (an upload code spent by a concurrent request between
    /// its check and the commit): it counts, but no budget was held for it.
    func recordFailure(_ address: String) {
        addresses[address, default: AddressState()].failures.append(clock.now())
        pruneIfLarge()
    }

    private func pruneIfLarge() {
        guard addresses.count > pruneThreshold else { return }
        let now = clock.now()
        addresses = addresses.compactMapValues { state in
            var state = state
            state.failures.removeAll { $0 <= now - windowSeconds }
            return state.isIdle ? nil : state
        }
    }
}
