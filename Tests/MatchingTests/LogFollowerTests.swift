import Crypto
import Foundation
import Matching
import TestTiers
import Testing
import TransparencyLog

/// The node's side of the positive list as a log (issue 39): a follower that verifies each
/// checkpoint, downloads only the entries it does not hold and accepts the checkpoint only if the
/// held tree extended by them has its root. Logs are built with the appender the server uses and
/// served from memory, honestly or as a hostile mirror would.
@Suite(.tags(.unit)) struct LogFollowerTests {
    static let origin = "tracer.test/list"

    /// A log as its server publishes it: tiles, bundles and a checkpoint per append.
    struct PublishedLog {
        let signer: NoteSigner
        var edge = LogRightEdge.empty
        var files: [String: Data] = [:]
        var entries: [Data] = []
        var checkpoint = Data()

        init(signer: NoteSigner) { self.signer = signer }

        mutating func append(
            _ new: [Data], origin: String = LogFollowerTests.origin, cosigners: [NoteSigner] = [], timestamp: UInt64 = 1_764_000_000
        ) throws {
            let result = try LogAppender.append(new, to: edge)
            for write in result.writes { files[write.path] = write.bytes }
            edge = result.rightEdge
            entries += new
            checkpoint = try Checkpoint(origin: origin, treeSize: edge.treeSize, rootHash: result.rootHash)
                .signed(by: [signer] + cosigners, timestamp: timestamp).encoded
        }

        var served: ServedLog { ServedLog(checkpointBytes: checkpoint, files: files, requests: Requests()) }
    }

    actor Requests {
        var made: [(path: String, offset: Int, bytes: Int)] = []
        func record(_ path: String, _ offset: Int, _ bytes: Int) { made.append((path, offset, bytes)) }
    }

    /// Static files as a web server serves them, Range requests included.
    struct ServedLog: LogFileFetching {
        var checkpointBytes: Data
        var files: [String: Data]
        let requests: Requests

        struct NotFound: Error { let path: String }

        func checkpoint() async throws -> Data { checkpointBytes }

        func file(_ path: String, fromByte offset: Int) async throws -> Data {
            guard let bytes = files[path] else { throw NotFound(path: path) }
            let served = bytes.count > offset ? bytes.subdata(in: offset..<bytes.count) : Data()
            await requests.record(path, offset, served.count)
            return served
        }
    }

    static func entries(_ range: Range<Int>, tag: String = "") -> [Data] {
        range.map { Data("entry \($0)\(tag) ".utf8) + Data(repeating: UInt8($0 % 251), count: $0 % 40) }
    }

    static func source(_ signer: NoteSigner, witnesses: [NoteVerifierKey] = [], required: Int = 0) -> FollowedLogSource {
        FollowedLogSource(origin: origin, logKey: signer.verifierKey, witnesses: witnesses, requiredCosignatures: required)
    }

    @Test func aNodeFollowsAGrowingLogDownloadingEachEntryOnce() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var log = PublishedLog(signer: signer)
        var held: FollowedLogState?
        var received: [Data] = []
        var fetchedBytes = 0
        // Sizes that start, fill and cross bundles: 3, then within the first bundle, across two, then a nothing-new check.
        for (step, range) in [0..<3, 3..<200, 200..<700, 700..<700, 700..<701].enumerated() {
            try log.append(Self.entries(range))
            let served = log.served
            let advance = try await LogFollower.advance(held, source: Self.source(signer), fetcher: served)
            #expect(advance.newEntries == Self.entries(range), "step \(step)")
            #expect(advance.checkpoint.checkpoint.treeSize == UInt64(range.upperBound))
            held = advance.state
            received += advance.newEntries
            fetchedBytes += await served.requests.made.reduce(0) { $0 + $1.bytes }
        }
        #expect(received == log.entries)
        // Each entry's framed bytes (a 2-byte length and the entry) were downloaded exactly once.
        #expect(fetchedBytes == log.entries.reduce(0) { $0 + 2 + $1.count })
        #expect(held?.rootHash == MerkleTree.rootHash(ofEntries: log.entries))
    }

    @Test func aHeldPartialBundleIsNotDownloadedAgain() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<10))
        let first = try await LogFollower.advance(nil, source: Self.source(signer), fetcher: log.served)
        try log.append(Self.entries(10..<12))
        let served = log.served
        _ = try await LogFollower.advance(first.state, source: Self.source(signer), fetcher: served)
        let heldBytes = Self.entries(0..<10).reduce(0) { $0 + 2 + $1.count }
        let requests = await served.requests.made
        #expect(requests.map(\.path) == ["tile/entries/000.p/12"])
        #expect(requests.map(\.offset) == [heldBytes])
    }

    @Test func aSmallerLogIsRefusedAsOlderAndIsNoEvidence() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<5))
        let older = log
        try log.append(Self.entries(5..<9))
        let held = try await LogFollower.advance(nil, source: Self.source(signer), fetcher: log.served).state
        // A cache that has not caught up serves the older checkpoint, genuinely signed.
        await #expect {
            try await LogFollower.advance(held, source: Self.source(signer), fetcher: older.served)
        } throws: { error in
            guard case .olderTree(let heldSize, let offered) = error as? LogFollowError else { return false }
            return heldSize == 9 && offered == 5 && !(error as! LogFollowError).isEvidence
        }
    }

    @Test func twoSignedTreesOfOneSizeAreAForkAndEvidence() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var honest = PublishedLog(signer: signer)
        try honest.append(Self.entries(0..<300))
        let held = try await LogFollower.advance(nil, source: Self.source(signer), fetcher: honest.served).state
        var split = PublishedLog(signer: signer)
        try split.append(Self.entries(0..<300, tag: "'"))
        await #expect {
            try await LogFollower.advance(held, source: Self.source(signer), fetcher: split.served)
        } throws: { error in
            guard case .fork(let size, let heldNote, let offeredNote) = error as? LogFollowError else { return false }
            return size == 300 && heldNote == held.checkpointNote && offeredNote == split.checkpoint && (error as! LogFollowError).isEvidence
        }
    }

    @Test func aGrownTreeThatRewroteHistoryIsRefusedButProvesNothingAlone() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var honest = PublishedLog(signer: signer)
        try honest.append(Self.entries(0..<300))
        let held = try await LogFollower.advance(nil, source: Self.source(signer), fetcher: honest.served).state
        // The same key signs a log whose entry 42 was rewritten, then grown: its new entries are
        // real, but its root is not the held tree extended. From the entries alone this cannot be
        // told from a mirror that altered them, so it is refused without evidence.
        var rewritten = PublishedLog(signer: signer)
        var history = Self.entries(0..<300)
        history[42] = Data("entry 42, rewritten".utf8)
        try rewritten.append(history)
        try rewritten.append(Self.entries(300..<320))
        await #expect {
            try await LogFollower.advance(held, source: Self.source(signer), fetcher: rewritten.served)
        } throws: { error in
            guard case .entriesDoNotLeadToCheckpoint(let heldSize, let offeredSize, _, _) = error as? LogFollowError else { return false }
            return heldSize == 300 && offeredSize == 320 && !(error as! LogFollowError).isEvidence
        }
    }

    @Test func anAlteredNewEntryIsCaughtByTheRoot() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<20))
        let held = try await LogFollower.advance(nil, source: Self.source(signer), fetcher: log.served).state
        try log.append(Self.entries(20..<30))
        var served = log.served
        // A mirror flips one byte of the last entry (framing intact).
        var bundle = served.files["tile/entries/000.p/30"]!
        bundle[bundle.count - 1] ^= 0x01
        served.files["tile/entries/000.p/30"] = bundle
        await #expect {
            try await LogFollower.advance(held, source: Self.source(signer), fetcher: served)
        } throws: { error in
            guard case .entriesDoNotLeadToCheckpoint = error as? LogFollowError else { return false }
            return true
        }
    }

    @Test func anOlderNoteOfTheHeldTreeNeverMakesTheListLookOlder() async throws {
        let key = Curve25519.Signing.PrivateKey()
        let signer = try NoteSigner(name: Self.origin, privateKey: key)
        let stamp = try NoteSigner(name: Self.origin, type: .cosignatureV1, privateKey: key)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<3), cosigners: [stamp])
        let earlier = log
        // The same tree signed again a day later (an idle log's refresh).
        let checkpoint = try Checkpoint(origin: Self.origin, treeSize: 3, rootHash: log.edge.rootHash)
        log.checkpoint = try checkpoint.signed(by: [signer, stamp], timestamp: 1_764_086_400).encoded
        let current = try await LogFollower.advance(nil, source: Self.source(signer), fetcher: log.served)
        #expect(current.signedAt == 1_764_086_400)
        // A cache serves the earlier note: the held, later one stays.
        let replayed = try await LogFollower.advance(current.state, source: Self.source(signer), fetcher: earlier.served)
        #expect(replayed.signedAt == 1_764_086_400 && replayed.state == current.state && replayed.newEntries.isEmpty)
        // The later note replaces an earlier held one.
        let first = try await LogFollower.advance(nil, source: Self.source(signer), fetcher: earlier.served)
        #expect(try await LogFollower.advance(first.state, source: Self.source(signer), fetcher: log.served).signedAt == 1_764_086_400)
    }

    @Test func aHeldStateThatIsNotItsCheckpointsTreeIsDamaged() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<3))
        let held = try await LogFollower.advance(nil, source: Self.source(signer), fetcher: log.served).state
        var other = PublishedLog(signer: signer)
        try other.append(Self.entries(0..<4))
        // The note of one tree with the edge of another.
        let mixed = FollowedLogState(checkpointNote: held.checkpointNote, edge: other.edge)
        await #expect {
            try await LogFollower.advance(mixed, source: Self.source(signer), fetcher: log.served)
        } throws: { error in
            guard case .heldStateDamaged = error as? LogFollowError else { return false }
            return true
        }
    }

    @Test func damagedBundlesAreRefusedForWhatTheyAre() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<8))
        for damage in [{ (bytes: Data) in bytes.dropLast(3) }, { $0 + Data([0, 1, 7]) }, { _ in Data() }] {
            var served = log.served
            served.files["tile/entries/000.p/8"] = damage(served.files["tile/entries/000.p/8"]!)
            await #expect {
                try await LogFollower.advance(nil, source: Self.source(signer), fetcher: served)
            } throws: { error in
                guard case .bundle(let path, _) = error as? LogFollowError else { return false }
                return path == "tile/entries/000.p/8"
            }
        }
        var missing = log.served
        missing.files = [:]
        await #expect {
            try await LogFollower.advance(nil, source: Self.source(signer), fetcher: missing)
        } throws: { error in
            guard case .unreachable = error as? LogFollowError else { return false }
            return true
        }
    }

    @Test func aCheckpointFromAnotherOriginKeyOrWithoutItsWitnessesIsRefused() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        let stranger = try NoteSigner.generate(name: Self.origin)
        let witness = try NoteSigner.generate(name: "witness.test", type: .cosignatureV1)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<4), origin: "other.test/list")
        var byStranger = PublishedLog(signer: stranger)
        try byStranger.append(Self.entries(0..<4))
        var unwitnessed = PublishedLog(signer: signer)
        try unwitnessed.append(Self.entries(0..<4))
        var witnessed = PublishedLog(signer: signer)
        try witnessed.append(Self.entries(0..<4), cosigners: [witness])

        let requiringWitness = Self.source(signer, witnesses: [witness.verifierKey], required: 1)
        for (served, source) in [(log.served, Self.source(signer)), (byStranger.served, Self.source(signer)), (unwitnessed.served, requiringWitness)] {
            await #expect {
                try await LogFollower.advance(nil, source: source, fetcher: served)
            } throws: { error in
                guard case .checkpoint = error as? LogFollowError else { return false }
                return !(error as! LogFollowError).isEvidence
            }
        }
        let accepted = try await LogFollower.advance(nil, source: requiringWitness, fetcher: witnessed.served)
        #expect(accepted.checkpoint.cosignatures.map(\.key) == [witness.verifierKey])
    }

    @Test func theLogsOwnTimestampSaysWhenItSignedAndIsNoWitness() async throws {
        let key = Curve25519.Signing.PrivateKey()
        let signer = try NoteSigner(name: Self.origin, privateKey: key)
        let stamp = try NoteSigner(name: Self.origin, type: .cosignatureV1, privateKey: key)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<3), cosigners: [stamp])
        #expect(try await LogFollower.advance(nil, source: Self.source(signer), fetcher: log.served).signedAt == 1_764_000_000)
        // Without it, no time: the node cannot tell a current list from a frozen one.
        var unstamped = PublishedLog(signer: signer)
        try unstamped.append(Self.entries(0..<3))
        #expect(try await LogFollower.advance(nil, source: Self.source(signer), fetcher: unstamped.served).signedAt == nil)
        // The log vouching for itself is not a witness.
        let witness = try NoteSigner.generate(name: "witness.test", type: .cosignatureV1)
        await #expect {
            try await LogFollower.advance(nil, source: Self.source(signer, witnesses: [witness.verifierKey], required: 1), fetcher: log.served)
        } throws: { error in
            guard case .checkpoint(.tooFewCosignatures(let valid, let required)) = error as? LogFollowError else { return false }
            return valid == 0 && required == 1
        }
    }

    @Test func theHeldStateSurvivesItsOwnEncodingAndRefusesDamage() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var log = PublishedLog(signer: signer)
        // Two levels of partial hashes and a partial bundle of 4 entries.
        try log.append(Self.entries(0..<260))
        let state = try await LogFollower.advance(nil, source: Self.source(signer), fetcher: log.served).state
        #expect(state.edge.partialTileHashes.map(\.count) == [4, 1] && state.edge.partialBundleEntries.count == 4)
        let bytes = state.encode()
        let stored = try FollowedLogState.stored(decoding: bytes)
        #expect(stored.partialBundleWidth == 4)
        #expect(try FollowedLogState(stored, partialBundleEntries: state.edge.partialBundleEntries) == state)
        // Version 2: the note, the size and the hashes; no entry, so a few kilobytes at most.
        #expect(FollowedLogState(checkpointNote: Data(), edge: .empty).encode() == Data([2, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [0]))
        #expect(bytes.count == 1 + 4 + state.checkpointNote.count + 8 + 1 + (1 + 4 * 32) + (1 + 32))
        // Every truncation, and a byte after the end, is refused without a trap.
        for length in 0..<bytes.count {
            #expect(throws: FollowedLogStateError.self) { try FollowedLogState.stored(decoding: bytes.prefix(length)) }
        }
        #expect(throws: FollowedLogStateError.trailingBytes) { try FollowedLogState.stored(decoding: bytes + Data([0])) }
        #expect(throws: FollowedLogStateError.unsupportedVersion) { try FollowedLogState.stored(decoding: Data([1]) + bytes.dropFirst()) }
        // Partial entries that do not hash to the level-0 hashes, or too few: no edge.
        var altered = state.edge.partialBundleEntries
        altered[3].append(0x01)
        #expect(throws: FollowedLogStateError.self) { try FollowedLogState(stored, partialBundleEntries: altered) }
        #expect(throws: FollowedLogStateError.self) { try FollowedLogState(stored, partialBundleEntries: Array(altered.prefix(3))) }
    }

    // MARK: Starting mid-log (retention)

    /// Entries `0..<expired` count as expired, the rest as live.
    static func isLive(expired: Int) -> (Data) -> Bool {
        { entry in
            let text = String(decoding: entry.prefix(12), as: UTF8.self)
            let number = Int(text.split(separator: " ")[1].prefix { $0.isNumber }) ?? 0
            return number >= expired
        }
    }

    @Test func aFreshNodeTakesOnlyTheBundlesThatHoldLiveEntries() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<300))
        try log.append(Self.entries(300..<1_000))
        let served = log.served
        // Bundle 1 (256..<512) is all expired, bundle 2 (512..<768) partly: the walk ends at
        // bundle 1, which is taken too so that the root proves it.
        let (advance, first) = try await LogFollower.start(source: Self.source(signer), fetcher: served, isLive: Self.isLive(expired: 600))
        #expect(first == 256)
        #expect(advance.newEntries == Array(log.entries[256...]))
        #expect(advance.state.edge == (try LogAppender.append(log.entries, to: .empty)).rightEdge)
        let asked = await served.requests.made.map(\.path)
        #expect(asked.filter { $0.hasPrefix("tile/entries/") } == ["tile/entries/003.p/232", "tile/entries/002", "tile/entries/001"])
        #expect(!asked.contains("tile/entries/000"), "history before the first expired bundle is never fetched")
        // The edge at 256 came from one level-1 tile: the partial one of the served tree (width 3).
        #expect(asked.filter { !$0.hasPrefix("tile/entries/") } == ["tile/1/000.p/3"])

        // Following on from there works as from any held state.
        try log.append(Self.entries(1_000..<1_010))
        let next = try await LogFollower.advance(advance.state, source: Self.source(signer), fetcher: log.served)
        #expect(next.newEntries == Self.entries(1_000..<1_010))

        // Nothing live: the newest bundle is taken all the same; everything live: the whole log.
        let none = try await LogFollower.start(source: Self.source(signer), fetcher: log.served, isLive: { _ in false })
        #expect(none.firstIndex == 512 && none.advance.newEntries == Array(log.entries[512...]))
        let all = try await LogFollower.start(source: Self.source(signer), fetcher: log.served, isLive: { _ in true })
        #expect(all.firstIndex == 0 && all.advance.newEntries == log.entries)
    }

    @Test func aWrongTileOrEntryAtAFreshStartIsCaughtByTheRoot() async throws {
        let signer = try NoteSigner.generate(name: Self.origin)
        var log = PublishedLog(signer: signer)
        try log.append(Self.entries(0..<900))
        var tampered = log.served
        var tile = [UInt8](try #require(tampered.files["tile/1/000.p/3"]))
        tile[5] ^= 0x01
        tampered.files["tile/1/000.p/3"] = Data(tile)
        await #expect(throws: LogFollowError.self) {
            try await LogFollower.start(source: Self.source(signer), fetcher: tampered, isLive: Self.isLive(expired: 600))
        }
        do {
            _ = try await LogFollower.start(source: Self.source(signer), fetcher: tampered, isLive: Self.isLive(expired: 600))
        } catch {
            guard case .entriesDoNotLeadToCheckpoint(256, 900, _, _) = error else { throw error }
            #expect(!error.isEvidence)
        }
        // A made-up bundle of expired entries where the walk would end, to hide what is before
        // it: the root catches it, since the bundle that ends the walk is taken too.
        var forged = log.served
        forged.files["tile/entries/001"] = try EntryBundle.encode(Self.entries(0..<256, tag: "x"))
        do {
            _ = try await LogFollower.start(source: Self.source(signer), fetcher: forged, isLive: Self.isLive(expired: 600))
            Issue.record("a forged bundle ended the walk")
        } catch {
            guard case .entriesDoNotLeadToCheckpoint = error else { throw error }
        }
        // An altered entry in a bundle that is taken.
        var altered = log.served
        var bundle = [UInt8](try #require(altered.files["tile/entries/002"]))
        bundle[bundle.count - 1] ^= 0x01
        altered.files["tile/entries/002"] = Data(bundle)
        await #expect(throws: LogFollowError.self) {
            try await LogFollower.start(source: Self.source(signer), fetcher: altered, isLive: Self.isLive(expired: 600))
        }
        // A tile that is missing: the update fails, nothing is taken.
        var missing = log.served
        missing.files["tile/1/000.p/3"] = nil
        await #expect(throws: LogFollowError.self) {
            try await LogFollower.start(source: Self.source(signer), fetcher: missing, isLive: Self.isLive(expired: 600))
        }
    }
}
