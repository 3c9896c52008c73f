import CurlHTTP
import Foundation

/// Why `tracer report` uploaded nothing, or may not have: each says what to do next.
public enum ReportError: Error, Sendable, Equatable, CustomStringConvertible {
    case nothingToReport
    /// Key upload chosen, but the store holds no daily key of the period (ids from before keys).
    case noKeysToReport
    case codeRefused(reason: String)
    case tooManyAttempts(retryAfterSeconds: Int?)
    case historyRefused(detail: String)
    case unexpectedResponse(url: String, status: Int)
    /// 503: the server cannot take uploads now (its database restarting, too many connections);
    /// nothing was stored, and the upload stays pending for the same command to send again.
    case serverUnavailable(retryAfterSeconds: Int?)
    /// The upload itself failed on the way: it may or may not have arrived.
    case network(HTTPClientError)
    /// Reading what the server accepts failed, before anything was sent.
    case serverUnreachable(HTTPClientError)
    /// The server's upload policy did not verify with the configured public key.
    case acceptanceNotVerified(url: String, detail: String)
    /// `log/uploads` answered 404: a tracer-server from before the list log (or not one at all).
    case serverTooOld(url: String)
    /// The server does not take this kind (its published setting, or its 403 answer).
    case kindNotAccepted(UploadKind)
    /// The server takes keys only and the user has not chosen keys (`--yes` without `--keys`).
    case keysNeedExplicitChoice
    case store(String)

    public var description: String {
        switch self {
        case .nothingToReport:
            return "This node has no ids from the last 28 days to report; nothing was uploaded."
        case .noKeysToReport:
            return "This node has no daily keys from the last 28 days (its ids were drawn before daily keys), so there are no keys to report; upload your ids instead with --ids. Nothing was uploaded."
        case .codeRefused(let reason):
            return "The server refused the upload code (\(reason)); check the code with your health authority or ask for a new one. Nothing was uploaded."
        case .tooManyAttempts(let seconds):
            let wait = seconds.map { " in \($0) seconds" } ?? " later"
            return "Too many wrong codes were tried from this address; try again\(wait). Nothing was uploaded."
        case .historyRefused(let detail):
            return "The server refused the history: \(detail) Nothing was uploaded."
        case .serverUnavailable(let seconds):
            let wait = seconds.map { " in \($0) seconds" } ?? " in a minute"
            return "The server cannot take uploads right now (HTTP 503); run the same command again\(wait). Nothing was stored, and the same upload is sent again."
        case .unexpectedResponse(let url, let status):
            return "The server answered \(url) with HTTP \(status); check the server address. Nothing was uploaded."
        case .network(let error):
            return "\(error) The upload may or may not have reached the server; run the same command again: the server recognizes a repeat and stores nothing twice."
        case .serverUnreachable(let error):
            return "\(error) Nothing was uploaded; check the network connection and the server address, then run the same command again."
        case .acceptanceNotVerified(let url, let detail):
            return "What the server signs about the uploads it accepts (\(url)) failed verification (\(detail)), so this node cannot tell what the server accepts. Check server.public_key (and list.origin, if set) against what your health authority publishes. Nothing was uploaded."
        case .serverTooOld(let url):
            return "The server has no \(url) (HTTP 404), which every tracer-server that publishes the list log has: it is older than this node (or server.url names something else). Ask your health authority to upgrade the server, and check server.url; this node cannot follow an older server's list either. Nothing was uploaded."
        case .kindNotAccepted(.keys):
            return "This server does not accept daily keys: your health authority publishes ids only. Upload your ids instead: run the command again with --ids instead of --keys. Nothing was uploaded."
        case .kindNotAccepted(.ids):
            return "This server does not accept ids: your health authority publishes daily keys only. Once published, a day's key lets anyone who logged some of your ids that day link those sightings to each other; if you accept that, run the command again with --keys (`tracer report --help` explains the difference). Nothing was uploaded."
        case .keysNeedExplicitChoice:
            return "This server accepts only daily keys, and Tracer uploads keys only when you choose them: once published, a day's key lets anyone who logged some of your ids that day link those sightings to each other. Read `tracer report --help`, then run the command again with --keys if you accept that. Nothing was uploaded."
        case .store(let detail):
            return detail
        }
    }
}
