import Dispatch
import ServerStorage
import Synchronization
import Waits

/// A few PostgreSQL connections, each with its own serial queue: libpq blocks, so its calls run
/// there and Swift's cooperative threads only wait (suspended) for the answer.
///
/// A caller gets one connection for one closure (usually a whole transaction); when every
/// connection is busy it waits, suspended, for the next one released. A connection that broke
/// is replaced at its next use, through the pool's ``ReconnectGate``: while the database is down,
/// new connections are tried at most at its back-off, not once per request.
final class PostgresConnectionPool: Sendable {
    private let settings: PostgresSettings
    /// A caller waits for its slot through a cancellation: a transaction asked for runs whole.
    private let slots: ResourcePool<PostgresConnectionSlot>
    private let gate = ReconnectGate()
    private let size: Int

    init(settings: PostgresSettings, size: Int) {
        self.settings = settings
        self.size = max(size, 1)
        slots = ResourcePool((0..<max(size, 1)).map { PostgresConnectionSlot(label: "tracer-server.postgres.\($0)") })
    }

    /// The pool's connections and how many are idle, and the callers waiting for one (metrics).
    var usage: ConnectionPoolUsage {
        let (idle, waiting) = slots.occupancy
        return ConnectionPoolUsage(size: size, idle: idle, waiting: waiting)
    }

    /// Runs `body` on a connection of the pool, off the cooperative thread pool.
    func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws -> T
    ) async throws -> T {
        try await slots.withResource { slot in try await slot.run(settings: settings, gate: gate, body) }
    }
}

/// How to reach the database: libpq keywords and values, the password among them if any.
/// Its description leaves the password out, so it may be logged.
public struct PostgresSettings: Sendable, CustomStringConvertible {
    /// A `postgresql://` URL or a libpq conninfo string, without a password.
    public let connection: String
    let password: String?

    public init(connection: String, password: String?) {
        self.connection = connection
        self.password = password
    }

    var keywordsAndValues: [(String, String)] {
        // Notices (such as "relation already exists, skipping" from an idempotent migration
        // step) would go to stderr through libpq's default handler; warnings still do.
        var pairs = [
            ("dbname", connection), ("application_name", "tracer-server"), ("connect_timeout", "10"),
            ("options", "-c client_min_messages=warning"),
        ]
        if let password { pairs.append(("password", password)) }
        return pairs
    }

    public var description: String { connection + (password == nil ? "" : " (password given separately)") }
}

/// One connection and the serial queue it is used on.
///
/// `@unchecked Sendable` is safe: `connection` is read and written only by blocks on `queue`,
/// which is serial, and the pool hands a slot to one caller at a time.
final class PostgresConnectionSlot: @unchecked Sendable {
    private let queue: DispatchQueue
    private var connection: PostgresConnection?

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func run<T: Sendable>(
        settings: PostgresSettings, gate: ReconnectGate? = nil, _ body: @escaping @Sendable (PostgresConnection) throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do {
                    if let connection = self.connection, !connection.isHealthy { self.connection = nil }
                    let connection = try self.connection ?? gate.map { try $0.connect(settings) } ?? PostgresConnection(settings: settings.keywordsAndValues)
                    self.connection = connection
                    continuation.resume(returning: try body(connection))
                } catch {
                    if let connection = self.connection, !connection.isHealthy { self.connection = nil }
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Closes the connection (a session-level advisory lock it holds goes with it).
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.connection = nil
                continuation.resume()
            }
        }
    }
}

/// When a pool may try to connect again after a connection attempt failed: 1 s later, then twice
/// as long after each failure in a row, up to `longest` (10 s), and at once after a success. A
/// request meanwhile is refused at once with the last failure (the client is answered 503 with
/// Retry-After), so a database that is down or starting is not met by one connection attempt per
/// request, and once it is back the pool is connected again within `longest`.
final class ReconnectGate: Sendable {
    private struct State {
        var backoff: RetryBackoff
        var notBefore: ContinuousClock.Instant?
        var lastFailure: PostgresError?
    }

    private let state: Mutex<State>

    init(longest: Duration = .seconds(ServerStoreError.retryAfterSeconds)) {
        state = Mutex(State(backoff: RetryBackoff(first: .seconds(1), longest: longest)))
    }

    /// A new connection, unless the last attempt failed less than the back-off ago.
    func connect(_ settings: PostgresSettings) throws(PostgresError) -> PostgresConnection {
        let refusal: PostgresError? = state.withLock { state in
            guard let notBefore = state.notBefore, let last = state.lastFailure, ContinuousClock.now < notBefore else { return nil }
            let seconds = max((notBefore - .now).components.seconds, 1)
            return PostgresError(
                context: last.context, sqlState: last.sqlState, message: last.message + " (not tried again for \(seconds) s)")
        }
        if let refusal { throw refusal }
        do {
            let connection = try PostgresConnection(settings: settings.keywordsAndValues)
            state.withLock { state in
                state.backoff.reset()
                state.notBefore = nil
                state.lastFailure = nil
            }
            return connection
        } catch {
            state.withLock { state in
                state.notBefore = .now + state.backoff.next()
                state.lastFailure = error
            }
            throw error
        }
    }
}
