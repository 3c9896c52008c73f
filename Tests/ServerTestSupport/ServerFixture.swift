import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PositiveListFormat
import PositiveListServer
import ServerApplication
import SQLiteServerStore
import Synchronization
import Testing
import TestTiers
import TracerCore
import TracerTestSupport

/// A wall clock the test moves by hand. A sleeper is resumed by the `advance` that reaches its
/// time, not by polling, so a sleep ends exactly when the test says and no sooner.
package final class ManualClock: WallClock {
    private let timeline: ManualTimeline<UnixSeconds>

    package init(_ start: UnixSeconds) { timeline = ManualTimeline(startingAt: start) }

    package func now() -> UnixSeconds { timeline.now }

    /// The wake times of the sleepers still waiting, earliest first.
    package var pendingWakes: [UnixSeconds] { timeline.pendingWakes }

    package func advance(by seconds: UnixSeconds) { timeline.advance { $0 + seconds } }

    package func sleep(until time: UnixSeconds) async throws { try await timeline.sleep(until: time) }
}

/// A monotonic clock the test moves by hand (the publication scheduler's and the long poll's):
/// sleepers wake at the `advance` that reaches them.
package final class ManualMonotonicClock: Clock {
    package struct Instant: InstantProtocol {
        package let offset: Duration
        package func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        package func duration(to other: Instant) -> Duration { other.offset - offset }
        package static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let timeline = ManualTimeline(startingAt: Instant(offset: .zero))

    package init() {}

    package var now: Instant { timeline.now }
    package var minimumResolution: Duration { .nanoseconds(1) }
    /// The wake times of the sleepers still waiting, as offsets from the start, earliest first.
    package var pendingWakes: [Duration] { timeline.pendingWakes.map(\.offset) }

    package func sleep(until deadline: Instant, tolerance: Duration?) async throws { try await timeline.sleep(until: deadline) }

    package func advance(by duration: Duration) { timeline.advance { $0.advanced(by: duration) } }
}

package extension ManualMonotonicClock {
    /// Waits until the clock's sleepers wake exactly at `wakes` (offsets from its start): an
    /// exact set, so that a wrong wake time never matches.
    func expectWakes(_ wakes: [Duration], sourceLocation: SourceLocation = #_sourceLocation) async {
        let reached = await eventually(timeout: .seconds(10), every: .milliseconds(1)) { self.pendingWakes == wakes }
        #expect(reached, "sleepers wake at \(pendingWakes), not \(wakes)", sourceLocation: sourceLocation)
    }
}

/// A scratch server: data directory, configuration, store, signing key and a manual clock.
/// Every test gets its own, removed with `defer { fixture.remove() }`.
package struct ServerFixture: Sendable {
    package static let start: UnixSeconds = 1_800_000_000
    package static let authorityToken = "authority-token-0123456789abcdef"
    package static let otherAuthorityToken = "second-authority-token-9876543210"

    package let paths: ServerPaths
    package let clock: ManualClock
    package let configuration: ServerConfiguration
    package let store: ServerStore
    package let signingKeyBytes: [UInt8]
    package let publicKey: PositiveListPublicKey
    package let logs = LogCapture()

    package init(adjust: (inout ServerConfiguration) -> Void = { _ in }) throws {
        let root = NSTemporaryDirectory() + "/tracer-server-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        paths = ServerPaths(dataDirectory: root)
        clock = ManualClock(Self.start)
        var configuration = ServerConfiguration(authorities: [
            AuthorityConfiguration(name: "Health Authority A", token: Self.authorityToken),
            AuthorityConfiguration(name: "Health Authority B", token: Self.otherAuthorityToken),
        ])
        adjust(&configuration)
        self.configuration = configuration
        store = try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        let key = try SigningKeyFile.create(at: paths.signingKey)
        signingKeyBytes = Array(key.rawRepresentation)
        publicKey = PositiveListPublicKey(key.publicKey)
        try paths.published.prepare()
    }

    package func remove() { try? FileManager.default.removeItem(atPath: paths.dataDirectory) }

    package var signingKey: Curve25519.Signing.PrivateKey { try! Curve25519.Signing.PrivateKey(rawRepresentation: signingKeyBytes) }

    /// `idPublicationDelaySeconds` is 0 unless a test is about that rule: the fixtures' histories
    /// end at the fixture's `now` (``Histories``), and most tests publish them at that time.
    package func makePublisher(faultInjection: Publisher.FaultInjection? = nil, idPublicationDelaySeconds: Int64 = 0) -> Publisher {
        Publisher(
            store: store, directory: paths.published, signingKey: signingKey,
            retentionSeconds: configuration.retentionSeconds, keySettings: KeyPublicationSettings(configuration),
            idPublicationDelaySeconds: idPublicationDelaySeconds, clock: clock, logger: logs.logger, faultInjection: faultInjection)
    }

    /// Ids as an authority's upload brings them: checked by the configuration's rules at `now`
    /// (the fixture's clock unless given) and stored for Health Authority A; throws unless stored.
    @discardableResult
    package func appendIDs(_ submitted: [SubmittedEntry], at now: UnixSeconds? = nil) async throws -> [PositiveListEntry] {
        let now = now ?? clock.now()
        let entries = try HistoryRules(configuration).validate(SubmittedHistory(ids: submitted), now: now)
        let outcome = try await store.appendHistory(entries, credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: now)
        guard case .stored = outcome else { throw HarnessFailure(description: "ids not stored: \(outcome)") }
        return entries
    }

    package var components: ServerComponents { components(witness: nil) }

    /// The server's parts; with `witness`, a server that witnesses logs (POST /v1/add-checkpoint).
    package func components(witness: CheckpointWitness?) -> ServerComponents {
        ServerComponents(configuration: configuration, store: store, publisher: makePublisher(), directory: paths.published, clock: clock, witness: witness)
    }

    /// Runs `body` against the real server listening on 127.0.0.1 with an ephemeral port; with
    /// `witness`, one that witnesses logs.
    package func withServer<Value: Sendable>(
        witness: CheckpointWitness? = nil, _ body: @escaping @Sendable (any TestClientProtocol) async throws -> Value
    ) async throws -> Value {
        let application = PositiveListHTTPServer.makeApplication(
            components(witness: witness), address: .hostname("127.0.0.1", port: 0), logger: logs.logger, publishOnSchedule: false)
        return try await application.test(.live) { client in try await body(client) }
    }

    /// The published list log, verified from its files alone with the server's keys.
    package func verifiedLog() throws -> PublishedListLog {
        // The key in the data directory now: a test may have made a new one with `keygen`.
        let key = (try? SigningKeyFile.load(from: paths.signingKey)) ?? signingKey
        return try PublishedListLog.open(paths.published, identity: try ListLogIdentity(origin: nil, publicKey: key.publicKey))
    }

    /// The log's tree size; 0 before the first publication.
    package func logTreeSize() throws -> UInt64 {
        FileManager.default.fileExists(atPath: paths.published.logCheckpointPath) ? try verifiedLog().checkpoint.treeSize : 0
    }

    /// Every id batch the log holds (expired ones too: the log only grows), in number order, as
    /// a node reads them.
    package func verifiedBatches() throws -> [LoggedIDBatch] {
        try verifiedLog().batches().ids.sorted { $0.key < $1.key }.map { LoggedIDBatch(number: $0.key, entries: $0.value) }
    }
}

/// An id batch read back from the published log.
package struct LoggedIDBatch: Equatable {
    package let number: UInt64
    package let entries: [PositiveListEntry]
    package var count: Int { entries.count }
}

/// Histories shaped like a node's: consecutive 15-minute windows ending at `end`.
package enum Histories {
    package static func entries(count: Int, endingAt end: UnixSeconds, seed: UInt64 = 1) -> [SubmittedEntry] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { position in
            let until = end - UnixSeconds(position) * 900
            return SubmittedEntry(id: UserID.random(using: &generator).hex, validFrom: until - 900, validUntil: until)
        }
    }

    package static func body(_ entries: [SubmittedEntry]) -> ByteBuffer {
        ByteBuffer(bytes: stableJSON(SubmittedHistory(ids: entries)))
    }

    /// `value` as JSON with its members sorted. JSONEncoder's member order may differ between two
    /// encodings of one value in one process, and an idempotent retry must send the same bytes:
    /// otherwise the server rightly answers `idempotency_key_reused`.
    package static func stableJSON(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Array(try! encoder.encode(value))
    }
}


package extension TestClientProtocol {
    /// Sends a request and returns the whole response.
    func send(_ uri: String, _ method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil) async throws -> TestResponse {
        try await execute(uri: uri, method: method, headers: headers, body: body) { $0 }
    }
}

package extension TestResponse {
    /// The `error` and `detail` of a JSON error body.
    var apiError: (error: String, detail: String)? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: String],
              let error = object["error"], let detail = object["detail"]
        else { return nil }
        return (error, detail)
    }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]) ?? [:]
    }

    var bytes: [UInt8] { Array(body.readableBytesView) }
}

package extension HTTPFields {
    static func authority(_ token: String = ServerFixture.authorityToken) -> HTTPFields {
        [.authorization: "Bearer " + token, .contentType: "application/json"]
    }

    static func uploadCode(_ code: String) -> HTTPFields {
        [HTTPField.Name("Upload-Code")!: code, .contentType: "application/json"]
    }

    func adding(_ name: String, _ value: String) -> HTTPFields {
        var copy = self
        copy[HTTPField.Name(name)!] = value
        return copy
    }
}
