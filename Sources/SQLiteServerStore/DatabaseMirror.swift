import GRDB
import Synchronization

/// A value held in memory that mirrors part of the database, brought up to date inside the
/// write transaction that uses it whenever it may be stale:
/// - another connection (a `tracer-server append` or `publish` process next to the server)
///   committed something: `PRAGMA data_version` changes exactly then;
/// - this connection changed what it mirrors other than through ``update(_:)``: it calls
///   ``invalidate()``.
/// Use it only inside a write transaction (BEGIN IMMEDIATE), so that no other connection can
/// commit between the check and the use.
final class DatabaseMirror<Value: Sendable>: Sendable {
    private struct State {
        var value: Value
        /// `PRAGMA data_version` when `value` last matched the database; nil when it must be
        /// brought up to date.
        var dataVersion: Int64?
    }

    private let state: Mutex<State>
    private let bringUpToDate: @Sendable (inout Value, Database) throws -> Void

    init(_ initial: Value, bringUpToDate: @escaping @Sendable (inout Value, Database) throws -> Void) {
        state = Mutex(State(value: initial, dataVersion: nil))
        self.bringUpToDate = bringUpToDate
    }

    /// Runs `body` with the value as of the current write transaction, whose
    /// `db.dataVersion()` is `dataVersion` (read once per transaction by the caller).
    func withCurrentValue<T>(_ db: Database, dataVersion: Int64, _ body: (Value) throws -> T) throws -> T {
        try state.withLock { state in
            if state.dataVersion != dataVersion {
                // A failure leaves the version unset, so the next use tries again.
                state.dataVersion = nil
                try bringUpToDate(&state.value, db)
                state.dataVersion = dataVersion
            }
            return try body(state.value)
        }
    }

    /// Changes the value the way this connection just changed the database (after its commit).
    func update(_ change: (inout Value) -> Void) {
        state.withLock { change(&$0.value) }
    }

    /// Marks the value as possibly stale; the next use brings it up to date.
    func invalidate() {
        state.withLock { $0.dataVersion = nil }
    }
}

extension Database {
    /// `PRAGMA data_version`: changes exactly when another connection committed.
    func dataVersion() throws -> Int64 {
        try Int64.fetchOne(self, sql: "PRAGMA data_version") ?? 0
    }
}
