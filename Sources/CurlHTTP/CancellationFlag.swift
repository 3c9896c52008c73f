import Synchronization

/// Set from a task's cancellation handler, read by libcurl's callbacks on the transfer thread.
final class CancellationFlag: Sendable {
    private let state = Atomic<Bool>(false)

    func cancel() { state.store(true, ordering: .relaxed) }

    var isCancelled: Bool { state.load(ordering: .relaxed) }
}
