import Foundation
import TransparencyLog

/// What a node keeps of one positive-list log between checks: the last checkpoint it verified,
/// as the signed bytes it received (kept so that a later checkpoint contradicting it can be shown
/// to anyone), and the right edge of that tree, from which the next entries are appended and the
/// next root recomputed without fetching a single hash tile.
public struct FollowedLogState: Sendable, Equatable {
    /// The signed checkpoint note, byte for byte as served.
    public var checkpointNote: Data
    public var edge: LogRightEdge

    public init(checkpointNote: Data, edge: LogRightEdge) {
        self.checkpointNote = checkpointNote
        self.edge = edge
    }

    public var treeSize: UInt64 { edge.treeSize }
    public var rootHash: MerkleHash { edge.rootHash }

    /// Version 2, big-endian: the note's length (4) and bytes; the tree size (8); the level count
    /// (1), then per level its hash count (1) and the hashes. At most a few kilobytes whatever
    /// the log's size: the partial bundle's entries are not in it, since they are the last
    /// entries a node holds anyway (`FollowedLogStore` keeps them in its entries file), and a
    /// node rewrites its state at every update.
    public func encode() -> Data {
        var bytes = Data([Self.version])
        Self.append(UInt32(checkpointNote.count), to: &bytes)
        bytes.append(checkpointNote)
        Self.append(edge.treeSize, to: &bytes)
        bytes.append(UInt8(edge.partialTileHashes.count))
        for level in edge.partialTileHashes {
            bytes.append(UInt8(level.count))
            for hash in level { bytes.append(contentsOf: hash.bytes) }
        }
        return bytes
    }

    /// What `encode` wrote, before the partial bundle's entries are joined to it.
    public struct Stored: Sendable, Equatable {
        public var checkpointNote: Data
        public var treeSize: UInt64
        public var partialTileHashes: [[MerkleHash]]

        /// How many entries of the log's end the edge needs besides: the partial bundle's.
        public var partialBundleWidth: Int { TileLayout.partialWidth(level: 0, treeSize: treeSize) }
    }

    /// Reads what `encode` wrote; refuses anything else, never traps.
    public static func stored(decoding data: Data) throws(FollowedLogStateError) -> Stored {
        var reader = Reader(bytes: [UInt8](data))
        guard try reader.byte() == version else { throw .unsupportedVersion }
        let noteLength = Int(try reader.integer(UInt32.self))
        let note = Data(try reader.bytes(noteLength))
        let treeSize = try reader.integer(UInt64.self)
        var levels: [[MerkleHash]] = []
        for _ in 0..<Int(try reader.byte()) {
            var hashes: [MerkleHash] = []
            for _ in 0..<Int(try reader.byte()) {
                guard let hash = MerkleHash(bytes: try reader.bytes(MerkleHash.byteCount)) else { throw .truncated }
                hashes.append(hash)
            }
            levels.append(hashes)
        }
        guard reader.isAtEnd else { throw .trailingBytes }
        return Stored(checkpointNote: note, treeSize: treeSize, partialTileHashes: levels)
    }

    /// The state from its stored part and the last `stored.partialBundleWidth` entries of the
    /// log. The edge is checked as a fresh one is (its widths fit its size, the entries hash to
    /// its level-0 hashes); whether it matches the note's root is the follower's check.
    public init(_ stored: Stored, partialBundleEntries: [Data]) throws(FollowedLogStateError) {
        do {
            self.init(checkpointNote: stored.checkpointNote,
                      edge: try LogRightEdge(treeSize: stored.treeSize, partialTileHashes: stored.partialTileHashes, partialBundleEntries: partialBundleEntries))
        } catch {
            throw .inconsistentEdge(String(describing: error))
        }
    }

    static let version: UInt8 = 2

    private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout Data) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        var isAtEnd: Bool { offset == bytes.count }

        mutating func bytes(_ count: Int) throws(FollowedLogStateError) -> ArraySlice<UInt8> {
            guard count >= 0, bytes.count - offset >= count else { throw .truncated }
            defer { offset += count }
            return bytes[offset..<(offset + count)]
        }

        mutating func byte() throws(FollowedLogStateError) -> UInt8 { try bytes(1).first! }

        mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(FollowedLogStateError) -> T {
            try bytes(MemoryLayout<T>.size).reduce(T(0)) { ($0 << 8) | T($1) }
        }
    }
}

public enum FollowedLogStateError: Error, Equatable, Sendable, CustomStringConvertible {
    case unsupportedVersion
    case truncated
    case trailingBytes
    case inconsistentEdge(String)

    public var description: String {
        switch self {
        case .unsupportedVersion: "the saved log state has a version this node does not read (it is followed afresh)"
        case .truncated: "the saved log state is cut short"
        case .trailingBytes: "the saved log state has bytes after its end"
        case .inconsistentEdge(let reason): "the saved log state does not hold together: \(reason)"
        }
    }
}
