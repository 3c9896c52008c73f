import Crypto
import Foundation
import PositiveListFormat
import PositiveListServer
import PostgresServerStore
import ServerStorage
import Synchronization
import Testing
import TestTiers
import TracerCore
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A scratch server (ServerFixture: data directory, signing key, clock) whose data lives in a
/// fresh PostgreSQL 15 started for the test, with as many stores (connection pools, as separate
/// `serve` instances would have) as the test asks for.
package struct PostgresFixture {
    package let server: ServerFixture
    package let postgres: PostgresProcess
    package let url: String
    package let stores: [PostgresServerStore]

    /// False when the PostgreSQL server is the caller's (``make(database:on:stores:)``).
    package var ownsPostgres = true

    package static func make(stores count: Int = 1) async throws -> PostgresFixture {
        let postgres = try PostgresProcess()
        do {
            return try await make(database: "tracer", on: postgres, stores: count, ownsPostgres: true)
        } catch {
            postgres.stop(keepDirectory: true)
            throw error
        }
    }

    /// A fixture whose data is `database`, created on `postgres`, a server the caller keeps
    /// running for several tests (one cluster, a database each): `remove()` leaves it running.
    package static func make(database: String, on postgres: PostgresProcess, stores count: Int = 1) async throws -> PostgresFixture {
        try await make(database: database, on: postgres, stores: count, ownsPostgres: false)
    }

    private static func make(database: String, on postgres: PostgresProcess, stores count: Int, ownsPostgres: Bool) async throws -> PostgresFixture {
        let server = try ServerFixture()
        do {
            let url = try postgres.createDatabase(database)
            var stores: [PostgresServerStore] = []
            for _ in 0..<count {
                stores.append(try await PostgresServerStore.open(settings: PostgresSettings(connection: url, password: nil), publishedDirectory: server.paths.published, poolSize: 4))
            }
            return PostgresFixture(server: server, postgres: postgres, url: url, stores: stores, ownsPostgres: ownsPostgres)
        } catch {
            server.remove()
            throw error
        }
    }

    package var store: PostgresServerStore { stores[0] }

    package func remove() {
        if ownsPostgres { postgres.stop() }
        server.remove()
    }

    /// `idPublicationDelaySeconds` is 0 unless a test is about that rule, as in ServerFixture.
    package func publisher(
        _ store: PostgresServerStore? = nil, faultInjection: Publisher.FaultInjection? = nil, idPublicationDelaySeconds: Int64 = 0
    ) -> Publisher {
        Publisher(
            store: store ?? self.store, directory: server.paths.published,
            signingKey: server.signingKey, retentionSeconds: server.configuration.retentionSeconds,
            idPublicationDelaySeconds: idPublicationDelaySeconds, clock: server.clock, logger: server.logs.logger, faultInjection: faultInjection)
    }

    package func entries(count: Int, seed: UInt64, endingAt end: UnixSeconds = ServerFixture.start) throws -> [PositiveListEntry] {
        try HistoryRules(server.configuration)
            .validate(SubmittedHistory(ids: Histories.entries(count: count, endingAt: end, seed: seed)), now: server.clock.now())
    }

    /// Every id of every batch the verified index lists, repeated ones included.
    package func publishedIDs() throws -> [UInt64] {
        try server.verifiedBatches().flatMap { batch in batch.entries.map(\.id.rawValue) }
    }
}


/// One PostgreSQL cluster for the cases of one parameterized test, which run one after another
/// (their suite is serialized), each on a database of its own: `initdb` and the first start once
/// for all of them, not once a case. A case stops and starts the cluster as if it were its own
/// (``ServerOutageTests/PostgresServe``); the next case starts it again if a failed one left it
/// down. Made by the first case that asks (so that a missing PostgreSQL skips the case, as
/// `RequiredTool` does), stopped and removed after the last: the `.sharedPostgreSQLCluster` trait.
package final class SharedPostgresCluster: Sendable {
    @TaskLocal package static var current: SharedPostgresCluster?

    private let postgres = Mutex<PostgresProcess?>(nil)

    /// The cluster, running: started (again) if it is not.
    package func running() throws -> PostgresProcess {
        try postgres.withLock { postgres in
            if let running = postgres, running.isRunning { return running }
            let started = try postgres.map { try PostgresProcess(directory: $0.directory, port: $0.port) } ?? PostgresProcess()
            postgres = started
            return started
        }
    }

    /// A case started the cluster again: this process is the cluster from now on.
    package func replace(with process: PostgresProcess) { postgres.withLock { $0 = process } }

    package func remove() { postgres.withLock { $0?.stop() } }
}

/// Gives the cases of a parameterized test one ``SharedPostgresCluster`` (its scope is the whole
/// test function, not each case).
package struct SharedPostgresClusterTrait: TestTrait, TestScoping {
    package func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? { testCase == nil ? self : nil }

    package func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let cluster = SharedPostgresCluster()
        defer { cluster.remove() }
        try await SharedPostgresCluster.$current.withValue(cluster) { try await function() }
    }
}

package extension Trait where Self == SharedPostgresClusterTrait {
    static var sharedPostgreSQLCluster: Self { Self() }
}
