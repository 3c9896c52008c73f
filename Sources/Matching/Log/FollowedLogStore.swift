import Crypto
import Foundation
import PositiveListFormat
import TracerCore
import TransparencyLog
#if canImport(Glibc)
import Glibc
#endif

/// Where a node keeps one followed log: its state (the last verified checkpoint and right edge),
/// the entries it holds for matching, and the evidence of any checkpoint it refused as a second
/// history. Layout under `directory`:
///
/// - `state`: ``FollowedLogState``'s encoding, replaced atomically;
/// - `entries`: the log index of the first entry held (8 bytes, big-endian), then the entries,
///   each as its 2-byte big-endian length and its bytes, as in an entry bundle. Only appended to,
///   so a node on an SD card does not rewrite megabytes at every update; dropping old entries
///   rewrites it whole (`keepEntries(from:)`), which retention needs about once a day;
/// - `checkpoint.etag`: the ETag the checkpoint was last served with, sent back so that a
///   revalidation while nothing changed costs a 304 and no body;
/// - `evidence/<time>-fork-<hash>/`: the held and the offered signed checkpoints of a fork, and a
///   line saying why.
///
/// New entries are appended and made durable before the state that counts them replaces the
/// old one, so a crash leaves either the old state (and a tail of entries it does not count,
/// cut off at the next load) or the new one with all its entries.
public struct FollowedLogStore: Sendable {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    var statePath: String { directory + "/state" }
    var entriesPath: String { directory + "/entries" }
    var evidenceDirectory: String { directory + "/evidence" }
    var etagPath: String { directory + "/checkpoint.etag" }

    /// The ETag to send back with the next checkpoint request; nil without a held state, since a
    /// 304 only confirms a checkpoint the node holds.
    public var checkpointETag: String? {
        guard FileManager.default.fileExists(atPath: statePath), let data = FileManager.default.contents(atPath: etagPath) else { return nil }
        return EntityTag.kept(String(decoding: data, as: UTF8.self))
    }

    /// Keeps the ETag the checkpoint was served with (nil: forgets it). Best effort: a lost ETag
    /// costs one full checkpoint download.
    public func saveCheckpointETag(_ etag: String?) {
        guard let etag = etag.flatMap(EntityTag.kept) else {
            unlink(etagPath)
            return
        }
        try? AtomicFile.write(Array(etag.utf8), to: etagPath, mode: 0o600)
    }

    var followedMarkerPath: String { directory + "/followed" }

    /// True when a copy of the log is held (its state file exists, whether or not it loads).
    public var holdsState: Bool { FileManager.default.fileExists(atPath: statePath) }

    /// True once this node has followed the log, even if its copy was since forgotten (`reset`):
    /// for a node that has followed a log, a 404 for the checkpoint is a failing server or cache,
    /// never a server from before the log.
    public var hasFollowed: Bool {
        FileManager.default.fileExists(atPath: followedMarkerPath) || FileManager.default.fileExists(atPath: statePath)
    }

    /// The held state's stored part alone, without the entries: what `tracer status` shows. nil
    /// when nothing is held or the state does not decode.
    public func heldState() -> FollowedLogState.Stored? {
        FileManager.default.contents(atPath: statePath).flatMap { try? FollowedLogState.stored(decoding: $0) }
    }

