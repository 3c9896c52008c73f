import CurlHTTP
import Foundation
import IDRotation
import PositiveListFormat
import TracerCore
import TransparencyLog

/// What `tracer report` would upload as ids: the node's own ids of the retention period whose
/// windows have begun, with their windows. Nothing about encounters is ever part of it.
public struct HistoryUpload: Sendable, Equatable {
    public var ids: [OwnID]

    public var days: [String] {
        var names: [String] = []
        for id in ids {
            let name = UTCDay(containing: id.window.start).date
            if names.last != name { names.append(name) }
        }
        return names
    }

    func body() -> [UInt8] {
        let entries = ids.map { "{\"id\":\"\($0.id.hex)\",\"validFrom\":\($0.window.start),\"validUntil\":\($0.window.end)}" }
        return Array("{\"ids\":[\(entries.joined(separator: ","))]}".utf8)
    }
}

/// What `tracer report --keys` would upload: the node's daily keys of the same period as the
/// ids, today's included (the server holds each until its day has ended plus its delay), oldest
/// first. Days whose ids were drawn before daily keys have no key and are not covered.
public struct KeyHistoryUpload: Sendable, Equatable {
    public var keys: [DailyKeyRecord]

    public var days: [String] {
        var names: [String] = []
        for record in keys where names.last != record.day.date { names.append(record.day.date) }
        return names
    }

    func body() -> [UInt8] {
        let entries = keys.map { "{\"day\":\($0.day.number),\"intervalSeconds\":\($0.intervalSeconds),\"key\":\"\($0.key.hex)\"}" }
        return Array("{\"keys\":[\(entries.joined(separator: ","))]}".utf8)
    }
}

/// A report the server accepted.
public struct ReportReceipt: Codable, Sendable, Equatable {
    public var reportedAt: UnixSeconds
    /// Ids uploaded; 0 for a key upload.
    public var ids: Int
    public var stored: Int
    public var firstValidFrom: UnixSeconds
    public var lastValidUntil: UnixSeconds
    public var server: String
    /// Daily keys uploaded; absent for an id upload (and in receipts from before key uploads).
    public var keys: Int?

    public var kind: UploadKind { keys == nil ? .ids : .keys }
}

/// Uploads the node's own id history, or its daily keys, with a one-time code from the health
/// authority.
///
/// The request carries an Idempotency-Key kept in the store until the server confirms: if the
/// answer is lost, running `tracer report` again (the same kind) repeats the same request, which
/// the server recognizes, instead of needing a new code.
public struct HistoryReporter: Sendable {
    public let serverURL: String
    public let store: NodeStore
    let http: any HTTPTransferring
    let clock: any WallClock
    let retention: RetentionPolicy

    static let pendingKey = "report.pending"
    static let receiptsKey = "report.receipts"

    /// A key whose day ended this close to the retention cutoff is left out: the server applies
    /// the same cutoff by its own clock, and would refuse the whole history over a key that its
    /// clock, a little ahead, finds too old. Its ids expire from every node within minutes anyway.
    static let keyCutoffMargin: UnixSeconds = 300

    /// An upload sent without a definite answer: repeated exactly, same key and same content, so
    /// the server can recognize it, even after the node's history has moved on.
    private struct PendingUpload: Codable {
        struct Entry: Codable, Equatable {
            var id: String
            var validFrom: UnixSeconds
            var validUntil: UnixSeconds
        }

        struct KeyEntry: Codable, Equatable {
            var day: Int64
            var intervalSeconds: Int64
            var key: String
        }

        var idempotencyKey: String
        /// Absent in uploads recorded before key uploads existed: those were ids.
        var kind: UploadKind?
        var ids: [Entry]
        var keys: [KeyEntry]?

        var uploadKind: UploadKind { kind ?? .ids }

        func sameContent(as other: PendingUpload) -> Bool {
            uploadKind == other.uploadKind && ids == other.ids && (keys ?? []) == (other.keys ?? [])
        }
    }

    public init(serverURL: String, store: NodeStore, http: any HTTPTransferring, retention: RetentionPolicy = .standard, clock: any WallClock = SystemWallClock()) {
        self.serverURL = serverURL.hasSuffix("/") ? String(serverURL.dropLast()) : serverURL
        self.store = store
        self.http = http
        self.retention = retention
        self.clock = clock
    }

    // MARK: What the server accepts

