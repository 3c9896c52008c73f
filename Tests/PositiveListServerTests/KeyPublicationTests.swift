import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import ServerStorage
@testable import SQLiteServerStore
import Testing
import TestTiers
import TracerCore
import TransparencyLog
import ServerTestSupport

/// Key histories from upload to the published key batches: the publication delay, the order
/// and padding of published keys, idempotency, refusals, the accepted-uploads setting, expiry.
@Suite(.tags(.unit)) struct KeyPublicationTests {
    /// 2027-01-15 08:00 UTC.
    static let now = ServerFixture.start
    static let today = UTCDay(containing: now)

    static func key(_ byte: UInt8) -> DailyKey { try! DailyKey(bytes: [byte] + Array(repeating: 0x11, count: 15)) }

    static func record(_ day: UTCDay, _ key: DailyKey, interval: Int64 = 900) -> DailyKeyRecord {
        DailyKeyRecord(day: day, intervalSeconds: interval, key: key)
    }

    static func body(_ records: [DailyKeyRecord]) -> ByteBuffer {
        let history = SubmittedKeyHistory(keys: records.map {
            SubmittedKey(day: $0.day.number, intervalSeconds: $0.intervalSeconds, key: $0.key.hex)
        })
        return ByteBuffer(bytes: Histories.stableJSON(history))
    }

    func append(_ fixture: ServerFixture, _ records: [DailyKeyRecord]) async throws -> SubmissionOutcome {
        try await fixture.store.appendKeyHistory(
            records, credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: fixture.clock.now())
    }

    /// `log/uploads` as a node reads it: signed by the log's key under the default origin.
    func verifiedUploadPolicy(_ fixture: ServerFixture) throws -> UploadPolicyNote {
        let bytes = try #require(FileManager.default.contents(atPath: fixture.paths.published.uploadPolicyPath), "log/uploads is missing")
        let identity = try ListLogIdentity(origin: nil, publicKey: fixture.signingKey.publicKey)
        return try UploadPolicyNote.open(bytes, origin: identity.origin, logKey: identity.verifierKey)
    }

    /// The key batches the published log holds, in number order, as a node reads them.
    func verifiedKeyBatches(_ fixture: ServerFixture) throws -> [(number: UInt64, records: [DailyKeyRecord])] {
        try fixture.verifiedLog().batches().keys.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    // MARK: The publication delay

    @Test func aKeyWaitsUntilItsDayHasEndedPlusTheDelay() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let todays = Self.record(Self.today, Self.key(1))
        let yesterdays = Self.record(UTCDay(number: Self.today.number - 1), Self.key(2))
        _ = try await append(fixture, [todays, yesterdays])
        let publisher = fixture.makePublisher()

        // Yesterday ended eight hours ago: due. Today's key waits, though it was uploaded.
        let first = try await publisher.publish()
        #expect(first.newKeyBatch?.keyCount == 1)
        #expect(first.waitingKeys == 1)
        // The scheduler wakes when today's key becomes due (PublishScheduler).
        #expect(first.nextDueAt == Self.today.end + 450 + 7_200)
        #expect(try verifiedKeyBatches(fixture).flatMap(\.records) == [yesterdays])

        // One second before the end of today's last window (midnight plus at most half an
        // interval of rotation jitter) plus two hours: still not published.
        fixture.clock.advance(by: Self.today.end + 450 + 7_200 - 1 - fixture.clock.now())
        let early = try await publisher.publish()
        #expect(early.newKeyBatch == nil)
        #expect(try verifiedKeyBatches(fixture).flatMap(\.records) == [yesterdays])

        fixture.clock.advance(by: 1)
        let due = try await publisher.publish()
        #expect(due.newKeyBatch?.keyCount == 1)
        #expect(due.waitingKeys == 0)
        #expect(due.nextDueAt == nil, "nothing is held")
        #expect(try verifiedKeyBatches(fixture).flatMap(\.records) == [yesterdays, todays])
        #expect(try await publisher.publish().newKeyBatch == nil)
    }

    /// The demo clock (`tracer-server publish --demo-key-clock`) applies the same rule as if it
    /// were later, for keys only: the log keeps the real time, and it never moves backwards.
    @Test func theDemoClockReleasesKeysAsIfLaterAndNothingElse() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let todays = Self.record(Self.today, Self.key(1))
        _ = try await append(fixture, [todays])
        let publisher = fixture.makePublisher()
        let due = Self.today.end + 450 + 7_200

        #expect(try await publisher.publish(demoKeyClock: Self.now - 86_400).newKeyBatch == nil, "a clock in the past is now")
        let early = try await publisher.publish(demoKeyClock: due - 1)
        #expect(early.newKeyBatch == nil)
        #expect(early.waitingKeys == 1)
        let released = try await publisher.publish(demoKeyClock: due)
        #expect(released.newKeyBatch?.keyCount == 1)
        #expect(released.newKeyBatch?.publishedAt == Self.now)
        #expect(try verifiedKeyBatches(fixture).flatMap(\.records) == [todays])
        #expect(try fixture.verifiedLog().signedAt == UInt64(Self.now))
        // Without it, the rule holds by the real clock again.
        _ = try await append(fixture, [Self.record(Self.today, Self.key(2), interval: 600)])
        #expect(try await publisher.publish().newKeyBatch == nil)
    }

    /// With an interval that does not divide a day, the day's last window runs past midnight;
    /// its ids stay valid until that window (plus jitter) ends, so the key waits for it.
    @Test func aKeyWaitsForItsLastWindowToEnd() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let interval: Int64 = 50_000
        let yesterday = UTCDay(number: Self.today.number - 1)
        let record = Self.record(yesterday, Self.key(1), interval: interval)
        // The last slot of yesterday starts before midnight and ends at this boundary.
        let lastWindowEnd = (yesterday.end / interval + 1) * interval
        #expect(lastWindowEnd > yesterday.end)
        _ = try await append(fixture, [record])
        fixture.clock.advance(by: lastWindowEnd + interval / 2 + 7_200 - 1 - fixture.clock.now())
        #expect(try await fixture.makePublisher().publish().newKeyBatch == nil)
        fixture.clock.advance(by: 1)
        #expect(try await fixture.makePublisher().publish().newKeyBatch?.keyCount == 1)
    }

    @Test func theDelayIsConfigurable() async throws {
        let fixture = try ServerFixture { $0.keyPublicationDelaySeconds = 6 * 3_600 }
        defer { fixture.remove() }
        // 02:00 today: yesterday ended two hours ago, less than the six hours configured.
        fixture.clock.advance(by: Self.today.start + 7_200 - fixture.clock.now())
        _ = try await append(fixture, [Self.record(UTCDay(number: Self.today.number - 1), Self.key(1))])
        #expect(try await fixture.makePublisher().publish().newKeyBatch == nil)
        fixture.clock.advance(by: 4 * 3_600 + 450)
        #expect(try await fixture.makePublisher().publish().newKeyBatch?.keyCount == 1)
    }

    // MARK: Order and padding

    @Test func keysAreStoredAndPublishedByValueNeverGroupedByUpload() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let dayA = UTCDay(number: Self.today.number - 2)
        let dayB = UTCDay(number: Self.today.number - 1)
        // Three uploads, in this order; each key's first byte says where it must end up.
        _ = try await append(fixture, [Self.record(dayA, Self.key(0x00)), Self.record(dayB, Self.key(0xFF))])
        _ = try await append(fixture, [Self.record(dayA, Self.key(0x7F)), Self.record(dayB, Self.key(0x80))])
        _ = try await append(fixture, [Self.record(dayB, Self.key(0x01))])
        try await fixture.makePublisher().publish()

        let batch = try #require(try verifiedKeyBatches(fixture).first)
        #expect(batch.records.map(\.day) == [dayA, dayA, dayB, dayB, dayB], "grouped by day")
        #expect(batch.records.map { $0.key.bytes[0] } == [0x00, 0x7F, 0x01, 0x80, 0xFF])

        // Nothing in the store ties a key to its upload or to the other keys of its upload.
        let columns = try await fixture.store.queue.read { db in try db.columns(in: "submitted_keys").map(\.name) }
        #expect(Set(columns) == ["key", "day", "interval", "batch"])
    }

    @Test(arguments: [(1.0, 10), (1.5, 15), (2.0, 20)])
    func paddingAddsFakeKeysByTheMultiplier(multiplier: Double, published: Int) async throws {
        let fixture = try ServerFixture { $0.keyPaddingMultiplier = multiplier }
        defer { fixture.remove() }
        let real = (1...10).map { Self.record(UTCDay(number: Self.today.number - Int64($0)), DailyKey.random()) }
        _ = try await append(fixture, real)
        let report = try await fixture.makePublisher().publish()
        #expect(report.newKeyBatch?.keyCount == 10)
        #expect(report.newKeyBatch?.fakeKeyCount == published - 10)

        let batch = try #require(try verifiedKeyBatches(fixture).first)
        #expect(batch.records.count == published)
        let records = Set(batch.records)
        #expect(records.isSuperset(of: real))
        // Fake keys wear the days and interval of real ones, so nothing sets them apart.
        #expect(Set(records.map(\.day)) == Set(real.map(\.day)))
        #expect(records.allSatisfy { $0.intervalSeconds == 900 })
    }

    /// A batch of one upload's keys would tell that they belong together: with a minimum, due
    /// keys wait for company, or for the longest hold.
    @Test func dueKeysWaitForTheMinimumOrTheLongestHold() async throws {
        let fixture = try ServerFixture {
            $0.keyBatchMinimumKeys = 5
            $0.keyBatchMaximumHoldSeconds = 6 * 3_600
        }
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        let yesterday = UTCDay(number: Self.today.number - 1)
        // Three uploads of yesterday's key, due at 02:07:30 today, 5 h 52 min 30 s ago: held.
        for _ in 0..<3 { _ = try await append(fixture, [Self.record(yesterday, DailyKey.random())]) }
        #expect(try await publisher.publish().newKeyBatch == nil)
        // Two more: five due, published together.
        for _ in 0..<2 { _ = try await append(fixture, [Self.record(yesterday, DailyKey.random())]) }
        #expect(try await publisher.publish().newKeyBatch?.keyCount == 5)

        // A lone key is held until the first due key has waited six hours.
        _ = try await append(fixture, [Self.record(yesterday, DailyKey.random(), interval: 600)])
        let dueAt = yesterday.end + 300 + 7_200
        fixture.clock.advance(by: dueAt + 6 * 3_600 - 1 - fixture.clock.now())
        let held = try await publisher.publish()
        #expect(held.newKeyBatch == nil)
        #expect(held.nextDueAt == dueAt + 6 * 3_600, "the scheduler wakes when the hold ends")
        fixture.clock.advance(by: 1)
        #expect(try await publisher.publish().newKeyBatch?.keyCount == 1)
    }

    // MARK: Upload

    @Test func aRepeatedUploadIsIdempotentAndKnownKeysAreStoredOnce() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let records = (0..<5).map { Self.record(UTCDay(number: Self.today.number - Int64($0)), DailyKey.random()) }
        try await fixture.withServer { client in
            let headers = HTTPFields.authority().adding("Idempotency-Key", "upload-1")
            let first = try await client.send("/v1/key-histories", .post, headers: headers, body: Self.body(records))
            #expect(first.status == .created)
            #expect(first.json["received"] as? Int == 5)
            #expect(first.json["stored"] as? Int == 5)

            let again = try await client.send("/v1/key-histories", .post, headers: headers, body: Self.body(records))
            #expect(again.status == .ok)
            #expect(again.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            #expect(again.json["submission"] as? Int == first.json["submission"] as? Int)

            let other = try await client.send("/v1/key-histories", .post, headers: headers, body: Self.body(Array(records.prefix(2))))
            #expect(other.status == .unprocessableContent)
            #expect(other.apiError?.error == "idempotency_key_reused")

            // Without an idempotency key, by another authority: accepted, nothing new stored.
            let overlap = records.prefix(3) + [Self.record(UTCDay(number: Self.today.number - 9), DailyKey.random())]
            let second = try await client.send(
                "/v1/key-histories", .post, headers: .authority(ServerFixture.otherAuthorityToken), body: Self.body(Array(overlap)))
            #expect(second.status == .created)
            #expect(second.json["stored"] as? Int == 1)

            // An upload code works once, for keys as for ids.
            let code = try #require(try await client.send("/v1/codes", .post, headers: .authority()).json["code"] as? String)
            let byCode = [Self.record(UTCDay(number: Self.today.number - 10), DailyKey.random())]
            #expect(try await client.send("/v1/key-histories", .post, headers: .uploadCode(code), body: Self.body(byCode)).status == .created)
            let reused = try await client.send("/v1/key-histories", .post, headers: .uploadCode(code), body: Self.body(byCode))
            #expect(reused.apiError?.error == "used_code")
        }
        try await fixture.makePublisher().publish()
        // Four due days of the first upload, the new one of the second, the code's: each once.
        #expect(try verifiedKeyBatches(fixture).flatMap(\.records).count == 6)
    }

    /// A body can be both an id history and a key history (each decoder skips the other's
    /// member); under one Idempotency-Key the second endpoint must not answer with the first
    /// endpoint's receipt as if it had stored its own kind.
    @Test func anIdempotencyKeyDoesNotReplayAcrossKinds() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let entry = Histories.entries(count: 1, endingAt: Self.now)[0]
        let both = #"{"ids":[{"id":"\#(entry.id)","validFrom":\#(entry.validFrom),"validUntil":\#(entry.validUntil)}],"keys":[{"day":\#(Self.today.number),"intervalSeconds":900,"key":"\#(DailyKey.random().hex)"}]}"#
        try await fixture.withServer { client in
            let headers = HTTPFields.authority().adding("Idempotency-Key", "shared")
            let ids = try await client.send("/v1/histories", .post, headers: headers, body: ByteBuffer(string: both))
            #expect(ids.status == .created)
            let keys = try await client.send("/v1/key-histories", .post, headers: headers, body: ByteBuffer(string: both))
            #expect(keys.status == .unprocessableContent)
            #expect(keys.apiError?.error == "idempotency_key_reused")
            // Each endpoint still replays its own request.
            #expect(try await client.send("/v1/histories", .post, headers: headers, body: ByteBuffer(string: both)).status == .ok)
        }
    }

    @Test func badKeysAreRefusedWithAClearErrorAndNothingStored() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let secret = "00112233445566778899aabbccddeeff"
        try await fixture.withServer { client in
            let cases: [(String, HTTPResponse.Status, String, String)] = [
                (#"{"keys":[{"day":\#(Self.today.number),"intervalSeconds":900,"key":"\#(secret)"},{"day":\#(Self.today.number - 1),"intervalSeconds":900,"key":"abc"}]}"#,
                 .unprocessableContent, "invalid_key", "keys[1].key"),
                (#"{"keys":[{"day":\#(Self.today.number),"intervalSeconds":4,"key":"\#(secret)"}]}"#, .unprocessableContent, "invalid_interval", "keys[0]"),
                (#"{"keys":[{"day":\#(Self.today.number - 40),"intervalSeconds":900,"key":"\#(secret)"}]}"#, .unprocessableContent, "day_too_old", "keys[0]"),
                (#"{"keys":[{"day":\#(Self.today.number + 1),"intervalSeconds":900,"key":"\#(secret)"}]}"#, .unprocessableContent, "day_in_future", "keys[0]"),
                (#"{"keys":[{"day":\#(Self.today.number),"intervalSeconds":900,"key":"\#(secret)"},{"day":\#(Self.today.number),"intervalSeconds":900,"key":"\#(secret.uppercased())"}]}"#,
                 .unprocessableContent, "duplicate_day", "keys[1]"),
                (#"{"keys":[]}"#, .unprocessableContent, "empty_history", "no keys"),
                (#"{"keys":[{"day":1,"intervalSeconds":900}]}"#, .badRequest, "invalid_json", "keys[0].key is missing"),
                (#"{"ids":[]}"#, .badRequest, "invalid_json", "keys is missing"),
            ]
            for (body, status, code, mention) in cases {
                let response = try await client.send("/v1/key-histories", .post, headers: .authority(), body: ByteBuffer(string: body))
                #expect(response.status == status, "\(body)")
                let error = try #require(response.apiError, "\(body)")
                #expect(error.error == code)
                #expect(error.detail.contains(mention), "\(error.detail)")
                #expect(!error.detail.lowercased().contains(secret), "a key was echoed: \(error.detail)")
            }
        }
        #expect(try await fixture.store.queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM submitted_keys") } == 0)
        #expect(!fixture.logs.all.joined().lowercased().contains(secret))
    }

    // MARK: The authority's setting

    @Test(arguments: [AcceptedUploads.ids, .keys, .both])
    func theAcceptedUploadsAreEnforcedAndPublished(accepts: AcceptedUploads) async throws {
        let fixture = try ServerFixture { $0.acceptUploads = accepts }
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let keys = try await client.send(
                "/v1/key-histories", .post, headers: .authority(),
                body: Self.body([Self.record(Self.today, DailyKey.random())]))
            let ids = try await client.send(
                "/v1/histories", .post, headers: .authority(), body: Histories.body(Histories.entries(count: 3, endingAt: Self.now)))
            #expect(keys.status == (accepts.contains(.keys) ? .created : .forbidden))
            #expect(ids.status == (accepts.contains(.ids) ? .created : .forbidden))
            for refused in [keys, ids] where refused.status == .forbidden {
                #expect(refused.apiError?.error == "upload_kind_not_accepted")
                #expect(refused.apiError?.detail.contains("instead") == true)
            }
        }
        try await fixture.makePublisher().publish()
        #expect(try verifiedUploadPolicy(fixture).accepts == accepts)
    }

    // That the list is signed again once a day with nothing new is ListLogPublicationTests'
    // anIdleLogIsSignedAgainOnceItsCheckpointIsOld: the log holds keys and ids alike.

    @Test func aChangedSettingIsPublishedAtTheNextPublication() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.makePublisher().publish()
        #expect(try verifiedUploadPolicy(fixture).accepts == .both)
        // An unchanged policy is not signed again (its ETag stays): signatures differ each time.
        let policyBytes = FileManager.default.contents(atPath: fixture.paths.published.uploadPolicyPath)
        fixture.clock.advance(by: 86_400)
        try await fixture.makePublisher().publish()
        #expect(FileManager.default.contents(atPath: fixture.paths.published.uploadPolicyPath) == policyBytes)
        let restricted = try ServerFixture { $0.acceptUploads = .ids }
        defer { restricted.remove() }
        // Same data directory and key, new setting: as after an operator's restart.
        let publisher = Publisher(
            store: fixture.store, directory: fixture.paths.published, signingKey: fixture.signingKey,
            retentionSeconds: fixture.configuration.retentionSeconds, keySettings: KeyPublicationSettings(restricted.configuration),
            idPublicationDelaySeconds: 0, clock: fixture.clock, logger: fixture.logs.logger)
        try await publisher.publish()
        #expect(try verifiedUploadPolicy(fixture).accepts == .ids)
    }

    // MARK: Retention

    // Crash safety: StoreContractTests.aCrashDuringKeyPublicationLeavesTheLogValid, on both stores.

    @Test func keyBatchesExpireWithTheirLastDay() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let old = Self.record(UTCDay(number: Self.today.number - 27), Self.key(1))
        let recent = Self.record(UTCDay(number: Self.today.number - 1), Self.key(2))
        _ = try await append(fixture, [old])
        try await fixture.makePublisher().publish()
        _ = try await append(fixture, [recent])
        fixture.clock.advance(by: 3_600)
        try await fixture.makePublisher().publish()
        #expect(try await fixture.store.liveKeyBatches().map(\.number) == [1, 2])

        // Two days later the first batch's day is 29 days old: past the 28-day retention.
        fixture.clock.advance(by: 2 * 86_400)
        let report = try await fixture.makePublisher().publish()
        #expect(report.expiredKeyBatches == [1])
        #expect(try await fixture.store.liveKeyBatches().map(\.number) == [2])
        #expect(try verifiedKeyBatches(fixture).map(\.number) == [1, 2], "the log keeps what it published")
        #expect(try await fixture.store.queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM submitted_keys") } == 1)
    }
}
