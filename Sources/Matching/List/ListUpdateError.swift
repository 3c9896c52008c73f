import CurlHTTP
import Foundation
import IDRotation
import PositiveListFormat
import TracerCore

/// Why the positive list could not be brought up to date. The previous good list, if any, is
/// left as it was; only `.outdated` keeps a newer list the server offered, since an old list is
/// still better than an older one.
public enum ListUpdateError: Error, Sendable, Equatable, CustomStringConvertible {
    case network(HTTPClientError)
    /// The server answered with a status that is not the list (404, 403, an HTML error page…).
    case unexpectedStatus(url: String, status: Int)
    /// A downloaded file failed verification: altered, truncated, signed by another key, garbage.
    case notVerified(url: String, PositiveListFormatError)
    /// The server offered an index older than one already accepted: a replay, or a rollback.
    case olderIndex(offered: UInt64, held: UInt64)
    /// The newest list the server offers was signed too long ago (see
    /// ``PositiveListUpdater/maximumListAge``); it is held all the same.
    case outdated(publishedAt: UnixSeconds, ageSeconds: UnixSeconds)
    /// The key index answered 404 while a signed one from this list is held, or the verified id
    /// index says one is published: not a withdrawal (a server that stops publishing keys signs
    /// an empty key index) but a failing server, mirror or cache. Held key batches are still
    /// matched. `heldGeneration` is nil when the node never had a key index.
    case keyIndexMissing(url: String, heldGeneration: UInt64?)
    /// An index longer than the format allows, or a batch longer than its listing: an endless
    /// or padded answer, cut off at `limit` bytes.
    case tooLarge(url: String, limit: Int)
    /// A verified index lists a batch larger than the format allows; nothing was downloaded.
    case listingTooLarge(indexURL: String, batch: String, byteCount: Int, limit: Int)
    case cannotWriteCache(path: String, reason: String)
    /// The list kept on this machine cannot be read now (permissions, an I/O error); it is kept.
    case cannotReadCache(path: String, reason: String)
    /// The list log kept on this machine is damaged; it is followed afresh.
    case listLogDamaged(String)
    /// The server publishes no list log (`log/checkpoint` answered 404) and this node has never
    /// followed one: a server from before the log. With `list.format = auto` the node uses the
    /// signed index instead; with `log` it is a failed update.
    case logNotPublished(url: String)
    /// The log's checkpoint or files were refused (`LogFollowError`'s plain words): a bad
    /// signature, another origin, too few witnesses, an older tree, entries that do not lead to
    /// the signed root, a damaged file. The held list stays.
    case logRefused(String)
    /// The log's key signed two different trees of one size: a split view. Both signed
    /// checkpoints are kept in `evidenceDirectory` (nil when they could not be written).
    case logForked(size: UInt64, evidenceDirectory: String?)
    case cancelled

    public var description: String {
        switch self {
        case .network(let error):
            return error.description
        case .unexpectedStatus(let url, let status):
            return "The server answered \(url) with HTTP \(status) instead of the list; check the server address."
        case .notVerified(let url, let error):
            return "The file from \(url) failed verification: \(error)."
        case .olderIndex(let offered, let held):
            return "The server offered an older list (generation \(offered)) than the one already held (\(held)); it may be replaying old files. Try again later or ask the list's operator."
        case .outdated(let publishedAt, let age):
            let signed = Date(timeIntervalSince1970: TimeInterval(publishedAt)).formatted(.iso8601)
            let clock = Date(timeIntervalSince1970: TimeInterval(publishedAt + age)).formatted(.iso8601)
            return "The server's newest list was signed \(age / 3_600) hours ago (at \(signed), by this machine's clock reading \(clock)); the server signs a new one at least every 36 hours, so it, or a cache in front of it, has stopped updating. If this machine's clock is wrong, correct it; otherwise try again later and tell the list's operator if this lasts."
        case .keyIndexMissing(let url, let generation?):
            return "The server answered \(url) with HTTP 404, but this node holds a signed key index from this list (generation \(generation)); a list server does not withdraw its keys that way, so the server, or a cache or mirror in front of it, is failing. The keys already downloaded were still checked. Try again later, and tell the list's operator if this lasts."
        case .keyIndexMissing(let url, nil):
            return "The server answered \(url) with HTTP 404, but the signed list says it publishes one; the server, or a cache or mirror in front of it, is failing, so published daily keys could not be checked. Try again later, and tell the list's operator if this lasts."
        case .tooLarge(let url, let limit):
            return "The server sent more for \(url) than the list allows (\(limit) bytes), so it was cut off; the server, or a cache or mirror in front of it, is misbehaving. Try again later, and tell the list's operator if this lasts."
        case .listingTooLarge(let indexURL, let batch, let byteCount, let limit):
            return "The list at \(indexURL) names \(batch) with a size of \(byteCount) bytes, more than the format allows (\(limit) bytes); it was not downloaded. The list's server is misbehaving: tell its operator."
        case .cannotWriteCache(let path, let reason):
            return "Cannot write the list cache at \(path) (\(reason)); check free space and permissions, or choose another place with --cache-dir."
        case .cannotReadCache(let path, let reason):
            return "Cannot read the list cache at \(path) (\(reason)); check its permissions and the disk, or choose another place with --cache-dir. What it holds is kept."
        case .listLogDamaged(let description):
            return description.prefix(1).uppercased() + description.dropFirst() + "."
        case .logNotPublished(let url):
            return "The server publishes no list log (\(url) answered HTTP 404); it may be a tracer-server from before the log. Upgrade the server, or set list.format = index to use its signed index."
        case .logRefused(let reason):
            return "The list could not be brought up to date: \(reason)" + (reason.hasSuffix(".") ? "" : ".")
        case .logForked(let size, let directory):
            let kept = directory.map { "Both signed checkpoints are kept in \($0); hand them to the health authority or a journalist: anyone can check them with the list's public key." }
                ?? "Both signed checkpoints could not be saved (see the log)."
            return "The list's signing key signed two different lists of \(size) entries: the list server shows different lists to different people. The checkpoint that contradicts the one this node holds was refused, and the list held before is still checked. \(kept)"
        case .cancelled:
            return "The list update was interrupted."
        }
    }
}
