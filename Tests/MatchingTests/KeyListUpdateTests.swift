import Crypto
import Foundation
import IDRotation
@testable import Matching
import PositiveListFormat
import Testing
import TestTiers
import TracerCore

/// The updater's key half: `keys/index.tpki` and its batches fetched incrementally and verified
/// like id batches, and a server without keys (404) still a working server.
@Suite(.tags(.unit)) struct KeyListUpdateTests {
    let now = ListFreshnessTests.now
    let signer = BatchSigner()
    let server = ListFreshnessTests.StaticServer()

    func updater(_ cache: PositiveListCache) -> PositiveListUpdater {
        PositiveListUpdater(
            source: PositiveListSource(baseURL: "http://list.test/", publicKey: signer.publicKey), cache: cache, http: server,
            clock: ListFreshnessTests.FixedClock(time: now))
    }

    func publishIDIndex() throws {
        server.publish(PositiveListIndex.relativePath, try PositiveListIndex(generation: 1, publishedAt: now, batches: []).encode(signingKey: signer.key))
    }

    /// Publishes key batches `numbers` (one key each, of yesterday) under a key index of `generation`.
    func publishKeys(_ numbers: [UInt64], generation: UInt64, tamperWith tampered: UInt64? = nil) throws {
        let day = UTCDay(number: UTCDay(containing: now).number - 1)
        var listings: [PositiveListIndex.BatchListing] = []
        for number in numbers {
            let records = [DailyKeyRecord(day: day, intervalSeconds: 900, key: DailyKey.random())]
            var file = try PositiveListKeyBatch.encode(number: number, records: records, signingKey: signer.key)
            listings.append(PositiveListIndex.BatchListing(
                number: number, timeRange: PositiveListKeyBatch.timeRange(of: records),
                byteCount: file.count, sha256: Array(SHA256.hash(data: file)), kind: .keys))
            // Altered after it was listed: the digest no longer fits.
            if number == tampered { file[file.count - 70] ^= 1 }
            server.publish(PositiveListKeyBatch.relativePath(number: number), file)
        }
        server.publish(
            PositiveListKeyIndex.relativePath,
            try PositiveListKeyIndex(generation: generation, publishedAt: now, accepts: .both, batches: listings).encode(signingKey: signer.key))
    }

    @Test func aServerWithoutAKeyIndexIsAServerWithoutKeys() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = PositiveListCache(directory: directory.path)
        try publishIDIndex()
        let update = try await updater(cache).update()
        #expect(update.keyIndex == nil)
        #expect(update.downloadedKeyBatches == 0)
        #expect(cache.keyIndex(publicKey: signer.publicKey) == nil)
        #expect(cache.state.lastFailure == nil)
    }

    @Test func keyBatchesAreFetchedOnceAndDroppedWhenTheServerSignsAnEmptyKeyIndex() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = PositiveListCache(directory: directory.path)
        try publishIDIndex()
        try publishKeys([1, 2], generation: 1)
        let first = try await updater(cache).update()
        #expect(first.downloadedKeyBatches == 2)
        #expect(first.keyIndex?.batches.count == 2)
        let held = try #require(cache.keyIndex(publicKey: signer.publicKey))
        #expect(try cache.keyBatches(of: held).map(\.number) == [1, 2])

        // Unchanged (304): nothing downloaded. A new batch: only it.
        #expect(try await updater(cache).update().downloadedKeyBatches == 0)
        try publishKeys([1, 2, 3], generation: 2)
        // publishKeys re-encodes batches 1 and 2 with new keys, so their digests changed and
        // they are fetched again; what matters is that every listed batch is held after.
        _ = try await updater(cache).update()
        let second = try #require(cache.keyIndex(publicKey: signer.publicKey))
        #expect(second.generation == 2)
        #expect(try cache.keyBatches(of: second).count == 3)

        // The server stops publishing keys: it signs a key index without batches, and the held
        // keys are no longer matched. (A 404 cannot do this: see HostileListServerTests.)
        try publishKeys([], generation: 3)
        let after = try await updater(cache).update()
        #expect(after.keyIndex?.batches == [])
        #expect(try cache.keyBatches(of: try #require(cache.keyIndex(publicKey: signer.publicKey))).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: cache.keyBatchPath(1)))
    }

    @Test func anAlteredKeyBatchIsRefusedAndTheOldKeyListStays() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = PositiveListCache(directory: directory.path)
        try publishIDIndex()
        try publishKeys([1], generation: 1)
        _ = try await updater(cache).update()
        try publishKeys([1, 2], generation: 2, tamperWith: 2)
        do {
            _ = try await updater(cache).update()
            Issue.record("an altered key batch was accepted")
        } catch {
            guard case .notVerified(let url, _) = error else {
                Issue.record("expected notVerified, got \(error)")
                return
            }
            #expect(url.hasSuffix("keys/2.tpkb"))
        }
        #expect(cache.keyIndex(publicKey: signer.publicKey)?.generation == 1)
        #expect(!FileManager.default.fileExists(atPath: cache.keyBatchPath(2)))
    }
}
