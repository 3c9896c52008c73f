import Foundation
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
import TransparencyLog
#if canImport(Glibc)
import Glibc
#endif

/// Two real servers on loopback: a `tracer-server serve` witnessing a log (its key made by
/// `witness-keygen`), and a log server whose `tracer-server publish` asks it over HTTP (libcurl)
/// and publishes the checkpoint with its cosignature; a fork of that log (another server with the
/// same key) refused with evidence; a witness that never answers costing a publication only its
/// timeout.
@Suite(.tags(.integration), .serialized) struct WitnessServersTests {
    /// A `serve` that witnesses the logs whose verifier keys are given.
    struct WitnessServer {
        let fixture: ServerFixture
        let process: Process
        let port: Int
        let key: NoteVerifierKey

        static func start(witnessing logKeys: [String]) async throws -> WitnessServer {
            let fixture = try ServerFixture()
            let logs = logKeys.map { #"{"key": "\#($0)"}"# }.joined(separator: ", ")
            try fixture.writeConfiguration(extra: #", "witnessedLogs": [\#(logs)], "witnessName": "witness.test/w1""#)
            let keygen = try ServerCLI.run(["witness-keygen"], fixture: fixture)
            #expect(keygen.exitCode == 0, "\(keygen)")
            let key = try NoteVerifierKey(text: keygen.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(key.name == "witness.test/w1" && key.type == .cosignatureV1)
            #expect(keygen.stderr.contains("witness-key"), "\(keygen)")
            // A second keygen keeps the key: logs and nodes trust it.
            let again = try ServerCLI.run(["witness-keygen"], fixture: fixture)
            #expect(again.exitCode == 1 && again.stderr.contains("A witness key already exists"), "\(again)")
            let port = try LoopbackPort.free()
            let process = try await ServerCLI.serveWithOpenFileLimit(1_024, port: port, fixture: fixture)
            return WitnessServer(fixture: fixture, process: process, port: port, key: key)
        }

        var prefix: String { "http://127.0.0.1:\(port)/v1" }
        var store: WitnessStateStore { WitnessStateStore(directory: fixture.paths.witnessDirectory) }

        func stop() {
            process.terminate()
            process.waitUntilExit()
            fixture.remove()
        }
    }

    static func identity(_ fixture: ServerFixture) throws -> ListLogIdentity {
        try ListLogIdentity(origin: nil, publicKey: fixture.signingKey.publicKey)
    }

    /// A log server's configuration asking the witness at `prefix` with `key`.
    static func askWitness(_ fixture: ServerFixture, prefix: String, key: NoteVerifierKey, timeout: Int = 5) throws {
        try fixture.writeConfiguration(extra: #", "witnesses": [{"url": "\#(prefix)", "key": "\#(key.text)"}], "witnessTimeoutSeconds": \#(timeout)"#)
    }

    /// Ids that ended ten minutes ago (due now by the real clock `publish` uses), stored directly.
    static func addIDs(_ fixture: ServerFixture, seed: UInt64) async throws {
        let now = SystemWallClock().now()
        let submitted = Histories.entries(count: 12, endingAt: now - 600, seed: seed)
        try await fixture.appendIDs(submitted, at: now)
    }

    static func publish(_ fixture: ServerFixture) throws -> ProcessResult {
        let result = try ServerCLI.run(["publish"], fixture: fixture)
        #expect(result.exitCode == 0, "\(result)")
        return result
    }

    static func checkpoint(_ fixture: ServerFixture) throws -> Data {
        try #require(FileManager.default.contents(atPath: fixture.paths.published.logCheckpointPath), "no log/checkpoint")
    }

    @Test func aLogServerPublishesWithTheCosignatureOfAWitnessServer() async throws {
        let log = try ServerFixture()
        defer { log.remove() }
        let identity = try Self.identity(log)
        let witness = try await WitnessServer.start(witnessing: [identity.verifierKey.text])
        defer { witness.stop() }
        try Self.askWitness(log, prefix: witness.prefix, key: witness.key)

        for round in 1...2 {
            try await Self.addIDs(log, seed: UInt64(round))
            let published = try Self.publish(log)
            #expect(published.stdout.contains("Checkpoint cosigned by witness.test/w1."), "\(published)")
            // What a node requiring one cosignature by this witness accepts.
            let opened = try Checkpoint.open(
                try Self.checkpoint(log), origin: identity.origin, logKey: identity.verifierKey, witnesses: [witness.key], requiredCosignatures: 1)
            #expect(opened.checkpoint.treeSize == UInt64(round))
            let time = try #require(opened.cosignatures.first?.cosignatureTime)
            #expect(abs(Int64(time) - SystemWallClock().now()) < 120, "the witness's time, by its own clock")
            #expect(try witness.store.read(origin: identity.origin)?.treeSize == UInt64(round))
        }

        let logStatus = try ServerCLI.run(["status"], fixture: log)
        #expect(logStatus.exitCode == 0, "\(logStatus)")
        #expect(logStatus.stdout.contains("Witness witness.test/w1: cosigned the checkpoint of size 2"), "\(logStatus)")
        let witnessStatus = try ServerCLI.run(["status"], fixture: witness.fixture)
        #expect(witnessStatus.stdout.contains("Witness key:       \(witness.key.text)"), "\(witnessStatus)")
        #expect(witnessStatus.stdout.contains("Witnessing:        \(identity.origin), cosigned size 2"), "\(witnessStatus)")
        let doctor = try ServerCLI.run(["doctor"], fixture: witness.fixture)
        #expect(doctor.stdout.contains("ok   witness key: \(witness.key.text)"), "\(doctor)")
    }

    /// Another server publishing with the same key (a fork of the log): the witness refuses its
    /// checkpoints (a smaller tree, the same size with another root, a bigger tree that does not
    /// extend the one it cosigned), keeps the last two as evidence, and keeps cosigning the log it
    /// knows. The fork still publishes, without the cosignature, and says why.
    @Test func aWitnessServerRefusesAForkedLogAndKeepsEvidence() async throws {
        let log = try ServerFixture()
        defer { log.remove() }
        let identity = try Self.identity(log)
        let witness = try await WitnessServer.start(witnessing: [identity.verifierKey.text])
        defer { witness.stop() }
        try Self.askWitness(log, prefix: witness.prefix, key: witness.key)
        for round in 1...2 {
            try await Self.addIDs(log, seed: UInt64(round))
            _ = try Self.publish(log)
        }

        let fork = try ServerFixture()
        defer { fork.remove() }
        try FileManager.default.removeItem(atPath: fork.paths.signingKey)
        let sharedKey = try #require(FileManager.default.contents(atPath: log.paths.signingKey))
        #expect(FileManager.default.createFile(atPath: fork.paths.signingKey, contents: sharedKey, attributes: [.posixPermissions: 0o600]))
        try Self.askWitness(fork, prefix: witness.prefix, key: witness.key)
        func forkedCheckpointOpensWithTheWitness() throws -> Bool {
            let bytes = try Self.checkpoint(fork)
            #expect(throws: Never.self) { try Checkpoint.open(bytes, origin: identity.origin, logKey: identity.verifierKey) }
            return (try? Checkpoint.open(bytes, origin: identity.origin, logKey: identity.verifierKey, witnesses: [witness.key], requiredCosignatures: 1)) != nil
        }

        // Size 1: the witness cosigned 2 of this log.
        try await Self.addIDs(fork, seed: 101)
        let first = try Self.publish(fork)
        #expect(first.stdout.contains("Warning: witness.test/w1 did not cosign the checkpoint"), "\(first)")
        #expect(try !forkedCheckpointOpensWithTheWitness())
        let smaller = try ServerCLI.run(["status"], fixture: fork)
        #expect(smaller.exitCode == 1 && smaller.stdout.contains("Witness witness.test/w1 FAILING") && smaller.stdout.contains("more than the 1 this log holds"), "\(smaller)")

        // Size 2, another root: a split view.
        try await Self.addIDs(fork, seed: 102)
        _ = try Self.publish(fork)
        #expect(try !forkedCheckpointOpensWithTheWitness())
        let split = try ServerCLI.run(["status"], fixture: fork)
        #expect(split.exitCode == 1 && split.stdout.contains("split view"), "\(split)")

        // Size 3, not an extension of the tree of size 2 the witness cosigned.
        try await Self.addIDs(fork, seed: 103)
        _ = try Self.publish(fork)
        #expect(try !forkedCheckpointOpensWithTheWitness())
        let rewritten = try ServerCLI.run(["status"], fixture: fork)
        #expect(rewritten.exitCode == 1 && rewritten.stdout.contains("does not extend the tree of size 2"), "\(rewritten)")

        // The evidence: the log's own note the witness held, and each refused request.
        let folders = witness.store.evidenceFolders()
        #expect(folders.count == 2 && folders.contains { $0.contains("/split-view-") } && folders.contains { $0.contains("/inconsistent-") }, "\(folders)")
        for folder in folders {
            let held = try #require(FileManager.default.contents(atPath: folder + "/held-checkpoint"))
            #expect(try Checkpoint.open(held, origin: identity.origin, logKey: identity.verifierKey).checkpoint.treeSize == 2)
            let offered = try AddCheckpointRequest(parsing: try #require(FileManager.default.contents(atPath: folder + "/offered-request")))
            #expect(try offered.note.verify(with: [identity.verifierKey]).text != (try SignedNote(parsing: held)).text)
        }
        let witnessStatus = try ServerCLI.run(["status"], fixture: witness.fixture)
        #expect(witnessStatus.stdout.contains("Witness EVIDENCE:  2 refused checkpoints"), "\(witnessStatus)")

        // The log the witness knows is still cosigned from where it was.
        try await Self.addIDs(log, seed: 3)
        _ = try Self.publish(log)
        _ = try Checkpoint.open(try Self.checkpoint(log), origin: identity.origin, logKey: identity.verifierKey, witnesses: [witness.key], requiredCosignatures: 1)
        #expect(try witness.store.read(origin: identity.origin)?.treeSize == 3)
    }

    /// A witness that accepts the connection and never answers: the publication waits for
    /// `witnessTimeoutSeconds`, publishes without it, and `status` says so.
    @Test func aWitnessThatNeverAnswersCostsAPublicationOnlyItsTimeout() async throws {
        let log = try ServerFixture()
        defer { log.remove() }
        let silent = try SilentListener()
        defer { silent.close() }
        let key = try NoteSigner.generate(name: "silent.test/w", type: .cosignatureV1).verifierKey
        try Self.askWitness(log, prefix: "http://127.0.0.1:\(silent.port)/v1", key: key, timeout: 1)
        try await Self.addIDs(log, seed: 1)
        let started = ContinuousClock.now
        let published = try Self.publish(log)
        let took = ContinuousClock.now - started
        #expect(took < .seconds(8), "publication took \(took) with a 1 s witness timeout")
        #expect(published.stdout.contains("Warning: silent.test/w did not cosign the checkpoint"), "\(published)")
        let identity = try Self.identity(log)
        #expect(try Checkpoint.open(try Self.checkpoint(log), origin: identity.origin, logKey: identity.verifierKey).checkpoint.treeSize == 1)
        let status = try ServerCLI.run(["status"], fixture: log)
        #expect(status.exitCode == 1 && status.stdout.contains("Witness silent.test/w FAILING") && status.stdout.contains("could not be reached"), "\(status)")
    }

    /// A TCP port on 127.0.0.1 that completes connections (the kernel's backlog) and never reads
    /// or answers.
    final class SilentListener: Sendable {
        let descriptor: Int32
        let port: Int

        init() throws {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
                }
            }
            guard bound, listen(descriptor, 8) == 0 else {
                Glibc.close(descriptor)
                throw HarnessFailure(description: "cannot listen on 127.0.0.1")
            }
            self.descriptor = descriptor
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        func close() { Glibc.close(descriptor) }
    }
}
