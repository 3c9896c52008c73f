import Foundation

/// Everything an appender needs of a log, and nothing more: its size, the hashes of its partial
/// tile at each level and the entries of its partial entry bundle (together at most 255 hashes
/// per level and 255 entries). The complete subtrees on the tree's right edge, from which the
/// root is made, all lie in those partial tiles, so nothing to their left is ever read again.
public struct LogRightEdge: Sendable, Equatable {
    public let treeSize: UInt64
    /// Indexed by tile level; `partialTileHashes[L]` has `TileLayout.partialWidth(level: L, …)`
    /// hashes (none where the level has no partial tile).
    public let partialTileHashes: [[MerkleHash]]
    public let partialBundleEntries: [Data]

    public static let empty = LogRightEdge(checkedSize: 0, partialTileHashes: [], partialBundleEntries: [])

    /// Checks that the widths are the ones `treeSize` calls for and that the partial bundle's
    /// entries hash to the partial level-0 tile.
    public init(treeSize: UInt64, partialTileHashes: [[MerkleHash]], partialBundleEntries: [Data]) throws(TileError) {
        let levels = max(partialTileHashes.count, TileLayout.levelCount(treeSize: treeSize))
        for level in 0..<levels {
            let held = level < partialTileHashes.count ? partialTileHashes[level].count : 0
            let needed = level <= TileID.maximumLevel ? TileLayout.partialWidth(level: level, treeSize: treeSize) : 0
            guard held == needed else {
                throw .inconsistentRightEdge(treeSize: treeSize, reason: "level \(level) has \(held) partial hashes where \(needed) are needed")
            }
        }
        guard partialBundleEntries.count == TileLayout.partialWidth(level: 0, treeSize: treeSize) else {
            throw .inconsistentRightEdge(treeSize: treeSize, reason: "the partial bundle has \(partialBundleEntries.count) entries")
        }
        for (position, entry) in partialBundleEntries.enumerated() where MerkleTree.leafHash(entry) != partialTileHashes[0][position] {
            throw .inconsistentRightEdge(treeSize: treeSize, reason: "partial entry \(position) does not hash to its level-0 tile")
        }
        self.init(checkedSize: treeSize, partialTileHashes: partialTileHashes, partialBundleEntries: partialBundleEntries)
    }

    fileprivate init(checkedSize: UInt64, partialTileHashes: [[MerkleHash]], partialBundleEntries: [Data]) {
        self.treeSize = checkedSize
        // Trailing empty levels carry nothing; dropping them makes equal edges compare equal.
        var levels = partialTileHashes
        while levels.last?.isEmpty == true { levels.removeLast() }
        self.partialTileHashes = levels
        self.partialBundleEntries = partialBundleEntries
    }

    /// Reads the right edge of a published tree of `treeSize` through `read` (a file or an
    /// object store, by tile path): its partial tiles and partial bundle only. When
    /// `expectedRoot` is given the edge must lead to it, so a stale or damaged store is caught
    /// before anything is appended to it.
    public static func load(
        treeSize: UInt64, expectedRoot: MerkleHash? = nil, read: (String) throws -> Data
    ) throws -> LogRightEdge {
        var levels: [[MerkleHash]] = Array(repeating: [], count: TileLayout.levelCount(treeSize: treeSize))
        for tile in TileLayout.partialTiles(treeSize: treeSize) {
            let bytes = try read(tile.path)
            guard bytes.count == tile.byteCount else {
                throw TileError.wrongTileSize(path: tile.path, expectedBytes: tile.byteCount, actualBytes: bytes.count)
            }
            levels[tile.level] = TileHashReader.hashes(in: bytes, count: tile.width)
        }
        var entries: [Data] = []
        let bundleWidth = TileLayout.partialWidth(level: 0, treeSize: treeSize)
        if bundleWidth > 0 {
            let bundle = EntryBundleID(validIndex: TileLayout.fullTileCount(level: 0, treeSize: treeSize), width: bundleWidth)
            entries = try EntryBundle.decode(try read(bundle.path), as: bundle)
        }
        let edge = try LogRightEdge(treeSize: treeSize, partialTileHashes: levels, partialBundleEntries: entries)
        if let expectedRoot, edge.rootHash != expectedRoot {
            throw MerkleProofError.rootMismatch(expected: expectedRoot, computed: edge.rootHash)
        }
        return edge
    }

    /// The right edge of the tree of the log's first `treeSize` entries, a multiple of 256 (no
    /// partial bundle), read from the tiles a tree of `servedSize` publishes: where the smaller
    /// tree has a partial tile, the bigger one has the same tile full or wider, and its first
    /// hashes are the smaller tile's. What a node starting mid-log needs; the tiles are
    /// untrusted, and entries appended to this edge lead to the served checkpoint's root only if
    /// they are right.
    public static func load(
        treeSize: UInt64, servedSize: UInt64, read: (String) async throws -> Data
    ) async throws -> LogRightEdge {
        guard treeSize % UInt64(TileID.fullWidth) == 0, treeSize <= servedSize else {
            throw TileError.inconsistentRightEdge(treeSize: treeSize, reason: "a start inside a bundle, or after the served tree of \(servedSize)")
        }
        var levels: [[MerkleHash]] = Array(repeating: [], count: TileLayout.levelCount(treeSize: treeSize))
        for needed in TileLayout.partialTiles(treeSize: treeSize) {
            let complete = needed.index < TileLayout.fullTileCount(level: needed.level, treeSize: servedSize)
            let served = try TileID(
                level: needed.level, index: needed.index,
                width: complete ? TileID.fullWidth : TileLayout.partialWidth(level: needed.level, treeSize: servedSize))
            let bytes = try await read(served.path)
            guard bytes.count == served.byteCount else {
                throw TileError.wrongTileSize(path: served.path, expectedBytes: served.byteCount, actualBytes: bytes.count)
            }
            levels[needed.level] = TileHashReader.hashes(in: bytes.prefix(needed.byteCount), count: needed.width)
        }
        return try LogRightEdge(treeSize: treeSize, partialTileHashes: levels, partialBundleEntries: [])
    }

