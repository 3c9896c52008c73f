import Crypto

/// SHA-256 of a bearer secret. Secrets are kept and compared only as digests: a leaked
/// database or configuration does not reveal them, and comparing fixed-size digests in
/// constant time hides how much of a guess was right.
package enum TokenDigest {
    package static func of(_ secret: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(secret.utf8)))
    }
}

package enum ConstantTime {
    /// True when the two byte strings are equal; the time taken depends only on their lengths.
    package static func equal(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in lhs.indices { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }
}