    /// What is held: the state and the entries from `firstIndex` to the state's tree size. nil
    /// when nothing is held yet. A state or entries file that does not hold together throws: the
    /// caller starts afresh (a node may always follow a log again from its start).
    ///
    /// The entries stay in their file (`HeldLogEntries` reads them when asked): checking that
    /// the file holds what the state counts reads each entry's 2-byte frame and the partial
    /// bundle's entries, not the megabytes of a national list.
    public func load() throws(FollowedLogStoreError) -> (state: FollowedLogState, firstIndex: UInt64, entries: HeldLogEntries)? {
        guard FileManager.default.fileExists(atPath: statePath) else { return nil }
        guard let stateBytes = FileManager.default.contents(atPath: statePath) else {
            throw .unreadable(path: statePath, reason: String(cString: strerror(errno)))
        }
        let stored: FollowedLogState.Stored
        do {
            stored = try FollowedLogState.stored(decoding: stateBytes)
        } catch {
            throw .damaged(path: statePath, reason: error.description)
        }
        let file = try EntriesFile(path: entriesPath)
        defer { file.close() }
        let fileSize = try file.size()
        guard fileSize >= 8 else { throw .damaged(path: entriesPath, reason: "it has no header") }
        let header = try file.bytes(count: 8, at: 0)
        let firstIndex = header.reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
        guard firstIndex <= stored.treeSize else {
            throw .damaged(path: entriesPath, reason: "it starts at entry \(firstIndex), after the state's \(stored.treeSize)")
        }
        let frames = try HeldLogEntries.frames(
            of: file, from: 8, fileSize: fileSize, limit: stored.treeSize - firstIndex, keepingLast: stored.partialBundleWidth)
        guard firstIndex + UInt64(frames.count) == stored.treeSize else {
            throw .damaged(path: entriesPath, reason: "it holds entries up to \(firstIndex + UInt64(frames.count)), the state counts \(stored.treeSize)")
        }
        // The partial bundle's entries are the newest held; that they hash to the state's level-0
        // hashes is a cheap check that the file holds the entries the state was computed from.
        guard frames.count >= stored.partialBundleWidth else {
            throw .damaged(path: entriesPath, reason: "it holds \(frames.count) entries, fewer than the \(stored.partialBundleWidth) of the partial bundle")
        }
        var partialBundleEntries: [Data] = []
        for frame in frames.last {
            partialBundleEntries.append(Data(try file.bytes(count: frame.count, at: frame.lowerBound)))
        }
        let state: FollowedLogState
        do {
            state = try FollowedLogState(stored, partialBundleEntries: partialBundleEntries)
        } catch {
            throw .damaged(path: entriesPath, reason: "its newest entries are not the ones the state was computed from (\(error.description))")
        }
        // A tail the state does not count was appended by an update that did not finish.
        if frames.endOffset < fileSize, truncate(entriesPath, off_t(frames.endOffset)) != 0 {
            throw .cannotWrite(path: entriesPath, reason: "cutting an unfinished update's tail: \(String(cString: strerror(errno)))")
        }
        let entries = HeldLogEntries(path: entriesPath, firstIndex: firstIndex, count: frames.count, startOffset: 8, endOffset: frames.endOffset)
        return (state, firstIndex, entries)
    }

    /// Appends `newEntries` (which follow the held ones) and then replaces the state. The first
    /// save of a log creates the entries file starting at `firstIndex`.
    public func save(_ state: FollowedLogState, appending newEntries: [Data], firstIndex: UInt64 = 0) throws(FollowedLogStoreError) {
        try prepare()
        let bytes = try Self.framed(newEntries)
        if FileManager.default.fileExists(atPath: statePath) {
            // Cuts any tail a failed earlier save appended and the state does not count (a disk
            // that filled between the two writes), so the new entries follow the counted ones.
            _ = try load()
            try append(bytes, to: entriesPath)
        } else {
            // The first save, or the first after a state was lost: entries a crashed first save
            // left behind count for nothing, so the file starts afresh rather than after them.
            do {
                try AtomicFile.write(Self.bigEndian(firstIndex) + bytes, to: entriesPath, mode: 0o600)
            } catch {
                throw .cannotWrite(path: entriesPath, reason: error.description)
            }
        }
        do {
            try AtomicFile.write([UInt8](state.encode()), to: statePath, mode: 0o600)
            if !FileManager.default.fileExists(atPath: followedMarkerPath) {
                try AtomicFile.write(Array("this node has followed the list log: a 404 for its checkpoint is a failing server, not one from before the log\n".utf8), to: followedMarkerPath, mode: 0o600)
            }
        } catch {
            throw .cannotWrite(path: statePath, reason: error.description)
        }
    }

