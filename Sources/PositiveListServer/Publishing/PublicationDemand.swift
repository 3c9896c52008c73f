import Waits

/// Asks the one publisher of a running server (its ``PublishScheduler``) to publish soon: an
/// accepted upload whose ids may be published should reach nodes in minutes, not at the next
/// hourly tick. Requests only count; the scheduler alone decides when to publish, so two
/// publications never run at once and a flood of uploads costs one publication per spacing, not
/// one per upload.
public actor PublicationDemand {
    private let requests = EventCount()
    /// The request count at the scheduler's last ``takeRequest()``: a request is pending while
    /// the count has moved past it.
    private var taken: UInt64 = 0

    public init() {}

    /// Counts a request and wakes the scheduler if it waits. Callable from anywhere without
    /// waiting: an upload's answer must not wait for a publication.
    public nonisolated func request() {
        requests.announce()
    }

    /// Returns at `deadline` (on the scheduler's clock), at a request (or at once if one is
    /// pending), or when the task is cancelled; the request stays pending for ``takeRequest()``.
    func wait(until deadline: Deadline) async {
        await requests.wait(past: taken, until: deadline)
    }

    /// True, and no longer pending, when a publication was requested since the last call.
    func takeRequest() -> Bool {
        let count = requests.count
        defer { taken = count }
        return count != taken
    }
}
