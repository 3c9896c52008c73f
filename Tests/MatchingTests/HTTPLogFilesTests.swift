import CurlHTTP
import Foundation
import Matching
import Synchronization
import Testing
import TestTiers

/// How a node asks for a log's files, and what it does with each answer a server or cache may
/// give to a Range request. (Real nginx answers are in LogOverNginxTests.)
@Suite(.tags(.unit)) struct HTTPLogFilesTests {
    /// Answers every request with one scripted response and keeps the requests.
    final class ScriptedHTTP: HTTPTransferring {
        let answer: HTTPResponse
        let requests = Mutex<[HTTPRequest]>([])

        init(_ answer: HTTPResponse) { self.answer = answer }

        func perform(_ request: HTTPRequest) async throws(HTTPClientError) -> HTTPResponse {
            requests.withLock { $0.append(request) }
            return answer
        }

        func download(_ request: HTTPRequest, to path: String, progress: (@Sendable (DownloadProgress) -> Void)?) async throws(HTTPClientError) -> HTTPResponse {
            HTTPResponse(status: 500)
        }
    }

    static let bundle = Array("0123456789".utf8)

    @Test func aHeldStartIsAskedForAsARangeAndOnlyTheRestIsReturned() async throws {
        let http = ScriptedHTTP(HTTPResponse(status: 206, headers: ["content-range": "bytes 4-9/10"], body: Array(Self.bundle[4...])))
        let files = HTTPLogFiles(baseURL: "https://list.test/log/", http: http)
        #expect(try await files.file("tile/entries/000.p/3", fromByte: 4) == Data("456789".utf8))
        let request = try #require(http.requests.withLock { $0.first })
        #expect(request.url == "https://list.test/log/tile/entries/000.p/3")
        #expect(request.headers == [HTTPHeaderField(name: "Range", value: "bytes=4-")])
        // From the start: no Range header at all.
        let whole = ScriptedHTTP(HTTPResponse(status: 200, body: Self.bundle))
        #expect(try await HTTPLogFiles(baseURL: "https://list.test/log", http: whole).file("tile/entries/000", fromByte: 0) == Data(Self.bundle))
        #expect(whole.requests.withLock { $0.first?.headers } == [])
    }

    @Test func aServerThatIgnoresRangeCostsBytesNotCorrectness() async throws {
        let http = ScriptedHTTP(HTTPResponse(status: 200, body: Self.bundle))
        #expect(try await HTTPLogFiles(baseURL: "https://list.test/log", http: http).file("tile/entries/000", fromByte: 4) == Data("456789".utf8))
    }

    @Test func wrongRangesShortFilesAndErrorsAreRefused() async throws {
        let cases: [(HTTPResponse, HTTPLogFilesError)] = [
            (HTTPResponse(status: 206, headers: ["content-range": "bytes 0-9/10"], body: Self.bundle),
             .wrongRange(url: "https://list.test/log/tile/entries/000", asked: 4, answered: "bytes 0-9/10")),
            (HTTPResponse(status: 206, body: Self.bundle), .wrongRange(url: "https://list.test/log/tile/entries/000", asked: 4, answered: "none")),
            (HTTPResponse(status: 200, body: Array(Self.bundle.prefix(3))), .shorterThanHeld(url: "https://list.test/log/tile/entries/000", held: 4, served: 3)),
            (HTTPResponse(status: 404), .unexpectedStatus(url: "https://list.test/log/tile/entries/000", status: 404)),
        ]
        for (answer, expected) in cases {
            await #expect(throws: expected) {
                try await HTTPLogFiles(baseURL: "https://list.test/log", http: ScriptedHTTP(answer)).file("tile/entries/000", fromByte: 4)
            }
        }
        // 416 to a range from the held length: nothing more (the bundle's width check decides).
        #expect(try await HTTPLogFiles(baseURL: "https://list.test/log", http: ScriptedHTTP(HTTPResponse(status: 416))).file("tile/entries/000", fromByte: 10) == Data())
        await #expect(throws: HTTPLogFilesError.unexpectedStatus(url: "https://list.test/log/checkpoint", status: 503)) {
            try await HTTPLogFiles(baseURL: "https://list.test/log", http: ScriptedHTTP(HTTPResponse(status: 503))).checkpoint()
        }
    }
}
