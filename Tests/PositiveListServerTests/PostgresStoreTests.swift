import Crypto
import Foundation
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
@testable import PostgresServerStore
import ServerStorage
import Synchronization
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite(.tags(.integration), .serialized) struct PostgresStoreTests {
    static let authority = SubmissionCredential.authority(name: "Health Authority A")

    @Test func aNewerSchemaIsRefusedAndReopeningMigratesNothing() async throws {
        let fixture = try await PostgresFixture.make()
        defer { fixture.remove() }
        let settings = PostgresSettings(connection: fixture.url, password: nil)
        #expect(try await PostgresServerStore.schemaVersion(settings: settings) == PostgresServerStore.knownSchemaVersion)
        _ = try await PostgresServerStore.open(settings: settings, publishedDirectory: fixture.server.paths.published)
        _ = try await fixture.store.run { connection in
            try connection.exec("INSERT INTO tracer_schema_migrations (version, name) VALUES (99, 'from the future')")
        }
        await #expect(throws: ServerStoreError.self) { _ = try await PostgresServerStore.open(settings: settings, publishedDirectory: fixture.server.paths.published) }
        // A wrong port gives a connection error with its SQLSTATE class, not a crash.
        let nowhere = PostgresSettings(connection: "postgresql://postgres@127.0.0.1:\(try LoopbackPort.free())/tracer", password: nil)
        do {
            _ = try await PostgresServerStore.schemaVersion(settings: nowhere)
            Issue.record("connected to nothing")
        } catch {
            guard case .postgres(let failure) = error else { Issue.record("unexpected \(error)"); return }
            #expect(failure.isConnectionFailure)
        }
    }

    /// Two stores (two instances' pools) upload at once with the same codes and overlapping ids
    /// while a publisher runs: each code is used once, each accepted id counted new once and
    /// published exactly once.
    @Test func twoInstancesHammeringTheSameCodesUseEachOnceAndPublishEveryIdOnce() async throws {
        let fixture = try await PostgresFixture.make(stores: 2)
        defer { fixture.remove() }
        let now = fixture.server.clock.now()
        let codes = (0..<24).map { _ in UploadCode.generate() }
        for code in codes {
            try await fixture.store.recordIssuedCode(code, authority: "Health Authority B", issuedAt: now, expiresAt: now + 3_600)
        }
        // Attempt i of instance s: code i % 24 with its own ids, every third history also
        // repeating ids of a shared pool that both instances send.
        let shared = try fixture.entries(count: 40, seed: 999)
        struct Attempt: Sendable { let instance: Int; let code: Int?; let entries: [PositiveListEntry] }
        var attempts: [Attempt] = []
        for instance in 0..<2 {
            for number in 0..<48 {
                let own = try fixture.entries(count: 12, seed: UInt64(1_000 * (instance + 1) + number))
                let extra = number % 3 == 0 ? Array(shared[(number % 4) * 10..<(number % 4) * 10 + 10]) : []
                attempts.append(Attempt(instance: instance, code: number < 24 ? number : nil, entries: own + extra))
            }
        }
        let stores = fixture.stores
        let publisher = fixture.publisher(fixture.stores[1])
        let outcomes = try await withThrowingTaskGroup(of: (Attempt, SubmissionOutcome)?.self) { group in
            for attempt in attempts {
                group.addTask {
                    let credential = attempt.code.map { SubmissionCredential.uploadCode(codes[$0]) } ?? Self.authority
                    return (attempt, try await stores[attempt.instance].appendHistory(attempt.entries, credential: credential, idempotencyKey: nil, now: now))
                }
            }
            // Publications while the uploads run: ids committed meanwhile wait for the next.
            group.addTask {
                for _ in 0..<3 {
                    _ = try? await publisher.publish()
                    try await Task.sleep(for: .milliseconds(20))
                }
                return nil
            }
            var results: [(Attempt, SubmissionOutcome)] = []
            for try await result in group { if let result { results.append(result) } }
            return results
        }
        try await fixture.publisher(fixture.stores[0]).publish()

        var storedPerCode = [Int: Int]()
        var accepted = Set<UInt64>()
        var newCount = 0
        for (attempt, outcome) in outcomes {
            switch outcome {
            case .stored(let receipt):
                if let code = attempt.code { storedPerCode[code, default: 0] += 1 }
                accepted.formUnion(attempt.entries.map(\.id.rawValue))
                newCount += receipt.stored
            case .refused(.usedCode):
                #expect(attempt.code != nil)
            default:
                Issue.record("unexpected \(outcome)")
            }
        }
        #expect(storedPerCode.count == 24 && storedPerCode.values.allSatisfy { $0 == 1 }, "\(storedPerCode)")
        #expect(newCount == accepted.count, "an id was counted new twice or not at all")
        let published = try fixture.publishedIDs()
        #expect(published.count == Set(published).count, "an id was published twice")
        #expect(Set(published) == accepted)
        #expect(try await fixture.store.summary(now: now).unpublishedIDs == 0)
    }

    /// A publisher process killed while holding the lock: PostgreSQL ends its session and with
    /// it the lock, so the next publisher is not locked out.
    @Test func aLockHeldByADeadSessionIsReleased() async throws {
        let fixture = try await PostgresFixture.make(stores: 2)
        defer { fixture.remove() }
        let lock = try await fixture.store.lockPublication()
        await #expect(throws: PublicationLockError.self) { _ = try await fixture.stores[1].lockPublication() }
        // Ending the holder's backend as a crash would.
        _ = try await fixture.stores[1].run { connection in
            try connection.exec("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted")
        }
        var second: (any PublicationLock)?
        _ = await eventually(every: .milliseconds(20)) {
            second = try? await fixture.stores[1].lockPublication()
            return second != nil
        }
        #expect(second != nil)
        await second?.release()
        await lock.release()
    }
}
