import Foundation
import IDRotation
import PositiveListFormat
import TracerCore
import TransparencyLog
#if canImport(Glibc)
import Glibc
#endif

/// Which history the published log keeps (issue 39, item 3; docs/positive-list-format.md,
/// "Retention"), kept in `log-state.json` so that each pass starts where the last one stopped.
///
/// Bundle numbers, not entry indexes: bundle `N` holds entries `256·N ..< 256·N + 256`, and its
/// leaf hashes are the level-0 tile `N`.
struct ListLogHistory: Codable, Equatable, Sendable {
    /// The first entry bundle kept: every full bundle before it is deleted, or is deleted by the
    /// next pass when one stopped midway. It only grows.
    var keptFromBundle: UInt64
    /// Every full entry bundle before this is deleted (at most `keptFromBundle`; less after a
    /// pass that stopped between its deletions).
    var bundlesDeletedBefore: UInt64
    /// Every full level-0 hash tile before this is deleted (at most `keptFromBundle`; less while
    /// a witness's consistency proof needs an older one, or after a pass that stopped midway).
    var levelZeroTilesDeletedBefore: UInt64
    /// The first bundle holding a live entry at the last pass, and until when it stays live (its
    /// entries' latest `ListLogEntry.liveUntil`): until then no bundle is decoded at all.
    var liveBundle: UInt64? = nil
    var liveBundleUntil: UnixSeconds? = nil

    static let whole = ListLogHistory(keptFromBundle: 0, bundlesDeletedBefore: 0, levelZeroTilesDeletedBefore: 0)

    /// The log index of the first entry kept.
    var keptFromEntry: UInt64 { keptFromBundle << 8 }
}

/// Why old history could not be deleted; the publication goes on (`pruneLogHistory` logs it).
enum ListLogHistoryError: Error, Sendable, CustomStringConvertible {
    case bundleUnreadable(path: String, reason: String)
    case cannotDelete(path: String, reason: String)
    case stateNotWritten(String)
    case stopped(PublishStep)

    var description: String {
        switch self {
        case .bundleUnreadable(let path, let reason):
            "log/\(path) could not be read to find which history is still live (\(reason))"
        case .cannotDelete(let path, let reason): "log/\(path) could not be deleted (\(reason)); check the directory's permissions"
        case .stateNotWritten(let reason): "the history kept could not be recorded in log-state.json (\(reason))"
        case .stopped(let step): "stopped after step \(step.rawValue) (injected fault)"
        }
    }
}

/// What a node can still need, and so what the server keeps.
///
/// A node starting afresh (`LogFollower.start` in Matching) fetches entry bundles from the newest
/// backwards and stops at the first *full* bundle holding no live entry by its own cutoff `c_n`
/// (`ListLogRetention`: its oldest kept encounter, at most `RetentionPolicy.maximumDays` ago,
/// less one day); the newest bundle is always taken, and so is the one that ends the walk (the
/// root proves it). It then reads the right edge at the start of that last bundle from hash tiles
/// of level 1 and above, and fails the update if a bundle it walks back to is missing (a cache
/// could hide live entries with a 404, so a missing bundle is never the end of history).
///
/// The server's cutoff is `c_s = now - max(retentionDays, RetentionPolicy.maximumDays) - 2 days`,
/// and `L` is the first bundle holding an entry live at `c_s` (`ListLogEntry.isLive`, the rule the
/// node uses). Records are not ordered in the log (a key upload published today may hold keys of
/// 14 days ago), so bundles after `L` may hold expired entries and `L` is found by decoding
/// bundles in order; but no bundle before `L` holds a record ending at or after `c_s`. The server
/// deletes the full bundles and level-0 tiles before bundle `K = min(L, n) - 1`, `n` the newest
/// bundle (`K` = `n - 1` when no bundle is live; never below what an earlier pass kept).
///
/// Why a node's walk never reaches a deleted bundle: a node starting at its time `t_n ≥ now`,
/// with a clock at most one day behind the server's and an encounter retention of at most
/// `RetentionPolicy.maximumDays`, has `c_n = t_n - retention - 1 day ≥ now - maximumDays - 2 days
/// ≥ c_s`. Every record in bundle `K` (below `L`, or `n - 1` with nothing live) ends before `c_s ≤
/// c_n`, so it holds no entry live for the node (the server wrote them all, so they parse), and it
/// is full (only the newest bundle `n > K` can be partial): walking back from `n`, the node stops
/// at `K` at the latest (kept), fetches no bundle before it, and reads the edge at `K·256` from
/// tiles of level ≥ 1, which are never deleted. A later node has a later cutoff and stops no
/// earlier. The margin is two days, one beyond the node's own, for clock skew; and the server
/// keeps `maximumDays` even when its `retentionDays` is shorter, since nodes keep their encounters
/// for their own retention (up to `maximumDays`) whatever the server's.
///
/// Never deleted: tiles of level 1 and above (a fresh node's right edge, 32 bytes per 256
/// entries), the newest two bundles (`K ≤ n - 1`), partial files (`prunePartialFiles` deletes the
/// superseded ones; the checkpoint's right edge is its partial files only), and the level-0 tiles
/// a consistency proof to a configured witness's last cosigned tree needs (a witness down for
/// weeks is still sent a proof it can check; bundles are not needed for it).
extension Publisher {
    /// The log index of the first entry whose bundle the published log keeps, from the state at
    /// `statePath` (`tracer-server status`); nil while no history has been deleted.
    public static func logHistoryKeptFromEntry(statePath: String) -> UInt64? {
        guard let kept = readLogState(at: statePath)?.history?.keptFromEntry, kept > 0 else { return nil }
        return kept
    }

