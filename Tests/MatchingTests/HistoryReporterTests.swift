import CurlHTTP
import Foundation
import IDRotation
import Synchronization
import Testing
import TestTiers
@testable import Matching
import TracerCore

extension MatchingTests {
    /// `tracer report`'s upload, against a stand-in server that records what it receives.
    @Suite(.tags(.unit)) struct HistoryReporterTests {
        /// Answers from a script, recording every request.
        final class ScriptedServer: HTTPTransferring {
            enum Answer: Sendable {
                case lostConnection
                case status(Int, String)
                case statusWithHeaders(Int, [String: String], String)
            }

            private let state: Mutex<(answers: [Answer], requests: [HTTPRequest])>

            init(_ answers: [Answer]) {
                state = Mutex((answers, []))
            }

            var requests: [HTTPRequest] { state.withLock { $0.requests } }

            func perform(_ request: HTTPRequest) async throws(HTTPClientError) -> HTTPResponse {
                let answer = state.withLock { state in
                    state.requests.append(request)
                    return state.answers.removeFirst()
                }
                switch answer {
                case .lostConnection:
                    throw .transferFailed(url: request.url, attempts: 4, reason: "connection reset")
                case .status(let status, let body):
                    return HTTPResponse(status: status, body: Array(body.utf8))
                case .statusWithHeaders(let status, let headers, let body):
                    return HTTPResponse(status: status, headers: headers, body: Array(body.utf8))
                }
            }

            func download(_ request: HTTPRequest, to path: String, progress: (@Sendable (DownloadProgress) -> Void)?) async throws(HTTPClientError) -> HTTPResponse {
                HTTPResponse(status: 404)
            }
        }

        struct FixedClock: WallClock {
            let time: UnixSeconds
            func now() -> UnixSeconds { time }
            func sleep(until time: UnixSeconds) async throws {}
        }

        let now: UnixSeconds = 1_795_305_600

        func store(in directory: TemporaryDirectory) throws -> NodeStore {
            try NodeStore.open(StoreLocation(path: directory.path + "/node.db", source: .flag, ownsDirectory: false))
        }

        func header(_ name: String, of request: HTTPRequest) -> String? {
            request.headers.first { $0.name == name }?.value
        }

        @Test func aRepeatAfterALostAnswerSendsTheSameIDsWithTheSameKey() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let store = try store(in: directory)
            try store.recordOwnID(OwnID(id: UserID(rawValue: 0xA1), window: IDWindow(start: now - 1_800, end: now - 900)))
            try store.recordOwnID(OwnID(id: UserID(rawValue: 0xA2), window: IDWindow(start: now - 900, end: now)))
            let server = ScriptedServer([.lostConnection, .status(201, #"{"submission":1,"received":2,"stored":2}"#)])
            let first = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now - 1))

            let upload = try first.pendingUpload()
            #expect(upload.ids.map(\.id.rawValue) == [0xA1, 0xA2])
            await #expect(throws: ReportError.self) { try await first.upload(upload, code: "CODE-1") }

            // The node rotated meanwhile; the repeat must still be the request the server may have stored.
            try store.recordOwnID(OwnID(id: UserID(rawValue: 0xA3), window: IDWindow(start: now, end: now + 900)))
            let later = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now + 10))
            let repeated = try later.pendingUpload()
            #expect(repeated.ids.map(\.id.rawValue) == [0xA1, 0xA2])
            let receipt = try await later.upload(repeated, code: "CODE-1")
            #expect(receipt.ids == 2)

            let requests = server.requests
            #expect(requests.count == 2)
            #expect(requests[0].body == requests[1].body)
            #expect(header("Idempotency-Key", of: requests[0]) != nil)
            #expect(header("Idempotency-Key", of: requests[0]) == header("Idempotency-Key", of: requests[1]))
            // Once confirmed, the next report is built afresh from the history.
            #expect(try later.pendingUpload().ids.map(\.id.rawValue) == [0xA1, 0xA2, 0xA3])
            #expect(HistoryReporter.receipts(in: store).count == 1)
        }

        /// Issue 38: a server whose database is restarting answers 503 with Retry-After; the
        /// user is told when to run the command again, and the repeat is the same request.
        @Test func aServerThatCannotStoreNowSaysWhenAndTheRepeatIsTheSameRequest() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let store = try store(in: directory)
            try store.recordOwnID(OwnID(id: UserID(rawValue: 0xC1), window: IDWindow(start: now - 900, end: now)))
            let server = ScriptedServer([
                .statusWithHeaders(503, ["retry-after": "10"], #"{"error":"store_unavailable","detail":"try again in 10 seconds"}"#),
                .status(201, #"{"submission":3,"received":1,"stored":1}"#),
            ])
            let reporter = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now))
            let error = await #expect(throws: ReportError.self) { try await reporter.upload(try reporter.pendingUpload(), code: "CODE-3") }
            #expect(error == .serverUnavailable(retryAfterSeconds: 10))
            #expect(error?.description.contains("run the same command again in 10 seconds") == true)
            _ = try await reporter.upload(try reporter.pendingUpload(), code: "CODE-3")
            let requests = server.requests
            #expect(requests[0].body == requests[1].body)
            #expect(header("Idempotency-Key", of: requests[0]) == header("Idempotency-Key", of: requests[1]))
        }

        @Test func aRefusedCodeLeavesNothingPending() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let store = try store(in: directory)
            try store.recordOwnID(OwnID(id: UserID(rawValue: 0xB1), window: IDWindow(start: now - 900, end: now)))
            let server = ScriptedServer([
                .status(401, #"{"error":"used_code","detail":"This upload code was already used."}"#),
                .status(201, #"{"submission":2,"received":2,"stored":2}"#),
            ])
            let reporter = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now))
            let error = await #expect(throws: ReportError.self) { try await reporter.upload(try reporter.pendingUpload(), code: "USED") }
            #expect(error == .codeRefused(reason: "it was already used"))

            try store.recordOwnID(OwnID(id: UserID(rawValue: 0xB2), window: IDWindow(start: now, end: now + 900)))
            let next = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now + 5))
            _ = try await next.upload(try next.pendingUpload(), code: "NEW-CODE")
            let keys = server.requests.map { header("Idempotency-Key", of: $0) }
            #expect(keys[0] != keys[1], "a new code is a new request")
            #expect(String(decoding: server.requests[1].body, as: UTF8.self).contains(UserID(rawValue: 0xB2).hex))
        }
    }
}
