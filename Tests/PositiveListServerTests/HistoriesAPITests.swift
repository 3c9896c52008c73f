import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IDRotation
import PositiveListFormat
import PositiveListServer
import ServerStorage
import Testing
import TestTiers
import ServerTestSupport
import TracerTestSupport

@Suite(.tags(.unit)) struct HistoriesAPITests {
    static let now = ServerFixture.start

    func issueCode(_ client: any TestClientProtocol) async throws -> String {
        let response = try await client.send("/v1/codes", .post, headers: .authority())
        return try #require(response.json["code"] as? String)
    }

    @Test func anAuthorityAppendsAHistoryAndDuplicatesAreStoredOnce() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let entries = Histories.entries(count: 2_688, endingAt: Self.now)
        try await fixture.withServer { client in
            let first = try await client.send("/v1/histories", .post, headers: .authority(), body: Histories.body(entries))
            #expect(first.status == .created)
            #expect(first.json["received"] as? Int == 2_688)
            #expect(first.json["stored"] as? Int == 2_688)

            // Overlapping history: 100 ids already known, 10 new, one repeated in the request.
            let overlapping = Array(entries.prefix(100)) + Histories.entries(count: 10, endingAt: Self.now, seed: 99) + [entries[0]]
            let second = try await client.send("/v1/histories", .post, headers: .authority(ServerFixture.otherAuthorityToken), body: Histories.body(overlapping))
            #expect(second.status == .created)
            #expect(second.json["received"] as? Int == 111)
            #expect(second.json["stored"] as? Int == 10)
        }
        let summary = try await fixture.store.summary(now: Self.now)
        #expect(summary.storedIDs == 2_698)
        #expect(summary.submissions == 2)
    }

    @Test func anUploadCodeWorksOnceAndOnlyWhenTheUploadSucceeds() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let code = try await issueCode(client)
            // A refused upload leaves the code usable.
            let bad = try await client.send("/v1/histories", .post, headers: .uploadCode(code), body: Histories.body([]))
            #expect(bad.status == .unprocessableContent)
            #expect(bad.apiError?.error == "empty_history")

            let good = try await client.send(
                "/v1/histories", .post, headers: .uploadCode(code), body: Histories.body(Histories.entries(count: 5, endingAt: Self.now)))
            #expect(good.status == .created)

            let again = try await client.send(
                "/v1/histories", .post, headers: .uploadCode(code), body: Histories.body(Histories.entries(count: 5, endingAt: Self.now, seed: 2)))
            #expect(again.status == .unauthorized)
            #expect(again.apiError?.error == "used_code")
        }
        #expect(try await fixture.store.summary(now: Self.now).storedIDs == 5)
    }

    @Test func anExpiredCodeIsRefused() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let code = try await issueCode(client)
            fixture.clock.advance(by: 86_400)
            let response = try await client.send(
                "/v1/histories", .post, headers: .uploadCode(code),
                body: Histories.body(Histories.entries(count: 5, endingAt: Self.now + 86_400)))
            #expect(response.status == .unauthorized)
            #expect(response.apiError?.error == "expired_code")
        }
        #expect(try await fixture.store.summary(now: Self.now).storedIDs == 0)
    }

    @Test func unknownAndMalformedCodesAreRefused() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let body = Histories.body(Histories.entries(count: 1, endingAt: Self.now))
            var response = try await client.send("/v1/histories", .post, headers: .uploadCode("ABCD-EFGH-JKMN"), body: body)
            #expect(response.status == .unauthorized)
            #expect(response.apiError?.error == "invalid_code")
            response = try await client.send("/v1/histories", .post, headers: .uploadCode("0000"), body: body)
            #expect(response.status == .unauthorized)
            #expect(response.apiError?.error == "invalid_code")
            response = try await client.send("/v1/histories", .post, headers: [.contentType: "application/json"], body: body)
            #expect(response.status == .unauthorized)
            #expect(response.apiError?.error == "missing_credentials")
            response = try await client.send(
                "/v1/histories", .post, headers: HTTPFields.authority().adding("Upload-Code", "ABCD-EFGH-JKMN"), body: body)
            #expect(response.status == .badRequest)
            #expect(response.apiError?.error == "conflicting_credentials")
        }
    }

    @Test func failedCodeAttemptsAreLimitedPerClientAndNeverLogged() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let body = Histories.body(Histories.entries(count: 1, endingAt: Self.now))
        try await fixture.withServer { client in
            let valid = try await issueCode(client)
            var guesses: [String] = []
            for _ in 0..<10 {
                let guess = UploadCode.generate().display
                guesses.append(guess)
                let response = try await client.send("/v1/histories", .post, headers: .uploadCode(guess), body: body)
                #expect(response.status == .unauthorized)
            }
            // The 11th attempt in the minute is refused before the code is even looked at.
            let limited = try await client.send("/v1/histories", .post, headers: .uploadCode(valid), body: body)
            #expect(limited.status == .tooManyRequests)
            #expect(limited.apiError?.error == "too_many_attempts")
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 > 0)

            fixture.clock.advance(by: 61)
            let later = try await client.send("/v1/histories", .post, headers: .uploadCode(valid), body: body)
            #expect(later.status == .created)

            let logs = fixture.logs.all.joined(separator: "\n")
            #expect(logs.contains("credential refused"))
            for code in guesses + [valid] {
                #expect(!logs.contains(code))
                #expect(!logs.contains(try #require(UploadCode(typed: code)).canonical))
            }
            #expect(!logs.contains(ServerFixture.authorityToken))
            #expect(!logs.contains(Histories.entries(count: 1, endingAt: Self.now)[0].id))
        }
    }

    @Test func wrongAuthorityTokensCountTowardsTheLimitToo() async throws {
        let fixture = try ServerFixture { $0.failedAttemptsPerMinute = 3 }
        defer { fixture.remove() }
        try await fixture.withServer { client in
            for _ in 0..<3 {
                let response = try await client.send("/v1/codes", .post, headers: .authority("wrong-token-0000000000000000000"))
                #expect(response.status == .unauthorized)
            }
            let response = try await client.send("/v1/codes", .post, headers: .authority())
            #expect(response.status == .tooManyRequests)
        }
    }

    @Test(arguments: [
        ("empty_history", 0),
        ("too_many_ids", 1),
        ("invalid_id", 2),
        ("invalid_id", 3),
        ("invalid_window", 4),
        ("invalid_window", 5),
        ("window_too_long", 6),
        ("window_too_old", 7),
        ("window_in_future", 8),
    ])
    func invalidHistoriesAreRefusedWithTheirReasonAndNothingStored(expected: String, variant: Int) async throws {
        let fixture = try ServerFixture { $0.maxIDsPerHistory = 50 }
        defer { fixture.remove() }
        var entries = Histories.entries(count: 10, endingAt: Self.now)
        switch variant {
        case 0: entries = []
        case 1: entries = Histories.entries(count: 51, endingAt: Self.now)
        case 2: entries[3].id = "0123456789abcdeg"
        case 3: entries[3].id = "0123456789abcdef00"
        case 4: entries[3].validUntil = entries[3].validFrom
        case 5: entries[3].validFrom = -900; entries[3].validUntil = 0
        case 6: entries[3].validFrom = entries[3].validUntil - 7_200
        case 7: entries[9].validUntil = Self.now - 28 * 86_400; entries[9].validFrom = entries[9].validUntil - 900
        default: entries[0].validFrom = Self.now + 301; entries[0].validUntil = Self.now + 1_201
        }
        let body = Histories.body(entries)
        try await fixture.withServer { client in
            let response = try await client.send("/v1/histories", .post, headers: .authority(), body: body)
            #expect(response.status == .unprocessableContent)
            #expect(response.apiError?.error == expected)
            if variant >= 2 {
                // The detail names the entry, never its id.
                #expect(response.apiError?.detail.contains("ids[") == true)
            }
        }
        let summary = try await fixture.store.summary(now: Self.now)
        #expect(summary.storedIDs == 0)
        #expect(summary.submissions == 0)
    }

    @Test func idsWithinClockSkewAndStillValidAreAccepted() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let current = SubmittedEntry(id: "00000000000000ff", validFrom: Self.now - 100, validUntil: Self.now + 800)
        let early = SubmittedEntry(id: "00000000000000fe", validFrom: Self.now + 200, validUntil: Self.now + 1_100)
        let oldest = SubmittedEntry(id: "00000000000000fd", validFrom: Self.now - 28 * 86_400, validUntil: Self.now - 28 * 86_400 + 900)
        try await fixture.withServer { client in
            let response = try await client.send("/v1/histories", .post, headers: .authority(), body: Histories.body([current, early, oldest]))
            #expect(response.status == .created)
        }
    }

    @Test func malformedBodiesAreRefused() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            for text in ["", "{", "[]", #"{"ids": "x"}"#, #"{"ids": [{"id": "0123456789abcdef"}]}"#, #"{"ids": [{"id": 5, "validFrom": 1, "validUntil": 2}]}"#] {
                let response = try await client.send("/v1/histories", .post, headers: .authority(), body: ByteBuffer(string: text))
                #expect(response.status == .badRequest, "\(text)")
                #expect(response.apiError?.error == "invalid_json", "\(text)")
            }
            let wrongType = try await client.send(
                "/v1/histories", .post, headers: [.authorization: "Bearer " + ServerFixture.authorityToken, .contentType: "text/plain"],
                body: Histories.body(Histories.entries(count: 1, endingAt: Self.now)))
            #expect(wrongType.status == .unsupportedMediaType)
            #expect(wrongType.apiError?.error == "unsupported_media_type")
            let badKey = try await client.send(
                "/v1/histories", .post, headers: HTTPFields.authority().adding("Idempotency-Key", String(repeating: "k", count: 201)),
                body: Histories.body(Histories.entries(count: 1, endingAt: Self.now)))
            #expect(badKey.status == .badRequest)
            #expect(badKey.apiError?.error == "invalid_idempotency_key")
        }
        #expect(try await fixture.store.summary(now: Self.now).storedIDs == 0)
    }

    @Test func bodiesOverTheLimitAreRefusedWith413() async throws {
        let fixture = try ServerFixture { $0.maxRequestBodyBytes = 4_096 }
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let body = Histories.body(Histories.entries(count: 200, endingAt: Self.now))
            #expect(body.readableBytes > 4_096)
            let response = try await client.send("/v1/histories", .post, headers: .authority(), body: body)
            #expect(response.status == .contentTooLarge)
            #expect(response.apiError?.error == "body_too_large")
            // A declared length over the limit is refused from the header: the answer comes
            // although the client never sends the 100 MB it announced.
            let head = """
                POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(ServerFixture.authorityToken)\r\n\
                Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{"ids": [
                """
            let answer = try await RawHTTP.exchange(port: try #require(client.port), sending: head)
            #expect(answer.hasPrefix("HTTP/1.1 413"), "\(answer)")
            #expect(answer.contains("body_too_large"))
        }
        #expect(try await fixture.store.summary(now: Self.now).storedIDs == 0)
    }

    @Test func repeatingARequestWithTheSameIdempotencyKeyStoresItOnce() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let body = Histories.body(Histories.entries(count: 20, endingAt: Self.now))
        try await fixture.withServer { client in
            let headers = HTTPFields.authority().adding("Idempotency-Key", "3c1c6f0e-upload-1")
            let first = try await client.send("/v1/histories", .post, headers: headers, body: body)
            #expect(first.status == .created)
            let repeated = try await client.send("/v1/histories", .post, headers: headers, body: body)
            #expect(repeated.status == .ok)
            #expect(repeated.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(repeated.json["submission"] as? Int == first.json["submission"] as? Int)
            #expect(repeated.json["stored"] as? Int == 20)

            let different = try await client.send(
                "/v1/histories", .post, headers: headers, body: Histories.body(Histories.entries(count: 3, endingAt: Self.now, seed: 5)))
            #expect(different.status == .unprocessableContent)
            #expect(different.apiError?.error == "idempotency_key_reused")

            // Keys are per credential: another authority may use the same key.
            let other = try await client.send(
                "/v1/histories", .post, headers: HTTPFields.authority(ServerFixture.otherAuthorityToken).adding("Idempotency-Key", "3c1c6f0e-upload-1"),
                body: Histories.body(Histories.entries(count: 3, endingAt: Self.now, seed: 6)))
            #expect(other.status == .created)
        }
        let summary = try await fixture.store.summary(now: Self.now)
        #expect(summary.submissions == 2)
        #expect(summary.storedIDs == 23)
    }

    @Test func aNodeRetryingAnUploadWithItsCodeGetsTheSameAnswer() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let body = Histories.body(Histories.entries(count: 20, endingAt: Self.now))
        try await fixture.withServer { client in
            let code = try await issueCode(client)
            let headers = HTTPFields.uploadCode(code).adding("Idempotency-Key", "node-retry-1")
            let first = try await client.send("/v1/histories", .post, headers: headers, body: body)
            #expect(first.status == .created)
            // The response was lost; the node sends the same request again.
            let retry = try await client.send("/v1/histories", .post, headers: headers, body: body)
            #expect(retry.status == .ok)
            #expect(retry.json["submission"] as? Int == first.json["submission"] as? Int)
            // But the used code cannot carry a new history, key or not.
            let other = try await client.send(
                "/v1/histories", .post, headers: HTTPFields.uploadCode(code).adding("Idempotency-Key", "node-retry-2"), body: body)
            #expect(other.status == .unauthorized)
            #expect(other.apiError?.error == "used_code")
        }
        #expect(try await fixture.store.summary(now: Self.now).submissions == 1)
    }
}