    /// Reads the authority's `acceptUploads` from `log/uploads`, signed by the log's key under its
    /// origin (`logOrigin`, nil: the key's default origin). A 404 there is a server from before
    /// the list log, which this node cannot follow (``ReportError/serverTooOld(url:)``). Without a
    /// public key the setting cannot be trusted, so it is not read: the server then decides when
    /// the upload arrives.
    public func acceptance(publicKey: PositiveListPublicKey?, logOrigin: String? = nil) async throws(ReportError) -> UploadAcceptance {
        guard let publicKey else { return UploadAcceptance(kinds: .both, source: .unknown) }
        let origin = logOrigin ?? publicKey.defaultLogOrigin
        let url = serverURL + "/" + UploadPolicyNote.relativePath
        let response = try await fetch(url, maximumByteCount: UploadPolicyNote.maximumByteCount)
        switch response.status {
        case 200:
            do {
                let logKey = try NoteVerifierKey(name: origin, type: .ed25519, publicKey: publicKey.key)
                return UploadAcceptance(kinds: try UploadPolicyNote.open(response.body, origin: origin, logKey: logKey).accepts, source: .signedUploadPolicy)
            } catch {
                throw .acceptanceNotVerified(url: redactedURL(url), detail: "\(error)")
            }
        case 404:
            throw .serverTooOld(url: redactedURL(url))
        default:
            throw .unexpectedResponse(url: redactedURL(url), status: response.status)
        }
    }

    private func fetch(_ url: String, maximumByteCount: Int) async throws(ReportError) -> HTTPResponse {
        do {
            return try await http.perform(HTTPRequest(url: url, maximumByteCount: maximumByteCount))
        } catch {
            throw .serverUnreachable(error)
        }
    }

    // MARK: What would be uploaded

    /// The ids to upload: the pending id upload if one got no answer, else the history.
    public func pendingUpload() throws(ReportError) -> HistoryUpload {
        if let pending = try storedPending(), pending.uploadKind == .ids {
            return HistoryUpload(ids: pending.ids.compactMap { entry in
                guard let id = try? UserID(hex: entry.id), entry.validUntil > entry.validFrom else { return nil }
                return OwnID(id: id, window: IDWindow(start: entry.validFrom, end: entry.validUntil))
            })
        }
        let now = clock.now()
        let cutoff = retention.ownIDCutoff(now: now)
        let ids: [OwnID]
        do { ids = try store.ownIDs() } catch { throw .store(error.description) }
        return HistoryUpload(ids: ids.filter { $0.window.end > cutoff && $0.window.start <= now })
    }

    /// The daily keys to upload: the pending key upload if one got no answer, else every key of
    /// a day that overlaps the ids' period and has begun (today's too).
    public func pendingKeyUpload() throws(ReportError) -> KeyHistoryUpload {
        if let pending = try storedPending(), pending.uploadKind == .keys {
            return KeyHistoryUpload(keys: (pending.keys ?? []).compactMap { entry in
                guard let key = try? DailyKey(hex: entry.key) else { return nil }
                return DailyKeyRecord(day: UTCDay(number: entry.day), intervalSeconds: entry.intervalSeconds, key: key)
            })
        }
        let now = clock.now()
        let cutoff = retention.ownIDCutoff(now: now) + Self.keyCutoffMargin
        let keys: [DailyKeyRecord]
        do { keys = try store.dailyKeys() } catch { throw .store(error.description) }
        return KeyHistoryUpload(keys: keys.filter { $0.day.end > cutoff && $0.day.start <= now })
    }

    // MARK: Uploading

    public func upload(_ history: HistoryUpload, code: String) async throws(ReportError) -> ReportReceipt {
        guard let first = history.ids.first, let last = history.ids.last else { throw .nothingToReport }
        let content = PendingUpload(
            idempotencyKey: "", kind: .ids,
            ids: history.ids.map { PendingUpload.Entry(id: $0.id.hex, validFrom: $0.window.start, validUntil: $0.window.end) })
        let stored = try await send(content, body: history.body(), code: code)
        let receipt = ReportReceipt(
            reportedAt: clock.now(), ids: history.ids.count, stored: stored, firstValidFrom: first.window.start,
            lastValidUntil: last.window.end, server: redactedURL(serverURL))
        try record(receipt)
        return receipt
    }

