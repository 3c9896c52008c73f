import CurlHTTP
import Foundation
import IDRotation
import PositiveListFormat
import Testing
import TestTiers
@testable import Matching
import TracerCore
import TransparencyLog

extension MatchingTests {
    /// `tracer report`'s key half: what the server accepts (read from its signed log/uploads), the
    /// choice that follows from it, and uploading daily keys with the same credentials and
    /// idempotency as ids.
    @Suite(.tags(.unit)) struct KeyReportTests {
        typealias ScriptedServer = HistoryReporterTests.ScriptedServer
        typealias FixedClock = HistoryReporterTests.FixedClock

        /// 2026-11-22 00:00:00 UTC, the start of day 20,779.
        let now: UnixSeconds = 1_795_305_600 + 12 * 3_600
        var today: UTCDay { UTCDay(containing: now) }

        func store(in directory: TemporaryDirectory) throws -> NodeStore {
            try NodeStore.open(StoreLocation(path: directory.path + "/node.db", source: .flag, ownsDirectory: false))
        }

        func day(_ offset: Int64) -> UTCDay { UTCDay(number: today.number + offset) }

        @discardableResult
        func recordKey(_ store: NodeStore, day: UTCDay, interval: Int64 = 900) throws -> DailyKey {
            try store.dailyKey(for: day, intervalSeconds: interval, recordingIfAbsent: DailyKey.random())
        }

        func header(_ name: String, of request: HTTPRequest) -> String? {
            request.headers.first { $0.name == name }?.value
        }

        func body(of request: HTTPRequest) throws -> [[String: Any]] {
            let object = try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]
            return try #require(object?["keys"] as? [[String: Any]], "not a key history: \(String(decoding: request.body, as: UTF8.self))")
        }

        // MARK: What the server accepts

        func uploadPolicy(accepting kinds: AcceptedUploads, signer: BatchSigner, origin: String? = nil) throws -> [UInt8] {
            let origin = origin ?? signer.publicKey.defaultLogOrigin
            return Array(try UploadPolicyNote(origin: origin, accepts: kinds).signed(by: NoteSigner(name: origin, privateKey: signer.key)).encoded)
        }

