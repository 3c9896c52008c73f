import CurlHTTP
import Foundation
import Matching
import Testing
import TestTiers
import TracerTestSupport

struct FixtureFailure: Error, CustomStringConvertible {
    var description: String
}

/// Tests/Support/http_fixture.py for one test, with URLs that carry the test's token so that
/// concurrent tests' counts stay apart.
final class HTTPFixture {
    private let server: HTTPFixtureServer

    init(tls: SelfSignedCertificate? = nil) throws {
        server = try HTTPFixtureServer(certificatePath: tls?.certificatePath, keyPath: tls?.keyPath)
    }

    var port: Int { server.port }
    var scheme: String { server.scheme }

    func url(_ path: String, token: String) -> String { server.url("\(path)?t=\(token)") }

    /// How many requests the fixture saw for `token`.
    func requestCount(token: String, client: CurlHTTPClient = CurlHTTPClient()) async throws -> Int {
        let response = try await client.perform(HTTPRequest(url: url("/count", token: token)))
        guard let count = Int(String(decoding: response.body, as: UTF8.self)) else {
            throw FixtureFailure(description: "unexpected /count answer \(response.status)")
        }
        return count
    }
}

/// A key and self-signed certificate for 127.0.0.1, made with the openssl CLI.
struct SelfSignedCertificate {
    let directory: String
    var certificatePath: String { directory + "/cert.pem" }
    var keyPath: String { directory + "/key.pem" }
    /// The certificate's key as CURLOPT_PINNEDPUBLICKEY wants it.
    let pin: String

    init(in directory: String) throws {
        self.directory = directory
        try RequiredTool.openssl.require()
        try Self.shell("""
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
              -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout key.pem -out cert.pem
            """, in: directory)
        let pin = try Self.shell(
            "openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
            in: directory)
        self.pin = "sha256//" + pin.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @discardableResult
    private static func shell(_ command: String, in directory: String) throws -> String {
        let result = try ProcessResult.run("/bin/sh", ["-c", command], in: directory)
        guard result.exitCode == 0 else {
            throw FixtureFailure(description: "`\(command)` failed with status \(result.exitCode)")
        }
        return result.stdout
    }
}

/// A directory for one test's files, removed with `defer { scratch.remove() }`.
struct ScratchDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "/tracer-http-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// A token unique to one test, so the fixture's request counts are the test's own.
func uniqueToken() -> String { UUID().uuidString }

/// The fixture's /bytes/N body.
func fixtureBytes(_ count: Int) -> [UInt8] { (0..<count).map { UInt8($0 % 251) } }

/// A client with short retry delays, so tests of retries take milliseconds.
func quickClient(maxAttempts: Int = 3, configure: (inout HTTPClientConfiguration) -> Void = { _ in }) -> CurlHTTPClient {
    var configuration = HTTPClientConfiguration(
        connectTimeout: .seconds(2), baseTimeout: .seconds(10),
        retry: RetryPolicy(maxAttempts: maxAttempts, initialDelay: .milliseconds(10), maxDelay: .milliseconds(40)))
    configure(&configuration)
    return CurlHTTPClient(configuration: configuration)
}
