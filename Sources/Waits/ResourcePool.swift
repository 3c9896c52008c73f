import Synchronization

/// A few interchangeable resources (a database pool's connections), each lent to one caller at a
/// time; when none is idle, callers wait, suspended, and get the next one given back in the order
/// they came.
///
/// A wait here outlasts its task's cancellation: the caller has asked for work that must run whole
/// once begun (a transaction), and a resource comes back as soon as its holder's work ends.
public final class ResourcePool<Resource: Sendable>: Sendable {
    private struct State {
        var idle: [Resource]
        var waiters = ParkedTasks<Resource>()
    }

    private let state: Mutex<State>

    public init(_ resources: [Resource]) { state = Mutex(State(idle: resources)) }

    /// Resources no caller holds now, and callers waiting for one, read together (a metric).
    public var occupancy: (idle: Int, waiting: Int) { state.withLock { ($0.idle.count, $0.waiters.count) } }

    /// Callers waiting for a resource now: a test's sign that a caller is parked.
    public var waiterCount: Int { state.withLock { $0.waiters.count } }

    /// An idle resource, or the next one given back; the caller must give it back.
    public func take() async -> Resource {
        let number = newParkingNumber()
        return await parkThroughCancellation { continuation in
            state.withLock { state -> Resource? in
                if let resource = state.idle.popLast() { return resource }
                state.waiters.park(number, continuation)
                return nil
            }
        }
    }

    /// Hands `resource` to the first waiter, or keeps it idle when nobody waits.
    public func giveBack(_ resource: Resource) {
        let waiter = state.withLock { state -> CheckedContinuation<Resource, Never>? in
            if let waiter = state.waiters.removeFirst() { return waiter }
            state.idle.append(resource)
            return nil
        }
        waiter?.resume(returning: resource)
    }

    /// Runs `body` with a resource of the pool, given back when it ends.
    public func withResource<T>(_ body: (Resource) async throws -> T) async rethrows -> T {
        let resource = await take()
        defer { giveBack(resource) }
        return try await body(resource)
    }
}
