import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PositiveListFormat
@testable import PositiveListServer
@testable import ServerHTTPAPI
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
import TransparencyLog

/// A witness of one log, in a scratch directory, on a manual clock.
struct WitnessHarness: Sendable {
    static let name = "witness.test/w1"
    let directory: String
    /// The seed, as the fixture keeps its key: Crypto's key type is not Sendable.
    let keyBytes: [UInt8]
    let clock: ManualClock
    let witness: CheckpointWitness
    let logs = LogCapture()

    init(witnessing log: NoteVerifierKey, origin: String? = nil, directory: String? = nil, key: Curve25519.Signing.PrivateKey? = nil) throws {
        self.directory = directory ?? NSTemporaryDirectory() + "/tracer-witness-test-" + UUID().uuidString
        keyBytes = Array((key ?? Curve25519.Signing.PrivateKey()).rawRepresentation)
        clock = ManualClock(ServerFixture.start)
        witness = try CheckpointWitness(
            key: try Curve25519.Signing.PrivateKey(rawRepresentation: keyBytes), name: Self.name, logs: [WitnessedLogSettings(origin: origin ?? log.name, key: log)], directory: self.directory,
            clock: clock, logger: logs.logger)
    }

    /// The same directory and key, as after a restart.
    func restarted(witnessing log: NoteVerifierKey) throws -> WitnessHarness {
        try WitnessHarness(witnessing: log, directory: directory, key: try Curve25519.Signing.PrivateKey(rawRepresentation: keyBytes))
    }

    var verifierKey: NoteVerifierKey { witness.identity.verifierKey }
    var store: WitnessStateStore { WitnessStateStore(directory: directory) }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

/// A log held in memory: its signer and whatever entries a test gives it.
struct MemoryLog {
    let signer: NoteSigner
    var origin: String { signer.name }
    var key: NoteVerifierKey { signer.verifierKey }

    init(origin: String = "log.test/a") throws {
        signer = try NoteSigner.generate(name: origin)
    }

    static func entries(_ count: Int, from start: Int = 0) -> [Data] { (start..<(start + count)).map { Data("entry \($0)".utf8) } }

    /// The request for the tree of `entries` from `oldSize`, with the proof from that tree.
    func request(_ entries: [Data], from oldSize: UInt64) throws -> AddCheckpointRequest {
        let leaves = entries.map { MerkleTree.leafHash($0) }
        let checkpoint = try Checkpoint(origin: origin, treeSize: UInt64(entries.count), rootHash: MerkleTree.rootHash(ofLeafHashes: leaves))
        let proof = try MerkleProofGenerator.consistencyProof(oldSize: oldSize, newSize: UInt64(entries.count), reader: Leaves(leaves))
        return AddCheckpointRequest(oldSize: oldSize, proof: proof, note: try checkpoint.signed(by: [signer]))
    }

    /// Complete subtrees straight from the leaves.
    struct Leaves: MerkleNodeReader {
        let leaves: [MerkleHash]
        init(_ leaves: [MerkleHash]) { self.leaves = leaves }
        func hash(of node: MerkleNodeID) throws -> MerkleHash {
            let range = node.leafRange!
            return MerkleTree.rootHash(ofLeafHashes: leaves[Int(range.lowerBound)..<Int(range.upperBound)])
        }
    }
}

/// The witness's transport in unit tests: the witness in this process, answered as its HTTP
/// route answers, behind a switch that makes it unreachable.
actor WitnessLine {
    var up = true
    var oldSizes: [UInt64] = []

    func set(up: Bool) { self.up = up }
    func record(_ body: [UInt8]) { if let request = try? AddCheckpointRequest(parsing: body) { oldSizes.append(request.oldSize) } }
}

struct DirectWitnessTransport: WitnessTransport {
    let witness: CheckpointWitness
    let line: WitnessLine
    /// Run before each request reaches the witness (a test's look at the published files).
    var beforeEach: @Sendable (AddCheckpointRequest) -> Void = { _ in }

