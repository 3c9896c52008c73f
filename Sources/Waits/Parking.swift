import Synchronization

/// Tasks parked in one primitive, in the order they came, each under a number its cancellation
/// handler finds it by. Kept inside the primitive's own mutex, beside the state it waits on.
struct ParkedTasks<Value: Sendable> {
    private var parked: [(number: UInt64, continuation: CheckedContinuation<Value, Never>)] = []

    var count: Int { parked.count }

    mutating func park(_ number: UInt64, _ continuation: CheckedContinuation<Value, Never>) {
        parked.append((number, continuation))
    }

    /// The continuation parked under `number`, if it is still there.
    mutating func remove(_ number: UInt64) -> CheckedContinuation<Value, Never>? {
        guard let index = parked.firstIndex(where: { $0.number == number }) else { return nil }
        return parked.remove(at: index).continuation
    }

    mutating func removeFirst() -> CheckedContinuation<Value, Never>? {
        parked.isEmpty ? nil : parked.removeFirst().continuation
    }

    /// Every continuation, earliest first.
    mutating func removeAll() -> [CheckedContinuation<Value, Never>] {
        defer { parked = [] }
        return parked.map(\.continuation)
    }
}

private let parkingNumbers = Atomic<UInt64>(0)

/// A number no other parked task of the process has.
func newParkingNumber() -> UInt64 { parkingNumbers.wrappingAdd(1, ordering: .relaxed).newValue }

/// The one way the kit suspends a task. `enroll` runs in the continuation's body and, under the
/// primitive's lock, answers at once (the value is ready, or `Task.isCancelled`) or parks the
/// continuation and answers nil. `withdraw` runs in the cancellation handler and takes the parked
/// continuation back under the same lock if nothing resumed it yet.
///
/// Exactly one resume: a cancellation sets the task's flag before its handler runs, so either the
/// handler takes the lock first and finds nothing (then `enroll` sees the flag, under the lock, and
/// does not park), or `enroll` parked first and the handler or the primitive, whichever takes the
/// lock first, removes the continuation and resumes it; the other finds it gone.
func park<Value: Sendable>(
    ifCancelled: Value,
    enroll: (CheckedContinuation<Value, Never>) -> Value?,
    withdraw: @Sendable () -> CheckedContinuation<Value, Never>?
) async -> Value {
    await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            if let answer = enroll(continuation) { continuation.resume(returning: answer) }
        }
    } onCancel: {
        withdraw()?.resume(returning: ifCancelled)
    }
}

/// `park` for a wait that outlasts its task's cancellation: no handler takes the continuation
/// back, so only the primitive resumes it. The primitive's owner must end every such wait in
/// bounded time (a timeout, the transport's end), as nothing else will.
func parkThroughCancellation<Value: Sendable>(
    enroll: (CheckedContinuation<Value, Never>) -> Value?
) async -> Value {
    await withCheckedContinuation { continuation in
        if let answer = enroll(continuation) { continuation.resume(returning: answer) }
    }
}
