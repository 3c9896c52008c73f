import CurlHTTP
import Foundation
import TransparencyLog

/// A log's files over HTTP (libcurl on a node): the checkpoint, and entry bundles from a byte
/// offset with a Range request, so that a node downloads only the entries it does not hold. A
/// server or cache that ignores Range and sends the whole file still works (the held start is
/// dropped); it only costs bytes.
public struct HTTPLogFiles: LogFileFetching {
    /// The log's prefix, e.g. `https://list.example.org/log` (no trailing slash).
    public let baseURL: String
    let http: any HTTPTransferring

    /// The largest entry bundle: 256 entries of the largest size, each with its 2-byte length.
    static let maximumBundleBytes = TileID.fullWidth * (EntryBundle.maximumEntryBytes + 2)

    public init(baseURL: String, http: any HTTPTransferring) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.http = http
    }

    public var checkpointURL: String { baseURL + "/checkpoint" }

    public func checkpoint() async throws -> Data {
        guard case .checkpoint(let note, _) = try await checkpoint(ifNoneMatch: nil) else {
            throw HTTPLogFilesError.unexpectedStatus(url: checkpointURL, status: 404)
        }
        return note
    }

    /// What a conditional checkpoint request found.
    public enum CheckpointAnswer: Sendable, Equatable {
        /// 304: the checkpoint the ETag was served with is still the one served.
        case notModified
        case checkpoint(Data, etag: String?)
        /// 404: no log at this address (a server from before the log, or a wrong prefix).
        case notPublished
    }

    /// The checkpoint, conditionally when an ETag is held: while nothing changes a revalidation
    /// costs a 304 and its head. A conditional request refused with another 4xx (a cache that
    /// cannot take the ETag back) is sent once more without it, as for the index: the ETag only
    /// saves bytes and must never stop updates.
    public func checkpoint(ifNoneMatch etag: String?) async throws -> CheckpointAnswer {
        var request = HTTPRequest(url: checkpointURL, maximumByteCount: SignedNote.maximumBytes)
        if let etag { request.headers = [HTTPHeaderField(name: "If-None-Match", value: etag)] }
        var response = try await http.perform(request)
        if etag != nil, response.status != 404, (400..<500).contains(response.status) {
            request.headers = []
            response = try await http.perform(request)
        }
        switch response.status {
        case 200: return .checkpoint(Data(response.body), etag: response.header("etag"))
        case 304 where etag != nil: return .notModified
        case 404: return .notPublished
        default: throw HTTPLogFilesError.unexpectedStatus(url: checkpointURL, status: response.status)
        }
    }

    public func file(_ path: String, fromByte offset: Int) async throws -> Data {
        let url = baseURL + "/" + path
        var request = HTTPRequest(url: url, maximumByteCount: Self.maximumBundleBytes)
        if offset > 0 { request.headers = [HTTPHeaderField(name: "Range", value: "bytes=\(offset)-")] }
        let response: HTTPResponse
        do {
            response = try await http.perform(request)
        } catch {
            if case .responseTooLarge(_, let limit) = error { throw HTTPLogFilesError.tooLarge(url: url, limit: limit) }
            throw error
        }
        switch response.status {
        case 206:
            // Only the range asked for: a response starting elsewhere would splice wrong bytes.
            guard let range = response.header("content-range"), range.hasPrefix("bytes \(offset)-") else {
                throw HTTPLogFilesError.wrongRange(url: url, asked: offset, answered: response.header("content-range") ?? "none")
            }
            return Data(response.body)
        case 200:
            guard response.body.count >= offset else { throw HTTPLogFilesError.shorterThanHeld(url: url, held: offset, served: response.body.count) }
            return Data(response.body.dropFirst(offset))
        case 416 where offset > 0:
            // Nothing after the held bytes: the bundle is no longer than what the node holds,
            // which the bundle's decoding then refuses for its width.
            return Data()
        default:
            throw HTTPLogFilesError.unexpectedStatus(url: url, status: response.status)
        }
    }
}

public enum HTTPLogFilesError: Error, Equatable, Sendable, CustomStringConvertible {
    case unexpectedStatus(url: String, status: Int)
    case wrongRange(url: String, asked: Int, answered: String)
    case shorterThanHeld(url: String, held: Int, served: Int)
    /// More than the largest bundle the format allows: an endless or padded answer, cut off.
    case tooLarge(url: String, limit: Int)

    public var description: String {
        switch self {
        case .unexpectedStatus(let url, let status): "\(redactedURL(url)) answered HTTP \(status)"
        case .wrongRange(let url, let asked, let answered):
            "\(redactedURL(url)) answered a range request for bytes from \(asked) with \(answered)"
        case .tooLarge(let url, let limit):
            "\(redactedURL(url)) sent more than a bundle of the list can hold (\(limit) bytes), so it was cut off: the server, or a cache in front of it, is misbehaving"
        case .shorterThanHeld(let url, let held, let served):
            "\(redactedURL(url)) is \(served) bytes long, shorter than the \(held) this node already holds of it"
        }
    }
}
