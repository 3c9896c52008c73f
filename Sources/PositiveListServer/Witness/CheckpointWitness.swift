import Crypto
import Foundation
import Logging
import PositiveListFormat
import TracerCore
import TransparencyLog
#if canImport(Glibc)
import Glibc
#endif

/// What the witness answered one add-checkpoint request.
public enum WitnessOutcome: Sendable, Equatable {
    /// Checked and recorded: the cosignature lines (a 200's body) for the checkpoint.
    case cosigned(lines: String, checkpoint: Checkpoint)
    /// Refused as tlog-witness says (400, 403, 404, 409, 422).
    case refused(WitnessRefusal)
    /// The witness cannot read or record what it cosigned (a damaged state file, a full disk): it
    /// cosigns nothing until that is mended (500).
    case failed(String)
}

/// The witness role (C2SP tlog-witness, tlog-cosignature): for each configured log, the last
/// checkpoint it cosigned is kept in `DATA_DIR/witness/logs/`; a new checkpoint of that log is
/// cosigned only if the log's key signed it and a consistency proof shows that its tree extends
/// the kept one. What it proves to whoever counts its cosignature: as of the cosignature's time,
/// this witness saw no other tree of the log that this one does not extend, so a log cannot show
/// one history to some nodes and another to others without also deceiving, and being caught by,
/// each witness both sets of nodes require.
///
/// An actor, and no `await` inside `addCheckpoint`: a request's check against the kept tree and
/// the recording of its new one happen with no other request between them, as the spec requires
/// (otherwise two requests checked against one tree could roll it back).
public actor CheckpointWitness {
    public nonisolated let identity: WitnessIdentity
    private let signer: NoteSigner
    /// By origin, compared byte for byte as signed notes compare names.
    private let logs: [[UInt8]: WitnessedLogSettings]
    private let store: WitnessStateStore
    private let clock: any WallClock
    private let logger: Logger
    /// What `store` holds, read once per log.
    private var held: [[UInt8]: HeldCheckpoint] = [:]

    public init(
        key: Curve25519.Signing.PrivateKey, name: String?, logs: [WitnessedLogSettings], directory: String, clock: any WallClock,
        logger: Logger
    ) throws(SignedNoteError) {
        identity = try WitnessIdentity(name: name, publicKey: key.publicKey)
        signer = try NoteSigner(name: identity.name, type: .cosignatureV1, privateKey: key)
        var byOrigin: [[UInt8]: WitnessedLogSettings] = [:]
        for log in logs { byOrigin[Array(log.origin.utf8)] = log }
        self.logs = byOrigin
        store = WitnessStateStore(directory: directory)
        self.clock = clock
        self.logger = logger
    }

    /// Checks one request body and, if it passes, records the new tree and cosigns it.
    public func addCheckpoint(_ body: [UInt8]) -> WitnessOutcome {
        let request: AddCheckpointRequest
        let claimed: Checkpoint
        do {
            request = try AddCheckpointRequest(parsing: body)
            claimed = try request.checkpoint()
        } catch {
            return .refused(error)
        }
        let origin = Array(claimed.origin.utf8)
        guard let log = logs[origin] else { return .refused(.unknownLog(origin: claimed.origin)) }
        let current: HeldCheckpoint?
        do {
            current = try heldCheckpoint(for: log)
        } catch {
            logger.error("witness state unreadable; cosigning nothing for this log", metadata: ["origin": "\(log.origin)", "reason": "\(error)"])
            return .failed(error.description)
        }
        let checkpoint: Checkpoint
        do {
            checkpoint = try request.check(logKey: log.key, held: current?.tree)
        } catch {
            refused(error, request: request, body: body, log: log, current: current)
            return .refused(error)
        }
        let now = clock.now()
        // The same tree again (a newer note of it) changes nothing held, and is not written: a
        // client replaying a published checkpoint cannot make the witness write to disk.
        if current?.tree != WitnessedTree(size: checkpoint.treeSize, root: checkpoint.rootHash) {
            let record = HeldCheckpoint(
                origin: log.origin, treeSize: checkpoint.treeSize, rootHash: checkpoint.rootHash.base64,
                note: String(decoding: request.note.encoded, as: UTF8.self), cosignedAt: now)
            do {
                // Recorded before the answer: a cosignature the witness forgot would let the log roll back.
                try store.write(record)
            } catch {
                logger.error("witness could not record the checkpoint; not cosigned", metadata: ["origin": "\(log.origin)", "reason": "\(error)"])
                return .failed(error.description)
            }
            held[origin] = record
        }
        let line: String
        do {
            line = try signer.sign(text: request.note.text, timestamp: UInt64(max(now, 0))).line
        } catch {
            // Ed25519 signing with a valid key does not fail; the record is kept either way, which
            // only makes the witness stricter.
            logger.error("witness could not sign", metadata: ["reason": "\(error)"])
            return .failed(error.description)
        }
        logger.info("checkpoint cosigned", metadata: [
            "origin": "\(log.origin)", "size": "\(checkpoint.treeSize)", "from": "\(current?.treeSize ?? 0)",
        ])
        return .cosigned(lines: line, checkpoint: checkpoint)
    }

    private func heldCheckpoint(for log: WitnessedLogSettings) throws(WitnessStateError) -> HeldCheckpoint? {
        let origin = Array(log.origin.utf8)
        if let cached = held[origin] { return cached }
        let loaded = try store.read(origin: log.origin)
        if let loaded { held[origin] = loaded }
        return loaded
    }

    /// Logs a refusal; a split view or a proof that fails is kept as evidence (once per offered
    /// checkpoint), with the checkpoint the witness held.
    private func refused(
        _ refusal: WitnessRefusal, request: AddCheckpointRequest, body: [UInt8], log: WitnessedLogSettings, current: HeldCheckpoint?
    ) {
        switch refusal {
        case .splitView, .inconsistent:
            let kept = store.keepEvidence(refusal: refusal, origin: log.origin, held: current, offeredNote: request.note, body: body, at: clock.now())
            logger.error("checkpoint refused: it does not extend the tree this witness cosigned", metadata: [
                "origin": "\(log.origin)", "reason": "\(refusal)", "evidence": "\(kept ?? "not kept (see the error before)")",
            ])
        case .oldSizeMismatch:
            // Routine: a log that does not know what the witness holds asks once to learn it.
            logger.debug("add-checkpoint from another size", metadata: ["origin": "\(log.origin)", "reason": "\(refusal)"])
        default:
            logger.notice("add-checkpoint refused", metadata: ["origin": "\(log.origin)", "reason": "\(refusal)"])
        }
    }
}

