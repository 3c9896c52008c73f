import Foundation
import Testing
import TestTiers
@testable import TransparencyLog

/// The appender: batches of any size give the same files and roots as one batch and as the
/// RFC's definition, files are only ever added, and a client proves everything from the tiles.
@Suite(.tags(.unit)) struct AppenderTests {
    /// A bucket that refuses to overwrite: the immutability of every published path is checked
    /// on each write.
    struct Bucket {
        var files: [String: Data] = [:]

        mutating func store(_ writes: [TileWrite]) {
            for write in writes {
                #expect(files[write.path] == nil, "\(write.path) written twice")
                #expect(write.isPartial == write.path.contains(".p/"))
                files[write.path] = write.bytes
            }
        }

        func read(_ path: String) throws -> Data {
            guard let bytes = files[path] else { throw TileError.missingTile(path: path) }
            return bytes
        }
    }

    static let allEntries = entries(count: 70_000)
    static let allLeafHashes = allEntries.map { MerkleTree.leafHash($0) }

    @Test func batchesOfAnySizeGiveTheSameTilesAndRoots() throws {
        let count = 2_000
        let oneBatch = try LogAppender.append(Array(Self.allEntries.prefix(count)), to: .empty)
        var whole = Bucket()
        whole.store(oneBatch.writes)
        #expect(oneBatch.rootHash == NaiveMerkle.root(Self.allLeafHashes[..<count]))

        var random = SplitMix64(seed: 0xB47C4)
        var edge = LogRightEdge.empty
        var bucket = Bucket()
        while edge.treeSize < UInt64(count) {
            let size = Int(edge.treeSize)
            let batch = min(count - size, Int.random(in: 0...300, using: &random))
            let result = try LogAppender.append(Array(Self.allEntries[size..<(size + batch)]), to: edge)
            #expect(result.writes.map(\.path) == (
                TileLayout.entryBundlesAdded(from: edge.treeSize, to: result.rightEdge.treeSize).map(\.path)
                    + TileLayout.tilesAdded(from: edge.treeSize, to: result.rightEdge.treeSize).map(\.path)))
            #expect(result.rootHash == NaiveMerkle.root(Self.allLeafHashes[..<(size + batch)]), "size \(size + batch)")
            bucket.store(result.writes)
            // What a server restarting here would read back gives the same edge.
            let reloaded = try LogRightEdge.load(treeSize: result.rightEdge.treeSize, expectedRoot: result.rootHash, read: bucket.read)
            #expect(reloaded == result.rightEdge)
            edge = result.rightEdge
        }
        // The final tree's files are byte for byte those of one batch; the many-batch bucket
        // also holds the narrower partial files of the sizes it passed through.
        for (path, bytes) in whole.files { #expect(bucket.files[path] == bytes, "\(path)") }
        let finalPaths = Set(TileLayout.tiles(treeSize: UInt64(count)).map(\.path))
        #expect(finalPaths.isSubset(of: Set(whole.files.keys)))
    }

    /// A node starting mid-log reads the edge of an earlier tree (a multiple of 256) from the
    /// tiles the current tree publishes, and nothing else: the edge is the one an appender had
    /// there, whether the tiles it needs are full or still partial in the served tree.
    @Test func theEdgeOfAnEarlierTreeIsReadFromTheServedTreesTiles() async throws {
        let served = try LogAppender.append(Array(Self.allEntries), to: .empty)
        var published = Bucket()
        published.store(served.writes)
        let servedSize = UInt64(Self.allEntries.count)
        let servedPaths = Set(TileLayout.tiles(treeSize: servedSize).map(\.path))
        for start in [0, 256, 512, 65_280, 65_536, 65_792, 69_888] {
            var read: [String] = []
            let edge = try await LogRightEdge.load(treeSize: UInt64(start), servedSize: servedSize) { path in
                read.append(path)
                return try published.read(path)
            }
            let direct = try LogAppender.append(Array(Self.allEntries.prefix(start)), to: .empty)
            #expect(edge == direct.rightEdge, "start \(start)")
            #expect(edge.rootHash == NaiveMerkle.root(Self.allLeafHashes[..<start]), "start \(start)")
            #expect(Set(read).isSubset(of: servedPaths), "start \(start) read \(read.filter { !servedPaths.contains($0) })")
            #expect(read.count == TileLayout.partialTiles(treeSize: UInt64(start)).count)
        }
        // Only bundle boundaries, and never past the served tree.
        await #expect(throws: TileError.self) { try await LogRightEdge.load(treeSize: 300, servedSize: servedSize) { try published.read($0) } }
        await #expect(throws: TileError.self) { try await LogRightEdge.load(treeSize: 70_144, servedSize: servedSize) { try published.read($0) } }
        // A tile cut short is refused for its size.
        await #expect(throws: TileError.self) {
            try await LogRightEdge.load(treeSize: 512, servedSize: servedSize) { path in (try published.read(path)).dropLast(1) }
        }
    }

    /// Three tile levels (70,000 entries, the spec's example size) in uneven batches; a client
    /// holding only the tiles it is told to fetch proves inclusion and consistency.
    @Test func threeLevelsProveFromTheTilesAClientFetches() throws {
        var random = SplitMix64(seed: 9162)
        var edge = LogRightEdge.empty
        var bucket = Bucket()
        var roots: [UInt64: MerkleHash] = [0: MerkleTree.emptyRoot]
        while edge.treeSize < 70_000 {
            let size = Int(edge.treeSize)
            let batch = min(70_000 - size, Int.random(in: 1...12_000, using: &random))
            let result = try LogAppender.append(Array(Self.allEntries[size..<(size + batch)]), to: edge)
            bucket.store(result.writes)
            edge = result.rightEdge
            roots[edge.treeSize] = result.rootHash
        }
        #expect(roots[70_000] == MerkleTree.rootHash(ofLeafHashes: Self.allLeafHashes))
        #expect(edge.partialTileHashes.map(\.count) == [112, 17, 1])

        let sizes = roots.keys.sorted()
        for _ in 0..<40 {
            let newSize = sizes.randomElement(using: &random)!
            guard newSize > 0 else { continue }
            let index = UInt64.random(in: 0..<newSize, using: &random)
            var reader = TileHashReader(treeSize: newSize)
            for tile in try TileLayout.tilesForInclusion(index: index, treeSize: newSize) {
                try reader.add(tile, bytes: try bucket.read(tile.path))
            }
            let proof = try MerkleProofGenerator.inclusionProof(index: index, treeSize: newSize, reader: reader)
            try MerkleProof.verifyInclusion(
                leafHash: Self.allLeafHashes[Int(index)], index: index, treeSize: newSize, proof: proof, rootHash: roots[newSize]!)

            let oldSize = sizes.filter { $0 <= newSize }.randomElement(using: &random)!
            var consistencyReader = TileHashReader(treeSize: newSize)
            for tile in try TileLayout.tilesForConsistency(oldSize: oldSize, newSize: newSize) {
                try consistencyReader.add(tile, bytes: try bucket.read(tile.path))
            }
            let consistency = try MerkleProofGenerator.consistencyProof(oldSize: oldSize, newSize: newSize, reader: consistencyReader)
            try MerkleProof.verifyConsistency(
                oldSize: oldSize, newSize: newSize, oldRoot: roots[oldSize]!, newRoot: roots[newSize]!, proof: consistency)

            var rootReader = TileHashReader(treeSize: newSize)
            for tile in try TileLayout.tilesForRoot(treeSize: newSize) { try rootReader.add(tile, bytes: try bucket.read(tile.path)) }
            #expect(try MerkleProofGenerator.rootHash(treeSize: newSize, reader: rootReader) == roots[newSize])
        }
    }

    @Test func rightEdgesThatDisagreeAreRefused() throws {
        let result = try LogAppender.append(Array(Self.allEntries.prefix(300)), to: .empty)
        var bucket = Bucket()
        bucket.store(result.writes)
        #expect(throws: TileError.self) { try LogRightEdge.load(treeSize: 301, read: bucket.read) }
        #expect(throws: MerkleProofError.self) {
            try LogRightEdge.load(treeSize: 300, expectedRoot: MerkleTree.emptyRoot, read: bucket.read)
        }
        var damaged = bucket
        damaged.files["tile/entries/001.p/44"] = try EntryBundle.encode(Array(Self.allEntries[257..<301]))
        #expect(throws: TileError.self) { try LogRightEdge.load(treeSize: 300, read: damaged.read) }
        damaged = bucket
        damaged.files["tile/0/001.p/44"] = Data(count: 44 * 32 - 1)
        #expect(throws: TileError.self) { try LogRightEdge.load(treeSize: 300, read: damaged.read) }

        let edge = result.rightEdge
        #expect(throws: TileError.self) {
            try LogRightEdge(treeSize: 301, partialTileHashes: edge.partialTileHashes, partialBundleEntries: edge.partialBundleEntries)
        }
        #expect(throws: TileError.self) {
            try LogRightEdge(treeSize: 300, partialTileHashes: edge.partialTileHashes, partialBundleEntries: Array(edge.partialBundleEntries.reversed()))
        }
        #expect(try LogRightEdge(treeSize: 300, partialTileHashes: edge.partialTileHashes, partialBundleEntries: edge.partialBundleEntries) == edge)
    }

    @Test func hostileAppendsThrow() throws {
        #expect(throws: TileError.entryTooLarge(index: 1, byteCount: 65_536)) {
            try LogAppender.append([Data(), Data(count: 65_536)], to: .empty)
        }
        let nothing = try LogAppender.append([], to: .empty)
        #expect(nothing.writes.isEmpty && nothing.rootHash == MerkleTree.emptyRoot)
    }

    /// Not a timing test (debug build, shared machine): the flat cost shows as the same batch
    /// producing the same work, the files of one batch, whatever lies left of the edge.
    @Test func appendCostDoesNotGrowWithTheLog() throws {
        let small = try LogAppender.append(Array(Self.allEntries.prefix(1_000)), to: .empty)
        let big = try LogAppender.append(Array(Self.allEntries.prefix(69_000)), to: .empty)
        let batch = Array(Self.allEntries[69_000..<70_000])
        let afterSmall = try LogAppender.append(batch, to: small.rightEdge)
        let afterBig = try LogAppender.append(batch, to: big.rightEdge)
        let smallBytes = afterSmall.writes.reduce(0) { $0 + $1.bytes.count }
        let bigBytes = afterBig.writes.reduce(0) { $0 + $1.bytes.count }
        #expect(abs(smallBytes - bigBytes) < 3 * 8_192, "\(smallBytes) vs \(bigBytes)")
    }
}