    /// Whether `path` (below `log/`) is history the deletion removes once the log keeps bundles
    /// from `keptFromBundle` on: a full entry bundle or a full level-0 tile before it. What sync
    /// no longer uploads, and deletes from a bucket, when this directory no longer has it.
    static func isOldHistory(_ path: String, keptFromBundle: UInt64) -> Bool {
        if let bundle = try? EntryBundleID(path: path) { return !bundle.isPartial && bundle.index < keptFromBundle }
        if let tile = try? TileID(path: path) { return tile.level == 0 && !tile.isPartial && tile.index < keptFromBundle }
        return false
    }

    /// The margin beyond a node's own day, for clock skew between server and nodes.
    static let historyMarginSeconds: Int64 = 2 * .secondsPerDay

    /// Records that ended before this no longer keep their bundle.
    static func historyCutoff(now: UnixSeconds, retentionSeconds: Int64) -> UnixSeconds {
        now - max(retentionSeconds, Int64(RetentionPolicy.maximumDays) * .secondsPerDay) - historyMarginSeconds
    }

    /// Deletes the entry bundles and level-0 tiles no node can need any more, after the log step.
    /// Never fails the publication: what could not be done is logged, and the next pass does it.
    func pruneLogHistory(now: UnixSeconds, report: inout ListLogReport) async {
        let witnessSizes = await cosigner?.cosignedSizes() ?? []
        do throws(ListLogHistoryError) {
            let cutoff = Self.historyCutoff(now: now, retentionSeconds: retentionSeconds)
            guard let pass = try pruneLogHistory(cutoff: cutoff, witnessSizes: witnessSizes) else { return }
            report.historyKeptFromEntry = pass.history.keptFromEntry
            report.deletedHistoryFiles = pass.deleted
            if pass.deleted > 0 {
                logger.info("old log history deleted", metadata: [
                    "keptFromEntry": "\(pass.history.keptFromEntry)", "filesDeleted": "\(pass.deleted)",
                ])
            }
        } catch {
            logger.error("old log history was not deleted; the publication is not affected and the next one tries again", metadata: [
                "reason": "\(error)",
            ])
        }
    }

