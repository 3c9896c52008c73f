import Crypto
import _CryptoExtras
import Foundation

/// How userIds follow from a daily key: the one definition that the node (when it rotates) and
/// matching (when it expands a published key) both use. docs/daily-keys.md is the specification
/// and holds test vectors.
///
/// For a rotation interval `I` seconds and a window that starts at `start` (Unix seconds, UTC):
///
/// - window index `n = floor(start / I)`, an unsigned 32-bit number: the slot of the rotation
///   schedule the window starts in. It depends on the time only, not on when the node started.
/// - the window belongs to the UTC day that contains `n × I` (the slot's boundary), and uses
///   that day's key even if it ends after midnight.
/// - `userId = first 8 bytes of AES-128(key, "TRACERID" ‖ I as u32 BE ‖ n as u32 BE)`.
///
/// The index sits in the last four bytes, big-endian, so the blocks of consecutive windows are
/// consecutive 128-bit counters: a day's ids are one AES-CTR keystream, which BoringSSL
/// computes with the CPU's AES instructions, several blocks in parallel.
public struct IDDerivation: Hashable, Sendable {
    /// ASCII "TRACERID": separates these blocks from any other use a later version makes of a key.
    public static let label: [UInt8] = Array("TRACERID".utf8)
    static let blockSize = 16

    public let intervalSeconds: Int64

    public init(schedule: RotationSchedule) {
        intervalSeconds = schedule.interval
    }

    /// The derivation for windows of `intervalSeconds` (5 s to 24 h, as a `RotationSchedule`).
    public init(intervalSeconds: Int64) throws(RotationScheduleError) {
        self.init(schedule: try RotationSchedule(intervalSeconds: intervalSeconds))
    }

    // MARK: Windows and days

    /// The window index of a window that starts at `start`, or nil when the time is before 1970
    /// or so far ahead that the index needs more than 32 bits (the year 2650 at 5-second windows).
    public func windowIndex(ofWindowStartingAt start: UnixSeconds) -> UInt32? {
        guard start >= 0 else { return nil }
        return UInt32(exactly: start / intervalSeconds)
    }

    /// The UTC day whose key derives the id of window `index`.
    public func day(ofWindowIndex index: UInt32) -> UTCDay {
        UTCDay(containing: Int64(index) * intervalSeconds)
    }

    /// The nominal start of window `index`: its slot's boundary. A window's actual start can be
    /// later (rotation jitter) and its end later than the next boundary (jitter, a pause).
    public func nominalStart(ofWindowIndex index: UInt32) -> UnixSeconds {
        Int64(index) * intervalSeconds
    }

    /// Every window index that belongs to `day`: 96 at 15-minute windows. Empty for days before
    /// 1970 or beyond the 32-bit index range.
    public func windowIndices(of day: UTCDay) -> Range<UInt32> {
        func ceilingIndex(_ time: UnixSeconds) -> UInt32 {
            let index = time <= 0 ? 0 : (time + intervalSeconds - 1) / intervalSeconds
            return UInt32(clamping: index)
        }
        let lower = ceilingIndex(day.start)
        let upper = ceilingIndex(day.end)
        return lower..<max(lower, upper)
    }

    // MARK: Ids

    /// The 16-byte AES input of window `index`.
    public func block(windowIndex index: UInt32) -> [UInt8] {
        // intervalSeconds is at most 86,400 (RotationSchedule), so it fits 32 bits.
        let interval = UInt32(intervalSeconds)
        return Self.label + Self.bigEndianBytes(interval) + Self.bigEndianBytes(index)
    }

    /// The userId of window `index` under `key`: one AES block.
    public func id(key: DailyKey, windowIndex index: UInt32) -> UserID {
        var block = block(windowIndex: index)
        // Cannot throw: the block is 16 bytes and the key 128 bits by construction.
        try! AES.permute(&block, key: SymmetricKey(data: key.bytes))
        return try! UserID(bytes: block.prefix(UserID.byteCount))
    }

    /// The userIds of `windowIndices` under `key`, written to `output[0..<windowIndices.count]`:
    /// the batch form for expanding published keys, one AES-CTR pass per key and no allocation
    /// per id. The caller owns and reuses the buffer.
    public func ids(key: DailyKey, windowIndices: Range<UInt32>, into output: UnsafeMutableBufferPointer<UserID>) {
        precondition(output.count >= windowIndices.count, "the output buffer is smaller than the window range")
        guard !windowIndices.isEmpty else { return }
        let symmetricKey = SymmetricKey(data: key.bytes)
        // The first block of a pass, built in place: `block(windowIndex:)` costs four arrays,
        // and a million keys make that millions of allocations (BENCHMARKS.md, issue 13 b).
        var counter: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &counter) { raw in
            raw.copyBytes(from: Self.label)
            // intervalSeconds is at most 86,400 (RotationSchedule), so it fits 32 bits.
            raw.storeBytes(of: UInt32(intervalSeconds).bigEndian, toByteOffset: 8, as: UInt32.self)
        }
        var written = 0
        while written < windowIndices.count {
            let count = min(Self.blocksPerPass, windowIndices.count - written)
            // A Range<UInt32> ends at UInt32.max at most, so the counter's low 32 bits never
            // carry into the interval bytes within a pass.
            let first = windowIndices.lowerBound + UInt32(written)
            // Cannot throw: a 16-byte nonce and a 128-bit key.
            let nonce = withUnsafeMutableBytes(of: &counter) { raw in
                raw.storeBytes(of: first.bigEndian, toByteOffset: 12, as: UInt32.self)
                return try! AES._CTR.Nonce(nonceBytes: UnsafeRawBufferPointer(raw))
            }
            // A slice of a `Data` is passed on as it is; a slice of an array was boxed first.
            let keystream = try! AES._CTR.encrypt(
                Self.zeroBlocks[0..<(count * Self.blockSize)], using: symmetricKey, nonce: nonce)
            keystream.withUnsafeBytes { raw in
                for offset in 0..<count {
                    let word = raw.loadUnaligned(fromByteOffset: offset * Self.blockSize, as: UInt64.self)
                    output[written + offset] = UserID(rawValue: UInt64(bigEndian: word))
                }
            }
            written += count
        }
    }

    /// The userIds of `windowIndices` under `key`, in index order.
    public func ids(key: DailyKey, windowIndices: Range<UInt32>) -> [UserID] {
        [UserID](unsafeUninitializedCapacity: windowIndices.count) { buffer, initialized in
            buffer.initialize(repeating: UserID(rawValue: 0))
            ids(key: key, windowIndices: windowIndices, into: buffer)
            initialized = windowIndices.count
        }
    }

    /// Every userId of `day` under `key`, in window order (index `windowIndices(of: day)`).
    public func ids(key: DailyKey, day: UTCDay) -> [UserID] {
        ids(key: key, windowIndices: windowIndices(of: day))
    }

    /// A day of 15-minute windows in one pass; longer ranges (short intervals) take several.
    static let blocksPerPass = 128
    /// CTR mode XORs the keystream into its input; encrypting zeros yields the keystream itself.
    static let zeroBlocks = Data(count: blocksPerPass * blockSize)

    private static func bigEndianBytes(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * (3 - $0))) }
    }
}
