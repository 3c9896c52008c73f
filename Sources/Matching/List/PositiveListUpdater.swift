import CurlHTTP
import Foundation
import IDRotation
import Logging
import PositiveListFormat
#if canImport(Glibc)
import Glibc
import TracerCore
#endif

/// Where a positive list is published and the key its files must be signed with.
public struct PositiveListSource: Sendable, Equatable {
    /// The directory URL that holds `index.tpli` and `batches/`, e.g. `https://list.example.org/`.
    public let baseURL: String
    public let publicKey: PositiveListPublicKey

    public init(baseURL: String, publicKey: PositiveListPublicKey) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.publicKey = publicKey
    }

    func url(of relativePath: String) -> String { baseURL + "/" + relativePath }
}

/// What an update did.
public struct ListUpdate: Sendable, Equatable {
    public var index: PositiveListIndex
    /// False when the server confirmed the held index (304) or sent the same one again.
    public var changed: Bool
    public var downloadedBatches: Int
    public var downloadedBytes: Int
    /// The verified key index, nil when the server publishes no keys (a server from before key
    /// batches answers 404).
    public var keyIndex: PositiveListKeyIndex? = nil
    public var downloadedKeyBatches: Int = 0
}

/// Progress over all the batch files one update downloads.
public struct ListDownloadProgress: Sendable, Equatable {
    public var receivedBytes: Int64
    public var totalBytes: Int64
}

/// Brings the cache up to date with the server, incrementally: a conditional request for the
/// index, then only the batches not held yet, each verified (size, SHA-256 from the index, its
/// own signature, its entries) before it enters the cache.
public struct PositiveListUpdater: Sendable {
    public let source: PositiveListSource
    public let cache: PositiveListCache
    /// A list signed longer ago than this is refused as outdated (nil: any age). The server
    /// signs a new index at least daily even when nothing changed, so an old signature means
    /// the server, or a mirror or CDN in front of it, stopped updating: without this bound a
    /// frozen mirror answering 304 forever would look current.
    public let maximumListAge: UnixSeconds?
    let http: any HTTPTransferring
    let clock: any WallClock
    let logger: Logger

    public init(
        source: PositiveListSource, cache: PositiveListCache, http: any HTTPTransferring, maximumListAge: UnixSeconds? = nil,
        clock: any WallClock = SystemWallClock(), logger: Logger = Logger(label: "tracer.list")
    ) {
        self.source = source
        self.cache = cache
        self.maximumListAge = maximumListAge
        self.http = http
        self.clock = clock
        self.logger = logger
    }

    /// Updates the cache; on failure records why (for `tracer status`) and rethrows. Takes the
    /// cache's lock unless the caller holds it already (`holding`).
    public func update(
        progress: (@Sendable (ListDownloadProgress) -> Void)? = nil, holding heldLock: CacheLock? = nil
    ) async throws(ListUpdateError) -> ListUpdate {
        let ownLock = heldLock == nil ? try await cache.lock() : nil
        defer { ownLock?.release() }
        var state = cache.state
        state.lastAttempt = clock.now()
        do throws(ListUpdateError) {
            let update = try await updateHoldingLock(progress: progress)
            state.lastUpdated = clock.now()
            state.lastFailure = nil
            try cache.saveState(state)
            return update
        } catch {
            // An interrupted update says nothing about the list; it is not recorded as a failure.
            if error != .cancelled {
                state.lastFailure = error.description
                try? cache.saveState(state)
            }
            throw error
        }
    }

