import Foundation
import Logging
import PositiveListFormat
import TracerCore
import TransparencyLog

/// What the log server last heard from one witness it asks, kept in `DATA_DIR/witness-cosigning.json`
/// for `tracer-server status` and for the next publication (which old size to send).
public struct WitnessCosigningRecord: Codable, Sendable, Equatable {
    /// The witness's verifier key text, as configured.
    public var key: String
    public var url: String
    /// The size of the tree the witness last cosigned, as far as this log knows: from its
    /// cosignature, or from a 409 that named it. nil: not known yet.
    public var cosignedSize: UInt64?
    /// When it was last asked.
    public var at: UnixSeconds
    public var succeeded: Bool
    /// What it did, or why it did not cosign, in words for the operator.
    public var detail: String

    public init(key: String, url: String, cosignedSize: UInt64?, at: UnixSeconds, succeeded: Bool, detail: String) {
        self.key = key
        self.url = url
        self.cosignedSize = cosignedSize
        self.at = at
        self.succeeded = succeeded
        self.detail = detail
    }

    /// The records at `path`, by key text; empty when there are none or they cannot be read.
    public static func read(from path: String) -> [String: WitnessCosigningRecord] {
        guard let data = FileManager.default.contents(atPath: path),
              let records = try? JSONDecoder().decode([WitnessCosigningRecord].self, from: data)
        else { return [:] }
        return Dictionary(records.map { ($0.key, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// Replaces the records atomically; like ``OutcomeRecord``, a record that cannot be written
    /// fails nothing (the log says what happened).
    static func write(_ records: [WitnessCosigningRecord], to path: String) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(records) else { return }
        try? AtomicFile.write(Array(data) + [0x0A], to: path, mode: 0o644)
    }
}

/// What one round of asking witnesses gave.
public struct CosigningResult: Sendable {
    /// The note with every cosignature obtained appended.
    public var note: SignedNote
    /// The names of the witnesses that cosigned it.
    public var cosigned: [String] = []
    /// The witnesses that did not, each with why.
    public var failed: [(witness: String, reason: String)] = []
}

/// The log's side of C2SP tlog-witness: each newly signed checkpoint goes to every configured
/// witness at once, with a consistency proof from the size that witness last cosigned (remembered
/// from its last answer; a witness that holds another size says so with a 409 and is asked once
/// more from there). The cosignature lines that verify with the witness's configured key are
/// appended to the checkpoint. A witness that is down, slow or refuses costs the publication at
/// most two requests of `timeout` each and never stops it: the checkpoint is published with the
/// cosignatures obtained, and the failure is logged and kept for `tracer-server status`.
public actor CheckpointCosigner {
    public nonisolated let witnesses: [WitnessEndpointSettings]
    private let transport: any WitnessTransport
    private let timeout: Duration
    private let recordPath: String?
    private let clock: any WallClock
    private let logger: Logger
    private var records: [String: WitnessCosigningRecord]

    public init(
        witnesses: [WitnessEndpointSettings], timeout: Duration, transport: any WitnessTransport = CurlWitnessTransport(),
        recordPath: String?, clock: any WallClock, logger: Logger
    ) {
        self.witnesses = witnesses
        self.transport = transport
        self.timeout = timeout
        self.recordPath = recordPath
        self.clock = clock
        self.logger = logger
        records = recordPath.map(WitnessCosigningRecord.read(from:)) ?? [:]
    }

    /// The tree sizes the configured witnesses last cosigned, as far as this log knows: the
    /// publisher keeps the level-0 tiles a consistency proof from them needs
    /// (Publisher+LogHistory.swift).
    public func cosignedSizes() -> [UInt64] {
        witnesses.compactMap { records[$0.key.text]?.cosignedSize }
    }

    /// The witnesses of `witnesses` whose cosignature `note` lacks.
    public nonisolated func missing(from note: SignedNote) -> [WitnessEndpointSettings] {
        witnesses.filter { witness in
            !note.signatures.contains { $0.name.utf8.elementsEqual(witness.key.name.utf8) && $0.keyID == witness.key.keyID }
        }
    }

    /// Asks `asked` (every configured witness unless given) to cosign `note`, the log-signed
    /// checkpoint of `checkpoint`, all at once. `previousSize` is the old size to send a witness
    /// this log has no record of; `proof(old)` makes the consistency proof from `old` to the
    /// checkpoint's size from the published tiles.
    public func cosign(
        _ note: SignedNote, checkpoint: Checkpoint, previousSize: UInt64, asking asked: [WitnessEndpointSettings]? = nil,
        proof: @escaping @Sendable (UInt64) throws -> [MerkleHash]
    ) async -> CosigningResult {
        let asked = asked ?? witnesses
        let guesses = asked.map { records[$0.key.text]?.cosignedSize ?? previousSize }
        let transport = transport
        let timeout = timeout
        let answers = await withTaskGroup(of: (Int, WitnessAttempt).self) { group in
            for (position, witness) in asked.enumerated() {
                group.addTask {
                    (position, await Self.ask(
                        witness, note: note, checkpoint: checkpoint, from: guesses[position], transport: transport, timeout: timeout, proof: proof))
                }
            }
            var answers = [WitnessAttempt?](repeating: nil, count: asked.count)
            for await (position, attempt) in group { answers[position] = attempt }
            return answers.compactMap { $0 }
        }

        var result = CosigningResult(note: note)
        var signatures = note.signatures
        let now = clock.now()
        for (witness, attempt) in zip(asked, answers) {
            let previous = records[witness.key.text]
            switch attempt.outcome {
            case .cosigned(let lines):
                signatures.removeAll { line in lines.contains { $0.name == line.name && $0.keyID == line.keyID } }
                signatures += lines
                result.cosigned.append(witness.key.name)
                records[witness.key.text] = WitnessCosigningRecord(
                    key: witness.key.text, url: witness.url, cosignedSize: checkpoint.treeSize, at: now, succeeded: true,
                    detail: "cosigned the checkpoint of size \(checkpoint.treeSize)")
                logger.info("witness cosigned the checkpoint", metadata: [
                    "witness": "\(witness.key.name)", "url": "\(witness.url)", "size": "\(checkpoint.treeSize)",
                ])
            case .failed(let reason):
                result.failed.append((witness.key.name, reason))
                records[witness.key.text] = WitnessCosigningRecord(
                    key: witness.key.text, url: witness.url, cosignedSize: attempt.learnedSize ?? previous?.cosignedSize, at: now,
                    succeeded: false, detail: reason)
                logger.error("witness did not cosign the checkpoint; it is published without that cosignature", metadata: [
                    "witness": "\(witness.key.name)", "url": "\(witness.url)", "size": "\(checkpoint.treeSize)", "reason": "\(reason)",
                ])
            }
        }
        if let updated = try? SignedNote(text: note.text, signatures: signatures) { result.note = updated }
        if let recordPath {
            // Only the configured witnesses: one taken out of the configuration leaves no stale line.
            WitnessCosigningRecord.write(witnesses.compactMap { records[$0.key.text] }, to: recordPath)
        }
        return result
    }

    struct WitnessAttempt: Sendable {
        enum Outcome: Sendable {
            case cosigned([NoteSignature])
            case failed(String)
        }

        var outcome: Outcome
        /// The size a 409 named.
        var learnedSize: UInt64?
    }

    /// One witness: a request from `guess`, and one more from the size a 409 names.
    static func ask(
        _ witness: WitnessEndpointSettings, note: SignedNote, checkpoint: Checkpoint, from guess: UInt64, transport: any WitnessTransport,
        timeout: Duration, proof: @Sendable (UInt64) throws -> [MerkleHash]
    ) async -> WitnessAttempt {
        let size = checkpoint.treeSize
        var old = guess <= size ? guess : 0
        var learned: UInt64?
        func failed(_ reason: String) -> WitnessAttempt { WitnessAttempt(outcome: .failed(reason), learnedSize: learned) }
        for round in 0..<2 {
            let hashes: [MerkleHash]
            do {
                hashes = try proof(old)
            } catch {
                return failed("the consistency proof from size \(old) to \(size) could not be made from the published tiles (\(error)); check the published log/ directory")
            }
            let body = Array(AddCheckpointRequest(oldSize: old, proof: hashes, note: note).encoded)
            let answer: WitnessHTTPAnswer
            switch await transport.post(body, to: witness.addCheckpointURL, timeout: timeout) {
            case .failure(let unreachable):
                return failed("it could not be reached at \(witness.addCheckpointURL) (\(unreachable.reason)); check that it runs and that the url is its submission prefix")
            case .success(let received):
                answer = received
            }
            switch answer.status {
            case 200:
                do {
                    return WitnessAttempt(outcome: .cosigned(try WitnessAnswer.cosignatures(inBody: answer.body, for: note, witness: witness.key)))
                } catch {
                    return failed("it answered 200 without a valid cosignature by \(witness.key) (\(error)); check the witness's key in `witnesses`")
                }
            case 409 where Self.mediaType(answer.contentType) == WitnessAnswer.sizeContentType:
                guard let held = WitnessAnswer.size(inBody: answer.body) else {
                    return failed("it answered 409 without a valid size; it does not speak tlog-witness as this server does")
                }
                learned = held
                guard held <= size else {
                    return failed("it cosigned a tree of \(held) entries of this log, more than the \(size) this log holds: this log was rolled back (a published directory restored from an older copy?) or another server publishes with its key. Find out which before anything else: nodes that require its cosignature will refuse this log")
                }
                guard round == 0, held != old else {
                    return failed("it asked again for the size \(held) it had already been sent")
                }
                old = held
            case 409:
                return failed("it holds another tree of size \(size) of this log (a split view: \(Self.excerpt(answer.body))); this log's history differs from what the witness cosigned. Find out why before anything else: nodes that require its cosignature will refuse this log")
            case 422:
                return failed("it found that this log's tree of size \(size) does not extend the tree of size \(old) it cosigned (\(Self.excerpt(answer.body))): a fork or a rewritten history. Find out why before anything else: nodes that require its cosignature will refuse this log")
            case 403:
                return failed("it does not accept this log's signature (\(Self.excerpt(answer.body))); its witnessedLogs must hold this log's verifier key as `tracer-server status` prints it")
            case 404:
                return failed("it does not witness this log (\(Self.excerpt(answer.body))); add this log's origin and verifier key to the witness's witnessedLogs")
            default:
                return failed("it answered HTTP \(answer.status) (\(Self.excerpt(answer.body)))")
            }
        }
        return failed("it kept asking for another size")
    }

    /// `text/x.tlog.size` from `text/x.tlog.size; charset=…`, lowercased.
    static func mediaType(_ contentType: String?) -> String? {
        contentType.map { $0.split(separator: ";", maxSplits: 1).first.map(String.init) ?? "" }?
            .trimmingCharacters(in: .whitespaces).lowercased()
    }

    /// The start of a witness's answer, as printable text for a log line.
    static func excerpt(_ body: [UInt8]) -> String {
        let text = String(decoding: body.prefix(200), as: UTF8.self)
            .unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? " " : String($0) }.joined()
            .trimmingCharacters(in: .whitespaces)
        return text.isEmpty ? "no explanation" : text
    }
}
