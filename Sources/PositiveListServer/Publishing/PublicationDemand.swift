/// Asks the one publisher of a running server (its ``PublishScheduler``) to publish soon: an
/// accepted upload whose ids may be published should reach nodes in minutes, not at the next
/// hourly tick. Requests only raise a flag; the scheduler alone decides when to publish, so
/// two publications never run at once and a flood of uploads costs one publication per
/// spacing, not one per upload.
public actor PublicationDemand {
    private var requested = false
    private var waiter: CheckedContinuation<Void, Never>?

    public init() {}

    /// Raises the flag and wakes the scheduler if it waits. Callable from anywhere without
    /// waiting: an upload's answer must not wait for a publication.
    public nonisolated func request() {
        Task { await self.raise() }
    }

    private func raise() {
        requested = true
        wake()
    }

    private func wake() {
        waiter?.resume()
        waiter = nil
    }

    /// Returns at `deadline`, at a request (or at once if one is pending), or when the task is
    /// cancelled; the flag stays raised for ``takeRequest()``.
    func wait(until deadline: ContinuousClock.Instant) async {
        guard !requested, !Task.isCancelled else { return }
        // A timer cancelled because the wait ended otherwise must not wake the next wait.
        let timer = Task { [weak self] in
            do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }
            await self?.wake()
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in waiter = continuation }
        } onCancel: {
            Task { await self.wake() }
        }
    }

    /// True, and lowers the flag, when a publication was requested since the last call.
    func takeRequest() -> Bool {
        defer { requested = false }
        return requested
    }
}
