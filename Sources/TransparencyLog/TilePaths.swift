/// Why a tile, a tile path or an entry bundle was refused.
public enum TileError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidPath(String, reason: String)
    case invalidTile(level: Int, index: UInt64, width: Int)
    case invalidEntryBundle(index: UInt64, width: Int)
    case wrongTileSize(path: String, expectedBytes: Int, actualBytes: Int)
    case missingTile(path: String)
    case nodeNotInTree(MerkleNodeID, treeSize: UInt64)
    case malformedEntryBundle(path: String, reason: String)
    case entryTooLarge(index: UInt64, byteCount: Int)
    /// A log's right edge whose tiles and entries do not agree with its size or with each other.
    case inconsistentRightEdge(treeSize: UInt64, reason: String)
    /// An append that would take the log past 2^64 - 1 entries.
    case treeSizeOverflow(treeSize: UInt64, adding: Int)

    public var description: String {
        switch self {
        case let .invalidPath(path, reason): "tile path \"\(path)\": \(reason)"
        case let .invalidTile(level, index, width): "no tile at level \(level), index \(index), width \(width)"
        case let .invalidEntryBundle(index, width): "no entry bundle at index \(index), width \(width)"
        case let .wrongTileSize(path, expected, actual): "\(path) has \(actual) bytes where \(expected) are needed"
        case let .missingTile(path): "\(path) is needed and was not given"
        case let .nodeNotInTree(node, treeSize): "\(node) is not a complete subtree of a tree of size \(treeSize)"
        case let .malformedEntryBundle(path, reason): "\(path): \(reason)"
        case let .entryTooLarge(index, byteCount): "entry \(index) has \(byteCount) bytes; an entry bundle holds at most 65535"
        case let .inconsistentRightEdge(treeSize, reason): "the right edge of the tree of size \(treeSize): \(reason)"
        case let .treeSizeOverflow(treeSize, adding): "\(adding) entries do not fit after \(treeSize)"
        }
    }
}

/// A hash tile (C2SP tlog-tiles): at `level` L, the node hashes at Merkle height 8·L with
/// indexes 256·`index` ..< 256·`index` + `width`. A tile of width 256 is full and never changes;
/// a narrower one is the partial tile at the right edge of some tree.
public struct TileID: Hashable, Sendable, CustomStringConvertible {
    public static let fullWidth = 256
    /// Merkle levels a tile spans: 256 = 2^8 hashes.
    public static let height = 8
    public static let maximumLevel = 63

    public let level: Int
    public let index: UInt64
    public let width: Int

    public init(level: Int, index: UInt64, width: Int) throws(TileError) {
        guard (0...Self.maximumLevel).contains(level), (1...Self.fullWidth).contains(width),
              TilePathCoding.startFits(index: index, levelShift: Self.height * (level + 1))
        else { throw .invalidTile(level: level, index: index, width: width) }
        self.level = level
        self.index = index
        self.width = width
    }

    /// Parses `tile/<L>/<N>[.p/<W>]`, accepting only the one canonical spelling of each tile.
    public init(path: String) throws(TileError) {
        guard path.hasPrefix("tile/"), !path.hasPrefix("tile/entries/") else {
            throw .invalidPath(path, reason: "a hash tile path starts with tile/<level>/")
        }
        var components = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard let levelText = components.first, let level = TilePathCoding.decimal(levelText), level <= Self.maximumLevel else {
            throw .invalidPath(path, reason: "the level is not a decimal from 0 to 63 without leading zeros")
        }
        components = components.dropFirst()
        let (index, width) = try TilePathCoding.decodeIndexAndWidth(components, path: path)
        do {
            try self.init(level: level, index: index, width: width)
        } catch {
            throw .invalidPath(path, reason: "the index is beyond any tree of 2^64 entries")
        }
    }

    /// For coordinates already checked (a bundle's own, or derived from a valid tree size).
    init(validLevel level: Int, index: UInt64, width: Int) {
        self.level = level
        self.index = index
        self.width = width
    }

    public var isPartial: Bool { width < Self.fullWidth }
    public var path: String { "tile/\(level)/" + TilePathCoding.encode(index: index, width: width) }
    public var byteCount: Int { width * MerkleHash.byteCount }
    public var description: String { path }

    /// The Merkle node held at `position` (0 ..< width).
    public func node(at position: Int) -> MerkleNodeID {
        MerkleNodeID(height: Self.height * level, index: index << 8 | UInt64(position))
    }
}

/// An entry bundle (C2SP tlog-tiles): entries 256·`index` ..< 256·`index` + `width`, each as a
/// big-endian uint16 length and its bytes. Its hashes are the level-0 tile of the same index.
public struct EntryBundleID: Hashable, Sendable, CustomStringConvertible {
    public let index: UInt64
    public let width: Int