/// The checkpoint a witness last cosigned for one log, as `DATA_DIR/witness/logs/<hash>.json` keeps
/// it: size and root, and the note as the log signed it, which a later split view is held against.
public struct HeldCheckpoint: Codable, Sendable, Equatable {
    public var origin: String
    public var treeSize: UInt64
    /// Base64, as in the checkpoint.
    public var rootHash: String
    /// The signed note as received (text, blank line, signature lines).
    public var note: String
    /// When the witness first cosigned this tree (later notes of the same tree change nothing).
    public var cosignedAt: UnixSeconds

    var tree: WitnessedTree? {
        MerkleHash(base64: rootHash).map { WitnessedTree(size: treeSize, root: $0) }
    }
}

public enum WitnessStateError: Error, Sendable, CustomStringConvertible {
    case damaged(path: String, reason: String)
    case cannotWrite(FileWriteError)

    public var description: String {
        switch self {
        case .damaged(let path, let reason):
            return "The witness's record \(path) is damaged (\(reason)); it cosigns nothing for this log until the file is restored from a backup. Never delete it: a witness that forgot what it cosigned could be led to cosign a rolled-back or forked tree."
        case .cannotWrite(let error):
            return "The witness cannot record what it cosigns (\(error)); nothing was cosigned. Free space or fix the permissions of the data directory's witness/ folder."
        }
    }
}

/// `DATA_DIR/witness/`: `logs/<SHA-256 of the origin, hex>.json` per witnessed log (replaced
/// atomically), and `evidence/<origin hash>/<kind>-<offered note hash>/`: the checkpoint held
/// (`held-checkpoint`), the request refused (`offered-request`) and why (`reason.txt`).
public struct WitnessStateStore: Sendable {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    var logsDirectory: String { directory + "/logs" }
    var evidenceDirectory: String { directory + "/evidence" }

