import Crypto
import Foundation
import _CryptoExtras
import TracerCore

/// A console password as the store keeps it: scrypt, a memory-hard function, so that a leaked
/// database costs a guesser 32 MiB and tens of milliseconds per guess on every core they have,
/// which GPUs and custom chips cannot shortcut the way they do a plain hash.
///
/// Stored as `scrypt$LOG2N$R$P$SALT$KEY` (hex), so that the cost can be raised later and older
/// hashes still verify. N = 2^15, r = 8, p = 1 (32 MiB): twice scrypt paper's interactive
/// setting (2^14, under 100 ms in 2009); scrypt with these parameters takes 74-95 ms on this
/// 2-core machine (OpenSSL's, BENCHMARKS.md), which a person signing in does not notice; sign-in
/// attempts are limited per account and per address (FailedAttemptLimiter), so hashing cannot
/// be used to load the server much.
public struct PasswordHash: Sendable, Equatable {
    public static let minimumPasswordLength = 12
    /// Longer passwords are refused before hashing: nobody types more, and scrypt's first pass
    /// is over the whole password.
    public static let maximumPasswordBytes = 1_024
    static let defaultLog2Rounds = 15
    static let blockSize = 8
    static let parallelism = 1
    static let keyBytes = 32
    static let saltBytes = 16

    public let encoded: String

    public init?(encoded: String) {
        guard Self.parse(encoded) != nil else { return nil }
        self.encoded = encoded
    }

    private init(log2Rounds: Int, blockSize: Int, parallelism: Int, salt: [UInt8], key: [UInt8]) {
        encoded = "scrypt$\(log2Rounds)$\(blockSize)$\(parallelism)$\(Hex.encode(salt))$\(Hex.encode(key))"
    }

    /// Hashes `password` with a fresh random salt.
    public static func make(password: String) throws -> PasswordHash {
        var generator = SystemRandomNumberGenerator()
        let salt = (0..<saltBytes).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let key = try derive(password, salt: salt, log2Rounds: defaultLog2Rounds, blockSize: blockSize, parallelism: parallelism)
        return PasswordHash(log2Rounds: defaultLog2Rounds, blockSize: blockSize, parallelism: parallelism, salt: salt, key: key)
    }

    /// True when `password` is the one hashed; the derived keys are compared in constant time.
    public func verify(_ password: String) -> Bool {
        guard let parts = Self.parse(encoded), password.utf8.count <= Self.maximumPasswordBytes,
              let key = try? Self.derive(password, salt: parts.salt, log2Rounds: parts.log2Rounds, blockSize: parts.blockSize, parallelism: parts.parallelism)
        else { return false }
        return ConstantTime.equal(key, parts.key)
    }

    /// A hash no password matches (its key is random, not derived): an account created for a
    /// set-password link, or whose password was reset, cannot sign in until the link is used.
    public static func unusable() -> PasswordHash {
        var generator = SystemRandomNumberGenerator()
        return PasswordHash(
            log2Rounds: defaultLog2Rounds, blockSize: blockSize, parallelism: parallelism,
            salt: (0..<saltBytes).map { _ in UInt8.random(in: 0...255, using: &generator) },
            key: (0..<keyBytes).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Checked for accounts that do not exist, so that a wrong name takes as long as a wrong
    /// password and the time taken does not tell which names are accounts.
    public static let decoy: PasswordHash = (try? make(password: "decoy-password-never-matches")) ?? PasswordHash(
        log2Rounds: defaultLog2Rounds, blockSize: blockSize, parallelism: parallelism, salt: [UInt8](repeating: 0, count: saltBytes),
        key: [UInt8](repeating: 0, count: keyBytes))

    private static func derive(_ password: String, salt: [UInt8], log2Rounds: Int, blockSize: Int, parallelism: Int) throws -> [UInt8] {
        let key = try KDF.Scrypt.deriveKey(
            from: Array(password.utf8), salt: salt, outputByteCount: keyBytes, rounds: 1 << log2Rounds, blockSize: blockSize,
            parallelism: parallelism)
        return key.withUnsafeBytes { Array($0) }
    }

    /// The parts of an encoded hash; nil when it is not one this server wrote, or asks for more
    /// work than a sign-in should ever cost (a damaged row must not stall the server).
    private static func parse(_ text: String) -> (log2Rounds: Int, blockSize: Int, parallelism: Int, salt: [UInt8], key: [UInt8])? {
        let fields = text.split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count == 6, fields[0] == "scrypt",
              let log2Rounds = Int(fields[1]), (10...20).contains(log2Rounds),
              let blockSize = Int(fields[2]), (1...16).contains(blockSize),
              let parallelism = Int(fields[3]), (1...4).contains(parallelism),
              let salt = Hex.decode(String(fields[4])), salt.count >= 8,
              let key = Hex.decode(String(fields[5])), key.count == keyBytes
        else { return nil }
        return (log2Rounds, blockSize, parallelism, salt, key)
    }
}

/// Why a password cannot be used, said so that the person choosing it knows what to change.
public enum PasswordProblem: Error, Sendable, Equatable, CustomStringConvertible {
    case tooShort(minimum: Int)
    case tooLong(maximumBytes: Int)

    public static func check(_ password: String) -> PasswordProblem? {
        if password.count < PasswordHash.minimumPasswordLength { return .tooShort(minimum: PasswordHash.minimumPasswordLength) }
        if password.utf8.count > PasswordHash.maximumPasswordBytes { return .tooLong(maximumBytes: PasswordHash.maximumPasswordBytes) }
        return nil
    }

    public var description: String {
        switch self {
        case .tooShort(let minimum): return "The password is shorter than \(minimum) characters; choose a longer one (a few unrelated words work well)."
        case .tooLong(let maximum): return "The password is longer than \(maximum) bytes; choose a shorter one."
        }
    }
}