    public init(index: UInt64, width: Int) throws(TileError) {
        guard (1...TileID.fullWidth).contains(width), TilePathCoding.startFits(index: index, levelShift: TileID.height) else {
            throw .invalidEntryBundle(index: index, width: width)
        }
        self.index = index
        self.width = width
    }

    /// Parses `tile/entries/<N>[.p/<W>]`, canonical spelling only.
    public init(path: String) throws(TileError) {
        guard path.hasPrefix("tile/entries/") else {
            throw .invalidPath(path, reason: "an entry bundle path starts with tile/entries/")
        }
        let components = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst(2)
        let (index, width) = try TilePathCoding.decodeIndexAndWidth(components, path: path)
        do {
            try self.init(index: index, width: width)
        } catch {
            throw .invalidPath(path, reason: "the index is beyond any tree of 2^64 entries")
        }
    }

    public var isPartial: Bool { width < TileID.fullWidth }
    public var path: String { "tile/entries/" + TilePathCoding.encode(index: index, width: width) }
    public var description: String { path }
    /// The level-0 hash tile whose hashes are this bundle's leaf hashes.
    public var hashTile: TileID { TileID(validLevel: 0, index: index, width: width) }
    /// The log indexes of its entries.
    public var entryRange: Range<UInt64> { (index << 8)..<((index << 8) + UInt64(width)) }
}

/// The `<N>[.p/<W>]` part shared by tile and bundle paths.
enum TilePathCoding {
    /// `N` in zero-padded groups of three digits, `x` before all but the last: 1234067 is
    /// `x001/x234/067`, so that no directory is also a file and none grows past 1000 names.
    static func encode(index: UInt64, width: Int) -> String {
        var groups: [String] = []
        var rest = index
        repeat {
            let group = String(rest % 1000)
            groups.append(String(repeating: "0", count: 3 - group.count) + group)
            rest /= 1000
        } while rest > 0
        let indexPath = groups.reversed().enumerated()
            .map { position, group in position < groups.count - 1 ? "x" + group : group }
            .joined(separator: "/")
        return width < TileID.fullWidth ? indexPath + ".p/\(width)" : indexPath
    }

    static func decodeIndexAndWidth(_ components: ArraySlice<Substring>, path: String) throws(TileError) -> (UInt64, Int) {
        var parts = Array(components)
        var width = TileID.fullWidth
        // A partial tile ends in `<last group>.p` then `<W>`.
        if let last = parts.last, parts.count >= 2, parts[parts.count - 2].hasSuffix(".p") {
            guard let parsed = decimal(last), (1..<TileID.fullWidth).contains(parsed) else {
                throw .invalidPath(path, reason: "the width is not a decimal from 1 to 255 without leading zeros")
            }
            width = parsed
            parts.removeLast()
            parts[parts.count - 1] = parts[parts.count - 1].dropLast(2)
        }
        guard !parts.isEmpty, parts.count <= 7 else { throw .invalidPath(path, reason: "the index has no or too many groups") }
        var index: UInt64 = 0
        for (position, part) in parts.enumerated() {
            let isLast = position == parts.count - 1
            var digits = Substring(part)
            if !isLast {
                guard digits.first == "x" else { throw .invalidPath(path, reason: "every index group but the last starts with x") }
                digits = digits.dropFirst()
            }
            guard digits.count == 3, digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                  let group = UInt64(digits)
            else { throw .invalidPath(path, reason: "an index group is not three digits") }
            // The leading group of a canonical index is never zero (1 is `001`, not `x000/001`).
            if position == 0, !isLast, group == 0 { throw .invalidPath(path, reason: "the index has a leading zero group") }
            let (scaled, overflowA) = index.multipliedReportingOverflow(by: 1000)
            let (sum, overflowB) = scaled.addingReportingOverflow(group)
            guard !overflowA, !overflowB else { throw .invalidPath(path, reason: "the index does not fit in 64 bits") }
            index = sum
        }
        return (index, width)
    }

    /// A decimal without sign or leading zeros ("0" itself is fine), below 2^31.
    static func decimal(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.count <= 9, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              text == "0" || text.first != "0"
        else { return nil }
        return Int(text)
    }

    /// Whether the entries of tile `index` (`index << levelShift` on) can be counted in 64 bits:
    /// no tree is bigger, so a tile beyond that is hostile input, not a tile.
    static func startFits(index: UInt64, levelShift: Int) -> Bool {
        levelShift >= UInt64.bitWidth ? index == 0 : index < (UInt64.max >> UInt64(levelShift))
    }
}
