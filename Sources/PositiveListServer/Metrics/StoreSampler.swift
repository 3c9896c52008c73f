import ServerStorage
import Synchronization
import Waits

/// What a scrape says of the store: whether it answered and, if so, its unused upload codes.
///
/// Each scrape would otherwise query the database itself, with no bound on how long that takes:
/// with the database down or locked a scrape could outlast Prometheus's timeout, so that
/// `store_up 0` never showed. Here one reading is in flight at most (scrapes that come while it
/// runs wait for it), a reading is reused for `maxAge`, and a scrape waits `deadline` at most:
/// a reading not back by then counts as the store down (the reading goes on, and the next scrape
/// waits for it again rather than starting another).
package final class StoreSampler: Sendable {
    package enum Reading: Sendable, Equatable {
        case up(UploadCodeCounts)
        case down
    }

    private struct State {
        var last: (at: ContinuousClock.Instant, reading: Reading)?
        /// The reading in flight, which every scrape meanwhile waits for.
        var inFlight: OnceSignal<Reading>?
    }

    private let read: @Sendable () async throws -> UploadCodeCounts
    private let deadline: Duration
    private let maxAge: Duration
    private let state = Mutex(State())

    /// `read` asks the store (``SubmissionStore/uploadCodeCounts(now:)``); an error is a
    /// store down.
    package init(deadline: Duration = .seconds(2), maxAge: Duration = .seconds(5), read: @escaping @Sendable () async throws -> UploadCodeCounts) {
        self.read = read
        self.deadline = deadline
        self.maxAge = maxAge
    }

    /// The latest reading if younger than `maxAge`, else the one in flight or a new one, or
    /// `.down` when it is not back within `deadline`.
    package func sample() async -> Reading {
        let now = ContinuousClock.now
        if let last = state.withLock({ $0.last }), now - last.at < maxAge { return last.reading }
        let (reading, start) = state.withLock { state in
            if let inFlight = state.inFlight { return (inFlight, false) }
            let reading = OnceSignal<Reading>()
            state.inFlight = reading
            return (reading, true)
        }
        if start {
            Task {
                let result: Reading
                do { result = .up(try await read()) } catch { result = .down }
                finish(reading, with: result)
            }
        }
        // A scrape cancelled or out of time reads the store as down; the reading goes on.
        let answer = await withDeadline(Deadline(now + deadline, on: ContinuousClock())) { await reading.wait() }
        return answer.flatMap { $0 } ?? .down
    }

    private func finish(_ reading: OnceSignal<Reading>, with result: Reading) {
        state.withLock { state in
            state.last = (ContinuousClock.now, result)
            state.inFlight = nil
        }
        reading.fire(result)
    }
}
