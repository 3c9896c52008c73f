import Crypto
import CurlHTTP
import Foundation
import IDRotation
import Logging
import Synchronization
@testable import Matching
import PositiveListFormat
import Testing
import TestTiers
import TracerCore
import TracerTestSupport

/// The hostile list server suite (issue 25): a compromised CDN in front of the list, played by
/// Tests/Support/http_fixture.py serving signed files with the misbehaviours a test names, and
/// the node's exposure check (`tracer check`'s ExposureChecker, and one step of `tracer run`'s
/// ExposureCheckSchedule) against it over real HTTP (libcurl).
///
/// The rule every test holds: what the node has verified is never forgotten because of an
/// unsigned answer. A node that met a diagnosed person's published key keeps finding that
/// exposure whatever the server answers later, and an update that fails is reported as such
/// (stale: `tracer check` exits 1, or 3 with a warning), never as "no exposure" (exit 0).
///
/// Covered elsewhere and not repeated here: bad signatures, truncated indexes, tampered batches,
/// a server that is down or slow (ExposureCheckCycleTests.failedUpdateKeepsTheVerifiedList),
/// id index rollback and frozen mirrors (ListFreshnessTests, ExposureCheckCycleTests), the HTTP
/// client's own limits: redirect counts, stalls, huge Content-Length (HTTPClientTests).
@Suite(.tags(.integration), .timeLimit(.minutes(1))) struct HostileListServerTests {
    /// One node and its list server: signed files in `site/`, the node's cache and store.
    final class World {
        let directory: TemporaryDirectory
        let server: HTTPFixtureServer
        let signer = BatchSigner()
        let now = UnixSeconds(Date().timeIntervalSince1970)
        let cache: PositiveListCache
        let store: NodeStore
        /// The diagnosed person's key of yesterday, whose ids the node met (if `exposed`).
        let metKey = DailyKey.random()
        let derivation = try! IDDerivation(intervalSeconds: 900)

        var site: String { directory.path + "/site" }
        var baseURL: String { server.url("/list") }
        var yesterday: UTCDay { UTCDay(number: UTCDay(containing: now).number - 1) }

        init(exposed: Bool = true) throws {
            directory = try TemporaryDirectory()
            try FileManager.default.createDirectory(atPath: directory.path + "/site/batches", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: directory.path + "/site/keys", withIntermediateDirectories: true)
            server = try HTTPFixtureServer(listRoot: directory.path + "/site")
            cache = PositiveListCache(directory: directory.path + "/cache")
            store = try NodeStore.open(StoreLocation(path: directory.path + "/node.db", source: .flag, ownsDirectory: false))
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

        func write(_ bytes: [UInt8], to path: String) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: site + "/" + path), options: .atomic)
        }

        /// Publishes id batches `numbers` (one id nobody met each) under an id index of
        /// `generation`; the last one listed with the size `claimed`, if given. `flags` as
        /// today's server sets them, unless a server from before key batches is played.
        func publishIDs(
            _ numbers: [UInt64], generation: UInt64, byteCount claimed: Int? = nil, flags: PositiveListIndex.Flags = .keyIndexPublished
        ) throws {
            var listings: [PositiveListIndex.BatchListing] = []
            for number in numbers {
                let file = try signer.batch(number: number, [listed(UInt64.random(in: 1...UInt64.max), from: now - 900, to: now)])
                try write(file, to: PositiveListBatch.relativePath(number: number))
                listings.append(PositiveListIndex.BatchListing(
                    number: number, timeRange: PublishedTimeRange(start: now - 900, end: now), byteCount: number == numbers.last ? claimed ?? file.count : file.count,
                    sha256: Array(SHA256.hash(data: file))))
            }
            try write(try PositiveListIndex(generation: generation, publishedAt: now, batches: listings, flags: flags).encode(signingKey: signer.key),
                to: PositiveListIndex.relativePath)
        }

        /// Publishes key batches `numbers` under a key index of `generation`: batch 1 holds
        /// `metKey`, the others a random key of yesterday each; the last listed as `claimed` bytes.
        func publishKeys(_ numbers: [UInt64], generation: UInt64, byteCount claimed: Int? = nil) throws {
            var listings: [PositiveListIndex.BatchListing] = []
            for number in numbers {
                let records = [DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: number == 1 ? metKey : DailyKey.random())]
                let file = try PositiveListKeyBatch.encode(number: number, records: records, signingKey: signer.key)
                try write(file, to: PositiveListKeyBatch.relativePath(number: number))
                listings.append(PositiveListIndex.BatchListing(
                    number: number, timeRange: PositiveListKeyBatch.timeRange(of: records), byteCount: number == numbers.last ? claimed ?? file.count : file.count,
                    sha256: Array(SHA256.hash(data: file)), kind: .keys))
            }
            try write(try PositiveListKeyIndex(generation: generation, publishedAt: now, accepts: .both, batches: listings)
                .encode(signingKey: signer.key), to: PositiveListKeyIndex.relativePath)
        }

        /// The honest list: id batch 1 and key batch 1 (the met key).
        func publishHonestList() throws {
            try publishIDs([1], generation: 1)
            try publishKeys([1], generation: 1)
        }

        /// What the server does instead of serving these files, until `misbehave([:])`.
        func misbehave(_ behaviours: [String: [String: Any]]) throws {
            let json = try JSONSerialization.data(withJSONObject: behaviours)
            try json.write(to: URL(fileURLWithPath: site + "/behaviour.json"), options: .atomic)
        }

        /// Every /list/ request so far: (path, If-None-Match or nil).
        func requests() async throws -> [(path: String, condition: String?)] {
            let response = try await CurlHTTPClient().perform(HTTPRequest(url: server.url("/list-requests")))
            let text = String(decoding: response.body, as: UTF8.self)
            return text.split(separator: "\n").map { line in
                let parts = line.split(separator: " ", maxSplits: 1)
                return (String(parts[0]), parts.count > 1 && parts[1] != "-" ? String(parts[1]) : nil)
            }
        }

        func checker(http: CurlHTTPClient = quickClient(maxAttempts: 2)) -> ExposureChecker {
            let clock = ListFreshnessTests.FixedClock(time: now)
            let updater = PositiveListUpdater(
                source: PositiveListSource(baseURL: baseURL, publicKey: signer.publicKey), cache: cache, http: http,
                maximumListAge: 2 * 86_400, clock: clock)
            return ExposureChecker(store: store, cache: cache, publicKey: signer.publicKey, updater: updater, clock: clock)
        }

        func check(http: CurlHTTPClient = quickClient(maxAttempts: 2)) async throws -> ExposureCheckReport {
            try await checker(http: http).check()
        }

        /// The first check against the honest list: the exposure by key is found and verified.
        func checkHonestly() async throws {
            try publishHonestList()
            let report = try await check()
            try #require(report.exposureFound && !report.listIsStale && report.keysChecked == 1, "\(report)")
        }
    }

    /// The verified exposure is still reported, and the report says the list could not be
    /// updated (`tracer check` exits 3 and prints the failure as a warning).
    static func expectHeldExposure(_ report: ExposureCheckReport, failure phrase: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(report.exposureFound, "the verified exposure was forgotten: \(report)", sourceLocation: sourceLocation)
        #expect(report.assessment.level == .high, sourceLocation: sourceLocation)
        #expect(report.listIsStale, "a failed update reported as up to date", sourceLocation: sourceLocation)
        #expect(
            report.list.updateFailure?.contains(phrase) == true, "\(report.list.updateFailure ?? "no failure")",
            sourceLocation: sourceLocation)
    }

    // MARK: Status codes in place of files (issue 25, item 1)

    @Test func aMissingKeyIndexAfterAVerifiedKeyMatchIsAFailedUpdateNotNoExposure() async throws {
        let world = try World()
        try await world.checkHonestly()
        try world.misbehave([PositiveListKeyIndex.relativePath: ["status": 404]])
        let report = try await world.check()
        Self.expectHeldExposure(report, failure: "HTTP 404")
        #expect(report.keysChecked == 1, "the cached, verified key batch is still matched")
        #expect(world.cache.keyIndex(publicKey: world.signer.publicKey)?.generation == 1)
        #expect(world.cache.state.lastFailure?.contains("holds a signed key index") == true)

        // Honest again: the same key index is confirmed, nothing is downloaded again.
        try world.misbehave([:])
        let recovered = try await world.check()
        #expect(recovered.exposureFound && !recovered.listIsStale)
    }

    @Test func aMissingKeyIndexWithoutExposureIsNeverNoExposure() async throws {
        // A node that met nobody, but has seen the signed key index: `tracer check` exits 1.
        let world = try World(exposed: false)
        try world.publishHonestList()
        #expect(try await world.check().listIsStale == false)
        try world.misbehave([PositiveListKeyIndex.relativePath: ["status": 404]])
        let report = try await world.check()
        #expect(!report.exposureFound)
        #expect(report.listIsStale, "a 404 on the key index was taken for a server without keys")
    }

    @Test func aFreshNodeTakesAMissingKeyIndexTheIdIndexAnnouncesForAFailedUpdate() async throws {
        // Never saw the key index: only the signed id index's flag says one exists.
        let world = try World()
        try world.publishHonestList()
        try world.misbehave([PositiveListKeyIndex.relativePath: ["status": 404]])
        let report = try await world.check()
        #expect(!report.exposureFound)
        #expect(report.listIsStale, "a 404 on an announced key index was taken for a server without keys")
        #expect(world.cache.state.lastFailure?.contains("says it publishes one") == true, "\(world.cache.state.lastFailure ?? "none")")

        try world.misbehave([:])
        let recovered = try await world.check()
        #expect(recovered.exposureFound && !recovered.listIsStale && recovered.keysChecked == 1)
    }

    @Test func aServerThatNeverPublishedKeysStillWorks() async throws {
        // A server from before key batches: its id index has no key flag, and a 404 for a node
        // that never held a key index means no keys.
        let world = try World(exposed: false)
        try world.publishIDs([1], generation: 1, flags: [])
        let report = try await world.check()
        #expect(!report.listIsStale && report.keysChecked == nil)
    }

    enum ListFile: String, CaseIterable, Sendable {
        case index = "index.tpli"
        case batch = "batches/2.tplb"
        case keyIndex = "keys/index.tpki"
        case keyBatch = "keys/2.tpkb"
    }

    /// 404, 500 and 503 in place of each file, after the list gained a batch of each kind.
    @Test(arguments: ListFile.allCases, [404, 500, 503])
    func aStatusInPlaceOfAFileKeepsTheVerifiedExposure(_ file: ListFile, _ status: Int) async throws {
        let world = try World()
        try await world.checkHonestly()
        try world.publishIDs([1, 2], generation: 2)
        try world.publishKeys([1, 2], generation: 2)
        try world.misbehave([file.rawValue: ["status": status]])
        let report = try await world.check()
        Self.expectHeldExposure(report, failure: status == 404 ? "HTTP 404" : "HTTP status \(status)")
        #expect(report.keysChecked ?? 0 >= 1)
    }

    // MARK: Rollback, truncation, oversize, endless and trickling bodies, redirects

    @Test func anOlderKeyIndexIsRefusedAndTheHeldKeysStay() async throws {
        let world = try World()
        try world.publishIDs([1], generation: 1)
        try world.publishKeys([1, 2], generation: 5)
        #expect(try await world.check().exposureFound)
        try world.publishKeys([2], generation: 4)
        Self.expectHeldExposure(try await world.check(), failure: "older list")
        #expect(world.cache.keyIndex(publicKey: world.signer.publicKey)?.generation == 5)
    }

    @Test func aTruncatedKeyBatchIsRefusedAndTheHeldKeysStay() async throws {
        let world = try World()
        try await world.checkHonestly()
        try world.publishKeys([1, 2], generation: 2)
        try world.misbehave(["keys/2.tpkb": ["truncate": 40]])
        Self.expectHeldExposure(try await world.check(), failure: "keys/2.tpkb")
        #expect(!FileManager.default.fileExists(atPath: world.cache.keyBatchPath(2)))
    }

    @Test(arguments: [ListFile.index, .keyIndex])
    func anEndlessIndexIsCutOffAtWhatTheFormatAllows(_ file: ListFile) async throws {
        let world = try World()
        try await world.checkHonestly()
        try world.misbehave([file.rawValue: ["endless": true]])
        let report = try await world.check()
        Self.expectHeldExposure(report, failure: "than the list allows (\(PositiveListIndex.maximumByteCount) bytes)")
    }

    @Test(arguments: [PositiveListIndex.BatchKind.ids, .keys])
    func aListingLargerThanTheFormatAllowsIsRefusedBeforeDownloading(_ kind: PositiveListIndex.BatchKind) async throws {
        // A signed index whose listing claims 10 GB, over a batch that never ends.
        let world = try World()
        try await world.checkHonestly()
        let claimed = 10_000_000_000
        if kind == .ids {
            try world.publishIDs([1, 2], generation: 2, byteCount: claimed)
        } else {
            try world.publishKeys([1, 2], generation: 2, byteCount: claimed)
        }
        let batch = kind == .ids ? "batches/2.tplb" : "keys/2.tpkb"
        try world.misbehave([batch: ["endless": true]])
        let report = try await world.check()
        Self.expectHeldExposure(report, failure: "more than the format allows")
        let requested = try await world.requests().map(\.path)
        #expect(!requested.contains(batch), "the oversized batch was requested")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: world.cache.directory + (kind == .ids ? "/batches" : "/keys"))) ?? []
        #expect(names.allSatisfy { !$0.hasPrefix(AtomicFile.temporaryPrefix) }, "\(names)")
    }

    @Test func aBatchLongerThanItsListingIsCutOffAtItsListedSize() async throws {
        // Honestly listed, but served without a length and without end.
        let world = try World()
        try await world.checkHonestly()
        try world.publishKeys([1, 2], generation: 2)
        try world.misbehave(["keys/2.tpkb": ["endless": true]])
        let report = try await world.check()
        let index = try PositiveListKeyIndex(
            verifying: Array(try Data(contentsOf: URL(fileURLWithPath: world.site + "/" + PositiveListKeyIndex.relativePath))),
            publicKey: world.signer.publicKey)
        let listed = try #require(index.batches.last).byteCount
        Self.expectHeldExposure(report, failure: "keys/2.tpkb than the list allows (\(listed) bytes)")
        #expect(!FileManager.default.fileExists(atPath: world.cache.keyBatchPath(2)))
    }

    @Test func aTricklingKeyIndexEndsWithinItsTimeLimit() async throws {
        let world = try World()
        try await world.checkHonestly()
        try world.misbehave([PositiveListKeyIndex.relativePath: ["trickle": 0.5]])
        // What a real client does over a slow link, with libcurl's low-speed window shortened.
        let client = quickClient(maxAttempts: 1) { $0.lowSpeedTime = .seconds(1) }
        let started = ContinuousClock.now
        Self.expectHeldExposure(try await world.check(http: client), failure: "keys/index.tpki")
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func aRedirectLoopOnTheKeyIndexIsAFailedUpdate() async throws {
        let world = try World()
        try await world.checkHonestly()
        try world.misbehave([PositiveListKeyIndex.relativePath: ["redirect": PositiveListKeyIndex.relativePath]])
        Self.expectHeldExposure(try await world.check(), failure: "keys/index.tpki")
    }

    @Test func aKeyIndexRedirectedToAnotherFileIsVerifiedLikeAnyOther() async throws {
        // A redirect to a batch (or any file not a key index) fails verification.
        let world = try World()
        try await world.checkHonestly()
        try world.misbehave([PositiveListKeyIndex.relativePath: ["redirect": "index.tpli"]])
        Self.expectHeldExposure(try await world.check(), failure: "failed verification")
    }

    // MARK: ETags (issue 25, item 3)

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
    func aBadETagIsNotKeptAndLaterUpdatesWork(_ etag: BadETag) async throws {
        let world = try World()
        try world.publishHonestList()
        try world.misbehave([PositiveListIndex.relativePath: ["etag": etag.value], PositiveListKeyIndex.relativePath: ["etag": etag.value]])
        #expect(try await world.check().exposureFound)
        #expect(world.cache.etag == nil && world.cache.keyEtag == nil)
        #expect(!FileManager.default.fileExists(atPath: world.cache.etagPath))

        try world.misbehave([:])
        for _ in 0..<2 {
            let report = try await world.check()
            #expect(report.exposureFound && !report.listIsStale, "\(report.list.updateFailure ?? "")")
        }
        // The honest ETags are kept and confirm the list.
        let lastTwo = try await world.requests().suffix(2)
        #expect(lastTwo.allSatisfy { $0.condition?.hasPrefix("\"") == true }, "\(lastTwo)")
    }

    @Test func aCacheHoldingABadETagRecovers() async throws {
        // A cache written by a node from before the ETag rule.
        let world = try World()
        try await world.checkHonestly()
        for path in [world.cache.etagPath, world.cache.keyEtagPath] {
            try Data("\"ab\rcd\"".utf8).write(to: URL(fileURLWithPath: path))
        }
        let report = try await world.check()
        #expect(report.exposureFound && !report.listIsStale, "\(report.list.updateFailure ?? "")")
        #expect(world.cache.etag?.contains("\r") == false)
    }

    @Test(arguments: [400, 412, 431])
    func aRefusedConditionalRequestIsRetriedOnceWithoutTheETag(_ status: Int) async throws {
        let world = try World()
        try await world.checkHonestly()
        try world.misbehave([
            PositiveListIndex.relativePath: ["refuseConditional": status], PositiveListKeyIndex.relativePath: ["refuseConditional": status],
        ])
        let before = try await world.requests().count
        let report = try await world.check()
        #expect(report.exposureFound && !report.listIsStale, "\(report.list.updateFailure ?? "")")
        let requests = try await world.requests().dropFirst(before)
        #expect(requests.map(\.path) == ["index.tpli", "index.tpli", "keys/index.tpki", "keys/index.tpki"])
        #expect(requests.map { $0.condition == nil } == [false, true, false, true])
    }

    // MARK: `tracer run`'s periodic check

    @Test func thePeriodicCheckDoesNotReportNoExposureWhenTheKeyIndexGoesMissing() async throws {
        let world = try World()
        try world.publishHonestList()
        let notifications = world.directory.path + "/notifications"
        let schedule = ExposureCheckSchedule(
            checker: world.checker(), hook: ExposureHook(command: "echo notified >> '\(notifications)'"), interval: 3_600, jitter: 0,
            logger: Logger(label: "test.check"))
        #expect(await schedule.checkOnce(), "the first check used an up-to-date list")
        #expect(try String(contentsOfFile: notifications, encoding: .utf8) == "notified\n")

        try world.misbehave([PositiveListKeyIndex.relativePath: ["status": 404]])
        // False: the schedule retries soon instead of waiting an interval on a list it could
        // not update; and the stored report (`tracer status`) still shows the exposure.
        #expect(await schedule.checkOnce() == false, "a 404 key index was taken as an up-to-date list")
        let last = try #require(try ExposureChecker.lastReport(in: world.store))
        Self.expectHeldExposure(last, failure: "HTTP 404")
        #expect(try String(contentsOfFile: notifications, encoding: .utf8) == "notified\n", "notified once, not again")
    }

    /// The reports a schedule tells its follower (`onReport`, the node's metrics file).
    final class ToldReports: Sendable {
        let reports = Mutex<[ExposureCheckReport]>([])
        var all: [ExposureCheckReport] { reports.withLock { $0 } }
    }

    /// Issue 29: the frequent revalidation between full checks costs two conditional requests
    /// (304) while the list is unchanged and matches nothing; once an index changes it downloads
    /// the new batch, matches at once and runs the on-exposure command. Every report the check
    /// and the revalidation keep is told to the schedule's follower too.
    @Test func theRevalidationMatchesOnlyWhenTheListChanged() async throws {
        let world = try World()
        try world.publishIDs([1], generation: 1)
        try world.publishKeys([2], generation: 1)
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
            Issue.record("an unchanged list was matched again")
            return
        }
        let revalidation = try await world.requests().dropFirst(before)
        #expect(revalidation.map(\.path) == ["index.tpli", "keys/index.tpki"])
        #expect(revalidation.allSatisfy { $0.condition != nil }, "both requests conditional: \(revalidation)")

        // The diagnosed person's key is published: the next revalidation warns.
        try world.publishKeys([1, 2], generation: 2)
        #expect(await schedule.refreshOnce())
        #expect(try String(contentsOfFile: notifications, encoding: .utf8) == "notified\n")
        let report = try #require(try ExposureChecker.lastReport(in: world.store))
        #expect(report.newExposure && report.list.keyBatches == 2)
        #expect(told.all.count == 2 && told.all.last?.withoutPlaces == report, "the revalidation's report was not told")
        // The id batch already verified was not downloaded again (its index answered 304).
        let all = try await world.requests()
        #expect(all.filter { $0.path == "batches/1.tplb" }.count == 1, "\(all.map(\.path))")
        #expect(all.contains { $0.path == "keys/1.tpkb" })
    }
}
