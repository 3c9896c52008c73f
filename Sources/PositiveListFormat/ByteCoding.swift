/// Big-endian fixed-width integers in a byte array: the format's only primitive, so that a
/// reader in any language needs nothing but shifts.
struct ByteWriter {
    private(set) var bytes: [UInt8]

    init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    mutating func append(_ raw: [UInt8]) { bytes.append(contentsOf: raw) }

    mutating func append<Integer: FixedWidthInteger>(_ value: Integer) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}

extension Array where Element == UInt8 {
    /// Reads a big-endian integer at `offset`; callers check the length first.
    func readInteger<Integer: FixedWidthInteger>(at offset: Int, as: Integer.Type = Integer.self) -> Integer {
        var value: Integer = 0
        for index in offset..<offset + MemoryLayout<Integer>.size {
            value = value << 8 | Integer(truncatingIfNeeded: self[index])
        }
        return value
    }
}

/// The length of a signed file with `header` bytes, `count` records of `each` bytes and the
/// signature, saturating at Int.max: a count from a hostile header must not overflow (which
/// traps) before the length check refuses it.
func signedFileLength(header: Int, count: UInt64, each: Int) -> Int {
    let limit = UInt64((Int.max - header - SignedFile.signatureByteCount) / each)
    guard count <= limit else { return Int.max }
    return header + Int(count) * each + SignedFile.signatureByteCount
}