    func post(_ body: [UInt8], to url: String, timeout: Duration) async -> Result<WitnessHTTPAnswer, WitnessUnreachable> {
        guard await line.up else { return .failure(WitnessUnreachable(reason: "Failed to connect to 127.0.0.1 port 9: Connection refused")) }
        await line.record(body)
        if let request = try? AddCheckpointRequest(parsing: body) { beforeEach(request) }
        return .success(WitnessAPI.answer(await witness.addCheckpoint(body)))
    }
}

/// The witness role (C2SP tlog-witness): what it cosigns, what it refuses with which status,
/// what it keeps, durably, and the evidence of a log that forked.
@Suite(.tags(.unit)) struct CheckpointWitnessTests {
    static func cosignature(_ outcome: WitnessOutcome) throws -> String {
        guard case .cosigned(let lines, _) = outcome else { throw HarnessFailure(description: "not cosigned: \(outcome)") }
        return lines
    }

    @Test func itCosignsAFirstTreeThenOnlyTreesThatExtendItAcrossARestart() async throws {
        let log = try MemoryLog()
        let harness = try WitnessHarness(witnessing: log.key)
        defer { harness.remove() }
        let first = try log.request(MemoryLog.entries(3), from: 0)
        let lines = try Self.cosignature(await harness.witness.addCheckpoint(Array(first.encoded)))
        // The line is a cosignature/v1 by the witness's key at the witness's time over the checkpoint.
        let cosigned = try WitnessAnswer.cosignatures(inBody: Data(lines.utf8), for: first.note, witness: harness.verifierKey)
        let note = try SignedNote(text: first.note.text, signatures: first.note.signatures + cosigned)
        let opened = try Checkpoint.open(note.encoded, origin: log.origin, logKey: log.key, witnesses: [harness.verifierKey], requiredCosignatures: 1)
        #expect(opened.cosignatures.first?.cosignatureTime == UInt64(ServerFixture.start))
        #expect(harness.verifierKey.name == WitnessHarness.name && harness.verifierKey.type == .cosignatureV1)

        // Kept on disk: a restarted witness knows it cosigned size 3.
        let held = try #require(try harness.store.read(origin: log.origin))
        #expect(held.treeSize == 3 && held.rootHash == first.note.text.split(separator: "\n")[2].description && held.note == String(decoding: first.note.encoded, as: UTF8.self))
        let restarted = try harness.restarted(witnessing: log.key)
        #expect(await restarted.witness.addCheckpoint(Array(try log.request(MemoryLog.entries(5), from: 0).encoded)) == .refused(.oldSizeMismatch(oldSize: 0, heldSize: 3)))
        _ = try Self.cosignature(await restarted.witness.addCheckpoint(Array(try log.request(MemoryLog.entries(5), from: 3).encoded)))
        #expect(try restarted.store.read(origin: log.origin)?.treeSize == 5)
        // The same tree again, a newer note: cosigned again at the new time, nothing written.
        restarted.clock.advance(by: 60)
        let again = try log.request(MemoryLog.entries(5), from: 5)
        let line = try Self.cosignature(await restarted.witness.addCheckpoint(Array(again.encoded)))
        let time = try Checkpoint.open(
            try SignedNote(text: again.note.text, signatures: again.note.signatures + WitnessAnswer.cosignatures(inBody: Data(line.utf8), for: again.note, witness: harness.verifierKey)).encoded,
            origin: log.origin, logKey: log.key, witnesses: [harness.verifierKey], requiredCosignatures: 1).cosignatures.first?.cosignatureTime
        #expect(time == UInt64(ServerFixture.start + 60))
        let kept = try #require(try restarted.store.read(origin: log.origin))
        #expect(kept.treeSize == 5 && kept.cosignedAt == ServerFixture.start, "the record of size 5 is the first one")
    }

    @Test func aSplitViewIsRefusedAndBothNotesAreKeptOnce() async throws {
        let log = try MemoryLog()
        let harness = try WitnessHarness(witnessing: log.key)
        defer { harness.remove() }
        let honest = try log.request(MemoryLog.entries(4), from: 0)
        _ = try Self.cosignature(await harness.witness.addCheckpoint(Array(honest.encoded)))
        let forked = try log.request(MemoryLog.entries(4, from: 100), from: 4)
        let outcome = await harness.witness.addCheckpoint(Array(forked.encoded))
        guard case .refused(.splitView(4, _, _)) = outcome else { Issue.record("\(outcome)"); return }
        #expect(WitnessAPI.answer(outcome).status == 409 && WitnessAPI.answer(outcome).contentType != WitnessAnswer.sizeContentType)
        let folders = harness.store.evidenceFolders()
        #expect(folders.count == 1 && folders[0].contains("/split-view-"), "\(folders)")
        let folder = try #require(folders.first)
        // Both notes, each with the log's own signature: anyone with the log's key can check them.
        let held = try #require(FileManager.default.contents(atPath: folder + "/held-checkpoint"))
        #expect(try Checkpoint.open(held, origin: log.origin, logKey: log.key).checkpoint.treeSize == 4)
        let offered = try AddCheckpointRequest(parsing: try #require(FileManager.default.contents(atPath: folder + "/offered-request")))
        #expect(offered == forked)
        #expect(try offered.note.verify(with: [log.key]).text != (try SignedNote(parsing: held)).text)
        #expect(try String(contentsOfFile: folder + "/reason.txt", encoding: .utf8).contains("split view"))
        // Offered again: refused again, kept once. The held tree is unchanged.
        _ = await harness.witness.addCheckpoint(Array(forked.encoded))
        #expect(harness.store.evidenceFolders() == folders)
        _ = try Self.cosignature(await harness.witness.addCheckpoint(Array(try log.request(MemoryLog.entries(6), from: 4).encoded)))
        #expect(harness.logs.all.contains { $0.contains("does not extend the tree this witness cosigned") })
    }

    @Test func aTreeThatDoesNotExtendTheCosignedOneIsRefusedWithEvidence() async throws {
        let log = try MemoryLog()
        let harness = try WitnessHarness(witnessing: log.key)
        defer { harness.remove() }
        _ = try Self.cosignature(await harness.witness.addCheckpoint(Array(try log.request(MemoryLog.entries(3), from: 0).encoded)))
        // A bigger tree with another history, its proof valid within its own tree.
        let rewritten = try log.request(MemoryLog.entries(1) + MemoryLog.entries(6, from: 50), from: 3)
        let outcome = await harness.witness.addCheckpoint(Array(rewritten.encoded))
        guard case .refused(.inconsistent(3, 7, _)) = outcome else { Issue.record("\(outcome)"); return }
        #expect(WitnessAPI.answer(outcome).status == 422)
        let folders = harness.store.evidenceFolders()
        #expect(folders.count == 1 && folders[0].contains("/inconsistent-"), "\(folders)")
        #expect(try harness.store.read(origin: log.origin)?.treeSize == 3, "a refusal changes nothing held")
    }

    @Test func unknownLogsBadSignaturesAndMalformedBodiesGetTheSpecsStatuses() async throws {
        let log = try MemoryLog()
        let harness = try WitnessHarness(witnessing: log.key)
        defer { harness.remove() }
        let stranger = try MemoryLog(origin: "other.test/b")
        let unknown = await harness.witness.addCheckpoint(Array(try stranger.request(MemoryLog.entries(2), from: 0).encoded))
        #expect(unknown == .refused(.unknownLog(origin: "other.test/b")) && WitnessAPI.answer(unknown).status == 404)
        let impostor = try MemoryLog(origin: log.origin)
        let forged = await harness.witness.addCheckpoint(Array(try impostor.request(MemoryLog.entries(2), from: 0).encoded))
        #expect(forged == .refused(.untrusted(origin: log.origin, reason: .noTrustedSignature)) && WitnessAPI.answer(forged).status == 403)
        let malformed = await harness.witness.addCheckpoint(Array("old 0\nnot a hash\n\n".utf8))
        #expect(WitnessAPI.answer(malformed).status == 400)
        #expect(String(decoding: WitnessAPI.answer(malformed).body, as: UTF8.self).hasPrefix("Not an add-checkpoint request"))
        #expect(harness.store.evidenceFolders().isEmpty)
        #expect(try harness.store.read(origin: log.origin) == nil)
    }

    /// A damaged record must not read as "never cosigned", which would let a fork start afresh.
    @Test func aDamagedRecordStopsCosigningForThatLog() async throws {
        let log = try MemoryLog()
        let harness = try WitnessHarness(witnessing: log.key)
        defer { harness.remove() }
        _ = try Self.cosignature(await harness.witness.addCheckpoint(Array(try log.request(MemoryLog.entries(3), from: 0).encoded)))
        let path = harness.store.path(origin: log.origin)
        var record = try JSONDecoder().decode(HeldCheckpoint.self, from: try #require(FileManager.default.contents(atPath: path)))
        record.treeSize = 2
        try JSONEncoder().encode(record).write(to: URL(fileURLWithPath: path))
        let restarted = try harness.restarted(witnessing: log.key)
        let outcome = await restarted.witness.addCheckpoint(Array(try log.request(MemoryLog.entries(3), from: 0).encoded))
        guard case .failed(let reason) = outcome else { Issue.record("\(outcome)"); return }
        #expect(reason.contains("damaged") && reason.contains("restored from a backup"))
        #expect(WitnessAPI.answer(outcome).status == 500)
        try Data("{".utf8).write(to: URL(fileURLWithPath: path))
        let again = try harness.restarted(witnessing: log.key)
        guard case .failed = await again.witness.addCheckpoint(Array(try log.request(MemoryLog.entries(3), from: 0).encoded)) else {
            Issue.record("a record that is not JSON was taken for none"); return
        }
    }

    /// The route as a client reaches it: `POST /v1/add-checkpoint`, 200 with the line, 409 with
    /// the held size as `text/x.tlog.size`, every other refusal as plain text.
    @Test func theRouteAnswersAsTlogWitnessSays() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let log = try MemoryLog()
        let harness = try WitnessHarness(witnessing: log.key)
        defer { harness.remove() }
        try await fixture.withServer(witness: harness.witness) { client in
            func post(_ body: Data) async throws -> TestResponse {
                try await client.execute(uri: "/v1/add-checkpoint", method: .post, body: ByteBuffer(bytes: body))
            }
            let first = try log.request(MemoryLog.entries(3), from: 0)
            let cosigned = try await post(first.encoded)
            #expect(cosigned.status == .ok && cosigned.headers[.contentType] == "text/plain; charset=utf-8")
            #expect(try WitnessAnswer.cosignatures(inBody: Data(cosigned.body.readableBytesView), for: first.note, witness: harness.verifierKey).count == 1)
            let conflict = try await post(try log.request(MemoryLog.entries(5), from: 0).encoded)
            #expect(conflict.status == .conflict && conflict.headers[.contentType] == "text/x.tlog.size")
            #expect(WitnessAnswer.size(inBody: conflict.body.readableBytesView) == 3)
            let malformed = try await post(Data("old 1\n".utf8))
            #expect(malformed.status == .badRequest && malformed.headers[.contentType] == "text/plain; charset=utf-8")
            // A declared length over the limit is answered from the head. Sent raw: a client still
            // writing the body when the server answers and closes meets a closed channel instead.
            let head = "POST /v1/add-checkpoint HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(AddCheckpointRequest.maximumBytes + 1)\r\n\r\nold 1\n"
            let raw = try RawConnection(port: try #require(client.port))
            raw.send(head)
            let tooLarge = try await raw.receiveResponse()
            #expect(tooLarge.status == 413 && tooLarge.header("Content-Type") == "text/plain; charset=utf-8", "\(tooLarge.text)")
            let get = try await client.execute(uri: "/v1/add-checkpoint", method: .get)
            #expect(get.status == .methodNotAllowed && get.headers[.allow] == "POST")
        }
        // Without witnessed logs the route does not exist.
        try await fixture.withServer { client in
            let response = try await client.execute(uri: "/v1/add-checkpoint", method: .post, body: ByteBuffer(string: "old 0\n\n"))
            #expect(response.status == .notFound)
        }
    }
}

/// The log's side: each new checkpoint goes to the witnesses with a proof from the size each last
/// cosigned, and is published with the cosignatures obtained, whatever a witness does.
@Suite(.tags(.unit)) struct CheckpointCosigningTests {
    static func identity(_ fixture: ServerFixture) throws -> ListLogIdentity {
        try ListLogIdentity(origin: nil, publicKey: fixture.signingKey.publicKey)
    }

    /// The fixture's log, asking `witness` through `line`.
    static func publisher(
        _ fixture: ServerFixture, witness: WitnessHarness, line: WitnessLine, beforeEach: @escaping @Sendable (AddCheckpointRequest) -> Void = { _ in }
    ) -> Publisher {
        let cosigner = CheckpointCosigner(
            witnesses: [WitnessEndpointSettings(url: "http://127.0.0.1:9/v1", key: witness.verifierKey)], timeout: .seconds(1),
            transport: DirectWitnessTransport(witness: witness.witness, line: line, beforeEach: beforeEach),
            recordPath: fixture.paths.witnessCosigningRecord,
            clock: fixture.clock, logger: fixture.logs.logger)
        return Publisher(
            store: fixture.store, directory: fixture.paths.published, signingKey: fixture.signingKey,
            retentionSeconds: fixture.configuration.retentionSeconds, keySettings: KeyPublicationSettings(fixture.configuration),
            idPublicationDelaySeconds: 0, clock: fixture.clock, logger: fixture.logs.logger, cosigner: cosigner)
    }

    static func checkpointBytes(_ fixture: ServerFixture) throws -> Data {
        try #require(FileManager.default.contents(atPath: fixture.paths.published.logCheckpointPath))
    }

    static func record(_ fixture: ServerFixture, _ witness: WitnessHarness) throws -> WitnessCosigningRecord {
        try #require(WitnessCosigningRecord.read(from: fixture.paths.witnessCosigningRecord)[witness.verifierKey.text])
    }

    @Test func thePublishedCheckpointCarriesTheWitnessCosignature() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let identity = try Self.identity(fixture)
        let witness = try WitnessHarness(witnessing: identity.verifierKey)
        defer { witness.remove() }
        let line = WitnessLine()
        // A witness sees only a tree the log has published: its checkpoint is in place, with the
        // log's own signatures, when the witness is asked.
        let checkpointPath = fixture.paths.published.logCheckpointPath
        let publishedFirst: @Sendable (AddCheckpointRequest) -> Void = { request in
            let published = FileManager.default.contents(atPath: checkpointPath).flatMap { try? SignedNote(parsing: $0) }
            #expect(published?.text == request.note.text, "the witness was asked before the checkpoint was published")
        }
        for round in 1...2 {
            try await ListLogPublicationTests.addIDs(fixture, count: 10, seed: UInt64(round))
            let report = try await Self.publisher(fixture, witness: witness, line: line, beforeEach: publishedFirst).publish()
            #expect(report.log?.cosignedBy == [WitnessHarness.name] && report.log?.witnessesFailed == [])
            let opened = try Checkpoint.open(
                try Self.checkpointBytes(fixture), origin: identity.origin, logKey: identity.verifierKey,
                witnesses: [witness.verifierKey], requiredCosignatures: 1)
            #expect(opened.checkpoint.treeSize == UInt64(round))
            // The log's own two signatures are still there, first.
            #expect(opened.note.verified.count == 2 && opened.note.unverified.count == 1)
            #expect(try Self.record(fixture, witness).cosignedSize == UInt64(round))
            fixture.clock.advance(by: 3_600)
        }
        // The second request went from the size the witness cosigned, with its proof.
        #expect(await line.oldSizes == [0, 1])
        #expect(try witness.store.read(origin: identity.origin)?.treeSize == 2)
        // The published log still reads as before for a node that knows no witness.
        _ = try PublishedListLog.open(fixture.paths.published, identity: identity)
    }

    @Test func aWitnessThatIsDownDoesNotStopPublicationAndCosignsAtTheNextOne() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let identity = try Self.identity(fixture)
        let witness = try WitnessHarness(witnessing: identity.verifierKey)
        defer { witness.remove() }
        let line = WitnessLine()
        await line.set(up: false)
        try await ListLogPublicationTests.addIDs(fixture, count: 10, seed: 1)
        let report = try await Self.publisher(fixture, witness: witness, line: line).publish()
        #expect(report.log?.treeSize == 1 && report.log?.checkpointSigned == true)
        #expect(report.log?.cosignedBy == [] && report.log?.witnessesFailed == [WitnessHarness.name])
        let published = try Self.checkpointBytes(fixture)
        #expect(throws: CheckpointError.tooFewCosignatures(valid: 0, required: 1)) {
            try Checkpoint.open(published, origin: identity.origin, logKey: identity.verifierKey, witnesses: [witness.verifierKey], requiredCosignatures: 1)
        }
        let failed = try Self.record(fixture, witness)
        #expect(!failed.succeeded && failed.detail.contains("could not be reached") && failed.detail.contains("Connection refused"))
        #expect(fixture.logs.all.contains { $0.contains("witness did not cosign the checkpoint; it is published without that cosignature") })

        // Back up: the next publication, with nothing new to append, adds its cosignature to the
        // same note (the log's signatures untouched).
        await line.set(up: true)
        fixture.clock.advance(by: 600)
        let next = try await Self.publisher(fixture, witness: witness, line: line).publish()
        #expect(next.log?.checkpointSigned == false && next.log?.cosignedBy == [WitnessHarness.name])
        let completed = try Self.checkpointBytes(fixture)
        let opened = try Checkpoint.open(completed, origin: identity.origin, logKey: identity.verifierKey, witnesses: [witness.verifierKey], requiredCosignatures: 1)
        #expect(opened.checkpoint.treeSize == 1)
        #expect(completed.starts(with: published), "the published note's lines are kept, the cosignature appended")
        #expect(try Self.record(fixture, witness).succeeded)
        // Asked from the published size (no record says another), told 0 by a 409, asked from 0.
        #expect(await line.oldSizes == [1, 0])
        // Nothing missing: nothing asked.
        _ = try await Self.publisher(fixture, witness: witness, line: line).publish()
        #expect(await line.oldSizes == [1, 0])
    }