        @Test(arguments: [AcceptedUploads.ids, .keys, .both])
        func theSignedUploadPolicySaysWhatTheServerAccepts(_ kinds: AcceptedUploads) async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let signer = BatchSigner()
            let server = ListFreshnessTests.StaticServer()
            server.publish(UploadPolicyNote.relativePath, try uploadPolicy(accepting: kinds, signer: signer))
            let reporter = HistoryReporter(serverURL: "http://list.test/", store: try store(in: directory), http: server, clock: FixedClock(time: now))
            #expect(try await reporter.acceptance(publicKey: signer.publicKey) == UploadAcceptance(kinds: kinds, source: .signedUploadPolicy))
        }

        @Test func theUploadPolicyOfAConfiguredOriginIsRead() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let signer = BatchSigner()
            let server = ListFreshnessTests.StaticServer()
            server.publish(UploadPolicyNote.relativePath, try uploadPolicy(accepting: .ids, signer: signer, origin: "health.example/list"))
            let reporter = HistoryReporter(serverURL: "http://list.test", store: try store(in: directory), http: server, clock: FixedClock(time: now))
            #expect(try await reporter.acceptance(publicKey: signer.publicKey, logOrigin: "health.example/list")
                == UploadAcceptance(kinds: .ids, source: .signedUploadPolicy))
            // The same note is another log's for a node that expects the key's default origin: its
            // signature is under another name, so it is no signature by the log this node follows.
            let error = await #expect(throws: ReportError.self) { try await reporter.acceptance(publicKey: signer.publicKey) }
            guard case .acceptanceNotVerified(let url, let detail) = error else {
                Issue.record("expected acceptanceNotVerified, got \(String(describing: error))")
                return
            }
            #expect(url == "http://list.test/log/uploads")
            #expect(detail.contains("not signed by the list's key"), "\(detail)")
        }

        @Test func anUploadPolicyThatDoesNotVerifyIsRefused() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let signer = BatchSigner()
            let server = ListFreshnessTests.StaticServer()
            let reporter = HistoryReporter(serverURL: "http://list.test", store: try store(in: directory), http: server, clock: FixedClock(time: now))
            var altered = try uploadPolicy(accepting: .ids, signer: signer)
            // "accept ids" -> "accept keys" is another length; flip the signed kind instead: ids -> idz.
            let text = String(decoding: altered, as: UTF8.self).replacingOccurrences(of: "accept ids", with: "accept idz")
            altered = Array(text.utf8)
            for policy in [try uploadPolicy(accepting: .keys, signer: BatchSigner()), altered] {
                server.publish(UploadPolicyNote.relativePath, policy)
                let error = await #expect(throws: ReportError.self) { try await reporter.acceptance(publicKey: signer.publicKey) }
                guard case .acceptanceNotVerified = error else {
                    Issue.record("expected acceptanceNotVerified, got \(String(describing: error))")
                    continue
                }
                #expect(error?.description.contains("server.public_key") == true)
            }
        }

        /// A server without `log/uploads` is older than the list log: said plainly, with what to do,
        /// and nothing else is asked of it (the retired key index is not a fallback any more), even
        /// when it still serves a key index.
        @Test func aServerWithoutAnUploadPolicyIsTooOldAndSaysWhatToDo() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let signer = BatchSigner()
            // 404 for log/uploads; a second request (the old fallback) would find an answer.
            let server = ScriptedServer([.status(404, ""), .status(200, "")])
            let reporter = HistoryReporter(serverURL: "http://list.test/", store: try store(in: directory), http: server, clock: FixedClock(time: now))
            let error = await #expect(throws: ReportError.self) { try await reporter.acceptance(publicKey: signer.publicKey) }
            #expect(error == .serverTooOld(url: "http://list.test/log/uploads"), "\(String(describing: error))")
            let text = error?.description ?? ""
            #expect(text.contains("http://list.test/log/uploads") && text.contains("HTTP 404"), "\(text)")
            #expect(text.contains("upgrade the server") && text.contains("server.url") && text.contains("Nothing was uploaded"), "\(text)")
            #expect(server.requests.map(\.url) == ["http://list.test/log/uploads"], "\(server.requests.map(\.url))")
        }

        @Test func withoutAPublicKeyNothingIsReadAndTheServerDecides() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let server = ScriptedServer([])
            let reporter = HistoryReporter(serverURL: "http://list.test", store: try store(in: directory), http: server, clock: FixedClock(time: now))
            #expect(try await reporter.acceptance(publicKey: nil) == UploadAcceptance(kinds: .both, source: .unknown))
            #expect(server.requests.isEmpty)
        }

        @Test func anUnreachableServerIsNotAnUploadThatMayHaveArrived() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let reporter = HistoryReporter(
                serverURL: "http://list.test", store: try store(in: directory), http: ScriptedServer([.lostConnection]), clock: FixedClock(time: now))
            let error = await #expect(throws: ReportError.self) { try await reporter.acceptance(publicKey: BatchSigner().publicKey) }
            guard case .serverUnreachable = error else {
                Issue.record("expected serverUnreachable, got \(String(describing: error))")
                return
            }
            #expect(error?.description.contains("Nothing was uploaded") == true)
        }

        // MARK: The choice

        @Test func keysAreNeverChosenWithoutTheUser() throws {
            let keysOnly = UploadAcceptance(kinds: .keys, source: .signedUploadPolicy)
            let idsOnly = UploadAcceptance(kinds: .ids, source: .signedUploadPolicy)
            let both = UploadAcceptance(kinds: .both, source: .signedUploadPolicy)
            let unknown = UploadAcceptance(kinds: .both, source: .unknown)

            // --yes alone: ids where the server takes them, else a refusal naming --keys.
            #expect(try both.decide(requested: nil, canAsk: false) == .upload(.ids))
            #expect(try unknown.decide(requested: nil, canAsk: false) == .upload(.ids))
            #expect(try idsOnly.decide(requested: nil, canAsk: false) == .upload(.ids))
            #expect(throws: ReportError.keysNeedExplicitChoice) { try keysOnly.decide(requested: nil, canAsk: false) }
            #expect(ReportError.keysNeedExplicitChoice.description.contains("--keys"))

            // At a terminal: asked when both are possible; the only kind otherwise (the typed
            // confirmation names it).
            #expect(try both.decide(requested: nil, canAsk: true) == .ask)
            #expect(try unknown.decide(requested: nil, canAsk: true) == .ask)
            #expect(try keysOnly.decide(requested: nil, canAsk: true) == .upload(.keys))
            #expect(try idsOnly.decide(requested: nil, canAsk: true) == .upload(.ids))

            // A flag is the user's choice, refused when the server does not take that kind.
            #expect(try both.decide(requested: .keys, canAsk: false) == .upload(.keys))
            #expect(try keysOnly.decide(requested: .keys, canAsk: false) == .upload(.keys))
            #expect(try unknown.decide(requested: .keys, canAsk: false) == .upload(.keys))
            #expect(throws: ReportError.kindNotAccepted(.keys)) { try idsOnly.decide(requested: .keys, canAsk: true) }
            #expect(throws: ReportError.kindNotAccepted(.ids)) { try keysOnly.decide(requested: .ids, canAsk: true) }
            #expect(ReportError.kindNotAccepted(.keys).description.contains("--ids"))
            #expect(ReportError.kindNotAccepted(.ids).description.contains("--keys"))
        }

        // MARK: Uploading keys

        @Test func theKeysOfThePeriodAreUploadedTodaysIncluded() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let store = try store(in: directory)
            try recordKey(store, day: day(-29))  // ended before the 28-day cutoff
            let old = try recordKey(store, day: day(-27))
            let yesterday = try recordKey(store, day: day(-1))
            let todays = try recordKey(store, day: day(0))
            let server = ScriptedServer([.status(201, #"{"submission":3,"received":3,"stored":3}"#)])
            let reporter = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now))

            let upload = try reporter.pendingKeyUpload()
            #expect(upload.keys.map(\.key) == [old, yesterday, todays])
            #expect(upload.days == [day(-27).date, day(-1).date, today.date])
            let receipt = try await reporter.upload(upload, code: "CODE-K")
            #expect(receipt.keys == 3)
            #expect(receipt.kind == .keys)
            #expect(receipt.stored == 3)
            #expect(receipt.firstValidFrom == day(-27).start)
            #expect(receipt.lastValidUntil == today.end)

            let request = try #require(server.requests.first)
            #expect(request.method == .post)
            #expect(request.url == "http://list.example/v1/key-histories")
            #expect(header("Upload-Code", of: request) == "CODE-K")
            #expect(header("Content-Type", of: request) == "application/json")
            let sent = try body(of: request)
            #expect(sent.map { $0["key"] as? String } == [old.hex, yesterday.hex, todays.hex])
            #expect(sent.map { ($0["day"] as? NSNumber)?.int64Value } == [day(-27).number, day(-1).number, today.number])
            #expect(sent.allSatisfy { ($0["intervalSeconds"] as? NSNumber)?.int64Value == 900 })
            #expect(HistoryReporter.receipts(in: store).map(\.keys) == [3])
        }

        @Test func aStoreWithoutKeysHasNothingToUploadAsKeys() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let store = try store(in: directory)
            // Ids from before daily keys: reportable as ids only.
            try store.recordOwnID(OwnID(id: UserID(rawValue: 0xC1), window: IDWindow(start: now - 900, end: now)))
            let server = ScriptedServer([])
            let reporter = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now))
            let upload = try reporter.pendingKeyUpload()
            #expect(upload.keys.isEmpty)
            await #expect(throws: ReportError.noKeysToReport) { try await reporter.upload(upload, code: "CODE") }
            #expect(server.requests.isEmpty)
            #expect(ReportError.noKeysToReport.description.contains("--ids"))
        }

        @Test func aRepeatedKeyUploadIsTheSameRequestAfterMidnightToo() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let store = try store(in: directory)
            try recordKey(store, day: day(-1))
            try recordKey(store, day: day(0))
            let server = ScriptedServer([.lostConnection, .status(200, #"{"submission":4,"received":2,"stored":2}"#)])
            let first = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now))
            await #expect(throws: ReportError.self) { try await first.upload(try first.pendingKeyUpload(), code: "CODE-R") }

            // A new day, a new key: the repeat must still be the request the server may have stored.
            try recordKey(store, day: day(1))
            let later = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: day(1).start + 60))
            let repeated = try later.pendingKeyUpload()
            #expect(repeated.keys.count == 2)
            _ = try await later.upload(repeated, code: "CODE-R")

            let requests = server.requests
            #expect(requests.count == 2)
            #expect(requests[0].body == requests[1].body)
            #expect(header("Idempotency-Key", of: requests[0]) != nil)
            #expect(header("Idempotency-Key", of: requests[0]) == header("Idempotency-Key", of: requests[1]))
            // Confirmed: the next key upload is built afresh, with the new day's key.
            #expect(try later.pendingKeyUpload().keys.count == 3)
        }

        @Test func aPendingKeyUploadIsNotRepeatedAsIDs() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let store = try store(in: directory)
            try recordKey(store, day: day(0))
            try store.recordOwnID(OwnID(id: UserID(rawValue: 0xD1), window: IDWindow(start: now - 900, end: now)))
            let server = ScriptedServer([.lostConnection, .status(201, #"{"submission":5,"received":1,"stored":1}"#)])
            let reporter = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now))
            await #expect(throws: ReportError.self) { try await reporter.upload(try reporter.pendingKeyUpload(), code: "CODE-S") }

            let ids = try reporter.pendingUpload()
            #expect(ids.ids.map(\.id.rawValue) == [0xD1])
            _ = try await reporter.upload(ids, code: "CODE-S")
            let requests = server.requests
            #expect(requests[1].url == "http://list.example/v1/histories")
            #expect(header("Idempotency-Key", of: requests[0]) != header("Idempotency-Key", of: requests[1]), "another body is another request")
        }

        @Test func aServerRefusingKeysIsSaidSoAndLeavesNothingPending() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            let store = try store(in: directory)
            try recordKey(store, day: day(0))
            let refusal = #"{"error":"upload_kind_not_accepted","detail":"This server does not accept daily keys."}"#
            let server = ScriptedServer([.status(403, refusal), .status(201, #"{"submission":6,"received":1,"stored":1}"#)])
            let reporter = HistoryReporter(serverURL: "http://list.example", store: store, http: server, clock: FixedClock(time: now))
            await #expect(throws: ReportError.kindNotAccepted(.keys)) { try await reporter.upload(try reporter.pendingKeyUpload(), code: "CODE-T") }
            _ = try await reporter.upload(try reporter.pendingKeyUpload(), code: "CODE-U")
            let keys = server.requests.map { header("Idempotency-Key", of: $0) }
            #expect(keys[0] != keys[1], "a refused request is not repeated")
        }
    }
}
