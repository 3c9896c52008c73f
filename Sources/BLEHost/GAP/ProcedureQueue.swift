import Synchronization

/// LEHost's GAP procedures, one at a time in order of submission, as Linux runs them on one
/// worker (`hci_cmd_sync_queue`): a procedure sends its commands and awaits their completions (and,
/// for a connection attempt, the attempt's end) before the next one starts, so that no await
/// inside it lets another procedure's commands in between. An urgent procedure (an address change)
/// goes before those still waiting, never before the one running.
///
/// A ticket is taken when the procedure is submitted, so that a request made on the event path
/// keeps its place although its task starts later. Cancelling the task of a waiting procedure
/// takes it out of the queue; a running one is never interrupted here (its owner decides what
/// cleanup it still owes the controller).
///
/// A class behind a mutex rather than actor state, so that a task's cancellation handler, which
/// runs synchronously on any thread, can take its ticket out at once.
final class ProcedureQueue: Sendable {
    struct Ticket: Hashable, Sendable {
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

    /// Takes a place in the queue, or the turn at once when nothing runs or waits.
    func submit(urgent: Bool = false) -> Ticket {
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

    /// Returns once it is `ticket`'s turn, or throws if the calling task is cancelled first; the
    /// ticket is then out of the queue and must not be finished.
    func awaitTurn(_ ticket: Ticket) async throws(CancellationError) {
        let admitted = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                enum Decision { case run, wait, cancelled(passTurnTo: CheckedContinuation<Bool, Never>?) }
                // Under the lock, so that a cancellation is seen either here or by the handler.
                let decision = state.withLock { state -> Decision in
                    if Task.isCancelled { return .cancelled(passTurnTo: Self.withdraw(ticket, from: &state)) }
                    if state.running == ticket { return .run }
                    guard let index = state.waiting.firstIndex(where: { $0.ticket == ticket }) else {
                        return .cancelled(passTurnTo: nil)
                    }
                    state.waiting[index].continuation = continuation
                    return .wait
                }
                switch decision {
                case .run: continuation.resume(returning: true)
                case .wait: break
                case .cancelled(let next):
                    next?.resume(returning: true)
                    continuation.resume(returning: false)
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard let index = state.waiting.firstIndex(where: { $0.ticket == ticket }),
                      let continuation = state.waiting[index].continuation else { return nil }
                state.waiting.remove(at: index)
                return continuation
            }
            waiter?.resume(returning: false)
        }
        if !admitted { throw CancellationError() }
    }

    /// Ends the running procedure and gives the turn to the next one.
    func finish(_ ticket: Ticket) {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard state.running == ticket else { return nil }
            return Self.advance(&state)
        }
        next?.resume(returning: true)
    }

    /// Procedures submitted and not yet running, for tests and diagnostics.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Whether `ticket` holds the turn.
    func isRunning(_ ticket: Ticket) -> Bool { state.withLock { $0.running == ticket } }

    /// Takes `ticket` out; returns the waiter the turn passed to, if the ticket held it.
    private static func withdraw(_ ticket: Ticket, from state: inout State) -> CheckedContinuation<Bool, Never>? {
        if state.running == ticket { return advance(&state) }  // given the turn, cancelled before it began
        state.waiting.removeAll { $0.ticket == ticket }
        return nil
    }

    /// Moves the turn to the first waiter; returns its continuation if it is already waiting.
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