    /// The tree's root, from the complete subtrees in its partial tiles, biggest first.
    public var rootHash: MerkleHash {
        var spine: [MerkleHash] = []
        for hashes in partialTileHashes.reversed() {
            let width = hashes.count
            for heightInTile in stride(from: TileID.height - 1, through: 0, by: -1) where width & (1 << heightInTile) != 0 {
                let start = (width >> (heightInTile + 1)) << (heightInTile + 1)
                spine.append(MerkleTree.rootHash(ofLeafHashes: hashes[start..<(start + (1 << heightInTile))]))
            }
        }
        guard var root = spine.popLast() else { return MerkleTree.emptyRoot }
        while let left = spine.popLast() { root = MerkleTree.nodeHash(left, root) }
        return root
    }
}

/// A file an append publishes, by its tile path. Full tiles and full bundles are written once
/// and never change; a partial one is a new file next to the narrower one it supersedes.
public struct TileWrite: Sendable, Equatable {
    public let path: String
    public let bytes: Data
    public let isPartial: Bool
}

public struct AppendResult: Sendable {
    public let rightEdge: LogRightEdge
    public let rootHash: MerkleHash
    /// Entry bundles first, then hash tiles level by level; every one is new.
    public let writes: [TileWrite]
}

/// Appends entries to a tiled log in time and reads proportional to the batch, whatever the size
/// of the log: it starts from the right edge alone and returns the tiles the batch adds.
public enum LogAppender {
    public static func append(_ entries: [Data], to edge: LogRightEdge) throws(TileError) -> AppendResult {
        let oldSize = edge.treeSize
        guard !entries.isEmpty else { return AppendResult(rightEdge: edge, rootHash: edge.rootHash, writes: []) }
        let (newSize, overflow) = oldSize.addingReportingOverflow(UInt64(entries.count))
        guard !overflow else { throw .treeSizeOverflow(treeSize: oldSize, adding: entries.count) }
        for (offset, entry) in entries.enumerated() where entry.count > EntryBundle.maximumEntryBytes {
            throw .entryTooLarge(index: oldSize + UInt64(offset), byteCount: entry.count)
        }

        var writes: [TileWrite] = []
        let bundleEntries = edge.partialBundleEntries + entries
        var bundleIndex = TileLayout.fullTileCount(level: 0, treeSize: oldSize)
        var newPartialBundle: [Data] = []
        for start in stride(from: 0, to: bundleEntries.count, by: TileID.fullWidth) {
            let chunk = bundleEntries[start..<min(start + TileID.fullWidth, bundleEntries.count)]
            let bundle = EntryBundleID(validIndex: bundleIndex, width: chunk.count)
            writes.append(TileWrite(path: bundle.path, bytes: try EntryBundle.encode(chunk), isPartial: bundle.isPartial))
            if bundle.isPartial { newPartialBundle = Array(chunk) }
            bundleIndex += 1
        }

        var levels = edge.partialTileHashes
        // The hashes the batch adds at the current level: leaf hashes, then the roots of the
        // tiles it completes at the level below.
        var added = entries.map { MerkleTree.leafHash($0) }
        var level = 0
        while !added.isEmpty {
            if level == levels.count { levels.append([]) }
            let hashes = levels[level] + added
            var tileIndex = TileLayout.fullTileCount(level: level, treeSize: oldSize)
            var completed: [MerkleHash] = []
            var start = 0
            while hashes.count - start >= TileID.fullWidth {
                let tile = hashes[start..<(start + TileID.fullWidth)]
                writes.append(TileWrite(
                    path: TileID(validLevel: level, index: tileIndex, width: TileID.fullWidth).path,
                    bytes: TileHashReader.bytes(of: tile), isPartial: false))
                completed.append(MerkleTree.rootHash(ofLeafHashes: tile))
                tileIndex += 1
                start += TileID.fullWidth
            }
            levels[level] = Array(hashes[start...])
            if !levels[level].isEmpty {
                let tile = TileID(validLevel: level, index: tileIndex, width: levels[level].count)
                writes.append(TileWrite(path: tile.path, bytes: TileHashReader.bytes(of: levels[level]), isPartial: true))
            }
            added = completed
            level += 1
        }

        let newEdge = LogRightEdge(checkedSize: newSize, partialTileHashes: levels, partialBundleEntries: newPartialBundle)
        return AppendResult(rightEdge: newEdge, rootHash: newEdge.rootHash, writes: writes)
    }
}
