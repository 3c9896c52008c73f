import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import PositiveListFormat
import PositiveListServer
import ServerStorage

/// A refusal as every client sees it: a 4xx status and `{"error": code, "detail": sentence}`.
public struct APIError: HTTPResponseError, Sendable {
    public let status: HTTPResponse.Status
    public let code: String
    public let detail: String
    public var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, _ code: String, _ detail: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: status, headers: headersWithContentType, body: ResponseBody(byteBuffer: jsonBody))
    }

    /// `headers` and the JSON content type, for the response and for the channel handler
    /// that writes refusals of unparsable requests without a `Request`.
    var headersWithContentType: HTTPFields {
        var headers = headers
        headers[.contentType] = "application/json"
        return headers
    }

    /// `{"error": code, "detail": detail}`, keys sorted so the bytes are the same every time.
    var jsonBody: ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Encoding a dictionary of two strings cannot fail.
        return ByteBuffer(bytes: (try? encoder.encode(["error": code, "detail": detail])) ?? Data("{}".utf8))
    }

    /// The whole HTTP/1.1 response, with `Connection: close`, for a channel handler to write as
    /// raw bytes: before a request is parsed, or where NIO's encoder would drop the body.
    var closingHTTP1Response: ByteBuffer {
        let body = jsonBody
        var head = "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n"
        for field in headersWithContentType { head += "\(field.name.rawName): \(field.value)\r\n" }
        head += "Connection: close\r\nContent-Length: \(body.readableBytes)\r\n\r\n"
        var bytes = ByteBuffer(string: head)
        bytes.writeImmutableBuffer(body)
        return bytes
    }

    /// The JSON error for a status the router or Hummingbird chose (404, 405, 413...).
    static func forStatus(_ status: HTTPResponse.Status) -> APIError {
        switch status {
        case .notFound: return APIError(status, "not_found", "There is nothing at this path.")
        case .methodNotAllowed: return APIError(status, "method_not_allowed", "This path does not accept that method.")
        case .contentTooLarge: return APIError(status, "body_too_large", "The request body is larger than the server accepts.")
        default: return APIError(status, "http_\(status.code)", status.reasonPhrase)
        }
    }

    /// A known path asked with a method it does not answer; `Allow` lists those it does
    /// (RFC 9110, 15.5.6).
    static func methodNotAllowed(allowed: [HTTPRequest.Method]) -> APIError {
        APIError(
            .methodNotAllowed, "method_not_allowed",
            "This path answers \(allowed.map(\.rawValue).joined(separator: ", ")) only.",
            headers: [.allow: allowed.map(\.rawValue).joined(separator: ", ")])
    }

    static func longPollsFull(retryAfterSeconds seconds: Int) -> APIError {
        APIError(
            .serviceUnavailable, "long_polls_full",
            "As many nodes as this server holds already wait for a new generation; revalidate the list as usual and poll again in \(seconds) seconds.",
            headers: [.retryAfter: String(seconds)])
    }

    static func tooManyAttempts(retryAfterSeconds seconds: Int) -> APIError {
        APIError(
            .tooManyRequests, "too_many_attempts",
            "Too many failed attempts from this address; wait \(seconds) seconds before trying again.",
            headers: [.retryAfter: String(seconds)])
    }

    /// The refusal of a request NIO's HTTP/1.1 parser could not read. `inHead`: the error came
    /// before the request's head was complete, so the router never saw the request.
    static func unparsable(_ error: HTTPParserError, inHead: Bool) -> APIError {
        switch error {
        case .headerOverflow where inHead:
            return APIError(
                .requestHeaderFieldsTooLarge, "headers_too_large",
                "The request's header fields are larger than the server accepts; send fewer or shorter ones.")
        case .headerOverflow:
            // Past the head, the parser's header limits apply to the trailer fields.
            return APIError(
                .contentTooLarge, "trailers_too_large", "The request's trailer fields are larger than the server accepts; send none.")
        case .invalidContentLength, .unexpectedContentLength:
            return APIError(
                .badRequest, "malformed_request",
                "The request's Content-Length is not one valid number, or contradicts its Transfer-Encoding; send exactly one.")
        case .invalidChunkSize:
            return APIError(.badRequest, "malformed_request", "A chunk of the request body has a malformed size line.")
        case .invalidEOFState:
            return APIError(.badRequest, "incomplete_request", "The connection ended before the whole request arrived; send it again.")
        default:
            return APIError(.badRequest, "malformed_request", "The request is not valid HTTP/1.1 (\(error)).")
        }
    }

    static let missingCredentials = APIError(
        .unauthorized, "missing_credentials",
        "Send an authority token as `Authorization: Bearer TOKEN`, or an upload code as `Upload-Code: CODE`.")
    static let invalidToken = APIError(.unauthorized, "invalid_token", "The authority token is not valid; check the server's configuration.")
    static let malformedCode = APIError(
        .unauthorized, "invalid_code", "That is not an upload code: codes have 12 letters and digits, such as ABCD-EFGH-JKMN.")
    static let unknownCode = APIError(.unauthorized, "invalid_code", "The upload code is not valid; check it, or ask the health authority for a new one.")
    static let expiredCode = APIError(.unauthorized, "expired_code", "The upload code has expired; ask the health authority for a new one.")
    static let revokedCode = APIError(
        .unauthorized, "revoked_code", "The upload code was revoked by the health authority; ask them for a new one.")
    static let usedCode = APIError(.unauthorized, "used_code", "The upload code was already used; ask the health authority for a new one.")

    /// The authority's setting (`acceptUploads`), also published in `log/uploads`.
    static func uploadKindNotAccepted(_ kind: AcceptedUploads) -> APIError {
        kind == .keys
            ? APIError(
                .forbidden, "upload_kind_not_accepted",
                "This server does not accept daily keys: the health authority publishes ids only. Upload the ids instead (POST /v1/histories).")
            : APIError(
                .forbidden, "upload_kind_not_accepted",
                "This server does not accept ids: the health authority publishes daily keys only. Upload the keys instead (POST /v1/key-histories).")
    }
}

