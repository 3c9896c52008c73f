import Foundation
import IDRotation
import PositiveListFormat
#if canImport(Glibc)
import Glibc
import TracerCore
#endif

/// The node's copy of the positive list: the last index that verified, the batches it lists,
/// and when the list was last confirmed current. Only verified files ever enter it, each by an
/// atomic rename, and the index is replaced only once every batch it names is held, so a crash
/// or a failed download leaves the previous good list whole.
///
/// Layout under `directory`: `index.tpli`, `index.etag`, `state.json`, `batches/N.tplb`, and for
/// a server that publishes daily keys `keys/index.tpki`, `keys/index.etag`, `keys/N.tpkb`.
public struct PositiveListCache: Sendable {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    var indexPath: String { directory + "/index.tpli" }
    var etagPath: String { directory + "/index.etag" }
    var statePath: String { directory + "/state.json" }
    var batchesDirectory: String { directory + "/batches" }

    func batchPath(_ number: UInt64) -> String { batchesDirectory + "/\(number).tplb" }

    var keysDirectory: String { directory + "/keys" }
    var keyIndexPath: String { keysDirectory + "/index.tpki" }
    var keyEtagPath: String { keysDirectory + "/index.etag" }

    func keyBatchPath(_ number: UInt64) -> String { keysDirectory + "/\(number).tpkb" }