    /// A log without a record of the witness sends the size before its append; the witness names
    /// the size it holds (409) and is asked once more from there.
    @Test func theSizeTheWitnessHoldsIsLearnedFromA409() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let identity = try Self.identity(fixture)
        let witness = try WitnessHarness(witnessing: identity.verifierKey)
        defer { witness.remove() }
        let line = WitnessLine()
        try await ListLogPublicationTests.addIDs(fixture, count: 10, seed: 1)
        _ = try await Self.publisher(fixture, witness: witness, line: line).publish()
        // Two appends without witnesses, and the record of what the witness cosigned lost.
        for seed in 2...3 {
            fixture.clock.advance(by: 3_600)
            try await ListLogPublicationTests.addIDs(fixture, count: 10, seed: UInt64(seed))
            try await fixture.makePublisher().publish()
        }
        try FileManager.default.removeItem(atPath: fixture.paths.witnessCosigningRecord)
        fixture.clock.advance(by: 3_600)
        try await ListLogPublicationTests.addIDs(fixture, count: 10, seed: 4)
        let report = try await Self.publisher(fixture, witness: witness, line: line).publish()
        #expect(report.log?.treeSize == 4 && report.log?.cosignedBy == [WitnessHarness.name])
        #expect(await line.oldSizes == [0, 3, 1], "the size before the append, then the size the 409 named")
        #expect(try witness.store.read(origin: identity.origin)?.treeSize == 4)
    }

    /// A log that answers differently from what the witness cosigned (here: another server
    /// publishing with the same key) still publishes; the witness refuses and says why.
    @Test func aForkIsPublishedWithoutTheCosignatureAndSaysWhy() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let identity = try Self.identity(fixture)
        let witness = try WitnessHarness(witnessing: identity.verifierKey)
        defer { witness.remove() }
        let line = WitnessLine()
        // The witness cosigned a tree of this key's log elsewhere: same origin, two other entries.
        let elsewhere = MemoryLog.entries(2, from: 900)
        let signer = try NoteSigner(name: identity.origin, privateKey: fixture.signingKey)
        let checkpoint = try Checkpoint(origin: identity.origin, treeSize: 2, rootHash: MerkleTree.rootHash(ofEntries: elsewhere))
        _ = try CheckpointWitnessTests.cosignature(await witness.witness.addCheckpoint(
            Array(AddCheckpointRequest(oldSize: 0, proof: [], note: try checkpoint.signed(by: [signer])).encoded)))
        // Size 1 here: the witness holds a bigger tree.
        try await ListLogPublicationTests.addIDs(fixture, count: 10, seed: 1)
        let first = try await Self.publisher(fixture, witness: witness, line: line).publish()
        #expect(first.log?.witnessesFailed == [WitnessHarness.name])
        #expect(try Self.record(fixture, witness).detail.contains("more than the 1 this log holds"))
        #expect(try Self.record(fixture, witness).cosignedSize == 2)
        // Size 2 here, another root: a split view, refused, kept as evidence by the witness.
        fixture.clock.advance(by: 3_600)
        try await ListLogPublicationTests.addIDs(fixture, count: 10, seed: 2)
        let second = try await Self.publisher(fixture, witness: witness, line: line).publish()
        #expect(second.log?.treeSize == 2 && second.log?.witnessesFailed == [WitnessHarness.name])
        let record = try Self.record(fixture, witness)
        #expect(!record.succeeded && record.detail.contains("split view"), "\(record.detail)")
        #expect(witness.store.evidenceFolders().count == 1)
        #expect(throws: CheckpointError.tooFewCosignatures(valid: 0, required: 1)) {
            try Checkpoint.open(try Self.checkpointBytes(fixture), origin: identity.origin, logKey: identity.verifierKey,
                                witnesses: [witness.verifierKey], requiredCosignatures: 1)
        }
    }

    /// Proofs come from the published tiles of the new tree only: across full tiles and levels,
    /// from any older size, they verify against the two roots.
    @Test func consistencyProofsFromThePublishedTilesVerify() throws {
        let directory = NSTemporaryDirectory() + "/tracer-proof-test-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let entries = MemoryLog.entries(700)
        var edge = LogRightEdge.empty
        var roots: [UInt64: MerkleHash] = [0: MerkleTree.emptyRoot]
        // Appended in uneven batches, every file written as the publisher writes them.
        var position = 0
        for batch in [1, 2, 5, 120, 200, 72, 300] {
            let result = try LogAppender.append(Array(entries[position..<(position + batch)]), to: edge)
            for write in result.writes {
                let path = directory + "/" + write.path
                try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try write.bytes.write(to: URL(fileURLWithPath: path))
            }
            edge = result.rightEdge
            position += batch
            roots[edge.treeSize] = result.rootHash
        }
        let newSize = UInt64(700)
        for oldSize: UInt64 in [0, 1, 3, 8, 128, 256, 327, 400, 512, 699, 700] {
            let oldRoot = roots[oldSize] ?? MerkleTree.rootHash(ofEntries: entries.prefix(Int(oldSize)))
            let proof = try Publisher.consistencyProof(from: oldSize, to: newSize, logDirectory: directory)
            try MerkleProof.verifyConsistency(oldSize: oldSize, newSize: newSize, oldRoot: oldRoot, newRoot: try #require(roots[newSize]), proof: proof)
        }
    }
}
