import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IDRotation
import PositiveListServer
import ServerHTTPAPI
import Testing
import TestTiers
import TracerCore
import TransparencyLog
import ServerTestSupport

/// docs/openapi.yaml must stay true: the error codes it lists are exactly those the server's
/// source can produce, and every path and method it documents is routed.
@Suite(.tags(.unit)) struct APIDocumentTests {
    static let root = NginxInstance.repositoryRoot

    static func documentedErrorCodes() throws -> Set<String> {
        let text = try String(contentsOfFile: root + "/docs/openapi.yaml", encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex { $0.contains("description: A stable, machine-readable code.") })
        var codes: Set<String> = []
        for line in lines[(start + 1)...] {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed == "enum:" { continue }
            guard trimmed.hasPrefix("- ") else { break }
            codes.insert(String(trimmed.dropFirst(2)))
        }
        return codes
    }

    static func errorCodesInSource() throws -> Set<String> {
        // The core's rejections and the HTTP API's errors (the console answers in HTML).
        let directories = ["PositiveListServer", "ServerHTTPAPI", "ServerApplication"].map { root + "/Sources/" + $0 }
        let files = try directories.flatMap { directory in
            try #require(FileManager.default.enumerator(atPath: directory)).compactMap { $0 as? String }
                .filter { $0.hasSuffix(".swift") }.map { directory + "/" + $0 }
        }
        // `APIError(.status, "code", ...)` and HistoryRejection's `return "code"`.
        let patterns = [#"APIError\(\s*\.?[A-Za-z]*\.?[A-Za-z]+,\s*"([a-z_]+)""#, #"return "([a-z]+_[a-z_]+)""#]
        var codes: Set<String> = []
        for file in files {
            let source = try String(contentsOfFile: file, encoding: .utf8)
            for pattern in patterns {
                let regex = try NSRegularExpression(pattern: pattern)
                for match in regex.matches(in: source, range: NSRange(source.startIndex..., in: source)) {
                    codes.insert(String(source[Range(match.range(at: 1), in: source)!]))
                }
            }
        }
        return codes
    }

    @Test func documentedErrorCodesAreExactlyTheServersOwn() throws {
        let documented = try Self.documentedErrorCodes()
        let produced = try Self.errorCodesInSource()
        #expect(produced.count > 15, "the source scan found too few codes: \(produced.sorted())")
        #expect(produced.subtracting(documented).isEmpty, "undocumented: \(produced.subtracting(documented).sorted())")
        #expect(documented.subtracting(produced).isEmpty, "documented but never produced: \(documented.subtracting(produced).sorted())")
    }

    @Test func everyDocumentedOperationIsRouted() async throws {
        let text = try String(contentsOfFile: Self.root + "/docs/openapi.yaml", encoding: .utf8)
        var operations: [(path: String, method: String)] = []
        var currentPath: String?
        var inPaths = false
        for line in text.components(separatedBy: "\n") {
            if line == "paths:" { inPaths = true; continue }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if let currentPath, let method = ["get", "head", "post"].first(where: { line == "    \($0):" }) {
                operations.append((currentPath, method))
            }
        }
        #expect(operations.count == 12, "\(operations)")

        // The long poll is routed only when configured.
        let fixture = try ServerFixture { $0.longPollSeconds = 1 }
        defer { fixture.remove() }
        try await fixture.appendIDs(Histories.entries(count: 3, endingAt: fixture.clock.now()))
        let yesterday = UTCDay(containing: fixture.clock.now()).number - 1
        let keys = try KeyHistoryRules(fixture.configuration).validate(
            SubmittedKeyHistory(keys: [SubmittedKey(day: yesterday, intervalSeconds: 900, key: String(repeating: "ab", count: 16))]),
            now: fixture.clock.now())
        _ = try await fixture.store.appendKeyHistory(keys, credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: fixture.clock.now())
        try await fixture.makePublisher().publish()
        let documented = operations
        // The witness's route is routed only on a server that witnesses a log.
        let witness = try WitnessHarness(witnessing: try NoteSigner.generate(name: "log.example/routes").verifierKey)
        defer { witness.remove() }
        try await fixture.withServer(witness: witness.witness) { client in
            for operation in documented {
                // The log holds two entries here (the id batch's and the key batch's): its level-0
                // tile is the partial 0/000.p/2.
                let path = operation.path
                    .replacingOccurrences(of: "{level}", with: "0").replacingOccurrences(of: "{tile}", with: "000")
                    .replacingOccurrences(of: "{width}", with: "2")
                let method = HTTPRequest.Method(rawValue: operation.method.uppercased())!
                let response = try await client.send(path, method)
                // Without credentials the API answers 401, the files and the long poll (a node
                // holding no list is behind at once) 200: never "no such route".
                // The witness answers an empty body as a malformed request.
                let expected: HTTPResponse.Status = path == "/v1/add-checkpoint" ? .badRequest
                    : path.hasPrefix("/v1/") && path != "/v1/generation" ? .unauthorized : .ok
                #expect(response.status == expected, "\(operation.method) \(operation.path)")
            }
        }
    }

    /// Without `longPollSeconds` the document says GET /v1/generation answers 404; the path is
    /// still known, so another method gets 405 with `Allow: GET`, as with the poll on.
    @Test func theLongPollTurnedOffAnswers404ToGetAnd405ToOtherMethods() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let get = try await client.send("/v1/generation?after=0&keys=0", .get)
            #expect(get.status == .notFound)
            #expect(String(buffer: get.body).contains(#""error":"not_found""#), "\(String(buffer: get.body))")
            let post = try await client.send("/v1/generation", .post)
            #expect(post.status == .methodNotAllowed)
            #expect(post.headers[.allow] == "GET")
        }
    }
}
