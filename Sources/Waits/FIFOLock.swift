import Synchronization

/// Mutual exclusion for async work, granted in order of submission, as Linux runs its HCI
/// procedures on one worker (`hci_cmd_sync_queue`): the holder of the turn may await anything
/// without another holder's work coming in between. An urgent ticket goes before the waiting ones
/// that are not urgent, never before the holder.
///
/// A ticket is taken synchronously, so that a request made on an event path keeps its place
/// although its task starts later. A task cancelled while it waits leaves the queue (its ticket
/// must then not be finished), unless it waits through cancellation; the holder is never
/// interrupted here.
///
/// A class behind a mutex rather than an actor, so that a task's cancellation handler, which runs
/// synchronously on any thread, can take its ticket out at once.
public final class FIFOLock: Sendable {
    public struct Ticket: Hashable, Sendable {
        fileprivate let number: UInt64
    }

    private struct Waiter {
        let ticket: Ticket
        let urgent: Bool
        var continuation: CheckedContinuation<Bool, Never>?
    }

    private struct State {
        var issued: UInt64 = 0
        var running: Ticket?
        var waiting: [Waiter] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Takes a place in the queue, or the turn at once when nothing holds it or waits.
    public func submit(urgent: Bool = false) -> Ticket {
        state.withLock { state in
            state.issued += 1
            let ticket = Ticket(number: state.issued)
            if state.running == nil, state.waiting.isEmpty {
                state.running = ticket
            } else if urgent {
                let afterUrgent = state.waiting.firstIndex { !$0.urgent } ?? state.waiting.endIndex
                state.waiting.insert(Waiter(ticket: ticket, urgent: true), at: afterUrgent)
            } else {
                state.waiting.append(Waiter(ticket: ticket, urgent: false))
            }
            return ticket
        }
    }

    /// Returns once `ticket` holds the turn, or throws if the calling task is cancelled first; the
    /// ticket is then out of the queue (a turn it was given passes on) and must not be finished.
    public func awaitTurn(_ ticket: Ticket) async throws(CancellationError) {
        let admitted = await park(ifCancelled: false) { continuation in
            var passTurnTo: CheckedContinuation<Bool, Never>?
            let answer = state.withLock { state -> Bool? in
                if Task.isCancelled {
                    passTurnTo = Self.withdraw(ticket, from: &state)
                    return false
                }
                if state.running == ticket { return true }
                guard let index = state.waiting.firstIndex(where: { $0.ticket == ticket }) else { return false }
                state.waiting[index].continuation = continuation
                return nil
            }
            passTurnTo?.resume(returning: true)
            return answer
        } withdraw: {
            state.withLock { state in
                guard let index = state.waiting.firstIndex(where: { $0.ticket == ticket }),
                      let continuation = state.waiting[index].continuation else { return nil }
                state.waiting.remove(at: index)
                return continuation
            }
        }
        if !admitted { throw CancellationError() }
    }

    /// Ends the holder's turn and gives it to the next ticket.
    public func finish(_ ticket: Ticket) {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard state.running == ticket else { return nil }
            return Self.advance(&state)
        }
        next?.resume(returning: true)
    }

    /// Runs `body` in a turn of its own; throws `CancellationError` if cancelled while waiting.
    public func withTurn<T>(urgent: Bool = false, _ body: () async throws -> T) async throws -> T {
        let ticket = submit(urgent: urgent)
        try await awaitTurn(ticket)
        defer { finish(ticket) }
        return try await body()
    }

    /// Returns once `ticket` holds the turn, cancelled or not: for work that must keep its place
    /// and run whole although its caller gives up (the exposure check's turns). The work behind
    /// the ticket must end on its own, as nothing cuts this wait short.
    public func awaitTurnThroughCancellation(_ ticket: Ticket) async {
        _ = await parkThroughCancellation { continuation in
            state.withLock { state -> Bool? in
                if state.running == ticket { return true }
                guard let index = state.waiting.firstIndex(where: { $0.ticket == ticket }) else {
                    preconditionFailure("FIFOLock: a ticket was awaited after it was finished or withdrawn")
                }
                precondition(state.waiting[index].continuation == nil, "FIFOLock: a ticket was awaited twice")
                state.waiting[index].continuation = continuation
                return nil
            }
        }
    }

    /// Runs `body` in a turn of its own, waiting for the turn through a cancellation.
    @discardableResult
    public func withTurnThroughCancellation<T>(urgent: Bool = false, _ body: () async -> T) async -> T {
        let ticket = submit(urgent: urgent)
        await awaitTurnThroughCancellation(ticket)
        defer { finish(ticket) }
        return await body()
    }

    /// Tickets submitted and not yet holding the turn.
    public var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Waiting tickets whose task is parked in `awaitTurn` or `awaitTurnThroughCancellation`
    /// (tests wait for it, so that a cancellation reaches a parked waiter rather than the check
    /// before parking).
    public var parkedCount: Int { state.withLock { $0.waiting.count { $0.continuation != nil } } }

    /// Whether `ticket` holds the turn.
    public func isRunning(_ ticket: Ticket) -> Bool { state.withLock { $0.running == ticket } }

    /// Takes `ticket` out; returns the waiter the turn passed to, if the ticket held it.
    private static func withdraw(_ ticket: Ticket, from state: inout State) -> CheckedContinuation<Bool, Never>? {
        if state.running == ticket { return advance(&state) }  // given the turn, cancelled before it began
        state.waiting.removeAll { $0.ticket == ticket }
        return nil
    }

    /// Moves the turn to the first waiter; returns its continuation if it is already parked.
    private static func advance(_ state: inout State) -> CheckedContinuation<Bool, Never>? {
        guard !state.waiting.isEmpty else {
            state.running = nil
            return nil
        }
        let next = state.waiting.removeFirst()
        state.running = next.ticket
        return next.continuation
    }
}