    public func upload(_ history: KeyHistoryUpload, code: String) async throws(ReportError) -> ReportReceipt {
        guard let first = history.keys.first, let last = history.keys.last else { throw .noKeysToReport }
        let content = PendingUpload(
            idempotencyKey: "", kind: .keys, ids: [],
            keys: history.keys.map { PendingUpload.KeyEntry(day: $0.day.number, intervalSeconds: $0.intervalSeconds, key: $0.key.hex) })
        let stored = try await send(content, body: history.body(), code: code)
        let receipt = ReportReceipt(
            reportedAt: clock.now(), ids: 0, stored: stored, firstValidFrom: first.day.start, lastValidUntil: last.day.end,
            server: redactedURL(serverURL), keys: history.keys.count)
        try record(receipt)
        return receipt
    }

    /// Reports made from this node, oldest first.
    public static func receipts(in store: NodeStore) -> [ReportReceipt] {
        guard let text = try? store.stateValue(forKey: receiptsKey),
              let receipts = try? JSONDecoder().decode([ReportReceipt].self, from: Data(text.utf8))
        else { return [] }
        return receipts
    }

    private struct ServerAnswer: Decodable {
        var error: String?
        var detail: String?
        var stored: Int?
    }

    /// POSTs `body` (the history `content` describes) to the kind's path; returns how many of
    /// its entries were new to the server. What both kinds share: credentials, idempotency and
    /// the meaning of every answer.
    private func send(_ content: PendingUpload, body: [UInt8], code: String) async throws(ReportError) -> Int {
        let key = try idempotencyKey(for: content)
        let url = serverURL + content.uploadKind.apiPath
        let response: HTTPResponse
        do {
            response = try await http.perform(HTTPRequest(
                method: .post, url: url,
                headers: [
                    HTTPHeaderField(name: "Content-Type", value: "application/json"),
                    HTTPHeaderField(name: "Upload-Code", value: code),
                    HTTPHeaderField(name: "Idempotency-Key", value: key),
                ],
                body: body))
        } catch {
            throw .network(error)
        }
        let answer = try? JSONDecoder().decode(ServerAnswer.self, from: Data(response.body))
        switch response.status {
        case 200, 201:
            return answer?.stored ?? 0
        case 401:
            // A definite no: nothing was stored, so the next attempt starts afresh.
            try clearPending()
            throw .codeRefused(reason: Self.codeReason(answer?.error))
        case 403 where answer?.error == "upload_kind_not_accepted":
            try clearPending()
            throw .kindNotAccepted(content.uploadKind)
        case 429:
            throw .tooManyAttempts(retryAfterSeconds: response.header("retry-after").flatMap { Int($0) })
        case 503:
            // Not stored; kept pending, so that running the command again resends this request.
            throw .serverUnavailable(retryAfterSeconds: response.header("retry-after").flatMap { Int($0) })
        case 400, 413, 422:
            try clearPending()
            throw .historyRefused(detail: answer?.detail ?? "HTTP \(response.status)")
        default:
            throw .unexpectedResponse(url: url, status: response.status)
        }
    }

    private static func codeReason(_ error: String?) -> String {
        switch error {
        case "expired_code": "it has expired"
        case "revoked_code": "the health authority revoked it; ask them for a new code"
        case "used_code": "it was already used"
        case "invalid_code": "it is not a valid code"
        case "missing_credentials": "no code reached it"
        default: error ?? "unknown reason"
        }
    }

    private func storedPending() throws(ReportError) -> PendingUpload? {
        let text: String?
        do { text = try store.stateValue(forKey: Self.pendingKey) } catch { throw .store(error.description) }
        return text.flatMap { try? JSONDecoder().decode(PendingUpload.self, from: Data($0.utf8)) }
    }

    /// The key of the pending upload when `content` is that upload, else a new key kept with it.
    private func idempotencyKey(for content: PendingUpload) throws(ReportError) -> String {
        if let pending = try storedPending(), pending.sameContent(as: content) { return pending.idempotencyKey }
        var pending = content
        pending.idempotencyKey = UUID().uuidString.lowercased()
        do {
            if let text = try? ExposureChecker.json(pending) { try store.setStateValue(text, forKey: Self.pendingKey) }
        } catch {
            throw .store(error.description)
        }
        return pending.idempotencyKey
    }

    private func clearPending() throws(ReportError) {
        do { try store.setStateValue(nil, forKey: Self.pendingKey) } catch { throw .store(error.description) }
    }

    private func record(_ receipt: ReportReceipt) throws(ReportError) {
        let receipts = Self.receipts(in: store) + [receipt]
        do {
            if let text = try? ExposureChecker.json(receipts) { try store.setStateValue(text, forKey: Self.receiptsKey) }
            try store.setStateValue(nil, forKey: Self.pendingKey)
        } catch {
            throw .store(error.description)
        }
    }
}
