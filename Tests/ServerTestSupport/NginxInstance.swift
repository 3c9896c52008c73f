import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import PositiveListFormat
import PositiveListServer
import Testing
import TestTiers
import TracerCore
import TracerTestSupport

/// nginx from Debian's package (TracerTestSupport's NginxProcess), started by the test over a
/// scratch copy of deploy/nginx/tracer-server.conf, with its pid file, logs and temporary files in
/// a scratch directory that `stop()` removes. Missing nginx fails the test: CI installs it through
/// scripts/setup.
package final class NginxInstance {
    private let nginx: NginxProcess

    package var port: Int { nginx.port }

    package init(publishedDirectory: String, upstreamPort: Int) async throws {
        let prefix = NSTemporaryDirectory() + "/tracer-nginx-" + UUID().uuidString
        do {
            nginx = try await NginxProcess(
                prefix: prefix, publishedDirectory: publishedDirectory, upstreamPort: upstreamPort,
                repositoryRoot: Self.repositoryRoot, workerProcesses: "1", captureErrors: true)
        } catch {
            try? FileManager.default.removeItem(atPath: prefix)
            throw error
        }
    }

    package func stop() {
        nginx.stop()
        try? FileManager.default.removeItem(atPath: nginx.prefix)
    }

    package static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.pathComponents.count > 1 {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.path + "/Package.swift") { return url.path }
        }
        return FileManager.default.currentDirectoryPath
    }()

    package func get(_ path: String, headers: HTTPFields = [:]) async throws -> TestClient.Response {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            try await client.execute(TestClient.Request(path, method: .get, authority: "127.0.0.1", headers: headers))
        }
    }

    package func send(_ request: TestClient.Request) async throws -> TestClient.Response {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in try await client.execute(request) }
    }
}
