import BLEHost
import TestTiers

/// Collects every event from a stream so that a test can wait for one that matches.
actor EventRecorder {
    private(set) var events: [HCIEvent] = []

    init(_ stream: AsyncStream<HCIEvent>) {
        Task { [weak self] in
            for await event in stream { await self?.record(event) }
        }
    }

    private func record(_ event: HCIEvent) { events.append(event) }

    /// The first recorded event for which `extract` returns a value, waiting up to `timeout`.
    func first<Value: Sendable>(timeout: Duration, _ extract: @Sendable (HCIEvent) -> Value?) async -> Value? {
        var match: Value?
        _ = await eventually(timeout: timeout, every: .milliseconds(10)) {
            match = events.lazy.compactMap(extract).first
            return match != nil
        }
        return match
    }
}
