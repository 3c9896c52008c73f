import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PositiveListFormat
import PositiveListServer
import ServerStorage
import TracerCore

/// `POST /v1/codes`, `POST /v1/histories` and `POST /v1/key-histories`: authentication, the brute-force limit, body
/// limits and validation, in front of the store.
package struct SubmissionAPI: Sendable {
    static let uploadCodeHeader = HTTPField.Name("Upload-Code")!
    static let idempotencyKeyHeader = HTTPField.Name("Idempotency-Key")!
    static let replayedHeader = HTTPField.Name("Idempotent-Replayed")!
    package static let forwardedForHeader = HTTPField.Name("X-Forwarded-For")!
    /// The most parts (chunks, or reads) a request's body may come in: a 1 MiB body in chunks
    /// of 256 bytes. Beyond, the request is refused with 413 (see RequestFraming).
    package static let maxBodyParts = 4_096

    let configuration: ServerConfiguration
    let authorities: AuthorityRegistry
    let rules: HistoryRules
    let keyRules: KeyHistoryRules
    let store: any SubmissionStore
    let clock: any WallClock
    let limiter: FailedAttemptLimiter
    let forwardedFor: ForwardedFor
    /// Told of every stored history, so that the scheduler publishes what is due soon.
    let demand: PublicationDemand?
    /// Counts every upload's answer and the codes issued and used.
    let metrics: ServerMetrics?

    package init(
        configuration: ServerConfiguration, store: any SubmissionStore, clock: any WallClock, demand: PublicationDemand? = nil,
        metrics: ServerMetrics? = nil
    ) {
        self.demand = demand
        self.metrics = metrics
        self.configuration = configuration
        self.authorities = AuthorityRegistry(configuration.authorities)
        self.rules = HistoryRules(configuration)
        self.keyRules = KeyHistoryRules(configuration)
        self.store = store
        self.clock = clock
        self.limiter = FailedAttemptLimiter(limitPerMinute: configuration.failedAttemptsPerMinute, clock: clock)
        self.forwardedFor = ForwardedFor(trustedProxies: configuration.trustedProxies, trustedHops: configuration.trustedProxyHops)
    }

    package func addRoutes(to router: Router<PositiveListRequestContext>, table: inout RouteTable) {
        table.add("v1/codes", .post, to: router) { request, context in try await issueCode(request, context) }
        table.add("v1/histories", .post, to: router) { request, context in try await appendHistory(request, context) }
        table.add("v1/key-histories", .post, to: router) { request, context in try await appendKeyHistory(request, context) }
    }

    // MARK: Codes

    private struct IssuedCode: Encodable {
        var code: String
        var expiresAt: UnixSeconds
        var authority: String
    }

    private func issueCode(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let authority = try await checkCredential(clientAddress(request, context), context) { () throws -> AuthorityConfiguration in
            guard let token = bearerToken(request) else { throw APIError.missingCredentials }
            guard let authority = authorities.authenticate(token: token) else {
                throw CredentialRefusal(error: .invalidToken, reason: "invalid authority token")
            }
            return authority
        }
        let body = try await readBody(request, limit: 4_096, address: clientAddress(request, context))
        var lifetime = configuration.uploadCodeLifetimeSeconds
        if body.readableBytes > 0 {
            let parsed: CodeRequest
            do throws(HistoryDecodingError) {
                parsed = try CodeRequest(json: Data(body.readableBytesView))
            } catch {
                throw APIError(
                    .badRequest, "invalid_json",
                    "The body must be empty or a JSON object such as {\"expiresInSeconds\": 86400}, with no other member: \(error.detail).")
            }
            if let requested = parsed.expiresInSeconds {
                guard (60...configuration.uploadCodeLifetimeSeconds).contains(requested) else {
                    throw APIError(
                        .unprocessableContent, "invalid_expiry",
                        "expiresInSeconds must be between 60 and \(configuration.uploadCodeLifetimeSeconds).")
                }
                lifetime = requested
            }
        }
        let issued = try await store.issueUploadCode(authority: authority.name, lifetimeSeconds: lifetime, now: clock.now())
        metrics?.uploadCode(.issued)
        context.logger.info("upload code issued", metadata: ["authority": "\(authority.name)", "expiresAt": "\(issued.expiresAt)"])
        return try json(.created, IssuedCode(code: issued.code.display, expiresAt: issued.expiresAt, authority: authority.name))
    }

    // MARK: Histories

    private func appendHistory(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        try await receiveHistory(request, context, kind: .ids) { body, now, credential, idempotencyKey in
            let history: SubmittedHistory
            do throws(HistoryDecodingError) {
                history = try SubmittedHistory(json: body)
            } catch {
                throw APIError(.badRequest, "invalid_json", "The body is not a history: \(error.detail).")
            }
            let entries: [PositiveListEntry]
            do throws(HistoryRejection) {
                entries = try rules.validate(history, now: now)
            } catch {
                throw APIError(.unprocessableContent, error.code, error.detail)
            }
            return try await store.appendHistory(entries, credential: credential, idempotencyKey: idempotencyKey(), now: now)
        }
    }

    private func appendKeyHistory(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        try await receiveHistory(request, context, kind: .keys) { body, now, credential, idempotencyKey in
            let history: SubmittedKeyHistory
            do throws(HistoryDecodingError) {
                history = try SubmittedKeyHistory(json: body)
            } catch {
                throw APIError(.badRequest, "invalid_json", "The body is not a key history: \(error.detail).")
            }
            let records: [DailyKeyRecord]
            do throws(KeyHistoryRejection) {
                records = try keyRules.validate(history, now: now)
            } catch {
                throw APIError(.unprocessableContent, error.code, error.detail)
            }
            return try await store.appendKeyHistory(records, credential: credential, idempotencyKey: idempotencyKey(), now: now)
        }
    }

    /// What both kinds of history share: the authority's choice of kinds, the brute-force
    /// limit, credentials, body limits, idempotency and the answers. `store` decodes, validates
    /// and stores the body; `idempotencyKey()` gives the request's key, if any, with its digest.
    /// Every answer is counted by its outcome: stored, replayed or the error's code.
    private func receiveHistory(
        _ request: Request, _ context: PositiveListRequestContext, kind: AcceptedUploads,
        store: (Data, UnixSeconds, SubmissionCredential, () -> IdempotencyKey?) async throws -> SubmissionOutcome
    ) async throws -> Response {
        guard let metrics else { return try await answerHistory(request, context, kind: kind, store: store) }
        let kindLabel: ServerMetrics.UploadKind = kind == .ids ? .ids : .keys
        do {
            let response = try await answerHistory(request, context, kind: kind, store: store)
            metrics.upload(kindLabel, outcome: response.status == .created ? "stored" : "replayed")
            return response
        } catch {
            // The code the JSON error responder will answer with, by the same mapping.
            metrics.upload(kindLabel, outcome: APIError.answering(error).code)
            throw error
        }
    }

    private func answerHistory(
        _ request: Request, _ context: PositiveListRequestContext, kind: AcceptedUploads,
        store: (Data, UnixSeconds, SubmissionCredential, () -> IdempotencyKey?) async throws -> SubmissionOutcome
    ) async throws -> Response {
        guard configuration.acceptUploads.contains(kind) else { throw APIError.uploadKindNotAccepted(kind) }
        let address = clientAddress(request, context)
        let credential = try await checkCredential(address, context) { try await authenticateSubmitter(request) }
        // Before the body is read and long before the store could spend an upload code.
        guard let contentType = request.headers[.contentType], MediaType(contentType)?.isJSON == true else {
            throw APIError(
                .unsupportedMediaType, "unsupported_media_type",
                "Send the history as `Content-Type: application/json` (a charset parameter, if any, must be utf-8).")
        }
        let idempotencyKeyText = try idempotencyKey(request)
        let bodyData = Data(try await readBody(request, limit: configuration.maxRequestBodyBytes, address: address).readableBytesView)
        // A key history's digest covers its kind too: a body that is both a valid id history and
        // a valid key history must not replay one as the other under the same Idempotency-Key.
        // Id histories keep the plain digest, so keys stored before key histories still match.
        let digested = kind == .ids ? bodyData : Data("key-history\n".utf8) + bodyData
        let now = clock.now()
        let outcome = try await store(bodyData, now, credential) {
            idempotencyKeyText.map { IdempotencyKey(key: $0, requestDigest: Array(SHA256.hash(data: digested))) }
        }
        let kindName = kind == .ids ? "ids" : "keys"
        switch outcome {
        case .stored(let receipt):
            if receipt.stored > 0 { demand?.request() }
            if credential.isUploadCode { metrics?.uploadCode(.used) }
            context.logger.info("history stored", metadata: [
                "submission": "\(receipt.submission)", "kind": "\(kindName)", "received": "\(receipt.received)",
                "new": "\(receipt.stored)", "viaUploadCode": "\(credential.isUploadCode)",
            ])
            return try json(.created, receipt)
        case .replayed(let receipt):
            context.logger.info("history request replayed", metadata: ["submission": "\(receipt.submission)", "kind": "\(kindName)"])
            return try json(.ok, receipt, headers: [Self.replayedHeader: "true"])
        case .refused(.idempotencyKeyReused):
            throw APIError(
                .unprocessableContent, "idempotency_key_reused",
                "This Idempotency-Key was used with a different body; use a new key for a new request.")
        case .refused(let refusal):
            // The code was valid when checked above but not any more (used or expired by a
            // concurrent request): the same answers as if it had been seen so.
            await limiter.recordFailure(address)
            logRefusal(address, reason: "upload code refused at commit", context)
            switch refusal {
            case .expiredCode: throw APIError.expiredCode
            case .revokedCode: throw APIError.revokedCode
            case .usedCode: throw APIError.usedCode
            default: throw APIError.unknownCode
            }
        }
    }

    /// Checks the credential before the body is read, so a guesser costs the server little.
    /// A wrong credential is thrown as a ``CredentialRefusal``, which counts against the limit.
    private func authenticateSubmitter(_ request: Request) async throws -> SubmissionCredential {
        let token = bearerToken(request)
        let typedCode = request.headers[Self.uploadCodeHeader]
        switch (token, typedCode) {
        case (nil, nil):
            throw APIError.missingCredentials
        case (_?, _?):
            throw APIError(.badRequest, "conflicting_credentials", "Send either an authority token or an upload code, not both.")
        case (let token?, nil):
            guard let authority = authorities.authenticate(token: token) else {
                throw CredentialRefusal(error: .invalidToken, reason: "invalid authority token")
            }
            return .authority(name: authority.name)
        case (nil, let typed?):
            guard let code = UploadCode(typed: typed) else {
                throw CredentialRefusal(error: .malformedCode, reason: "malformed upload code")
            }
            switch try await store.status(of: code, now: clock.now()) {
            case .valid:
                return .uploadCode(code)
            case .alreadyUsed where request.headers[Self.idempotencyKeyHeader] != nil:
                // Possibly a retry of the request that used it; the store replays or refuses.
                return .uploadCode(code)
            case .alreadyUsed:
                throw CredentialRefusal(error: .usedCode, reason: "used upload code")
            case .expired:
                throw CredentialRefusal(error: .expiredCode, reason: "expired upload code")
            case .revoked:
                throw CredentialRefusal(error: .revokedCode, reason: "revoked upload code")
            case .unknown:
                throw CredentialRefusal(error: .unknownCode, reason: "unknown upload code")
            }
        }
    }

    // MARK: Helpers

    /// A credential that was checked and is wrong: the client sees `error`, and the attempt
    /// counts against its address's limit.
    private struct CredentialRefusal: Error {
        let error: APIError
        /// For the log; never the token or the code.
        let reason: String
    }

    /// Runs `check` holding one unit of the address's failed-attempt budget (see
    /// ``FailedAttemptLimiter``), so concurrent guesses cannot all pass the limit before any
    /// of them is counted. A ``CredentialRefusal`` thrown by `check` is a failed attempt; any
    /// other outcome (success, a missing credential, a database error) gives the unit back.
    private func checkCredential<Value>(
        _ address: String, _ context: PositiveListRequestContext, _ check: () async throws -> Value
    ) async throws -> Value {
        let ticket: FailedAttemptLimiter.Ticket
        switch await limiter.admit(address) {
        case .refused(let seconds): throw APIError.tooManyAttempts(retryAfterSeconds: seconds)
        case .admitted(let admitted): ticket = admitted
        }
        do {
            let value = try await check()
            await limiter.settle(ticket, failed: false)
            return value
        } catch let refusal as CredentialRefusal {
            await limiter.settle(ticket, failed: true)
            logRefusal(address, reason: refusal.reason, context)
            throw refusal.error
        } catch {
            await limiter.settle(ticket, failed: false)
            throw error
        }
    }

    /// Logged with the address and the reason only: never the token or the code.
    private func logRefusal(_ address: String, reason: String, _ context: PositiveListRequestContext) {
        context.logger.warning("credential refused", metadata: ["client": "\(address)", "reason": "\(reason)"])
    }

    /// The address failed attempts are counted against: the peer's, or, from a trusted proxy,
    /// the one its `X-Forwarded-For` names (see ``ForwardedFor``).
    private func clientAddress(_ request: Request, _ context: PositiveListRequestContext) -> String {
        let peer = context.peerAddress ?? "unknown"
        guard configuration.trustForwardedFor else { return peer }
        return forwardedFor.clientAddress(peer: peer, headerValues: request.headers[values: Self.forwardedForHeader]) ?? peer
    }

    private func bearerToken(_ request: Request) -> String? {
        guard let value = request.headers[.authorization] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return "" }
        return String(parts[1]).trimmingCharacters(in: .whitespaces)
    }

    private func idempotencyKey(_ request: Request) throws -> String? {
        guard let key = request.headers[Self.idempotencyKeyHeader] else { return nil }
        guard (1...IdempotencyKey.maximumLength).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else {
            throw APIError(
                .badRequest, "invalid_idempotency_key",
                "Idempotency-Key must be 1 to \(IdempotencyKey.maximumLength) visible ASCII characters, such as a UUID.")
        }
        return key
    }

    /// Refuses a body over `limit` from its Content-Length before reading any of it, and a
    /// chunked one as soon as it passes the limit.
    private func readBody(_ request: Request, limit: Int, address: String) async throws -> ByteBuffer {
        let tooLarge = APIError(.contentTooLarge, "body_too_large", "The request body is larger than \(limit) bytes; send a smaller history.")
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit { throw tooLarge }
        do {
            return try await request.body.collect(upTo: limit)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw tooLarge
        } catch let error as TooManyBodyParts {
            // Only a client sending on purpose splits a body so finely: it counts as a failed attempt.
            await limiter.recordFailure(address)
            throw APIError(
                .contentTooLarge, "too_many_chunks",
                "The request body came in more than \(error.limit) chunks; send it with a Content-Length or in larger chunks.")
        }
    }

    private func json(_ status: HTTPResponse.Status, _ value: some Encodable, headers: HTTPFields = [:]) throws -> Response {
        var headers = headers
        headers[.contentType] = "application/json"
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }
}