    static func fileName(origin: String) -> String {
        SHA256.hash(data: Data(origin.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    func path(origin: String) -> String { logsDirectory + "/" + Self.fileName(origin: origin) + ".json" }

    /// nil when the witness never cosigned for this origin; throws when a record is there but
    /// does not read back as the note it claims to be.
    public func read(origin: String) throws(WitnessStateError) -> HeldCheckpoint? {
        let path = path(origin: origin)
        guard let data = FileManager.default.contents(atPath: path) else {
            if access(path, F_OK) == 0 { throw .damaged(path: path, reason: "it cannot be read") }
            return nil
        }
        let record: HeldCheckpoint
        do {
            record = try JSONDecoder().decode(HeldCheckpoint.self, from: data)
        } catch {
            throw .damaged(path: path, reason: "not a witness record")
        }
        guard record.origin.utf8.elementsEqual(origin.utf8), let tree = record.tree,
              let note = try? SignedNote(parsing: Data(record.note.utf8)), let checkpoint = try? Checkpoint(text: note.text),
              checkpoint.origin.utf8.elementsEqual(origin.utf8), checkpoint.treeSize == tree.size, checkpoint.rootHash == tree.root
        else { throw .damaged(path: path, reason: "its size, root and note disagree") }
        return record
    }

    /// The folders of evidence kept, for `status`.
    public func evidenceFolders() -> [String] {
        let origins = (try? FileManager.default.contentsOfDirectory(atPath: evidenceDirectory)) ?? []
        return origins.sorted().flatMap { origin in
            ((try? FileManager.default.contentsOfDirectory(atPath: evidenceDirectory + "/" + origin)) ?? [])
                .filter { !$0.hasPrefix(".") }.sorted().map { evidenceDirectory + "/" + origin + "/" + $0 }
        }
    }

    func write(_ record: HeldCheckpoint) throws(WitnessStateError) {
        do {
            try Publisher.makeDirectories(logsDirectory)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            // Encoding strings and integers does not fail.
            let data = (try? encoder.encode(record)) ?? Data()
            try AtomicFile.write(Array(data) + [0x0A], to: path(origin: record.origin), mode: 0o600)
        } catch {
            throw .cannotWrite(error)
        }
    }

    /// Keeps a refused request beside the checkpoint held, once per offered note and kind;
    /// returns the folder, or nil when it could not be written.
    func keepEvidence(
        refusal: WitnessRefusal, origin: String, held: HeldCheckpoint?, offeredNote: SignedNote, body: [UInt8], at time: UnixSeconds
    ) -> String? {
        let kind: String
        let meaning: String
        switch refusal {
        case .splitView:
            kind = "split-view"
            meaning = "Both checkpoints carry the log's signature and name one tree size with two roots: whoever holds the log's public key can check that the log signed two views of one tree."
        default:
            kind = "inconsistent"
            meaning = "The log's signed checkpoint came with a consistency proof from the held tree that does not verify. Either the log's history does not extend the held tree (a fork or a rewritten history), or the sender sent a wrong proof: check with a proof from the log's own tiles."
        }
        let offered = SHA256.hash(data: offeredNote.encoded).prefix(8).map { String(format: "%02x", $0) }.joined()
        let folder = evidenceDirectory + "/" + String(Self.fileName(origin: origin).prefix(16)) + "/" + kind + "-" + offered
        if FileManager.default.fileExists(atPath: folder) { return folder }
        do {
            try Publisher.makeDirectories(folder)
            try AtomicFile.write(Array(held?.note.utf8 ?? "".utf8), to: folder + "/held-checkpoint", mode: 0o644)
            try AtomicFile.write(body, to: folder + "/offered-request", mode: 0o644)
            let reason = "origin: \(origin)\nrefused at: \(time)\nreason: \(refusal)\n\n\(meaning)\n"
            try AtomicFile.write(Array(reason.utf8), to: folder + "/reason.txt", mode: 0o644)
            return folder
        } catch {
            return nil
        }
    }
}
