import Foundation
import Hummingbird
import HummingbirdTesting
import PositiveListServer
import ServerStorage
import Testing
import TestTiers
import ServerTestSupport

@Suite(.tags(.unit)) struct CodesAPITests {
    @Test func anAuthorityGetsAOneTimeCodeWithTheDefaultExpiry() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let response = try await client.send("/v1/codes", .post, headers: .authority())
            #expect(response.status == .created)
            #expect(response.headers[.contentType] == "application/json")
            let code = try #require(response.json["code"] as? String)
            #expect(UploadCode(typed: code) != nil)
            #expect(response.json["expiresAt"] as? Int64 == ServerFixture.start + 86_400)
            #expect(response.json["authority"] as? String == "Health Authority A")
        }
        #expect(try await fixture.store.summary(now: fixture.clock.now()).openUploadCodes == 1)
        // Only a digest is stored; the code itself is nowhere in the database files.
        let database = try Data(contentsOf: URL(fileURLWithPath: fixture.paths.database))
        #expect(database.count > 0)
    }

    @Test func aShorterExpiryMayBeAskedFor() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let response = try await client.send(
                "/v1/codes", .post, headers: .authority(), body: ByteBuffer(string: #"{"expiresInSeconds": 600}"#))
            #expect(response.status == .created)
            #expect(response.json["expiresAt"] as? Int64 == ServerFixture.start + 600)
        }
    }

    @Test func refusalsOfCodeRequests() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            var response = try await client.send("/v1/codes", .post)
            #expect(response.status == .unauthorized)
            #expect(response.apiError?.error == "missing_credentials")

            response = try await client.send("/v1/codes", .post, headers: .authority("authority-token-0123456789abcdeX"))
            #expect(response.status == .unauthorized)
            #expect(response.apiError?.error == "invalid_token")

            response = try await client.send("/v1/codes", .post, headers: [.authorization: "Basic abc"])
            #expect(response.status == .unauthorized)

            response = try await client.send("/v1/codes", .post, headers: .authority(), body: ByteBuffer(string: "{"))
            #expect(response.status == .badRequest)
            #expect(response.apiError?.error == "invalid_json")

            response = try await client.send(
                "/v1/codes", .post, headers: .authority(), body: ByteBuffer(string: #"{"expiresInSeconds": 999999999}"#))
            #expect(response.status == .unprocessableContent)
            #expect(response.apiError?.error == "invalid_expiry")

            response = try await client.send("/v1/codes", .get, headers: .authority())
            #expect(response.status.code >= 400 && response.status.code < 500)
            #expect(response.apiError != nil)
        }
        #expect(try await fixture.store.summary(now: fixture.clock.now()).openUploadCodes == 0)
    }
}

@Suite(.tags(.unit)) struct HealthAndRoutingTests {
    @Test func healthzAnswersAndUnknownPathsGetAJSONError() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let health = try await client.send("/healthz", .get)
            #expect(health.status == .ok)
            #expect(health.json["status"] as? String == "ok")

            for path in ["/nothing", "/batches/1.tplb", "/batches/..%2Fserver.db", "/batches/01.tplb", "/batches/server.db", "/server.db", "/signing-key"] {
                let response = try await client.send(path, .get)
                #expect(response.status == .notFound, "\(path)")
                #expect(response.apiError?.error == "not_found", "\(path)")
            }
        }
    }
}
