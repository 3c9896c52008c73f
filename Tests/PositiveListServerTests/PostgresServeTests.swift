import Foundation
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import PostgresServerStore
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Two real `tracer-server serve` processes on one PostgreSQL database and one data directory
/// (standing for a shared volume), as a scaled-out deployment runs them.
@Suite(.tags(.integration), .serialized) struct PostgresServeTests {
    @Test func twoServeProcessesOnOneDatabaseUseEachCodeOnceAndPublishEveryIdOnce() async throws {
        let fixture = try await PostgresFixture.make()
        defer { fixture.remove() }
        let server = fixture.server
        try server.writeConfiguration(extra: #", "publishIntervalSeconds": 3600, "database": {"url": "\#(fixture.url)", "poolSize": 3}"#)
        let ports = [try LoopbackPort.free(), try LoopbackPort.free()]
        let logs = [Pipe(), Pipe()]
        var processes: [Process] = []
        defer {
            for process in processes where process.isRunning {
                kill(process.processIdentifier, SIGTERM)
                process.waitUntilExit()
            }
        }
        for (port, log) in zip(ports, logs) {
            processes.append(try ServerCLI.start(["serve", "--bind", "127.0.0.1:\(port)"], fixture: server, stderr: log))
        }
        for (port, process) in zip(ports, processes) {
            try await LoopbackPort.waitUntilListening(port, timeout: .seconds(30), orExit: process)
        }

        // Codes issued by one instance, each then sent to both at the same moment with a
        // different history: exactly one of the two uploads may be stored.
        var codes: [String] = []
        for _ in 0..<10 {
            let response = try await Self.post(port: ports[codes.count % 2], "/v1/codes", header: "Authorization: Bearer \(ServerFixture.authorityToken)", body: "")
            try #require(response.status == 201, "\(response.text)")
            let object = try JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any]
            codes.append(try #require(object?["code"] as? String))
        }
        let now = SystemWallClock().now()
        struct Upload: Sendable { let code: Int; let instance: Int; let entries: [SubmittedEntry] }
        var uploads: [Upload] = []
        for code in codes.indices {
            for instance in 0..<2 {
                uploads.append(Upload(code: code, instance: instance, entries: Histories.entries(count: 20, endingAt: now - 900, seed: UInt64(100 * code + instance + 1))))
            }
        }
        let issued = codes
        let answers = try await withThrowingTaskGroup(of: (Upload, RawConnection.Response).self) { group in
            for upload in uploads {
                group.addTask {
                    let body = String(decoding: Histories.body(upload.entries).readableBytesView, as: UTF8.self)
                    return (upload, try await Self.post(port: ports[upload.instance], "/v1/histories", header: "Upload-Code: \(issued[upload.code])", body: body))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        var storedPerCode = [Int: Int]()
        var accepted = Set<UInt64>()
        for (upload, answer) in answers {
            if answer.status == 201 {
                storedPerCode[upload.code, default: 0] += 1
                accepted.formUnion(try upload.entries.map { try UserID(hex: $0.id).rawValue })
            } else {
                #expect(answer.status == 401 && answer.apiError == "used_code", "\(answer.text)")
            }
        }
        #expect(storedPerCode.count == codes.count && storedPerCode.values.allSatisfy { $0 == 1 }, "\(storedPerCode)")

        // One publication (the command, as a cron job or an operator would run it) publishes
        // what both instances accepted, each id once.
        // A serve instance may be publishing what an upload asked for at that moment: the command
        // then says so and publishes nothing, as designed; it is run again, as its message says.
        var publish = try ServerCLI.run(["publish"], fixture: server)
        for _ in 0..<20 where publish.exitCode != 0 && (publish.stdout + publish.stderr).contains("Another tracer-server instance is publishing") {
            try await Task.sleep(for: .milliseconds(500))
            publish = try ServerCLI.run(["publish"], fixture: server)
        }
        #expect(publish.exitCode == 0, "\(publish)")
        let published = try fixture.publishedIDs()
        #expect(published.count == accepted.count && Set(published) == accepted)
        // Both instances serve that log's checkpoint from the shared directory.
        for port in ports {
            let checkpoint = try await RawHTTP.exchange(port: port, sending: "GET /log/checkpoint HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            #expect(RawConnection.Response(text: checkpoint).status == 200)
        }
        let doctor = try ServerCLI.run(["doctor"], fixture: server)
        #expect(doctor.exitCode == 0 && doctor.stdout.contains("schema version \(PostgresServerStore.knownSchemaVersion) (current)"), "\(doctor)")
        #expect(!(doctor.stdout + doctor.stderr).contains("password"))
    }

    static func post(port: Int, _ path: String, header: String, body: String) async throws -> RawConnection.Response {
        let request = "POST \(path) HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\(header)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
        return RawConnection.Response(text: try await RawHTTP.exchange(port: port, sending: request, timeoutSeconds: 30))
    }
}