    /// Creates the directories (0700: what a user downloads reveals nothing, but it is theirs).
    func prepare() throws(ListUpdateError) {
        for path in [directory, batchesDirectory, keysDirectory] {
            do {
                try FileManager.default.createDirectory(
                    atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw .cannotWriteCache(path: path, reason: (error as NSError).localizedDescription)
            }
        }
    }

    /// The held index, if it still verifies with `publicKey` (a changed key invalidates it).
    public func index(publicKey: PositiveListPublicKey) -> PositiveListIndex? {
        guard let bytes = FileManager.default.contents(atPath: indexPath) else { return nil }
        return try? PositiveListIndex(verifying: Array(bytes), publicKey: publicKey)
    }

    var etag: String? {
        guard let data = FileManager.default.contents(atPath: etagPath) else { return nil }
        // A cache written before the ETag rule may hold a bad one: it is ignored, not sent.
        return EntityTag.kept(String(decoding: data, as: UTF8.self))
    }

    /// True when the batch file is present with the size the index gives it. Its content was
    /// verified before it was renamed into place.
    func holds(_ listing: PositiveListIndex.BatchListing) -> Bool {
        var status = stat()
        return stat(batchPath(listing.number), &status) == 0 && Int(status.st_size) == listing.byteCount
    }

    /// The cached batches of `index`, for matching; throws if one is missing.
    public func batches(of index: PositiveListIndex) throws(MatchingError) -> [CachedBatch] {
        try index.batches.map { listing throws(MatchingError) in
            guard holds(listing) else {
                throw .damagedCache(path: batchPath(listing.number), reason: "it is missing or has the wrong size")
            }
            return CachedBatch(number: listing.number, path: batchPath(listing.number))
        }
    }

    func installBatch(from temporary: String, number: UInt64) throws(ListUpdateError) {
        do { try AtomicFile.install(temporary, at: batchPath(number)) } catch {
            throw .cannotWriteCache(path: batchPath(number), reason: "\(error)")
        }
    }

    func installIndex(_ bytes: [UInt8], etag: String?) throws(ListUpdateError) {
        do {
            // The index first, and the old ETag gone before it changes: a crash or a failed write
            // must never leave a newer ETag beside an older index, or a 304 would confirm a list
            // the node does not hold. An old or missing ETag only costs one full index download.
            unlink(etagPath)
            try AtomicFile.write(bytes, to: indexPath, mode: 0o600)
            if let etag = EntityTag.kept(etag) { try AtomicFile.write(Array(etag.utf8), to: etagPath, mode: 0o600) }
        } catch {
            throw .cannotWriteCache(path: indexPath, reason: "\(error)")
        }
    }

    /// Removes the index and its ETag (the batch files stay, to be verified before any reuse).
    func removeIndex() {
        unlink(indexPath)
        unlink(etagPath)
    }

    /// Removes batches the index no longer lists and temporary files left by an interrupted run.
    func removeFiles(notListedIn index: PositiveListIndex) {
        let listed = Set(index.batches.map { "\($0.number).tplb" })
        let names = (try? FileManager.default.contentsOfDirectory(atPath: batchesDirectory)) ?? []
        for name in names where !listed.contains(name) {
            unlink(batchesDirectory + "/" + name)
        }
    }

    // MARK: Key batches

    /// The held key index, if it still verifies with `publicKey`; nil also for a server that
    /// publishes no keys.
    public func keyIndex(publicKey: PositiveListPublicKey) -> PositiveListKeyIndex? {
        guard let bytes = FileManager.default.contents(atPath: keyIndexPath) else { return nil }
        return try? PositiveListKeyIndex(verifying: Array(bytes), publicKey: publicKey)
    }

    var keyEtag: String? {
        guard let data = FileManager.default.contents(atPath: keyEtagPath) else { return nil }
        // A cache written before the ETag rule may hold a bad one: it is ignored, not sent.
        return EntityTag.kept(String(decoding: data, as: UTF8.self))
    }

    func holdsKeyBatch(_ listing: PositiveListIndex.BatchListing) -> Bool {
        var status = stat()
        return stat(keyBatchPath(listing.number), &status) == 0 && Int(status.st_size) == listing.byteCount
    }

    /// The cached key batches of `index`, for matching; throws if one is missing.
    public func keyBatches(of index: PositiveListKeyIndex) throws(MatchingError) -> [CachedBatch] {
        try index.batches.map { listing throws(MatchingError) in
            guard holdsKeyBatch(listing) else {
                throw .damagedCache(path: keyBatchPath(listing.number), reason: "it is missing or has the wrong size")
            }
            return CachedBatch(number: listing.number, path: keyBatchPath(listing.number))
        }
    }

    func installKeyBatch(from temporary: String, number: UInt64) throws(ListUpdateError) {
        do { try AtomicFile.install(temporary, at: keyBatchPath(number)) } catch {
            throw .cannotWriteCache(path: keyBatchPath(number), reason: "\(error)")
        }
    }

    func installKeyIndex(_ bytes: [UInt8], etag: String?) throws(ListUpdateError) {
        do {
            // The same order as installIndex, for the same reason: never a newer ETag beside an
            // older index.
            unlink(keyEtagPath)
            try AtomicFile.write(bytes, to: keyIndexPath, mode: 0o600)
            if let etag = EntityTag.kept(etag) { try AtomicFile.write(Array(etag.utf8), to: keyEtagPath, mode: 0o600) }
        } catch {
            throw .cannotWriteCache(path: keyIndexPath, reason: "\(error)")
        }
    }

    /// Forgets every key file: the server no longer publishes keys, or publishes another list's.
    func removeKeyIndex() {
        unlink(keyIndexPath)
        unlink(keyEtagPath)
    }

    /// Removes key batches the key index no longer lists (nil: all of them) and temporary files.
    func removeKeyFiles(notListedIn index: PositiveListKeyIndex?) {
        let listed = Set((index?.batches ?? []).map { "\($0.number).tpkb" } + ["index.tpki", "index.etag"])
        let names = (try? FileManager.default.contentsOfDirectory(atPath: keysDirectory)) ?? []
        for name in names where !listed.contains(name) {
            unlink(keysDirectory + "/" + name)
        }
    }

    // MARK: State

    /// What the node knows about its list's freshness, kept beside the files.
    public struct State: Codable, Sendable, Equatable {
        /// When the server last confirmed the held list current (a verified download or a 304).
        public var lastUpdated: UnixSeconds?
        public var lastAttempt: UnixSeconds?
        /// The last update's failure, in plain words; nil after a success.
        public var lastFailure: String?

        public init(lastUpdated: UnixSeconds? = nil, lastAttempt: UnixSeconds? = nil, lastFailure: String? = nil) {
            self.lastUpdated = lastUpdated
            self.lastAttempt = lastAttempt
            self.lastFailure = lastFailure
        }
    }

    public var state: State {
        guard let data = FileManager.default.contents(atPath: statePath),
              let state = try? JSONDecoder().decode(State.self, from: data)
        else { return State() }
        return state
    }

    func saveState(_ state: State) throws(ListUpdateError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try AtomicFile.write(Array(try encoder.encode(state)), to: statePath, mode: 0o600)
        } catch {
            throw .cannotWriteCache(path: statePath, reason: "\(error)")
        }
    }

    /// Takes the cache's exclusive lock, so that a scheduled check in `tracer run` and a
    /// `tracer check` typed by the user never interleave: one updates while the other reads.
    public func lock() async throws(ListUpdateError) -> CacheLock {
        try prepare()
        let path = directory + "/lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .cannotWriteCache(path: path, reason: String(cString: strerror(errno))) }
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw .cannotWriteCache(path: path, reason: reason)
            }
            do { try await Task.sleep(for: .milliseconds(100)) } catch {
                close(descriptor)
                throw .cancelled
            }
        }
        return CacheLock(descriptor: descriptor)
    }
}

/// The held lock of a `PositiveListCache`; released by `release()` or when it goes away.
public final class CacheLock {
    private var descriptor: Int32

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    public func release() {
        guard descriptor >= 0 else { return }
        // Closing the descriptor drops the flock.
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}