    private func updateHoldingLock(progress: (@Sendable (ListDownloadProgress) -> Void)?) async throws(ListUpdateError) -> ListUpdate {
        let held = cache.index(publicKey: source.publicKey)
        let indexURL = source.url(of: PositiveListIndex.relativePath)
        // Only an index that still verifies may be confirmed by a 304: after a key change or a
        // damaged cache the node must download everything again.
        let response = try await fetchIndex(indexURL, etag: held == nil ? nil : cache.etag)
        let index: PositiveListIndex
        if response.status == 304, let held {
            index = held
        } else {
            guard response.status == 200 else { throw .unexpectedStatus(url: indexURL, status: response.status) }
            do { index = try PositiveListIndex(verifying: response.body, publicKey: source.publicKey) } catch {
                throw .notVerified(url: indexURL, error)
            }
            if let held, index.generation < held.generation {
                throw .olderIndex(offered: index.generation, held: held.generation)
            }
            // A verified index while the held one does not verify: the node now follows another
            // list (another key). The old index must not survive to name batches of this one.
            if held == nil { cache.removeIndex() }
        }

        try refuseOversizedListings(of: index.batches, in: indexURL)
        // A 304 confirms the index, not the files: a batch lost from the cache is fetched again.
        let missing = index.batches.filter { !holds($0, vouchedForBy: held) }
        let total = Int64(missing.reduce(0) { $0 + $1.byteCount })
        var done: Int64 = 0
        for listing in missing {
            let before = done
            try await download(listing, keys: false) { received in progress?(ListDownloadProgress(receivedBytes: before + received, totalBytes: total)) }
            done += Int64(listing.byteCount)
        }
        if response.status == 200 {
            // Only now that every batch it names is held may the new index replace the old one.
            try cache.installIndex(response.body, etag: response.header("etag"))
            cache.removeFiles(notListedIn: index)
        }
        let keys = try await updateKeys(announcedBy: index)
        // Only now: an outdated list the server offers is still newer than the one held, and
        // the node should match against the newest it can get while it says it is outdated.
        try refuseIfOutdated(publishedAt: index.publishedAt)
        if let keyIndex = keys.index { try refuseIfOutdated(publishedAt: keyIndex.publishedAt) }
        return ListUpdate(
            index: index, changed: index != held || keys.changed, downloadedBatches: missing.count,
            downloadedBytes: Int(done) + keys.bytes, keyIndex: keys.index, downloadedKeyBatches: keys.batches)
    }

    /// The key index and the key batches not held yet, with the same checks as the id files.
    ///
    /// A 404 is an unsigned answer and cannot withdraw signed keys (a server that stops
    /// publishing keys signs an empty key index). When the verified id index says a key index is
    /// published, or a signed one from this list is held, a 404 is a failed update and the held
    /// key batches are kept and still matched. Only an id index without that flag, from a server
    /// from before key batches, with no key index ever seen, makes a 404 mean "no keys".
    private func updateKeys(announcedBy idIndex: PositiveListIndex) async throws(ListUpdateError) -> (index: PositiveListKeyIndex?, changed: Bool, batches: Int, bytes: Int) {
        let held = cache.keyIndex(publicKey: source.publicKey)
        let indexURL = source.url(of: PositiveListKeyIndex.relativePath)
        let response = try await fetchIndex(indexURL, etag: held == nil ? nil : cache.keyEtag)
        if response.status == 404 {
            if held != nil || idIndex.flags.contains(.keyIndexPublished) {
                throw .keyIndexMissing(url: indexURL, heldGeneration: held?.generation)
            }
            logger.debug("the server publishes no key index (HTTP 404); matching published ids only", metadata: ["url": "\(indexURL)"])
            cache.removeKeyIndex()
            cache.removeKeyFiles(notListedIn: nil)
            return (nil, held != nil, 0, 0)
        }
        let index: PositiveListKeyIndex
        if response.status == 304, let held {
            index = held
        } else {
            guard response.status == 200 else { throw .unexpectedStatus(url: indexURL, status: response.status) }
            do { index = try PositiveListKeyIndex(verifying: response.body, publicKey: source.publicKey) } catch {
                throw .notVerified(url: indexURL, error)
            }
            if let held, index.generation < held.generation {
                throw .olderIndex(offered: index.generation, held: held.generation)
            }
            if held == nil { cache.removeKeyIndex() }
        }
        try refuseOversizedListings(of: index.batches, in: indexURL)
        let missing = index.batches.filter { !holdsKeyBatch($0, vouchedForBy: held) }
        var done = 0
        for listing in missing {
            try await download(listing, keys: true) { _ in }
            done += listing.byteCount
        }
        if response.status == 200 {
            try cache.installKeyIndex(response.body, etag: response.header("etag"))
            cache.removeKeyFiles(notListedIn: index)
        }
        return (index, index != held, missing.count, done)
    }

    /// GETs an index (`maximumByteCount` bounds it: an endless answer costs at most that much
    /// memory), conditionally when an ETag is held. A conditional request refused with a 4xx (a
    /// 412, or a 400 or 431 from a server or cache that cannot take the ETag back) is sent once
    /// more without it: the ETag only saves a download and must never stop updates.
    private func fetchIndex(_ url: String, etag: String?) async throws(ListUpdateError) -> HTTPResponse {
        var request = HTTPRequest(url: url, maximumByteCount: PositiveListIndex.maximumByteCount)
        guard let etag else { return try await send(request) }
        request.headers = [HTTPHeaderField(name: "If-None-Match", value: etag)]
        let response = try await send(request)
        guard (400..<500).contains(response.status) else { return response }
        logger.debug("a conditional request was refused; asking again without If-None-Match", metadata: [
            "url": "\(url)", "status": "\(response.status)",
        ])
        request.headers = []
        return try await send(request)
    }

