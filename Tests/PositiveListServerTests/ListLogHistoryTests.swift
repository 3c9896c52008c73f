import Crypto
import Foundation
import IDRotation
import Matching
import PositiveListFormat
@testable import PositiveListServer
import ServerStorage
import Synchronization
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
import TransparencyLog

/// The log's files as a node fetches them, read from the published directory: a 404 is a thrown
/// error, as it is for `HTTPLogFiles`. Records every path asked for.
final class PublishedLogFetcher: LogFileFetching {
    let logDirectory: String
    private let asked = Mutex<[String]>([])

    init(_ directory: PublishedDirectory) { logDirectory = directory.logPath }

    struct NotFound: Error { let path: String }

    var paths: [String] { asked.withLock { $0 } }

    func checkpoint() async throws -> Data {
        guard let bytes = FileManager.default.contents(atPath: logDirectory + "/checkpoint") else { throw NotFound(path: "checkpoint") }
        return bytes
    }

    func file(_ path: String, fromByte offset: Int) async throws -> Data {
        asked.withLock { $0.append(path) }
        guard let bytes = FileManager.default.contents(atPath: logDirectory + "/" + path) else { throw NotFound(path: path) }
        return bytes.count > offset ? bytes.subdata(in: offset..<bytes.count) : Data()
    }
}

