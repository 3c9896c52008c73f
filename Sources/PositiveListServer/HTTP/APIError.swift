import Foundation
import HTTPTypes
import Hummingbird
import PositiveListFormat

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
        var headers = headers
        headers[.contentType] = "application/json"
        let body = try JSONEncoder().encode(["error": code, "detail": detail])
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
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

    static func tooManyAttempts(retryAfterSeconds seconds: Int) -> APIError {
        APIError(
            .tooManyRequests, "too_many_attempts",
            "Too many failed attempts from this address; wait \(seconds) seconds before trying again.",
            headers: [.retryAfter: String(seconds)])
    }

    static let missingCredentials = APIError(
        .unauthorized, "missing_credentials",
        "Send an authority token as `Authorization: Bearer TOKEN`, or an upload code as `Upload-Code: CODE`.")
    static let invalidToken = APIError(.unauthorized, "invalid_token", "The authority token is not valid; check the server's configuration.")
    static let malformedCode = APIError(
        .unauthorized, "invalid_code", "That is not an upload code: codes have 12 letters and digits, such as ABCD-EFGH-JKMN.")
    static let unknownCode = APIError(.unauthorized, "invalid_code", "The upload code is not valid; check it, or ask the health authority for a new one.")
    static let expiredCode = APIError(.unauthorized, "expired_code", "The upload code has expired; ask the health authority for a new one.")
    static let usedCode = APIError(.unauthorized, "used_code", "The upload code was already used; ask the health authority for a new one.")

    /// The authority's setting (`acceptUploads`), also published in `keys/index.tpki`.
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
struct JSONErrorResponder<Wrapped: HTTPResponder>: HTTPResponder where Wrapped.Context: RequestContext {
    typealias Context = Wrapped.Context
    let wrapped: Wrapped

    func respond(to request: Request, context: Context) async throws -> Response {
        do {
            let response = try await wrapped.respond(to: request, context: context)
            // Hummingbird's router answers its own refusals (no route: 404, a body over its
            // limit: 413) with an empty body; give them the same JSON shape as ours.
            if response.status.code >= 400, response.headers[.contentType] == nil {
                return try APIError.forStatus(response.status).response(from: request, context: context)
            }
            return response
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as any HTTPResponseError {
            return try APIError.forStatus(error.status).response(from: request, context: context)
        } catch let error as ServerStoreError {
            // Nothing was stored (every write is one transaction); the client may retry.
            context.logger.error("database unavailable", metadata: ["reason": "\(error)"])
            return try APIError(
                .serviceUnavailable, "store_unavailable", "The server cannot use its database right now; try again in a minute.",
                headers: [.retryAfter: "60"]
            ).response(from: request, context: context)
        } catch {
            context.logger.error("request failed", metadata: ["reason": "\(error)"])
            return try APIError(.internalServerError, "internal_error", "The server failed; try again later.")
                .response(from: request, context: context)
        }
    }
}