/// Turns every error a handler or the router throws into the JSON error body, so no client ever
/// gets an HTML page or an empty 500.
package struct JSONErrorResponder<Wrapped: HTTPResponder>: HTTPResponder where Wrapped.Context: RequestContext {
    package typealias Context = Wrapped.Context
    let wrapped: Wrapped
    /// Which methods each routed path answers: the router says 404 for both an unknown path and
    /// a known one asked with another method, and only the second is a 405.
    let routes: RouteTable

    package init(wrapped: Wrapped, routes: RouteTable) {
        self.wrapped = wrapped
        self.routes = routes
    }

    package func respond(to request: Request, context: Context) async throws -> Response {
        do {
            let response = try await wrapped.respond(to: request, context: context)
            // Hummingbird's router answers its own refusals (no route: 404, a body over its
            // limit: 413) with an empty body; give them the same JSON shape as ours.
            if response.status.code >= 400, response.headers[.contentType] == nil {
                if response.status == .notFound, let allowed = routes.allowedMethods(path: request.uri.path), !allowed.isEmpty {
                    return try APIError.methodNotAllowed(allowed: allowed).response(from: request, context: context)
                }
                return try APIError.forStatus(response.status).response(from: request, context: context)
            }
            return response
        } catch {
            Self.log(error, logger: context.logger)
            return try APIError.answering(error).response(from: request, context: context)
        }
    }

    /// What the log says of an error answered with ``APIError/answering(_:)``: a client's doing
    /// is no error in the log.
    static func log(_ error: any Error, logger: Logger) {
        switch error {
        case is APIError: break
        case let error as HTTPParserError:
            if error == .invalidEOFState {
                logger.debug("client left before sending the whole request")
            } else {
                logger.notice("malformed request body refused", metadata: ["reason": "\(error)"])
            }
        case let error as IOError:
            logger.debug("client connection failed while sending the request", metadata: ["reason": "\(error)"])
        case is TooManyBodyParts, is any HTTPResponseError: break
        case let error as ServerStoreError:
            logger.error("database unavailable", metadata: ["reason": "\(error)"])
        default:
            logger.error("request failed", metadata: ["reason": "\(error)"])
        }
    }
}

extension APIError {
    /// The answer to `error`, thrown while a request was answered: the one mapping both the
    /// JSON error responder (what the client gets) and the upload metrics (the outcome counted,
    /// the answer's `error` code) use, so that the two never disagree.
    static func answering(_ error: any Error) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as HTTPParserError:
            // The body broke HTTP/1.1 after a good head (a malformed chunk, trailers over the
            // limit) or ended early because the client left: the client's doing, so a 4xx. The
            // answer to a client that left is never read.
            return .unparsable(error, inHead: false)
        case let error as TooManyBodyParts:
            // A route that reads its body itself answers this; this is for one that does not.
            return APIError(
                .contentTooLarge, "too_many_chunks",
                "The request body came in more than \(error.limit) chunks; send it with a Content-Length or in larger chunks.")
        case is IOError:
            // Reading the body failed in the socket (a reset): the client is gone too.
            return APIError(.badRequest, "incomplete_request", "The connection ended before the whole request arrived; send it again.")
        case let error as any HTTPResponseError:
            return .forStatus(error.status)
        case is ServerStoreError:
            // Nothing was stored (every write is one transaction); the client may retry.
            return APIError(
                .serviceUnavailable, "store_unavailable",
                "The server cannot use its database right now; try again in \(ServerStoreError.retryAfterSeconds) seconds.",
                headers: [.retryAfter: String(ServerStoreError.retryAfterSeconds)])
        default:
            return APIError(.internalServerError, "internal_error", "The server failed; try again later.")
        }
    }
}