    /// A verified index may still list a batch larger than the format allows (a signing key in
    /// the wrong hands, a server bug): it is refused before anything is downloaded, rather than
    /// written to disk and read back to find out.
    private func refuseOversizedListings(of listings: [PositiveListIndex.BatchListing], in indexURL: String) throws(ListUpdateError) {
        for listing in listings where listing.byteCount > listing.maximumByteCount {
            throw .listingTooLarge(
                indexURL: indexURL, batch: listing.relativePath, byteCount: listing.byteCount, limit: listing.maximumByteCount)
        }
    }

    private func refuseIfOutdated(publishedAt: UnixSeconds) throws(ListUpdateError) {
        guard let maximumListAge else { return }
        let now = clock.now()
        if publishedAt < now - maximumListAge {
            throw .outdated(publishedAt: publishedAt, ageSeconds: now - publishedAt)
        }
    }

    /// `holds` for a key batch.
    private func holdsKeyBatch(_ listing: PositiveListIndex.BatchListing, vouchedForBy held: PositiveListKeyIndex?) -> Bool {
        guard cache.holdsKeyBatch(listing) else { return false }
        if held?.batches.contains(listing) == true { return true }
        guard let file = FileManager.default.contents(atPath: cache.keyBatchPath(listing.number)) else { return false }
        return (try? PositiveListKeyBatch(verifying: Array(file), listedAs: listing, publicKey: source.publicKey)) != nil
    }

    /// True when the cache holds the batch `listing` names. A file the held verified index lists
    /// the same way is that batch; any other file of that name (left by an interrupted update, or
    /// by another list: another server, another key) counts only if it verifies against the
    /// listing, so a same-sized batch of another list is never matched as this one.
    private func holds(_ listing: PositiveListIndex.BatchListing, vouchedForBy held: PositiveListIndex?) -> Bool {
        guard cache.holds(listing) else { return false }
        if held?.batches.contains(listing) == true { return true }
        guard let file = FileManager.default.contents(atPath: cache.batchPath(listing.number)) else { return false }
        return (try? PositiveListBatch(verifying: Array(file), listedAs: listing, publicKey: source.publicKey)) != nil
    }

    /// Downloads one id batch (or key batch, `keys`), verifies it against its listing and its
    /// signature, and only then renames it into the cache.
    private func download(
        _ listing: PositiveListIndex.BatchListing, keys: Bool, progress: @escaping @Sendable (Int64) -> Void
    ) async throws(ListUpdateError) {
        let url = source.url(of: listing.relativePath)
        let destination = keys ? cache.keyBatchPath(listing.number) : cache.batchPath(listing.number)
        let temporary = AtomicFile.temporaryPath(for: destination)
        defer { unlink(temporary) }
        let response: HTTPResponse
        do {
            response = try await http.download(
                HTTPRequest(url: url, expectedByteCount: listing.byteCount), to: temporary,
                progress: { progress($0.receivedBytes) })
        } catch {
            throw Self.listError(error)
        }
        guard response.status == 200 else { throw .unexpectedStatus(url: url, status: response.status) }
        // Mapped, so verification holds one copy of the batch (at most its listed size, which
        // the format bounds), not two.
        guard let file = try? Data(contentsOf: URL(fileURLWithPath: temporary), options: .alwaysMapped) else {
            throw .cannotWriteCache(path: temporary, reason: "the downloaded file cannot be read back")
        }
        do {
            if keys {
                _ = try PositiveListKeyBatch(verifying: Array(file), listedAs: listing, publicKey: source.publicKey)
            } else {
                _ = try PositiveListBatch(verifying: Array(file), listedAs: listing, publicKey: source.publicKey)
            }
        } catch {
            throw .notVerified(url: url, error)
        }
        if keys {
            try cache.installKeyBatch(from: temporary, number: listing.number)
        } else {
            try cache.installBatch(from: temporary, number: listing.number)
        }
    }

    private func send(_ request: HTTPRequest) async throws(ListUpdateError) -> HTTPResponse {
        do { return try await http.perform(request) } catch { throw Self.listError(error) }
    }

    static func listError(_ error: HTTPClientError) -> ListUpdateError {
        if case .cancelled = error { return .cancelled }
        if case .responseTooLarge(let url, let limit) = error { return .tooLarge(url: url, limit: limit) }
        return .network(error)
    }
}
