import CurlHTTP
import Foundation
import TracerCore

/// Why the positive list could not be brought up to date. The previous good list, if any, is
/// left as it was; only `.outdated` keeps a newer list the server offered, since an old list is
/// still better than an older one.
public enum ListUpdateError: Error, Sendable, Equatable, CustomStringConvertible {
    case network(HTTPClientError)
    /// The server answered with a status that is not the list (404, 403, an HTML error page…).
    case unexpectedStatus(url: String, status: Int)
    /// The newest list the server offers was signed too long ago (see
    /// ``ListLogUpdater/maximumListAge``); it is held all the same.
    case outdated(publishedAt: UnixSeconds, ageSeconds: UnixSeconds)
    /// An answer longer than the list allows: an endless or padded answer, cut off at `limit`
    /// bytes.
    case tooLarge(url: String, limit: Int)
    case cannotWriteCache(path: String, reason: String)
    /// The list kept on this machine cannot be read now (permissions, an I/O error); it is kept.
    case cannotReadCache(path: String, reason: String)
    /// The list log kept on this machine is damaged; it is followed afresh.
    case listLogDamaged(String)
    /// The server publishes no list log (`log/checkpoint` answered 404) and this node has never
    /// followed one: a server from before the log, which this node cannot follow.
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
        case .outdated(let publishedAt, let age):
            let signed = Date(timeIntervalSince1970: TimeInterval(publishedAt)).formatted(.iso8601)
            let clock = Date(timeIntervalSince1970: TimeInterval(publishedAt + age)).formatted(.iso8601)
            return "The server's newest list was signed \(age / 3_600) hours ago (at \(signed), by this machine's clock reading \(clock)); the server signs a new one at least every 36 hours, so it, or a cache in front of it, has stopped updating. If this machine's clock is wrong, correct it; otherwise try again later and tell the list's operator if this lasts."
        case .tooLarge(let url, let limit):
            return "The server sent more for \(url) than the list allows (\(limit) bytes), so it was cut off; the server, or a cache or mirror in front of it, is misbehaving. Try again later, and tell the list's operator if this lasts."
        case .cannotWriteCache(let path, let reason):
            return "Cannot write the list cache at \(path) (\(reason)); check free space and permissions, or choose another place with --cache-dir."
        case .cannotReadCache(let path, let reason):
            return "Cannot read the list cache at \(path) (\(reason)); check its permissions and the disk, or choose another place with --cache-dir. What it holds is kept."
        case .listLogDamaged(let description):
            return description.prefix(1).uppercased() + description.dropFirst() + "."
        case .logNotPublished(let url):
            return "The server publishes no list log (\(url) answered HTTP 404); it may be a tracer-server from before the log, and this tracer follows only the list log. Check server.url, and ask the list's operator to upgrade the server."
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
