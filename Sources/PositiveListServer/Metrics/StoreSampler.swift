import Synchronization

/// What a scrape says of the store: whether it answered and, if so, its unused upload codes.
///
/// Each scrape would otherwise query the database itself, with no bound on how long that takes:
/// with the database down or locked a scrape could outlast Prometheus's timeout, so that
/// `store_up 0` never showed. Here one reading is in flight at most (scrapes that come while it
/// runs wait for it), a reading is reused for `maxAge`, and a scrape waits `deadline` at most:
/// a reading not back by then counts as the store down (the reading goes on, and the next scrape
/// waits for it again rather than starting another).
final class StoreSampler: Sendable {
    enum Reading: Sendable, Equatable {
        case up(UploadCodeCounts)
        case down
    }

    private struct State {
        var last: (at: ContinuousClock.Instant, reading: Reading)?
        var running = false
        var waiters: [UInt64: CheckedContinuation<Reading, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let read: @Sendable () async throws -> UploadCodeCounts
    private let deadline: Duration
    private let maxAge: Duration
    private let state = Mutex(State())

    /// `read` asks the store (``SubmissionStore/uploadCodeCounts(now:)``); an error is a
    /// store down.
    init(deadline: Duration = .seconds(2), maxAge: Duration = .seconds(5), read: @escaping @Sendable () async throws -> UploadCodeCounts) {
        self.read = read
        self.deadline = deadline
        self.maxAge = maxAge
    }

    /// The latest reading if younger than `maxAge`, else the one in flight or a new one, or
    /// `.down` when it is not back within `deadline`.
    func sample() async -> Reading {
        let now = ContinuousClock.now
        if let last = state.withLock({ $0.last }), now - last.at < maxAge { return last.reading }
        return await withCheckedContinuation { continuation in
            let (waiter, start) = state.withLock { state in
                let waiter = state.nextWaiter
                state.nextWaiter += 1
                state.waiters[waiter] = continuation
                defer { state.running = true }
                return (waiter, !state.running)
            }
            if start {
                Task {
                    let reading: Reading
                    do { reading = .up(try await read()) } catch { reading = .down }
                    finish(reading)
                }
            }
            Task { [deadline] in
                try? await Task.sleep(for: deadline)
                state.withLock { $0.waiters.removeValue(forKey: waiter) }?.resume(returning: .down)
            }
        }
    }

    private func finish(_ reading: Reading) {
        let waiters = state.withLock { state in
            state.last = (ContinuousClock.now, reading)
            state.running = false
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: reading) }
    }
}