    /// Keeps only the entries from log index `index` on (retention), rewriting the file whole;
    /// never those of the partial bundle, which the state's edge is made of. The kept entries are
    /// copied file to file, never all in memory.
    public func keepEntries(from requested: UInt64) throws(FollowedLogStoreError) {
        guard let held = try load() else { return }
        let index = min(requested, held.state.treeSize - UInt64(held.state.edge.partialBundleEntries.count))
        guard index > held.firstIndex else { return }
        let from = try held.entries.frameOffset(ofPosition: Int(index - held.firstIndex))
        removeUnfinishedCopies()
        let source = try EntriesFile(path: entriesPath)
        defer { source.close() }
        let temporary = AtomicFile.temporaryPath(for: entriesPath)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.writeFailure(temporary) }
        do throws(FollowedLogStoreError) {
            defer { close(descriptor) }
            try Self.write(Self.bigEndian(index), to: descriptor, path: temporary)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
            defer { buffer.deallocate() }
            var offset = from
            while offset < held.entries.endOffset {
                let block = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(buffer.count, held.entries.endOffset - offset)])
                try source.read(into: block, at: offset)
                try Self.write(UnsafeRawBufferPointer(block), to: descriptor, path: temporary)
                offset += block.count
            }
        } catch {
            unlink(temporary)
            throw error
        }
        do {
            try AtomicFile.install(temporary, at: entriesPath)
        } catch .diskFull {
            unlink(temporary)
            throw .diskFull(path: entriesPath)
        } catch {
            unlink(temporary)
            throw .cannotWrite(path: entriesPath, reason: error.description)
        }
    }

    /// Removes what a copy of the entries that a crash interrupted left (as large as the list):
    /// the caller holds the cache's lock, so no copy is under way.
    private func removeUnfinishedCopies() {
        let prefix = AtomicFile.temporaryPrefix + "entries-"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix(prefix) {
            unlink(directory + "/" + name)
        }
    }

    /// Keeps the two signed checkpoints of a fork, and why, for the user to hand over; returns the
    /// directory they are in (the one already kept when the same offered checkpoint was refused
    /// before, so a server showing the fork at every update fills no disk). Nothing else of the
    /// node is in it. Other refusals are no evidence: nil.
    public func keepEvidence(of error: LogFollowError, at time: UnixSeconds) throws(FollowedLogStoreError) -> String? {
        guard case .fork(_, let held, let offered) = error else { return nil }
        // Named by the offered tree (size and root), not the note's bytes: a server re-signing
        // the same fork with a new timestamp at every update fills no disk either.
        let tree = (try? Checkpoint(text: (try? SignedNote(parsing: offered))?.text ?? "")).map { "\($0.treeSize) \($0.rootHash)" }
        let tag = SHA256.hash(data: Data((tree ?? String(decoding: offered, as: UTF8.self)).utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        if let kept = evidence().first(where: { $0.hasSuffix("-fork-" + tag) }) { return kept }
        let path = evidenceDirectory + "/\(time)-fork-\(tag)"
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try AtomicFile.write([UInt8](held), to: path + "/held-checkpoint", mode: 0o600)
            try AtomicFile.write([UInt8](offered), to: path + "/offered-checkpoint", mode: 0o600)
            try AtomicFile.write(Array((error.description + "\n").utf8), to: path + "/why", mode: 0o600)
        } catch {
            throw .cannotWrite(path: path, reason: String(describing: error))
        }
        return path
    }

    /// Forgets the followed log (not the evidence, nor that it followed one): what a node does
    /// when its copy is damaged, before following the log again.
    public func reset() throws(FollowedLogStoreError) {
        for path in [statePath, entriesPath, etagPath] where FileManager.default.fileExists(atPath: path) {
            guard unlink(path) == 0 else { throw .cannotWrite(path: path, reason: String(cString: strerror(errno))) }
        }
    }

    /// The evidence directories kept so far, oldest first.
    public func evidence() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: evidenceDirectory)) ?? []).sorted().map { evidenceDirectory + "/" + $0 }
    }

    private func prepare() throws(FollowedLogStoreError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .cannotWrite(path: directory, reason: (error as NSError).localizedDescription)
        }
    }

    private func append(_ bytes: [UInt8], to path: String) throws(FollowedLogStoreError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.writeFailure(path) }
        defer { close(descriptor) }
        try Self.write(bytes, to: descriptor, path: path)
        guard fsync(descriptor) == 0 else { throw .cannotWrite(path: path, reason: String(cString: strerror(errno))) }
    }

    private static func write(_ bytes: [UInt8], to descriptor: Int32, path: String) throws(FollowedLogStoreError) {
        try bytes.withUnsafeBytes { buffer in Result { () throws(FollowedLogStoreError) in try write(buffer, to: descriptor, path: path) } }.get()
    }

    private static func write(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32, path: String) throws(FollowedLogStoreError) {
        var written = 0
        while written < bytes.count {
            let result = Glibc.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else { throw writeFailure(path) }
            written += result
        }
    }

    /// The error for a write that just failed (`errno` still set): a full disk is told apart,
    /// because its fix is to free space.
    private static func writeFailure(_ path: String) -> FollowedLogStoreError {
        errno == ENOSPC || errno == EDQUOT ? .diskFull(path: path) : .cannotWrite(path: path, reason: String(cString: strerror(errno)))
    }

    /// Entries as an entry bundle frames them (each its 2-byte length and its bytes).
    static func framed(_ entries: [Data]) throws(FollowedLogStoreError) -> [UInt8] {
        do {
            return [UInt8](try EntryBundle.encode(entries))
        } catch {
            throw .cannotWrite(path: "entries", reason: error.description)
        }
    }

    static func bigEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }
}

public enum FollowedLogStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    case damaged(path: String, reason: String)
    case cannotWrite(path: String, reason: String)
    /// The copy exists but cannot be read now (permissions, an I/O error): kept, not reset.
    case unreadable(path: String, reason: String)
    case diskFull(path: String)

    public var description: String {
        switch self {
        case .damaged(let path, let reason): "the list log kept at \(path) is damaged (\(reason)); it will be downloaded again"
        case .cannotWrite(let path, let reason): "cannot write the list log at \(path): \(reason)"
        case .unreadable(let path, let reason): "cannot read the list log at \(path) (\(reason)); check its permissions and the disk"
        case .diskFull(let path): "the disk holding \(path) is full; free some space and check again"
        }
    }
}
