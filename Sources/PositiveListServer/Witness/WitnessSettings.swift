import Crypto
import Foundation
import Settings
import TransparencyLog

/// The witness's name and key as logs and nodes know them: cosignatures (C2SP tlog-cosignature,
/// Ed25519 `cosignature/v1`, type 0x04) by the key in `witness-key` under `witnessName`.
public struct WitnessIdentity: Sendable {
    public let name: String
    /// The vkey text `tracer-server witness-keygen` and `status` print, for the configuration of
    /// the logs that ask this witness (`witnesses[].key`) and of the nodes that count its cosignatures.
    public let verifierKey: NoteVerifierKey

    /// `name` nil: the default, `tracer-witness/` and the first 16 hex digits of SHA-256 of the
    /// public key, unique without a domain name as the log's default origin is.
    public init(name: String?, publicKey: Curve25519.Signing.PublicKey) throws(SignedNoteError) {
        let name = name ?? Self.defaultName(publicKey: publicKey)
        self.name = name
        self.verifierKey = try NoteVerifierKey(name: name, type: .cosignatureV1, publicKey: publicKey)
    }

    public static func defaultName(publicKey: Curve25519.Signing.PublicKey) -> String {
        "tracer-witness/" + SHA256.hash(data: publicKey.rawRepresentation).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// What a configured `witnessName` must be: a note key name of at most 255 bytes.
    public static func problem(name: String) -> String? {
        NoteNameRule.problem(name, setting: "witnessName")
    }
}

/// The rule both configured note key names follow (`logOrigin`, `witnessName`): non-empty, at most
/// 255 bytes, no space, `+` or control character, which would make vkeys and signature lines
/// ambiguous.
enum NoteNameRule {
    static func problem(_ name: String, setting: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= 255,
              !name.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0 == "+" || $0.value < 0x20 || $0.value == 0x7f })
        else { return "\(setting) must be 1 to 255 bytes without spaces, + or control characters" }
        return nil
    }
}

/// One log this server witnesses (`witnessedLogs`): the origin its checkpoints name and the key
/// whose signature they must carry.
public struct WitnessedLogSettings: Sendable, Equatable {
    public var origin: String
    /// The log's own signature key (signed-note type 0x01), as `tracer-server status` prints a
    /// Tracer log's "Log verifier key".
    public var key: NoteVerifierKey

    public init(origin: String, key: NoteVerifierKey) {
        self.origin = origin
        self.key = key
    }

    static let knownKeys: Set<String> = ["origin", "key"]

    /// How the configuration file spells one entry; `origin` defaults to the key's name, which is
    /// the origin for a Tracer log and for most C2SP logs.
    struct File: Decodable {
        var origin: String?
        var key: String
    }

    static func list(_ entries: [File]) throws(SettingProblem) -> [WitnessedLogSettings] {
        var logs: [WitnessedLogSettings] = []
        for (position, entry) in entries.enumerated() {
            func invalid(_ detail: String) -> SettingProblem { SettingProblem(namingItsSetting: "witnessedLogs[\(position)].\(detail)") }
            let key: NoteVerifierKey
            do {
                key = try NoteVerifierKey(text: entry.key)
            } catch {
                throw invalid("key is not a log verifier key (\(error)); copy the \"Log verifier key\" line of the log's `tracer-server status`")
            }
            guard key.type == .ed25519 else {
                throw invalid("key is a cosignature key (type 0x04); a log signs its checkpoints with an Ed25519 key (type 0x01): copy the log's verifier key, not its witness's")
            }
            let origin = entry.origin ?? key.name
            guard !origin.isEmpty, origin.utf8.count <= 255, !origin.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
                throw invalid("origin must be 1 to 255 bytes without control characters")
            }
            guard !logs.contains(where: { $0.origin.utf8.elementsEqual(origin.utf8) }) else {
                throw invalid("origin \"\(origin)\" is listed twice; a witness holds one key per log")
            }
            logs.append(WitnessedLogSettings(origin: origin, key: key))
        }
        return logs
    }
}

/// One witness this server's log asks to cosign each new checkpoint (`witnesses`).
public struct WitnessEndpointSettings: Sendable, Equatable {
    /// The witness's submission prefix: requests go to `<url>/add-checkpoint`. For a
    /// `tracer-server` witness, its address and `/v1` (`https://witness.example/v1`).
    public var url: String
    /// The witness's cosignature key (type 0x04), as its `tracer-server witness-keygen` printed it.
    public var key: NoteVerifierKey

    public init(url: String, key: NoteVerifierKey) {
        self.url = url
        self.key = key
    }

    /// More would only lengthen every checkpoint: a note holds at most 100 signatures, and nodes
    /// need a few cosignatures, not dozens.
    public static let maximumCount = 16
    static let knownKeys: Set<String> = ["url", "key"]

    struct File: Decodable {
        var url: String
        var key: String
    }

    var addCheckpointURL: String { (url.hasSuffix("/") ? String(url.dropLast()) : url) + "/add-checkpoint" }

    static func list(_ entries: [File]) throws(SettingProblem) -> [WitnessEndpointSettings] {
        guard entries.count <= maximumCount else {
            throw SettingProblem(namingItsSetting: "witnesses lists \(entries.count) witnesses, more than \(maximumCount)")
        }
        var witnesses: [WitnessEndpointSettings] = []
        for (position, entry) in entries.enumerated() {
            func invalid(_ detail: String) -> SettingProblem { SettingProblem(namingItsSetting: "witnesses[\(position)].\(detail)") }
            let scheme = entry.url.prefix(while: { $0 != ":" }).lowercased()
            guard scheme == "http" || scheme == "https", entry.url.hasPrefix(scheme + "://"), entry.url.count > scheme.count + 3,
                  !entry.url.contains("?"), !entry.url.contains("#"),
                  !entry.url.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 })
            else {
                throw invalid("url must be the witness's http or https address with its path prefix, such as https://witness.example/v1")
            }
            let key: NoteVerifierKey
            do {
                key = try NoteVerifierKey(text: entry.key)
            } catch {
                throw invalid("key is not a witness verifier key (\(error)); copy what the witness's `tracer-server witness-keygen` printed")
            }
            guard key.type == .cosignatureV1 else {
                throw invalid("key is an Ed25519 signature key (type 0x01); a witness cosigns with a cosignature/v1 key (type 0x04)")
            }
            guard !witnesses.contains(where: { $0.key == key }) else { throw invalid("key is listed twice") }
            witnesses.append(WitnessEndpointSettings(url: entry.url, key: key))
        }
        return witnesses
    }
}
