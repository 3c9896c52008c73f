import Foundation
import IDRotation

/// What `tracer report` would upload: the node's own ids of the retention period whose windows
/// have begun, with their windows. Nothing about encounters is ever part of it.
public struct HistoryUpload: Sendable, Equatable {
    public var ids: [OwnID]

    public var days: [String] {
        var names: [String] = []
        for id in ids {
            let name = ExposureAssessment.dayName(id.window.start - id.window.start.modulo(.secondsPerDay))
            if names.last != name { names.append(name) }
        }
        return names
    }

    func body() -> [UInt8] {
        let entries = ids.map { "{\"id\":\"\($0.id.hex)\",\"validFrom\":\($0.window.start),\"validUntil\":\($0.window.end)}" }
        return Array("{\"ids\":[\(entries.joined(separator: ","))]}".utf8)
    }
}

/// A report the server accepted.
public struct ReportReceipt: Codable, Sendable, Equatable {
    public var reportedAt: UnixSeconds
    public var ids: Int
    public var stored: Int
    public var firstValidFrom: UnixSeconds
    public var lastValidUntil: UnixSeconds
    public var server: String
}

public enum ReportError: Error, Sendable, Equatable, CustomStringConvertible {
    case nothingToReport
    case codeRefused(reason: String)
    case tooManyAttempts(retryAfterSeconds: Int?)
    case historyRefused(detail: String)
    case unexpectedResponse(url: String, status: Int)
    case network(HTTPClientError)
    case store(String)

    public var description: String {
        switch self {
        case .nothingToReport:
            return "This node has no ids from the last 28 days to report; nothing was uploaded."
        case .codeRefused(let reason):
            return "The server refused the upload code (\(reason)); check the code with your health authority or ask for a new one. Nothing was uploaded."
        case .tooManyAttempts(let seconds):
            let wait = seconds.map { " in \($0) seconds" } ?? " later"
            return "Too many wrong codes were tried from this address; try again\(wait). Nothing was uploaded."
        case .historyRefused(let detail):
            return "The server refused the id history: \(detail) Nothing was uploaded."
        case .unexpectedResponse(let url, let status):
            return "The server answered \(url) with HTTP \(status); check the server address. Nothing was uploaded."
        case .network(let error):
            return "\(error) The upload may or may not have reached the server; run the same command again: the server recognizes a repeat and stores nothing twice."
        case .store(let detail):
            return detail
        }
    }
}

/// Uploads the node's own id history with a one-time code from the health authority.
///
/// The request carries an Idempotency-Key kept in the store until the server confirms: if the
/// answer is lost, running `tracer report` again repeats the same request, which the server
/// recognizes, instead of needing a new code.
public struct HistoryReporter: Sendable {
    public let serverURL: String
    public let store: NodeStore
    let http: any HTTPTransferring
    let clock: any WallClock
    let retention: RetentionPolicy

    static let pendingKey = "report.pending"
    static let receiptsKey = "report.receipts"

    /// An upload sent without a definite answer: repeated exactly, same key and same ids, so the
    /// server can recognize it, even after the node's id history has moved on.
    private struct PendingUpload: Codable {
        struct Entry: Codable {
            var id: String
            var validFrom: UnixSeconds
            var validUntil: UnixSeconds
        }

        var idempotencyKey: String
        var ids: [Entry]
    }

    public init(serverURL: String, store: NodeStore, http: any HTTPTransferring, retention: RetentionPolicy = .standard, clock: any WallClock = SystemWallClock()) {
        self.serverURL = serverURL.hasSuffix("/") ? String(serverURL.dropLast()) : serverURL
        self.store = store
        self.http = http
        self.retention = retention
        self.clock = clock
    }

    public func pendingUpload() throws(ReportError) -> HistoryUpload {
        if let pending = try storedPending() {
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

    public func upload(_ history: HistoryUpload, code: String) async throws(ReportError) -> ReportReceipt {
        guard let first = history.ids.first, let last = history.ids.last else { throw .nothingToReport }
        let key = try idempotencyKey(for: history)
        let url = serverURL + "/v1/histories"
        let response: HTTPResponse
        do {
            response = try await http.perform(HTTPRequest(
                method: .post, url: url,
                headers: [
                    HTTPHeaderField(name: "Content-Type", value: "application/json"),
                    HTTPHeaderField(name: "Upload-Code", value: code),
                    HTTPHeaderField(name: "Idempotency-Key", value: key),
                ],
                body: history.body()))
        } catch {
            throw .network(error)
        }
        let answer = try? JSONDecoder().decode(ServerAnswer.self, from: Data(response.body))
        switch response.status {
        case 200, 201:
            let receipt = ReportReceipt(
                reportedAt: clock.now(), ids: history.ids.count, stored: answer?.stored ?? 0,
                firstValidFrom: first.window.start, lastValidUntil: last.window.end, server: redactedURL(serverURL))
            try record(receipt)
            return receipt
        case 401:
            // A definite no: nothing was stored, so the next attempt starts afresh.
            try clearPending()
            throw .codeRefused(reason: Self.codeReason(answer?.error))
        case 429:
            throw .tooManyAttempts(retryAfterSeconds: response.header("retry-after").flatMap { Int($0) })
        case 400, 413, 422:
            try clearPending()
            throw .historyRefused(detail: answer?.detail ?? "HTTP \(response.status)")
        default:
            throw .unexpectedResponse(url: url, status: response.status)
        }
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

    private static func codeReason(_ error: String?) -> String {
        switch error {
        case "expired_code": "it has expired"
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

    /// The key of the pending upload when `history` is that upload, else a new key kept with it.
    private func idempotencyKey(for history: HistoryUpload) throws(ReportError) -> String {
        let entries = history.ids.map { PendingUpload.Entry(id: $0.id.hex, validFrom: $0.window.start, validUntil: $0.window.end) }
        if let pending = try storedPending(), pending.ids.map(\.id) == entries.map(\.id) { return pending.idempotencyKey }
        let pending = PendingUpload(idempotencyKey: UUID().uuidString.lowercased(), ids: entries)
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
