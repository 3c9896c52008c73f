import Crypto
import CurlHTTP
import Foundation
import IDRotation
import Logging
@testable import Matching
import PositiveListFormat
import RetiredFormatWriters
import Synchronization
import Testing
import TestTiers
import TracerCore
import TracerTestSupport
import TransparencyLog

/// The hostile list server suite on the log (issue 39, item 6): a compromised CDN in front of the
/// list log, played by Tests/Support/http_fixture.py serving a real log (bundles, tiles and
/// checkpoints written by the server's appender and signed as `tracer-server` signs them) with
/// the misbehaviours a test names, and `tracer check`'s ExposureChecker following it over real
/// HTTP (libcurl).
///
/// The rule every test holds: what the node has verified is never forgotten because of an
/// unsigned answer. A node that met a diagnosed person's published key keeps finding that
/// exposure whatever the CDN answers later; an update that fails is reported as such (stale, and
/// the failure names the cause), never as "no exposure"; and nothing refused replaces the log the
/// node holds (its `FollowedLogStore` loads as it did before).
///
/// The log each test starts from: 512 entries of id batches that expired long ago (the full
/// bundles `000` and `001`: a fresh node walking back stops at `001` and takes the right edge
/// below it from the hash tile `1/000.p/2`), then an id batch nobody met and the key batch
/// holding the met key: 514 entries, the partial bundle `002.p/2`.
///
/// Covered elsewhere and not repeated here: the follower's refusals in memory (LogFollowerTests,
/// ListLogUpdaterTests), a damaged copy on the node's disk (ListLogUpdaterTests), the log behind
/// nginx (ListLogOverNginxTests), a log signed too long ago (ListFreshnessTests), the HTTP
/// client's own limits: redirect counts, stalls, huge Content-Length (HTTPClientTests).
@Suite(.tags(.integration), .timeLimit(.minutes(1))) struct HostileListLogTests {
    /// A log as its server appends to it: every file it ever wrote (superseded partial ones too,
    /// as a server keeps the previous tree's), its entries and its right edge.
    struct LogBuilder {
        var edge = LogRightEdge.empty
        var entries: [Data] = []
        var files: [String: Data] = [:]

        var size: UInt64 { edge.treeSize }

        mutating func append(_ new: [Data]) throws {
            let result = try LogAppender.append(new, to: edge)
            for write in result.writes { files[write.path] = write.bytes }
            edge = result.rightEdge
            entries += new
        }

        func appending(_ new: [Data]) throws -> LogBuilder {
            var copy = self
            try copy.append(new)
            return copy
        }
    }

    /// One request the fixture saw under /list/.
    struct Request: Equatable, CustomStringConvertible {
        var path: String
        var condition: String?
        var range: String?

        var description: String { "\(path) [\(condition ?? "-")] [\(range ?? "-")]" }
    }

    /// What the node holds of the log, as `FollowedLogStore.load()` gives it.
    struct Held: Equatable {
        var state: FollowedLogState
        var firstIndex: UInt64
        var entries: [Data]
    }

    /// One node and its list server: the log in `site/log/`, the node's store, cache and log.
    final class World {
        let directory: TemporaryDirectory
        let server: HTTPFixtureServer
        let now = UnixSeconds(Date().timeIntervalSince1970)
        let signingKey = Curve25519.Signing.PrivateKey()
        let logSigner: NoteSigner
        /// The log's own timestamp: the same key, tlog-cosignature/v1.
        let timestampSigner: NoteSigner
        /// A witness the node requires (with `witnessRequired`), whose cosignature honest
        /// checkpoints then carry.
        let witness: NoteSigner
        let witnessRequired: Bool
        let cache: ListCacheDirectory
        let store: NodeStore
        /// The diagnosed person's key of yesterday, whose ids the node met (if `exposed`).
        let metKey = DailyKey.random()
        let derivation = try! IDDerivation(intervalSeconds: 900)
        /// The 512 expired entries every log here starts with.
        let history: LogBuilder
        /// The honest log as its server last published it.
        var honest: LogBuilder
        private var nextIDBatch: UInt64 = 513
        private var nextKeyBatch: UInt64 = 1

        var site: String { directory.path + "/site" }
        var baseURL: String { server.url("/list") }
        var yesterday: UTCDay { UTCDay(number: UTCDay(containing: now).number - 1) }
        var publicKey: PositiveListPublicKey { PositiveListPublicKey(signingKey.publicKey) }
        var origin: String { publicKey.defaultLogOrigin }
        var logStore: FollowedLogStore { FollowedLogStore(directory: cache.directory + "/log") }
        var source: FollowedLogSource {
            FollowedLogSource(origin: origin, logKey: logSigner.verifierKey, witnesses: witnessRequired ? [witness.verifierKey] : [],
                              requiredCosignatures: witnessRequired ? 1 : 0)
        }

        init(witnessRequired: Bool = false, exposed: Bool = true) throws {
            self.witnessRequired = witnessRequired
            directory = try TemporaryDirectory()
            try FileManager.default.createDirectory(atPath: directory.path + "/site/log", withIntermediateDirectories: true)
            server = try HTTPFixtureServer(listRoot: directory.path + "/site")
            cache = ListCacheDirectory(directory: directory.path + "/cache")
            store = try NodeStore.open(StoreLocation(path: directory.path + "/node.db", source: .flag, ownsDirectory: false))
            let origin = PositiveListPublicKey(signingKey.publicKey).defaultLogOrigin
            logSigner = try NoteSigner(name: origin, privateKey: signingKey)
            timestampSigner = try NoteSigner(name: origin, type: .cosignatureV1, privateKey: signingKey)
            witness = try NoteSigner.generate(name: "witness.test/one", type: .cosignatureV1)
            var history = LogBuilder()
            let expired = now - 40 * .secondsPerDay
            try history.append((1...512).map { Self.idEntry(batch: UInt64($0), endingAt: expired) })
            self.history = history
            honest = history
            if exposed { try meetMetKey() }
        }

        deinit {
            server.stop()
            directory.remove()
        }

        /// Two windows of 15 minutes close to the ids `metKey` derives for 10:00 and 10:15
        /// yesterday: high risk once the key is published.
        private func meetMetKey() throws {
            var batch = SightingBatch()
            let first = derivation.windowIndices(of: yesterday).lowerBound + 40
            for index in [first, first + 1] {
                let start = derivation.nominalStart(ofWindowIndex: index)
                for offset: UnixSeconds in [30, 300, 600, 870] {
                    batch.add(Sighting(
                        peer: derivation.id(key: metKey, windowIndex: index), ownWindowStart: start, time: start + offset, rssi: -50,
                        txPower: 0, reportedRSSI: nil, learnedBy: .read))
                }
            }
            try store.write(batch)
        }

        /// An id batch of one id nobody met, as one log entry.
        static func idEntry(batch: UInt64, endingAt end: UnixSeconds) -> Data {
            let entries = try! ListLogEntry.entries(idBatch: batch, entries: [listed(UInt64.random(in: 1...UInt64.max), from: end - 900, to: end)])
            return Data(try! entries[0].encode())
        }

        /// A key batch of one key of yesterday, as one log entry.
        func keyEntry(batch: UInt64, key: DailyKey) -> Data {
            let entries = try! ListLogEntry.entries(keyBatch: batch, records: [DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: key)])
            return Data(try! entries[0].encode())
        }

        /// The next publication's entries: an id batch nobody met, and a key batch with `key`
        /// (a random one unless given).
        func nextEntries(key: DailyKey? = nil) -> [Data] {
            defer {
                nextIDBatch += 1
                nextKeyBatch += 1
            }
            return [Self.idEntry(batch: nextIDBatch, endingAt: now - 60), keyEntry(batch: nextKeyBatch, key: key ?? DailyKey.random())]
        }

        func write(_ bytes: Data, to path: String) throws {
            let url = URL(fileURLWithPath: site + "/" + path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try bytes.write(to: url, options: .atomic)
        }

        func served(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: site + "/" + path)) }

        /// `log`'s checkpoint, signed as its server signs it (the log's signature and its
        /// timestamp; the witness's cosignature when the node requires it) unless `signers` says
        /// otherwise.
        func checkpoint(
            _ log: LogBuilder, origin other: String? = nil, signers: [NoteSigner]? = nil, signedAt: UnixSeconds? = nil
        ) throws -> Data {
            let signers = signers ?? [logSigner, timestampSigner] + (witnessRequired ? [witness] : [])
            return try Checkpoint(origin: other ?? origin, treeSize: log.size, rootHash: log.edge.rootHash)
                .signed(by: signers, timestamp: UInt64(signedAt ?? now)).encoded
        }

        /// Writes every file of `log` and serves `checkpoint` (by default its honest one).
        func publish(_ log: LogBuilder, checkpoint note: Data? = nil) throws {
            for (path, bytes) in log.files { try write(bytes, to: "log/" + path) }
            try serve(checkpoint: note ?? checkpoint(log))
        }

        func serve(checkpoint note: Data) throws { try write(note, to: "log/checkpoint") }

        /// The honest server's next publication: the met key's batch in the first one.
        func publishNext(signedAt: UnixSeconds? = nil) throws {
            try honest.append(nextEntries(key: honest.size == 512 ? metKey : nil))
            try publish(honest, checkpoint: checkpoint(honest, signedAt: signedAt))
        }

        /// What the server does instead of serving these files, until `misbehave([:])`.
        func misbehave(_ behaviours: [String: [String: Any]]) throws {
            let json = try JSONSerialization.data(withJSONObject: behaviours)
            try json.write(to: URL(fileURLWithPath: site + "/behaviour.json"), options: .atomic)
        }

        /// Every /list/ request so far, with its If-None-Match and Range headers.
        func requests() async throws -> [Request] {
            let response = try await CurlHTTPClient().perform(HTTPRequest(url: server.url("/list-requests?range=1")))
            return String(decoding: response.body, as: UTF8.self).split(separator: "\n").map { line in
                let parts = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
                let condition = parts.dropFirst().dropLast().joined(separator: " ")
                return Request(path: parts[0], condition: condition == "-" ? nil : condition, range: parts.last == "-" ? nil : parts.last)
            }
        }

        /// The requests made since `count` of them had been.
        func requests(after count: Int) async throws -> [Request] { Array(try await requests().dropFirst(count)) }

        /// The node as `tracer check` builds it.
        func checker(http: CurlHTTPClient = quickClient(maxAttempts: 2)) -> ExposureChecker {
            let clock = ListFreshnessTests.FixedClock(time: now)
            let log = FollowedListLog(source: source, store: logStore)
            let updater = ListLogUpdater(
                log: log, files: HTTPLogFiles(baseURL: baseURL + "/log", http: http), cache: cache, maximumListAge: 2 * 86_400, clock: clock)
            return ExposureChecker(store: store, cache: cache, log: log, updater: updater, clock: clock)
        }

        func check(http: CurlHTTPClient = quickClient(maxAttempts: 2)) async throws(ExposureCheckError) -> ExposureCheckReport {
            try await checker(http: http).check()
        }

        /// What the node holds of the log.
        func held() throws -> Held? {
            try logStore.load().map { Held(state: $0.state, firstIndex: $0.firstIndex, entries: try $0.entries.read()) }
        }

        /// The framed bytes of the partial bundle's entries the node holds: where its Range
        /// request for the grown bundle starts.
        var heldPartialBytes: Int {
            let size = (try? held()?.state.treeSize) ?? 0
            return honest.entries[Int(size / 256 * 256)..<Int(size)].reduce(0) { $0 + 2 + $1.count }
        }

        /// The first check, against the honest log of 514 entries: the exposure by key is found
        /// and verified. Returns how many requests it made.
        @discardableResult
        func followHonestly() async throws -> Int {
            try publishNext()
            let report = try await check()
            try #require(report.exposureFound && !report.listIsStale && report.keysChecked == 1 && report.list.logEntries == 514, "\(report)")
            return try await requests().count
        }
    }

    /// The verified exposure is still reported, from the log held, and the report says the list
    /// could not be updated (`tracer check` exits 3 and prints the failure as a warning).
    static func expectHeldExposure(
        _ report: ExposureCheckReport, failure phrases: String..., entries: UInt64 = 514, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(report.exposureFound, "the verified exposure was forgotten: \(report)", sourceLocation: sourceLocation)
        #expect(report.assessment.level == .high, sourceLocation: sourceLocation)
        #expect(report.listIsStale, "a failed update reported as up to date", sourceLocation: sourceLocation)
        #expect(report.list.logEntries == entries, "matched from a log of \(report.list.logEntries.map(String.init) ?? "none")",
                sourceLocation: sourceLocation)
        for phrase in phrases {
            #expect(report.list.updateFailure?.contains(phrase) == true, "\(report.list.updateFailure ?? "no failure") lacks \(phrase.debugDescription)",
                    sourceLocation: sourceLocation)
        }
    }

    /// The check of a node that holds nothing: no result at all, never "no exposure".
    static func expectNoVerifiedList(
        _ world: World, failure phrases: String..., sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            let report = try await world.check()
            Issue.record("a fresh node took a hostile log: \(report)", sourceLocation: sourceLocation)
        } catch {
            guard case .noVerifiedList(let failure?, offline: false) = error else {
                Issue.record("expected no verified list with the update's failure, got \(error)", sourceLocation: sourceLocation)
                return
            }
            for phrase in phrases {
                #expect(failure.description.contains(phrase), "\(failure) lacks \(phrase.debugDescription)", sourceLocation: sourceLocation)
            }
        }
        #expect(!world.logStore.holdsState, "a refused log was kept", sourceLocation: sourceLocation)
        #expect(world.cache.state.lastFailure != nil, "the failure is not where `tracer status` reads it", sourceLocation: sourceLocation)
    }

    /// After the honest files are back: the update succeeds, the exposure is found from the
    /// served log, and the report is current.
    static func expectRecovered(_ report: ExposureCheckReport, entries: UInt64, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(report.exposureFound && !report.listIsStale, "\(report.list.updateFailure ?? "\(report)")", sourceLocation: sourceLocation)
        #expect(report.list.logEntries == entries, sourceLocation: sourceLocation)
    }

    // MARK: The honest log, as the baseline of every case

    @Test func anHonestLogIsFollowedWithEachEntryDownloadedOnce() async throws {
        let world = try World()
        let before = try await world.followHonestly()
        // A fresh node walks back from the newest bundle to an expired full one and takes the
        // right edge below it from the level-1 tile; it keeps the live entries only.
        let start = try await world.requests()
        #expect(start.map(\.path) == ["log/checkpoint", "log/tile/entries/002.p/2", "log/tile/entries/001", "log/tile/1/000.p/2"], "\(start)")
        #expect(try world.held()?.firstIndex == 512)

        // Growth: the checkpoint (conditionally) and the new bytes of the partial bundle only.
        let held = world.heldPartialBytes
        try world.publishNext()
        Self.expectRecovered(try await world.check(), entries: 516)
        let growth = try await world.requests(after: before)
        #expect(growth.count == 2 && growth.first?.path == "log/checkpoint" && growth.first?.condition != nil, "\(growth)")
        #expect(growth.last == Request(path: "log/tile/entries/002.p/4", condition: nil, range: "bytes=\(held)-"))

        // Nothing new: one conditional request, answered 304.
        let count = try await world.requests().count
        Self.expectRecovered(try await world.check(), entries: 516)
        #expect(try await world.requests(after: count).map(\.path) == ["log/checkpoint"])

        // A CDN that ignores Range costs bytes, nothing else.
        try world.publishNext()
        try world.misbehave(["log/tile/entries/002.p/6": ["ignoreRange": true]])
        Self.expectRecovered(try await world.check(), entries: 518)
        #expect(try world.held()?.entries == Array(world.honest.entries[512...]))
    }

    // MARK: Rollback and fork

    @Test func anOlderCheckpointServedAgainIsRefusedAndTheHeldLogStays() async throws {
        let world = try World()
        try world.publishNext(signedAt: world.now - 7_200)
        let older = try world.served("log/checkpoint")
        Self.expectRecovered(try await world.check(), entries: 514)
        try world.publishNext(signedAt: world.now - 3_600)
        let olderNote = try world.served("log/checkpoint")
        Self.expectRecovered(try await world.check(), entries: 516)
        // The server signs the same tree again (its daily refresh).
        let newest = try world.checkpoint(world.honest)
        try world.serve(checkpoint: newest)
        #expect(try await world.check().list.publishedAt == world.now)
        let held = try #require(try world.held())
        let count = try await world.requests().count

        // An older note of the held tree: taken for what it says, but the newer one is kept.
        try world.serve(checkpoint: olderNote)
        let report = try await world.check()
        Self.expectRecovered(report, entries: 516)
        #expect(report.list.publishedAt == world.now, "an older note made the held list look older")
        #expect(try world.held() == held)

        // An older tree: refused, the held log stays.
        try world.serve(checkpoint: older)
        Self.expectHeldExposure(try await world.check(), failure: "a log of 514 entries, older than the 516", entries: 516)
        #expect(try world.held() == held)
        #expect(world.logStore.evidence().isEmpty, "a rollback is no evidence: a cache serves one as readily")

        try world.serve(checkpoint: newest)
        Self.expectRecovered(try await world.check(), entries: 516)
        let asked = try await world.requests(after: count)
        #expect(asked.allSatisfy { $0.path == "log/checkpoint" }, "a refused or confirmed checkpoint fetched files: \(asked)")
    }

    @Test func aSplitViewIsRefusedAndKeptAsEvidenceOnce() async throws {
        let world = try World()
        let count = try await world.followHonestly()
        let honestNote = try world.served("log/checkpoint")
        let held = try #require(try world.held())
        // The same key signs another tree of 514 entries, without the met key.
        let forked = try world.history.appending([world.honest.entries[512], world.keyEntry(batch: 1, key: DailyKey.random())])
        let forkedNote = try world.checkpoint(forked)
        try world.serve(checkpoint: forkedNote)
        for _ in 0..<2 {
            let report = try await world.check()
            Self.expectHeldExposure(report, failure: "two different lists of 514 entries")
            let kept = try #require(world.logStore.evidence().first)
            #expect(report.list.updateFailure == ListUpdateError.logForked(size: 514, evidenceDirectory: kept).description)
        }
        let evidence = world.logStore.evidence()
        #expect(evidence.count == 1, "the same split view shown again fills no disk: \(evidence)")
        let kept = try #require(evidence.first)
        #expect(FileManager.default.contents(atPath: kept + "/held-checkpoint") == honestNote)
        #expect(FileManager.default.contents(atPath: kept + "/offered-checkpoint") == forkedNote)
        #expect(try world.held() == held)

        // The honest checkpoint again: confirmed by its ETag, the evidence stays.
        try world.serve(checkpoint: honestNote)
        Self.expectRecovered(try await world.check(), entries: 514)
        #expect(world.logStore.evidence() == evidence)
        let asked = try await world.requests(after: count)
        #expect(asked.allSatisfy { $0.path == "log/checkpoint" }, "\(asked)")
    }

    // MARK: Rewritten entries

    @Test func aBundleAlteredUnderItsSignedCheckpointIsRefused() async throws {
        let world = try World()
        let count = try await world.followHonestly()
        let held = try #require(try world.held())
        let offset = world.heldPartialBytes
        try world.publishNext()
        // The CDN changes the last byte of the newest entry (a key) and keeps the checkpoint.
        let path = "log/tile/entries/002.p/4"
        var bundle = try world.served(path)
        bundle[bundle.count - 1] ^= 0x01
        try world.write(bundle, to: path)
        Self.expectHeldExposure(try await world.check(), failure: "do not make the signed log of 516")
        #expect(try world.held() == held)
        #expect(world.logStore.evidence().isEmpty)

        try world.publish(world.honest)
        Self.expectRecovered(try await world.check(), entries: 516)
        let asked = try await world.requests(after: count)
        #expect(asked.filter { $0.path.hasPrefix("log/tile/") } == Array(repeating: Request(path: path, range: "bytes=\(offset)-"), count: 2),
                "only the new bytes, each time: \(asked)")
    }

    @Test func aGrownTreeThatRewroteAnEarlierEntryIsRefusedButIsNoEvidence() async throws {
        let world = try World()
        try await world.followHonestly()
        let held = try #require(try world.held())
        // Signed by the log's key: the met key's entry replaced, two entries appended.
        let grown = world.nextEntries()
        let rewritten = try world.history.appending([world.honest.entries[512], world.keyEntry(batch: 1, key: DailyKey.random())] + grown)
        try world.publish(rewritten)
        Self.expectHeldExposure(try await world.check(), failure: "do not make the signed log of 516")
        #expect(try world.held() == held)
        #expect(world.logStore.evidence().isEmpty, "a grown tree proves nothing from the entries alone")

        try world.honest.append(grown)
        try world.publish(world.honest)
        Self.expectRecovered(try await world.check(), entries: 516)
        #expect(try world.held()?.entries == Array(world.honest.entries[512...]))
    }

    // MARK: Missing, truncated and damaged tiles and bundles

    /// What the CDN does to one file.
    enum Damage: String, CaseIterable, Sendable {
        /// 404 in its place.
        case missing
        /// Its length announced, part of it sent, the connection closed.
        case cutOff
        /// Served whole, but shorter than it is: a damaged copy.
        case shortened
        /// A byte changed, its length kept: a bundle's last (in its newest entry), a tile's first
        /// (in the hash a fresh node takes from it).
        case altered
    }

    enum FreshFile: String, CaseIterable, Sendable {
        case newestBundle = "log/tile/entries/002.p/2"
        case expiredBundle = "log/tile/entries/001"
        case levelOneTile = "log/tile/1/000.p/2"
    }

    static func damage(_ damage: Damage, _ path: String, in world: World) throws {
        switch damage {
        case .missing: try world.misbehave([path: ["status": 404]])
        case .cutOff: try world.misbehave([path: ["truncate": 10]])
        case .shortened:
            let bytes = try world.served(path)
            try world.write(bytes.prefix(bytes.count - 3), to: path)
        case .altered:
            // A bundle's last byte is its last entry's; a tile's first is the hash the node uses.
            var bytes = try world.served(path)
            bytes[path.contains("/entries/") ? bytes.count - 1 : 0] ^= 0x01
            try world.write(bytes, to: path)
        }
    }

    static func failure(of damage: Damage) -> String {
        switch damage {
        case .missing: "HTTP 404"
        case .cutOff: "failed"
        case .shortened: "damaged file"
        case .altered: "do not make the signed log of 514"
        }
    }

    /// A fresh node walking back: every file it fetches is needed, and none may stand in for a
    /// missing or damaged one. A 404 for the expired bundle is no end of history, and an expired
    /// bundle altered (its last id's window, still long past) must not end the walk unproved: a
    /// CDN could otherwise hide live entries behind a made-up bundle of old ones.
    @Test(arguments: FreshFile.allCases, Damage.allCases)
    func aFreshNodeRefusesAMissingOrDamagedFileAndRecovers(_ file: FreshFile, _ damage: Damage) async throws {
        let world = try World()
        try world.publishNext()
        try Self.damage(damage, file.rawValue, in: world)
        await Self.expectNoVerifiedList(world, failure: Self.failure(of: damage))
        if damage != .altered {
            let failure = world.cache.state.lastFailure ?? ""
            #expect(failure.contains(file == .levelOneTile && damage == .shortened ? "tile" : String(file.rawValue.dropFirst(4))), "\(failure)")
        }

        try world.misbehave([:])
        try world.publish(world.honest)
        Self.expectRecovered(try await world.check(), entries: 514)
    }

    /// A following node fetches only the grown bundle: whatever happens to it, the held log stays,
    /// and the honest bundle is then fetched from the held bytes on.
    @Test(arguments: Damage.allCases)
    func aFollowingNodeRefusesAMissingOrDamagedBundleAndRecovers(_ damage: Damage) async throws {
        let world = try World()
        let count = try await world.followHonestly()
        let held = try #require(try world.held())
        let offset = world.heldPartialBytes
        try world.publishNext()
        let path = "log/tile/entries/002.p/4"
        try Self.damage(damage, path, in: world)
        let report = try await world.check()
        switch damage {
        case .missing: Self.expectHeldExposure(report, failure: "tile/entries/002.p/4", "HTTP 404")
        case .cutOff: Self.expectHeldExposure(report, failure: "tile/entries/002.p/4", "failed")
        case .shortened: Self.expectHeldExposure(report, failure: "damaged file (tile/entries/002.p/4)")
        case .altered: Self.expectHeldExposure(report, failure: "do not make the signed log of 516")
        }
        #expect(try world.held() == held)

        try world.misbehave([:])
        try world.publish(world.honest)
        Self.expectRecovered(try await world.check(), entries: 516)
        let asked = try await world.requests(after: count).filter { $0.path.hasPrefix("log/tile/") }
        #expect(asked.allSatisfy { $0 == Request(path: path, range: "bytes=\(offset)-") }, "a following node fetched more: \(asked)")
    }

    // MARK: Checkpoints that do not open

    enum RefusedCheckpoint: String, CaseIterable, Sendable {
        /// The same key, signing as another origin (the server's `logOrigin` changed).
        case otherOrigin
        /// Another origin in the text, signed under the configured one.
        case otherOriginInItsText
        /// The log's signature with a byte changed.
        case badSignature
        /// Signed under the configured origin by another key.
        case otherKey
        /// Without the cosignature of the witness the node requires (published before the
        /// witness cosigned it).
        case withoutTheWitness
        /// Cosigned by a witness the node does not require instead.
        case byAnotherWitness

        var requiresWitness: Bool { self == .withoutTheWitness || self == .byAnotherWitness }

        var failure: String {
            switch self {
            case .otherOrigin, .otherKey: "no valid signature by a trusted key"
            case .otherOriginInItsText: "checkpoint is from \"health.example.org/tracer-list\""
            case .badSignature: "does not verify"
            case .withoutTheWitness, .byAnotherWitness: "0 valid cosignatures of the 1 required"
            }
        }

        func note(of log: LogBuilder, in world: World) throws -> Data {
            switch self {
            case .otherOrigin:
                let name = "health.example.org/tracer-list"
                return try world.checkpoint(log, origin: name, signers: [
                    try NoteSigner(name: name, privateKey: world.signingKey), try NoteSigner(name: name, type: .cosignatureV1, privateKey: world.signingKey),
                ])
            case .otherOriginInItsText:
                return try world.checkpoint(log, origin: "health.example.org/tracer-list")
            case .badSignature:
                // The first signature line is the log's: base64 of its key id and signature.
                var lines = String(decoding: try world.checkpoint(log), as: UTF8.self).components(separatedBy: "\n")
                guard let line = lines.firstIndex(where: { $0.hasPrefix("— ") }), let space = lines[line].lastIndex(of: " "),
                      var signature = Data(base64Encoded: String(lines[line][lines[line].index(after: space)...]))
                else { throw FixtureFailure(description: "no signature line") }
                signature[signature.count - 1] ^= 0x01
                lines[line] = lines[line][..<space] + " " + signature.base64EncodedString()
                return Data(lines.joined(separator: "\n").utf8)
            case .otherKey:
                let other = Curve25519.Signing.PrivateKey()
                return try world.checkpoint(log, signers: [
                    try NoteSigner(name: world.origin, privateKey: other), try NoteSigner(name: world.origin, type: .cosignatureV1, privateKey: other),
                ])
            case .withoutTheWitness:
                return try world.checkpoint(log, signers: [world.logSigner, world.timestampSigner])
            case .byAnotherWitness:
                return try world.checkpoint(log, signers: [
                    world.logSigner, world.timestampSigner, try NoteSigner.generate(name: "witness.test/two", type: .cosignatureV1),
                ])
            }
        }
    }

    /// A grown log's checkpoint that does not open with the configured key, origin and
    /// witnesses: refused before any file is fetched, the held log stays.
    @Test(arguments: RefusedCheckpoint.allCases)
    func aCheckpointThatDoesNotOpenIsRefusedBeforeAnyFileIsFetched(_ kind: RefusedCheckpoint) async throws {
        let world = try World(witnessRequired: kind.requiresWitness)
        let count = try await world.followHonestly()
        let held = try #require(try world.held())
        let offset = world.heldPartialBytes
        try world.honest.append(world.nextEntries())
        try world.publish(world.honest, checkpoint: try kind.note(of: world.honest, in: world))
        Self.expectHeldExposure(try await world.check(), failure: "checkpoint was refused", kind.failure)
        #expect(try world.held() == held)
        #expect(try await world.requests(after: count).map(\.path) == ["log/checkpoint"])

        // The checkpoint as the server signs it (for a witness: once it has cosigned).
        try world.publish(world.honest)
        Self.expectRecovered(try await world.check(), entries: 516)
        let asked = try await world.requests(after: count + 1)
        #expect(asked.map(\.path) == ["log/checkpoint", "log/tile/entries/002.p/4"] && asked.last?.range == "bytes=\(offset)-", "\(asked)")
    }

    // MARK: Endless and trickling bodies

    @Test func anEndlessCheckpointIsCutOffAtTheNoteLimit() async throws {
        let world = try World()
        try await world.followHonestly()
        let held = try #require(try world.held())
        try world.misbehave(["log/checkpoint": ["endless": true]])
        Self.expectHeldExposure(try await world.check(), failure: "log/checkpoint than the list allows (\(SignedNote.maximumBytes) bytes)")
        #expect(try world.held() == held)
        try world.misbehave([:])
        Self.expectRecovered(try await world.check(), entries: 514)
    }

    @Test func anEndlessBundleIsCutOffAtTheLargestBundle() async throws {
        let world = try World()
        try await world.followHonestly()
        let held = try #require(try world.held())
        try world.publishNext()
        // Zeros without a length, past the largest bundle the format allows (16 MB and a bit).
        try world.misbehave(["log/tile/entries/002.p/4": ["endless": HTTPLogFiles.maximumBundleBytes + (1 << 20)]])
        Self.expectHeldExposure(try await world.check(), failure: "tile/entries/002.p/4", "more than a bundle of the list can hold (\(HTTPLogFiles.maximumBundleBytes) bytes)")
        #expect(try world.held() == held)
        try world.misbehave([:])
        Self.expectRecovered(try await world.check(), entries: 516)
    }

    enum Trickled: String, CaseIterable, Sendable {
        case checkpoint = "log/checkpoint"
        case bundle = "log/tile/entries/002.p/4"
    }

    @Test(arguments: Trickled.allCases)
    func aTricklingFileEndsWithinTheClientsTimeLimit(_ file: Trickled) async throws {
        let world = try World()
        try await world.followHonestly()
        let held = try #require(try world.held())
        if file == .bundle { try world.publishNext() }
        try world.misbehave([file.rawValue: ["trickle": 0.5]])
        // What a real client does over a slow link, with libcurl's low-speed window shortened.
        let client = quickClient(maxAttempts: 1) { $0.lowSpeedTime = .seconds(1) }
        let started = ContinuousClock.now
        Self.expectHeldExposure(try await world.check(http: client), failure: String(file.rawValue.dropFirst(4)), "timed out")
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(try world.held() == held)
        try world.misbehave([:])
        Self.expectRecovered(try await world.check(), entries: file == .bundle ? 516 : 514)
    }

    // MARK: Status codes in place of the checkpoint

    /// 404 once the node follows the log (with a signed index beside it, as a mirror of an older
    /// server may still hold one, that would say "no exposure"): a failed update, and the index
    /// is never asked for. 500, 503 and 403 likewise.
    @Test(arguments: [404, 500, 503, 403])
    func aStatusInPlaceOfTheCheckpointKeepsTheVerifiedExposure(_ status: Int) async throws {
        let world = try World()
        try world.write(Data(try PositiveListIndex(generation: 1, publishedAt: world.now, batches: [], flags: []).encode(signingKey: world.signingKey)),
                        to: PositiveListIndex.relativePath)
        let count = try await world.followHonestly()
        let held = try #require(try world.held())
        try world.misbehave(["log/checkpoint": ["status": status]])
        let report = try await world.check()
        Self.expectHeldExposure(report, failure: status >= 500 ? "HTTP status \(status)" : "HTTP \(status)")
        #expect(try world.held() == held)
        let asked = try await world.requests(after: count)
        #expect(asked.allSatisfy { $0.path == "log/checkpoint" }, "the index was asked for: \(asked)")
        // 403 to the conditional request is asked once more without the ETag; 500 and 503 are retried.
        #expect(asked.map { $0.condition != nil } == (status == 404 ? [true] : status == 403 ? [true, false] : [true, true]), "\(asked)")

        try world.misbehave([:])
        Self.expectRecovered(try await world.check(), entries: 514)
        #expect(try await world.requests(after: count + asked.count) == [Request(path: "log/checkpoint", condition: asked.first?.condition)])
    }

    @Test func thePeriodicCheckDoesNotReportNoExposureWhenTheCheckpointGoesMissing() async throws {
        let world = try World()
        try world.publishNext()
        let notifications = world.directory.path + "/notifications"
        let schedule = ExposureCheckSchedule(
            checker: world.checker(), hook: ExposureHook(command: "echo notified >> '\(notifications)'"), interval: 3_600, jitter: 0,
            logger: Logger(label: "test.check"))
        #expect(await schedule.checkOnce(), "the first check followed an up-to-date log")
        #expect(try String(contentsOfFile: notifications, encoding: .utf8) == "notified\n")

        try world.misbehave(["log/checkpoint": ["status": 404]])
        #expect(await schedule.checkOnce() == false, "a 404 checkpoint was taken for an up-to-date list")
        let last = try #require(try ExposureChecker.lastReport(in: world.store))
        Self.expectHeldExposure(last, failure: "HTTP 404")
        #expect(try String(contentsOfFile: notifications, encoding: .utf8) == "notified\n", "notified once, not again")
    }

    @Test func aMissingCheckpointWithoutExposureIsNeverNoExposure() async throws {
        // A node that met nobody, but has followed the signed log: `tracer check` exits 1.
        let world = try World(exposed: false)
        try world.publishNext()
        let first = try await world.check()
        #expect(!first.exposureFound && !first.listIsStale, "\(first.list.updateFailure ?? "")")
        try world.misbehave(["log/checkpoint": ["status": 404]])
        let report = try await world.check()
        #expect(!report.exposureFound)
        #expect(report.listIsStale, "a 404 checkpoint was taken for an up-to-date list")
        #expect(report.list.updateFailure?.contains("HTTP 404") == true, "\(report.list.updateFailure ?? "no failure")")
    }

    /// The reports a schedule tells its follower (`onReport`, the node's metrics file).
    final class ToldReports: Sendable {
        let reports = Mutex<[ExposureCheckReport]>([])
        var all: [ExposureCheckReport] { reports.withLock { $0 } }
    }

    /// Issue 29 on the log: the frequent revalidation between full checks costs one conditional
    /// request (304) while the log is unchanged and matches nothing; once it grows it downloads
    /// the grown bundle only, matches at once and runs the on-exposure command. Every report the
    /// check and the revalidation keep is told to the schedule's follower too.
    @Test func theRevalidationMatchesOnlyWhenTheListChanged() async throws {
        let world = try World()
        // A publication without the met key: nobody diagnosed yet.
        try world.honest.append(world.nextEntries())
        try world.publish(world.honest)
        let notifications = world.directory.path + "/notifications"
        let checker = world.checker()
        let told = ToldReports()
        let schedule = ExposureCheckSchedule(
            checker: checker, hook: ExposureHook(command: "echo notified >> '\(notifications)'"), interval: 3_600, jitter: 0,
            refreshInterval: 300, refreshJitter: 60, onReport: { report in told.reports.withLock { $0.append(report) } },
            logger: Logger(label: "test.check"))
        #expect(await schedule.checkOnce())
        #expect(told.all.map(\.withoutPlaces) == [try #require(try ExposureChecker.lastReport(in: world.store))])
        #expect(!FileManager.default.fileExists(atPath: notifications), "nobody diagnosed yet")
        let before = try await world.requests().count

        guard case .unchanged = try await checker.refresh() else {
            Issue.record("an unchanged log was matched again")
            return
        }
        let revalidation = try await world.requests(after: before)
        #expect(revalidation.map(\.path) == ["log/checkpoint"] && revalidation.allSatisfy { $0.condition != nil }, "\(revalidation)")

        // The diagnosed person's key is published: the next revalidation warns.
        let offset = world.heldPartialBytes
        try world.honest.append(world.nextEntries(key: world.metKey))
        try world.publish(world.honest)
        #expect(await schedule.refreshOnce())
        #expect(try String(contentsOfFile: notifications, encoding: .utf8) == "notified\n")
        let report = try #require(try ExposureChecker.lastReport(in: world.store))
        #expect(report.newExposure && report.list.logEntries == 516)
        #expect(told.all.count == 2 && told.all.last?.withoutPlaces == report, "the revalidation's report was not told")
        // The entries already verified were not downloaded again: the grown bundle from its new bytes.
        let grown = try await world.requests(after: before + revalidation.count)
        #expect(grown.map(\.path) == ["log/checkpoint", "log/tile/entries/002.p/4"] && grown.last?.range == "bytes=\(offset)-", "\(grown)")
    }

    // MARK: Redirects

    @Test func aRedirectLoopOnTheCheckpointIsAFailedUpdate() async throws {
        let world = try World()
        try await world.followHonestly()
        let held = try #require(try world.held())
        try world.misbehave(["log/checkpoint": ["redirect": "log/checkpoint"]])
        Self.expectHeldExposure(try await world.check(), failure: "log/checkpoint")
        #expect(try world.held() == held)
    }

    @Test func aCheckpointRedirectedToAnotherFileIsVerifiedLikeAnyOther() async throws {
        // A redirect to a bundle (or any file not a checkpoint) is refused like any other answer.
        let world = try World()
        try await world.followHonestly()
        let held = try #require(try world.held())
        try world.misbehave(["log/checkpoint": ["redirect": "log/tile/entries/000"]])
        Self.expectHeldExposure(try await world.check(), failure: "checkpoint was refused")
        #expect(try world.held() == held)
        try world.misbehave([:])
        Self.expectRecovered(try await world.check(), entries: 514)
    }

    // MARK: ETags

    enum BadETag: String, CaseIterable, Sendable {
        case lineBreak, huge, unquoted

        var value: String {
            switch self {
            case .lineBreak: "\"ab\rcd\""
            case .huge: "\"" + String(repeating: "a", count: 90_000) + "\""
            case .unquoted: "abc"
            }
        }
    }

    @Test(arguments: BadETag.allCases)
    func aBadETagOnTheCheckpointIsNotKeptAndLaterUpdatesWork(_ etag: BadETag) async throws {
        let world = try World()
        try world.publishNext()
        try world.misbehave(["log/checkpoint": ["etag": etag.value]])
        Self.expectRecovered(try await world.check(), entries: 514)
        #expect(world.logStore.checkpointETag == nil)
        #expect(!FileManager.default.fileExists(atPath: world.logStore.etagPath))
        // Every check now downloads the checkpoint, and nothing else.
        Self.expectRecovered(try await world.check(), entries: 514)

        try world.misbehave([:])
        let count = try await world.requests().count
        for _ in 0..<2 { Self.expectRecovered(try await world.check(), entries: 514) }
        let asked = try await world.requests(after: count)
        #expect(asked.map(\.path) == ["log/checkpoint", "log/checkpoint"], "\(asked)")
        // The honest ETag is kept and confirms the log.
        #expect(asked.last?.condition?.hasPrefix("\"") == true, "\(asked)")
    }

    @Test func aCacheHoldingABadETagRecovers() async throws {
        // A copy written by a node from before the ETag rule, or damaged on disk.
        let world = try World()
        try await world.followHonestly()
        try Data("\"ab\rcd\"".utf8).write(to: URL(fileURLWithPath: world.logStore.etagPath))
        Self.expectRecovered(try await world.check(), entries: 514)
        #expect(world.logStore.checkpointETag?.contains("\r") == false)
    }

    @Test(arguments: [400, 412, 431])
    func aRefusedConditionalCheckpointRequestIsRetriedOnceWithoutTheETag(_ status: Int) async throws {
        let world = try World()
        let count = try await world.followHonestly()
        try world.misbehave(["log/checkpoint": ["refuseConditional": status]])
        Self.expectRecovered(try await world.check(), entries: 514)
        let asked = try await world.requests(after: count)
        #expect(asked.map(\.path) == ["log/checkpoint", "log/checkpoint"])
        #expect(asked.map { $0.condition == nil } == [false, true])

        // And a grown log through such a cache: its new bytes only.
        let offset = world.heldPartialBytes
        try world.publishNext()
        Self.expectRecovered(try await world.check(), entries: 516)
        let grown = try await world.requests(after: count + asked.count)
        #expect(grown.map(\.path) == ["log/checkpoint", "log/checkpoint", "log/tile/entries/002.p/4"] && grown.last?.range == "bytes=\(offset)-",
                "\(grown)")
    }
}