/// The server's side of retention (issue 39, item 3): after each publication the entry bundles
/// and level-0 tiles no node can need are deleted, and a node starting afresh against what is
/// left still reaches the checkpoint's root with every live entry.
@Suite(.tags(.unit)) struct ListLogHistoryTests {
    static let day = UnixSeconds.secondsPerDay

    /// Appends `entries` to the published log as the publisher does (tiles, bundles, a checkpoint
    /// signed with both of the server's signatures, the state), standing for batches of uploads
    /// too many to publish one by one in a test.
    static func append(_ entries: [Data], to fixture: ServerFixture) throws {
        let identity = try ListLogPublicationTests.identity(fixture)
        let log = fixture.paths.published.logPath
        var state = try #require(Publisher.readLogState(at: fixture.paths.logState), "publish once first")
        let edge = try LogRightEdge.load(treeSize: state.treeSize) { path in
            try #require(FileManager.default.contents(atPath: log + "/" + path), "\(path) missing")
        }
        let result = try LogAppender.append(entries, to: edge)
        for write in result.writes {
            let path = log + "/" + write.path
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try AtomicFile.write(Array(write.bytes), to: path)
        }
        let note = try Checkpoint(origin: identity.origin, treeSize: result.rightEdge.treeSize, rootHash: result.rootHash).signed(by: [
            try NoteSigner(name: identity.origin, privateKey: fixture.signingKey),
            try NoteSigner(name: identity.origin, type: .cosignatureV1, privateKey: fixture.signingKey),
        ], timestamp: UInt64(fixture.clock.now()))
        try AtomicFile.write(Array(note.encoded), to: fixture.paths.published.logCheckpointPath)
        let previous = state.previousTreeSize
        state.previousTreeSize = state.treeSize
        state.treeSize = result.rightEdge.treeSize
        try writeState(state, fixture)
        Publisher.prunePartialFiles(
            in: log, sizes: [previous, state.previousTreeSize].compactMap { $0 }, keeping: [state.previousTreeSize!, state.treeSize])
    }

    static func writeState(_ state: ListLogState, _ fixture: ServerFixture) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try AtomicFile.write(Array(try encoder.encode(state)), to: fixture.paths.logState)
    }

    /// `count` entries as a day's uploads make them at `now`: ids whose windows ended in the last
    /// hours, and every tenth a key upload published today holding a key of 14 days ago (records
    /// are not ordered in the log).
    static func entries(count: Int, now: UnixSeconds, serial: inout UInt64) -> [Data] {
        (0..<count).map { position in
            serial += 1
            let payload: ListLogEntry.Payload
            if position % 10 == 9 {
                let key = try! DailyKey(bytes: (0..<16).map { UInt8(truncatingIfNeeded: serial &* 7 &+ UInt64($0)) })
                payload = .keys([DailyKeyRecord(day: UTCDay(containing: now - 14 * day), intervalSeconds: 900, key: key)])
            } else {
                let until = now - UnixSeconds(position) * 300
                payload = .ids([PositiveListEntry(id: UserID(rawValue: serial), validFrom: until - 900, validUntil: until)])
            }
            return Data(try! ListLogEntry(batchNumber: 1_000_000 + serial, part: 0, partCount: 1, payload: payload).encode())
        }
    }

    static func exists(_ fixture: ServerFixture, _ path: String) -> Bool {
        FileManager.default.fileExists(atPath: fixture.paths.published.logPath + "/" + path)
    }

    static func checkpoint(_ fixture: ServerFixture) throws -> Checkpoint {
        try PublishedListLogHead.open(fixture)
    }

    /// The entries published from `from` to the checkpoint's size, from the bundles (new ones,
    /// never deleted).
    static func newEntries(_ fixture: ServerFixture, from: UInt64, to size: UInt64) throws -> [Data] {
        var entries: [Data] = []
        var index = from
        while index < size {
            let bundle = try TileLayout.entryBundle(holding: index, treeSize: size)
            let bytes = try #require(FileManager.default.contents(atPath: fixture.paths.published.logPath + "/" + bundle.path))
            entries += try EntryBundle.decode(bytes, as: bundle).dropFirst(Int(index - bundle.entryRange.lowerBound))
            index = bundle.entryRange.upperBound
        }
        return entries
    }

    /// The first bundle kept, worked out from every entry the log ever held: the bundle before
    /// the first one with a record ending at or after now less 30 days (28, the longest a node
    /// keeps encounters, and 2 of margin), never after the one before the newest, never back.
    static func expectedKept(_ all: [Data], now: UnixSeconds, previous: UInt64) -> UInt64 {
        let cutoff = now - 30 * day
        let newest = UInt64(all.count - 1) / 256
        let firstLive = stride(from: 0, to: all.count, by: 256).first { start in
            all[start..<min(start + 256, all.count)].contains { ListLogEntry.isLive([UInt8]($0), cutoff: cutoff) }
        }.map { UInt64($0 / 256) }
        let limit = min(firstLive ?? newest + 1, newest)
        return max(previous, limit == 0 ? 0 : limit - 1)
    }

    /// Only the full bundles and level-0 tiles before `kept` are gone (up to `levelZeroKept` for
    /// tiles); every tile of level 1 and above, and the right edge, is there.
    static func expectFiles(_ fixture: ServerFixture, size: UInt64, kept: UInt64, levelZeroKept: UInt64? = nil) {
        for index in 0..<(size / 256) {
            let bundle = try! EntryBundleID(index: index, width: 256).path
            let tile = try! TileID(level: 0, index: index, width: 256).path
            #expect(exists(fixture, bundle) == (index >= kept), "\(bundle) with history kept from bundle \(kept)")
            #expect(exists(fixture, tile) == (index >= (levelZeroKept ?? kept)), "\(tile) with history kept from bundle \(kept)")
        }
        for tile in TileLayout.tiles(treeSize: size) where tile.level >= 1 || tile.isPartial {
            #expect(exists(fixture, tile.path), "\(tile.path) (level \(tile.level)) must stay")
        }
        if size % 256 != 0 {
            #expect(exists(fixture, try! TileLayout.entryBundle(holding: size - 1, treeSize: size).path), "the partial bundle stays")
        }
    }

    static func source(_ fixture: ServerFixture) throws -> FollowedLogSource {
        let identity = try ListLogPublicationTests.identity(fixture)
        return FollowedLogSource(origin: identity.origin, logKey: identity.verifierKey)
    }

    /// A node starting afresh at `now` against the published directory: it reaches the
    /// checkpoint's root and holds every entry live for it.
    static func expectFreshNodeGetsEveryLiveEntry(
        _ fixture: ServerFixture, all: [Data], now: UnixSeconds, fetcher: (any LogFileFetching)? = nil
    ) async throws {
        let fetcher = fetcher ?? PublishedLogFetcher(fixture.paths.published)
        let retention = ListLogRetention(retention: .standard, now: now)
        let (advance, first) = try await LogFollower.start(source: try source(fixture), fetcher: fetcher, isLive: retention.isLive)
        let checkpoint = try checkpoint(fixture)
        #expect(advance.checkpoint.checkpoint == checkpoint)
        #expect(advance.state.rootHash == checkpoint.rootHash && advance.state.treeSize == UInt64(all.count))
        #expect(advance.newEntries == Array(all[Int(first)...]), "the entries from the first one taken")
        let missed = all[..<Int(first)].filter(retention.isLive)
        #expect(missed.isEmpty, "\(missed.count) live entries before entry \(first) not taken")
    }

    // MARK: Weeks of publications

    /// 70 days of publications, four a day, each with 40 entries of uploads and every day real
    /// batches: after each, exactly the bundles and level-0 tiles before the boundary are gone,
    /// every tile of level 1 and above stays, a node starting afresh (on time, or with a clock a
    /// day behind) gets every live entry and the checkpoint's root, and a node that follows from
    /// the third day on keeps following.
    @Test func weeksOfPublicationsDeleteOnlyWhatNoNodeNeeds() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        try await publisher.publish()
        var all: [Data] = []
        var serial: UInt64 = 0
        var kept: UInt64 = 0
        var follower: FollowedLogState?
        var deletedAtOnce: [Int] = []
        for day in 0..<70 {
            for quarter in 0..<4 {
                if quarter == 0 {
                    try await ListLogPublicationTests.addIDs(fixture, count: 30, seed: UInt64(day * 10 + 1))
                    try await ListLogPublicationTests.addKeys(fixture, count: 3, seed: UInt64(day * 10 + 2))
                }
                try Self.append(Self.entries(count: 40, now: fixture.clock.now(), serial: &serial), to: fixture)
                let report = try await publisher.publish()
                let size = try Self.checkpoint(fixture).treeSize
                all += try Self.newEntries(fixture, from: UInt64(all.count), to: size)
                let expected = Self.expectedKept(all, now: fixture.clock.now(), previous: kept)
                #expect(report.log?.historyKeptFromEntry == expected << 8, "day \(day)")
                if report.log?.deletedHistoryFiles ?? 0 > 0 { deletedAtOnce.append(report.log!.deletedHistoryFiles) }
                kept = expected
                Self.expectFiles(fixture, size: size, kept: kept)
                let state = try #require(Publisher.readLogState(at: fixture.paths.logState)?.history)
                #expect(state.bundlesDeletedBefore == kept && state.levelZeroTilesDeletedBefore == kept && state.keptFromBundle == kept)

                if let held = follower {
                    let advance = try await LogFollower.advance(held, source: try Self.source(fixture), fetcher: PublishedLogFetcher(fixture.paths.published))
                    #expect(advance.state.treeSize == size)
                    follower = advance.state
                }
                fixture.clock.advance(by: 6 * 3_600)
            }
            if day == 2 {
                follower = try await LogFollower.start(
                    source: try Self.source(fixture), fetcher: PublishedLogFetcher(fixture.paths.published),
                    isLive: ListLogRetention(retention: .standard, now: fixture.clock.now()).isLive).advance.state
            }
            if day % 3 == 0 || day >= 60 {
                try await Self.expectFreshNodeGetsEveryLiveEntry(fixture, all: all, now: fixture.clock.now())
                try await Self.expectFreshNodeGetsEveryLiveEntry(fixture, all: all, now: fixture.clock.now() - Self.day)
            }
        }
        // 70 days at about 170 entries a day: the first 40 days' bundles are gone, a bundle or two
        // at a time, and what is kept is about 30 days' worth.
        #expect(kept >= 20, "history kept from bundle \(kept) of \(all.count / 256)")
        #expect(deletedAtOnce.allSatisfy { $0 <= 4 }, "\(deletedAtOnce)")
        #expect(UInt64(all.count) / 256 - kept <= 24)
        // The follower's state is the published tree's.
        #expect(follower?.rootHash == (try Self.checkpoint(fixture)).rootHash)
    }

    // MARK: The boundary

    /// Records are not ordered: a bundle after the first live one may have expired, a bundle
    /// before it never matters; with nothing live the newest two stay.
    @Test func theBoundaryIsTheBundleBeforeTheFirstLiveOneAndNeverPassesTheNewestTwo() throws {
        let cutoff: UnixSeconds = 10_000
        func bundles(_ ends: [UnixSeconds], last: Int = 256) -> [String: Data] {
            var files: [String: Data] = [:]
            for (index, end) in ends.enumerated() {
                let width = index == ends.count - 1 ? last : 256
                let entries = (0..<width).map { position in
                    Data(try! ListLogEntry(batchNumber: UInt64(index * 1_000 + position), part: 0, partCount: 1, payload: .ids([
                        PositiveListEntry(id: UserID(rawValue: 1), validFrom: 0, validUntil: position == width - 1 ? end : 1),
                    ])).encode())
                }
                let id = try! EntryBundleID(index: UInt64(index), width: width)
                files[id.path] = try! EntryBundle.encode(entries)
            }
            return files
        }
        func boundary(_ ends: [UnixSeconds], last: Int = 256, from history: ListLogHistory = .whole) throws -> (ListLogHistory, [String]) {
            let files = bundles(ends, last: last)
            var read: [String] = []
            let size = UInt64((ends.count - 1) * 256 + last)
            let kept = try Publisher.historyBoundary(history, treeSize: size, cutoff: cutoff) { path throws(ListLogHistoryError) in
                read.append(path)
                guard let data = files[path] else { throw .bundleUnreadable(path: path, reason: "missing") }
                return data
            }
            return (kept, read)
        }
        // Bundle 2 is the first live one; 3 expired after it, 4 live, 5 the partial newest.
        let (kept, read) = try boundary([1, 2, cutoff, 5, cutoff + 9, 7], last: 10)
        #expect(kept.keptFromBundle == 1 && kept.liveBundle == 2 && kept.liveBundleUntil == cutoff)
        #expect(read == ["tile/entries/000", "tile/entries/001", "tile/entries/002"], "stops at the first live bundle")
        // Nothing live: the newest two stay.
        #expect(try boundary([1, 2, 3, 4], last: 3).0.keptFromBundle == 2)
        #expect(try boundary([1, 2, 3, 4], last: 256).0.keptFromBundle == 2)
        #expect(try boundary([1, 2]).0.keptFromBundle == 0)
        #expect(try boundary([1]).0.keptFromBundle == 0)
        // The first bundle live: nothing goes.
        #expect(try boundary([cutoff, 1, 1]).0.keptFromBundle == 0)
        // The next pass starts from the live bundle, and decodes nothing while it is still live.
        let (again, readAgain) = try boundary([1, 2, cutoff, 5, cutoff + 9, 7], last: 10, from: kept)
        #expect(again == kept && readAgain.isEmpty)
        // Once it has expired (its entries' latest end is before the cutoff): from there on.
        var stale = kept
        stale.liveBundleUntil = cutoff - 1
        let (moved, readMoved) = try boundary([1, 2, 1, 5, cutoff + 9, 7], last: 10, from: stale)
        #expect(moved.keptFromBundle == 3 && moved.liveBundle == 4)
        #expect(readMoved == ["tile/entries/002", "tile/entries/003", "tile/entries/004"])
        // Never back.
        var ahead = ListLogHistory.whole
        ahead.keptFromBundle = 4
        #expect(try boundary([cutoff, 1, 1, 1, 1, 1, 1]).0.keptFromBundle == 0)
        #expect(try boundary([1, 1, 1, 1, cutoff, 1, 1], from: ahead).0.keptFromBundle == 4)
        // An entry that does not parse is live: what cannot be read is not thrown away.
        #expect(ListLogEntry.isLive([9, 9, 9], cutoff: .max))
        #expect(ListLogEntry.liveUntil([9]) == .max)
    }

    /// One rule for node and server: an entry is live while its latest record (an id's window, a
    /// key's day) ends at or after the cutoff; the node's cutoff is its encounter cutoff less a day.
    @Test func theNodeAndTheServerShareOneLivenessRule() throws {
        let day = UTCDay(number: 20_000)
        let key = try DailyKey(bytes: [UInt8](repeating: 0xAA, count: 16))
        let keys = ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .keys([
            DailyKeyRecord(day: UTCDay(number: 19_990), intervalSeconds: 900, key: key),
            DailyKeyRecord(day: day, intervalSeconds: 900, key: key),
        ]))
        #expect(keys.latestRecordEnd == day.end)
        let ids = ListLogEntry(batchNumber: 2, part: 0, partCount: 1, payload: .ids([
            PositiveListEntry(id: UserID(rawValue: 1), validFrom: 100, validUntil: 5_000),
            PositiveListEntry(id: UserID(rawValue: 2), validFrom: 100, validUntil: 900),
        ]))
        #expect(ids.latestRecordEnd == 5_000)
        #expect(ids.isLive(cutoff: 5_000) && !ids.isLive(cutoff: 5_001))
        // The node at the time its cutoff is the key's day's end, and a second later.
        let nodeNow = day.end + 29 * Self.day
        let bytes = try keys.encode()
        #expect(ListLogRetention(retention: .standard, now: nodeNow).isLive(Data(bytes)))
        #expect(!ListLogRetention(retention: .standard, now: nodeNow + 1).isLive(Data(bytes)))
        #expect(ListLogEntry.isLive(bytes, cutoff: day.end) && !ListLogEntry.isLive(bytes, cutoff: day.end + 1))
        // The server's cutoff is 30 days (28 and 2 of margin) even with a shorter retentionDays.
        #expect(Publisher.historyCutoff(now: nodeNow, retentionSeconds: 14 * Self.day) == nodeNow - 30 * Self.day)
    }

    /// The state before this change reads, with nothing deleted; the next publication records
    /// the history kept in the optional field.
    @Test func aStateFileWithoutTheHistoryReadsAndGainsIt() async throws {
        let old = try JSONDecoder().decode(ListLogState.self, from: Data(#"{"lastIDBatch":4,"lastKeyBatch":2,"previousTreeSize":7,"treeSize":9}"#.utf8))
        #expect(old == ListLogState(treeSize: 9, lastIDBatch: 4, lastKeyBatch: 2, previousTreeSize: 7, history: nil))
        #expect(try JSONDecoder().decode(ListLogState.self, from: Data(#"{"lastIDBatch":0,"lastKeyBatch":0,"treeSize":0}"#.utf8)) == .empty)

        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.makePublisher().publish()
        var serial: UInt64 = 0
        // 40 days of history at 100 entries a day, all appended before one publication.
        for day in stride(from: 40, to: 0, by: -1) {
            try Self.append(Self.entries(count: 100, now: fixture.clock.now() - UnixSeconds(day) * Self.day, serial: &serial), to: fixture)
        }
        var state = try #require(Publisher.readLogState(at: fixture.paths.logState))
        state.history = nil
        try Self.writeState(state, fixture)
        #expect(!String(decoding: try #require(FileManager.default.contents(atPath: fixture.paths.logState)), as: UTF8.self).contains("history"))
        #expect(Publisher.logHistoryKeptFromEntry(statePath: fixture.paths.logState) == nil)

        let report = try await fixture.makePublisher().publish()
        let kept = try #require(Publisher.readLogState(at: fixture.paths.logState)?.history)
        #expect(kept.keptFromBundle > 0 && report.log?.historyKeptFromEntry == kept.keptFromEntry)
        #expect(report.log?.deletedHistoryFiles == Int(kept.keptFromBundle) * 2)
        #expect(Publisher.logHistoryKeptFromEntry(statePath: fixture.paths.logState) == kept.keptFromEntry)
        let json = String(decoding: try #require(FileManager.default.contents(atPath: fixture.paths.logState)), as: UTF8.self)
        #expect(json.contains(#""history":{"bundlesDeletedBefore":\#(kept.keptFromBundle),"keptFromBundle":\#(kept.keptFromBundle)"#), "\(json)")
    }

    // MARK: Crashes and failures

    /// A crash after the boundary is recorded, or between two deletions, leaves files below it
    /// that nodes never ask for; the publication itself succeeds, and the next one deletes them.
    @Test(arguments: PublishStep.historySteps)
    func aCrashInTheDeletionsIsHarmlessAndTheNextPublicationFinishesThem(_ step: PublishStep) async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.makePublisher().publish()
        var serial: UInt64 = 0
        var all: [Data] = []
        for day in stride(from: 45, to: 0, by: -1) {
            let entries = Self.entries(count: 100, now: fixture.clock.now() - UnixSeconds(day) * Self.day, serial: &serial)
            try Self.append(entries, to: fixture)
            all += entries
        }
        let crashed = Once()
        let crashing = fixture.makePublisher(faultInjection: { reached in
            if reached == step, crashed.first() { throw CancellationError() }
        })
        let report = try await crashing.publish()
        #expect(crashed.happened, "the fault was reached")
        #expect(report.log?.historyKeptFromEntry == nil, "the pass did not finish")
        #expect(fixture.logs.all.contains { $0.contains("old log history was not deleted") && $0.contains(step.rawValue) })
        let history = try #require(Publisher.readLogState(at: fixture.paths.logState)?.history)
        let kept = Self.expectedKept(all, now: fixture.clock.now(), previous: 0)
        #expect(history.keptFromBundle == kept && kept > 2, "the boundary is recorded first")
        #expect(history.bundlesDeletedBefore == 0 && history.levelZeroTilesDeletedBefore == 0)
        let gone = (0..<kept).filter { !Self.exists(fixture, try! EntryBundleID(index: $0, width: 256).path) }
        #expect(gone == (step == .logHistoryFileDeleted ? [0] : []))
        // Nodes meet a consistent log meanwhile.
        try await Self.expectFreshNodeGetsEveryLiveEntry(fixture, all: all, now: fixture.clock.now())

        fixture.clock.advance(by: 60)
        let next = try await fixture.makePublisher().publish()
        let nextKept = Self.expectedKept(all, now: fixture.clock.now(), previous: kept)
        #expect(next.log?.historyKeptFromEntry == nextKept << 8)
        Self.expectFiles(fixture, size: UInt64(all.count), kept: nextKept)
        let finished = try #require(Publisher.readLogState(at: fixture.paths.logState)?.history)
        #expect(finished.bundlesDeletedBefore == nextKept && finished.levelZeroTilesDeletedBefore == nextKept)
        try await Self.expectFreshNodeGetsEveryLiveEntry(fixture, all: all, now: fixture.clock.now())
    }

    /// A bundle the pass cannot read stops the pass, never the publication: it is logged, and the
    /// index, key index and checkpoint are published as usual.
    @Test func aPassThatFailsIsLoggedAndNeverBlocksPublication() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.makePublisher().publish()
        var serial: UInt64 = 0
        for day in stride(from: 40, to: 0, by: -1) {
            try Self.append(Self.entries(count: 100, now: fixture.clock.now() - UnixSeconds(day) * Self.day, serial: &serial), to: fixture)
        }
        try AtomicFile.write([0, 9, 1], to: fixture.paths.published.logPath + "/tile/entries/000")
        try await ListLogPublicationTests.addIDs(fixture, count: 5, seed: 3)
        let report = try await fixture.makePublisher().publish()
        #expect(report.newBatch != nil && report.log?.appendedEntries == 1)
        #expect(report.log?.historyKeptFromEntry == nil)
        #expect(fixture.logs.all.contains { $0.contains("old log history was not deleted") && $0.contains("tile/entries/000") }, "\(fixture.logs.all.suffix(3))")
        #expect(Self.exists(fixture, "tile/entries/001"), "nothing deleted")
    }

    // MARK: Witnesses

    /// A witness that was down for weeks is still sent a proof from the tree it last cosigned:
    /// the level-0 tiles that proof reads stay (bundles go), and go once it has cosigned again.
    @Test func theLevelZeroTilesOfAWitnessProofStayWhileTheWitnessIsDown() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let identity = try ListLogPublicationTests.identity(fixture)
        let witness = try WitnessHarness(witnessing: identity.verifierKey)
        defer { witness.remove() }
        let line = WitnessLine()
        let publisher = CheckpointCosigningTests.publisher(fixture, witness: witness, line: line)
        try await publisher.publish()
        var serial: UInt64 = 0
        try Self.append(Self.entries(count: 300, now: fixture.clock.now(), serial: &serial), to: fixture)
        #expect(try await publisher.publish().log?.cosignedBy == [WitnessHarness.name])
        #expect(try CheckpointCosigningTests.record(fixture, witness).cosignedSize == 300)

        await line.set(up: false)
        for _ in 0..<45 {
            fixture.clock.advance(by: Self.day)
            try Self.append(Self.entries(count: 120, now: fixture.clock.now(), serial: &serial), to: fixture)
            #expect(try await publisher.publish().log?.witnessesFailed == [WitnessHarness.name])
        }
        let size = try Self.checkpoint(fixture).treeSize
        let history = try #require(Publisher.readLogState(at: fixture.paths.logState)?.history)
        #expect(history.keptFromBundle > 2)
        // The proof from 300 reads level-0 tile 1 (entries 256 to 511).
        #expect(history.levelZeroTilesDeletedBefore == 1)
        Self.expectFiles(fixture, size: size, kept: history.keptFromBundle, levelZeroKept: 1)

        await line.set(up: true)
        fixture.clock.advance(by: 3_600)
        try Self.append(Self.entries(count: 3, now: fixture.clock.now(), serial: &serial), to: fixture)
        let back = try await publisher.publish()
        #expect(back.log?.cosignedBy == [WitnessHarness.name], "\(fixture.logs.all.suffix(3))")
        #expect(await line.oldSizes.last == 300)
        fixture.clock.advance(by: 3_600)
        try await publisher.publish()
        let after = try #require(Publisher.readLogState(at: fixture.paths.logState)?.history)
        Self.expectFiles(fixture, size: try Self.checkpoint(fixture).treeSize, kept: after.keptFromBundle)
    }
}

/// True the first time only.
final class Once: Sendable {
    private let done = Mutex(false)
    func first() -> Bool { done.withLock { done in defer { done = true }; return !done } }
    var happened: Bool { done.withLock { $0 } }
}

/// The published checkpoint, opened with the server's keys.
enum PublishedListLogHead {
    static func open(_ fixture: ServerFixture) throws -> Checkpoint {
        let identity = try ListLogPublicationTests.identity(fixture)
        let bytes = try #require(FileManager.default.contents(atPath: fixture.paths.published.logCheckpointPath))
        return try Checkpoint.open(bytes, origin: identity.origin, logKey: identity.verifierKey).checkpoint
    }
}