    /// One pass: the new boundary, recorded before anything is deleted, then the deletions, then
    /// how far they got. A crash (or a failed deletion) between the two records leaves files below
    /// the boundary that the next pass deletes (a file already gone is skipped). Returns the
    /// history kept and the number of files this pass deleted; nil when there is no log.
    private func pruneLogHistory(
        cutoff: UnixSeconds, witnessSizes: [UInt64]
    ) throws(ListLogHistoryError) -> (history: ListLogHistory, deleted: Int)? {
        guard var state = Self.readLogState(at: logStatePath), state.treeSize > 0 else { return nil }
        let logDirectory = directory.logPath
        let before = state.history ?? .whole
        var history = try Self.historyBoundary(before, treeSize: state.treeSize, cutoff: cutoff) { path throws(ListLogHistoryError) in
            guard let data = FileManager.default.contents(atPath: logDirectory + "/" + path) else {
                throw .bundleUnreadable(path: path, reason: "it is missing")
            }
            return data
        }
        let tilesBefore = max(
            history.levelZeroTilesDeletedBefore,
            Self.levelZeroTilesNeeded(byWitnessesAt: witnessSizes, treeSize: state.treeSize).map { min($0, history.keptFromBundle) }
                ?? history.keptFromBundle)
        guard history != before || history.bundlesDeletedBefore < history.keptFromBundle
            || history.levelZeroTilesDeletedBefore < tilesBefore
        else { return (history, 0) }
        state.history = history
        try record(state)
        try stop(after: .logHistoryBoundaryRecorded)

        var deleted = 0
        var directories = Set<String>()
        let bundles = (history.bundlesDeletedBefore..<history.keptFromBundle).compactMap { try? EntryBundleID(index: $0, width: TileID.fullWidth).path }
        let tiles = (history.levelZeroTilesDeletedBefore..<tilesBefore).compactMap { try? TileID(level: 0, index: $0, width: TileID.fullWidth).path }
        for path in bundles + tiles {
            let full = logDirectory + "/" + path
            if unlink(full) == 0 {
                deleted += 1
            } else if errno != ENOENT {
                throw .cannotDelete(path: path, reason: AtomicFile.lastError())
            }
            directories.insert((full as NSString).deletingLastPathComponent)
            try stop(after: .logHistoryFileDeleted)
        }
        // The deletions are durable before the state says they are done; directories of a
        // thousand bundles (`x001/`) that are now empty go too (best effort).
        for directory in directories {
            if rmdir(directory) == 0 { continue }
            do { try AtomicFile.syncDirectory(directory) } catch { throw .cannotDelete(path: directory, reason: error.description) }
        }
        for parent in Set(directories.map { ($0 as NSString).deletingLastPathComponent }) where parent.hasPrefix(logDirectory) {
            do { try AtomicFile.syncDirectory(parent) } catch { throw .cannotDelete(path: parent, reason: error.description) }
        }
        history.bundlesDeletedBefore = history.keptFromBundle
        history.levelZeroTilesDeletedBefore = tilesBefore
        state.history = history
        try record(state)
        return (history, deleted)
    }

    private func record(_ state: ListLogState) throws(ListLogHistoryError) {
        do { try writeLogState(state) } catch { throw .stateNotWritten("\(error)") }
    }

    private func stop(after step: PublishStep) throws(ListLogHistoryError) {
        do { try inject(step) } catch { throw .stopped(step) }
    }

    /// The history to keep at `cutoff` for a tree of `treeSize` (> 0), from the last pass's:
    /// decodes bundles from where the last pass found the first live one (none while that one is
    /// still live), until one holds a live entry.
    static func historyBoundary(
        _ history: ListLogHistory, treeSize: UInt64, cutoff: UnixSeconds, read: (String) throws(ListLogHistoryError) -> Data
    ) throws(ListLogHistoryError) -> ListLogHistory {
        let newest = (treeSize - 1) >> 8
        var live: (bundle: UInt64, until: UnixSeconds)?
        if let bundle = history.liveBundle, let until = history.liveBundleUntil, until >= cutoff, bundle <= newest {
            live = (bundle, until)
        } else {
            // Bundles before the last live one held nothing live at an earlier cutoff.
            var index = max(history.keptFromBundle, history.liveBundle ?? 0)
            while live == nil, index <= newest {
                let bundle: EntryBundleID
                do { bundle = try TileLayout.entryBundle(holding: index << 8, treeSize: treeSize) } catch {
                    throw .bundleUnreadable(path: "tile/entries", reason: error.description)
                }
                let bytes = try read(bundle.path)
                let entries: [Data]
                do { entries = try EntryBundle.decode(bytes, as: bundle) } catch { throw .bundleUnreadable(path: bundle.path, reason: error.description) }
                if let until = entries.map({ ListLogEntry.liveUntil([UInt8]($0)) }).max(), until >= cutoff { live = (index, until) }
                index += 1
            }
        }
        // Kept: the bundle before the first live one (where a fresh node stops), and never the
        // newest two.
        let firstNeeded = min(live?.bundle ?? newest + 1, newest)
        var kept = history
        kept.keptFromBundle = max(history.keptFromBundle, firstNeeded == 0 ? 0 : firstNeeded - 1)
        kept.liveBundle = live?.bundle
        kept.liveBundleUntil = live?.until
        return kept
    }

    /// The first level-0 tile a consistency proof from any of `sizes` (the trees the configured
    /// witnesses last cosigned) to `treeSize` reads; nil when none reads one.
    static func levelZeroTilesNeeded(byWitnessesAt sizes: [UInt64], treeSize: UInt64) -> UInt64? {
        sizes.filter { $0 > 0 && $0 < treeSize }
            .compactMap { (try? TileLayout.tilesForConsistency(oldSize: $0, newSize: treeSize))?.filter { $0.level == 0 }.map(\.index).min() }
            .min()
    }
}
