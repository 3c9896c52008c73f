import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

@Suite("ATT bearer", .tags(.unit))
struct ATTBearerTests {
    @Test func unansweredRequestTimesOutAndClosesTheBearer() async throws {
        let (ours, theirs) = InMemoryFixedChannel.pair()
        let silentPeer = RawATTPeer.attached(to: theirs)
        let bearer = ATTBearer(channel: ours, configuration: ATTBearerConfiguration(transactionTimeout: .milliseconds(100)))

        let started = ContinuousClock.now
        await #expect(throws: ATTBearerError.transactionTimedOut(request: .readRequest)) {
            try await bearer.request(.readRequest(ATTReadRequest(handle: 1)))
        }
        #expect(ContinuousClock.now - started >= .milliseconds(100))
        #expect(await silentPeer.next() == [0x0A, 0x01, 0x00])
        #expect(await bearer.closeReason == .transactionTimeout(.readRequest))

        // No further PDU may go out on a timed-out bearer (Core Spec Vol 3 Part F 3.3.3).
        await #expect(throws: ATTBearerError.closed(.transactionTimeout(.readRequest))) {
            try await bearer.request(.readRequest(ATTReadRequest(handle: 1)))
        }
        await #expect(throws: ATTBearerError.closed(.transactionTimeout(.readRequest))) {
            try await bearer.send(command: .writeCommand(ATTWriteCommand(handle: 1, value: [])))
        }
        // A late answer changes nothing.
        try await silentPeer.send([0x0B, 0x01])
        #expect(await silentPeer.next(timeout: .milliseconds(50)) == nil)
        ours.close()
    }

    @Test func requestsAreSentOneAtATime() async throws {
        let (ours, theirs) = InMemoryFixedChannel.pair()
        let peer = RawATTPeer.attached(to: theirs)
        let bearer = ATTBearer(channel: ours)

        let first = Task { try await bearer.request(.readRequest(ATTReadRequest(handle: 1))) }
        let second = Task { try await bearer.request(.readRequest(ATTReadRequest(handle: 2))) }
        let request1 = try #require(await peer.next())
        // The second request waits until the first is answered: it reaches the bearer and is
        // held there, and nothing but the first has gone out.
        #expect(await eventually { await bearer.requestsWaitingTheirTurn == 1 }, "the second request was never held")
        #expect(await peer.pendingCount == 0, "a second request went out before the first was answered")
        try await peer.send([0x0B, request1[1]])
        let request2 = try #require(await peer.next())
        try await peer.send([0x0B, request2[1]])

        let answers = [try await first.value, try await second.value]
        #expect(Set([request1, request2]) == Set([[0x0A, 0x01, 0x00], [0x0A, 0x02, 0x00]]))
        // Each caller got the answer to its own request.
        #expect(answers == [.readResponse(ATTReadResponse(value: [0x01])), .readResponse(ATTReadResponse(value: [0x02]))])
        await bearer.close()
        ours.close()
    }

    @Test func errorResponsesAndMismatchedAnswersAreTypedErrors() async throws {
        let (ours, theirs) = InMemoryFixedChannel.pair()
        let peer = RawATTPeer.attached(to: theirs)
        let bearer = ATTBearer(channel: ours)

        let failing = Task { try await bearer.request(.readRequest(ATTReadRequest(handle: 9))) }
        _ = await peer.next()
        try await peer.send([0x01, 0x0A, 0x09, 0x00, 0x02])
        await #expect(throws: ATTBearerError.errorResponse(request: .readRequest, handle: 9, code: .readNotPermitted)) {
            try await failing.value
        }

        let mismatched = Task { try await bearer.request(.readRequest(ATTReadRequest(handle: 9))) }
        _ = await peer.next()
        try await peer.send([0x13])
        await #expect(throws: ATTBearerError.unexpectedResponse(request: .readRequest, received: .writeResponse)) {
            try await mismatched.value
        }

        let malformed = Task { try await bearer.request(.writeRequest(ATTWriteRequest(handle: 9, value: [1]))) }
        _ = await peer.next()
        try await peer.send([0x13, 0x00])
        await #expect(throws: ATTBearerError.malformedResponse(request: .writeRequest, .trailingBytes(count: 1))) {
            try await malformed.value
        }

        await #expect(throws: ATTBearerError.notARequest(.writeCommand)) {
            try await bearer.request(.writeCommand(ATTWriteCommand(handle: 1, value: [])))
        }
        await #expect(throws: ATTBearerError.pduExceedsMTU(length: 24, mtu: 23)) {
            try await bearer.request(.writeRequest(ATTWriteRequest(handle: 1, value: Array(repeating: 0, count: 21))))
        }
        await bearer.close()
        ours.close()
    }

    @Test func disconnectionFailsTheOutstandingRequest() async throws {
        let (ours, theirs) = InMemoryFixedChannel.pair()
        let peer = RawATTPeer.attached(to: theirs)
        let bearer = ATTBearer(channel: ours)
        let pending = Task { try await bearer.request(.readRequest(ATTReadRequest(handle: 1))) }
        _ = await peer.next()
        theirs.close()
        await #expect(throws: ATTBearerError.closed(.channelClosed)) { try await pending.value }
    }

    @Test func mtuNegotiationTakesTheSmallerReceiveMTU() async throws {
        let link = try LinkHarness(services: [], clientMTU: 247, serverMTU: 100)
        #expect(await link.clientBearer.mtu == 23)
        #expect(try await link.client.exchangeMTU() == 100)
        #expect(await link.clientBearer.mtu == 100)
        #expect(await link.serverBearer.mtu == 100)
        await link.close()

        let other = try LinkHarness(services: [], clientMTU: 64, serverMTU: 247)
        #expect(try await other.client.exchangeMTU() == 64)
        #expect(await other.serverBearer.mtu == 64)
        await other.close()
    }

    @Test func serverAnswersMTUExchangeWithItsMaximumAndNeverGoesBelowTheDefault() async throws {
        let setup = try ServerHarness(services: [], localMTU: 1000)
        #expect(try await setup.peer.exchange([0x02, 0x17, 0x00]) == [0x03, 0xF7, 0x00])
        #expect(await setup.bearer.mtu == 23)
        #expect(try await setup.peer.exchange([0x02, 0x05, 0x00]) == [0x03, 0xF7, 0x00])
        #expect(await setup.bearer.mtu == 23)
        #expect(try await setup.peer.exchange([0x02, 0x00, 0x02]) == [0x03, 0xF7, 0x00])
        #expect(await setup.bearer.mtu == 247)
        await setup.close()
    }

    @Test func notificationsAndIndicationsReachTheValueHandler() async throws {
        let received = CallbackRecorder<ATTHandleValue>()
        let link = try LinkHarness(services: [], valueHandler: { await received.record($0) })
        try await link.serverBearer.notify(handle: 0x20, value: [1, 2])
        try await link.serverBearer.indicate(handle: 0x21, value: [3])
        // The confirmation came back, so the notification sent before it has been handled too.
        #expect(await received.values == [
            ATTHandleValue(handle: 0x20, value: [1, 2], kind: .notification),
            ATTHandleValue(handle: 0x21, value: [3], kind: .indication),
        ])
        await link.close()
    }

    @Test func unconfirmedIndicationTimesOut() async throws {
        let (ours, theirs) = InMemoryFixedChannel.pair()
        let peer = RawATTPeer.attached(to: theirs)
        let bearer = ATTBearer(channel: ours, configuration: ATTBearerConfiguration(transactionTimeout: .milliseconds(50)))
        await #expect(throws: ATTBearerError.transactionTimedOut(request: .handleValueIndication)) {
            try await bearer.indicate(handle: 3, value: [1])
        }
        #expect(await peer.next() == [0x1D, 0x03, 0x00, 0x01])
        ours.close()
    }

    @Test func requestsWithoutAServerHandlerAreNotSupported() async throws {
        let (ours, theirs) = InMemoryFixedChannel.pair()
        let peer = RawATTPeer.attached(to: theirs)
        let bearer = ATTBearer(channel: ours)
        #expect(try await peer.exchange([0x0A, 0x05, 0x00]) == [0x01, 0x0A, 0x05, 0x00, 0x06])
        await bearer.close()
        ours.close()
    }
}
