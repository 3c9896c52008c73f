import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange

@Suite("Tracer service end to end", .tags(.unit))
struct TracerExchangeTests {
    private let ourID = PeerIDBytes([0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8])!

    @Test func fullDiscoveryReadAndWrite() async throws {
        let writes = CallbackRecorder<PeerIDWrite>()
        let link = try LinkHarness(services: [tracerService(writes: writes)])
        try await link.client.exchangeMTU()

        let services = try await link.client.discoverPrimaryServices(uuid: TracerService.serviceUUID)
        #expect(services == [GATTDiscoveredService(uuid: TracerService.serviceUUID,
                                                   handles: ATTHandleRange(start: TracerLayout.tracerService, end: TracerLayout.last))])
        let all = try await link.client.discoverAllPrimaryServices()
        #expect(all.map(\.uuid) == [.genericAccessService, .genericAttributeService, TracerService.serviceUUID])

        let service = try #require(services.first)
        let characteristics = try await link.client.discoverCharacteristics(of: service)
        #expect(characteristics == [
            GATTDiscoveredCharacteristic(uuid: TracerService.peerIDCharacteristicUUID, properties: .read,
                                         declarationHandle: TracerLayout.idDeclaration, valueHandle: TracerLayout.idValue),
            GATTDiscoveredCharacteristic(uuid: TracerService.peerIDWriteCharacteristicUUID, properties: [.write, .writeWithoutResponse],
                                         declarationHandle: TracerLayout.writeDeclaration, valueHandle: TracerLayout.writeValue),
        ])

        #expect(try await link.client.readValue(handle: TracerLayout.idValue) == sampleID.bytes)

        try await link.client.writeValue(ourID.bytes, handle: TracerLayout.writeValue)
        try await link.client.writeValue(ourID.bytes + [0xC4, 0x08], handle: TracerLayout.writeValue)
        #expect(await writes.values == [
            PeerIDWrite(id: ourID),
            PeerIDWrite(id: ourID, reportedRSSI: -60, txPower: 8),
        ])
        await link.close()
    }

    @Test(arguments: [0, 7, 9, 11, 20])
    func wrongLengthWritesAreRejected(length: Int) async throws {
        let writes = CallbackRecorder<PeerIDWrite>()
        let link = try LinkHarness(services: [tracerService(writes: writes)])
        await #expect(throws: GATTClientError.att(.errorResponse(request: .writeRequest, handle: TracerLayout.writeValue,
                                                                 code: .invalidAttributeValueLength))) {
            try await link.client.writeValue(Array(repeating: 0x42, count: length), handle: TracerLayout.writeValue)
        }
        // The same lengths as Write Commands vanish without an answer or a callback.
        try await link.client.writeValueWithoutResponse(Array(repeating: 0x42, count: length), handle: TracerLayout.writeValue)
        #expect(try await link.client.readValue(handle: TracerLayout.idValue) == sampleID.bytes)
        #expect(await writes.values.isEmpty)
        await link.close()
    }

    @Test func writeWithoutResponseDeliversWellFormedIDs() async throws {
        let writes = CallbackRecorder<PeerIDWrite>()
        let link = try LinkHarness(services: [tracerService(writes: writes)])
        try await link.client.writeValueWithoutResponse(ourID.bytes + [0x81, 0x7F], handle: TracerLayout.writeValue)
        // A request after the command is served after it, so the callback has run.
        _ = try await link.client.readValue(handle: TracerLayout.idValue)
        #expect(await writes.values == [PeerIDWrite(id: ourID, reportedRSSI: -127, txPower: 127)])
        await link.close()
    }

    /// The writer counts an acknowledged write as the end of the exchange and does not come back
    /// in its window, so a write the node cannot queue for its log (the queue is full, or the
    /// session stopped taking writes while its links were still up, as a controller reset
    /// leaves them) is refused, and the writer's exchange fails instead of succeeding.
    @Test func writesThatCannotBeQueuedForTheLogAreRefused() async throws {
        let peer = LinkPeer(handle: 0x40, role: .peripheral, address: BluetoothAddress(string: "3A:00:00:00:00:0A")!, addressType: .random)
        let (writes, continuation) = AsyncStream.makeStream(of: PeerWriteEvent.self, bufferingPolicy: .bufferingOldest(1))
        let link = try LinkHarness(services: [TracerGATTServer.service(identity: AdvertisedIdentity(), writes: continuation, peer: peer)])
        let refused = GATTClientError.att(.errorResponse(request: .writeRequest, handle: TracerLayout.writeValue, code: .insufficientResources))

        try await link.client.writeValue(ourID.bytes, handle: TracerLayout.writeValue)
        await #expect(throws: refused) { try await link.client.writeValue(ourID.bytes + [0xC4, 0x08], handle: TracerLayout.writeValue) }
        var queued = writes.makeAsyncIterator()
        #expect(await queued.next()?.write == PeerIDWrite(id: ourID))

        continuation.finish()
        await #expect(throws: TracerExchangeError.gatt(refused)) {
            try await TracerPeerExchange(client: link.client).exchange(writing: PeerIDWrite(id: ourID))
        }
        #expect(await queued.next() == nil)
        await link.close()
    }

    @Test func readingTheWriteCharacteristicIsNotPermitted() async throws {
        let link = try LinkHarness(services: [tracerService(writes: CallbackRecorder())])
        await #expect(throws: GATTClientError.att(.errorResponse(request: .readRequest, handle: TracerLayout.writeValue,
                                                                 code: .readNotPermitted))) {
            try await link.client.readValue(handle: TracerLayout.writeValue)
        }
        await link.close()
    }

    @Test func idIsComputedAtReadTime() async throws {
        let counter = CallbackRecorder<Int>()
        let service = TracerService.definition(
            currentID: {
                await counter.record(1)
                let reads = await counter.values.count
                return PeerIDBytes(Array(repeating: UInt8(reads), count: 8))!
            },
            onPeerWrite: { _ in })
        let link = try LinkHarness(services: [service])
        #expect(try await link.client.readValue(handle: TracerLayout.idValue) == Array(repeating: 1, count: 8))
        #expect(try await link.client.readValue(handle: TracerLayout.idValue) == Array(repeating: 2, count: 8))
        await link.close()
    }

    @Test func exchangeHelperReadsTheirIDAndWritesOurs() async throws {
        let writes = CallbackRecorder<PeerIDWrite>()
        let link = try LinkHarness(services: [tracerService(writes: writes)])
        let exchange = TracerPeerExchange(client: link.client)

        #expect(try await exchange.exchange(writing: PeerIDWrite(id: ourID)) == sampleID)
        #expect(try await exchange.exchange(writing: PeerIDWrite(id: ourID, reportedRSSI: -72, txPower: -4)) == sampleID)
        #expect(await writes.values == [PeerIDWrite(id: ourID), PeerIDWrite(id: ourID, reportedRSSI: -72, txPower: -4)])
        await link.close()
    }

    @Test func exchangeHelperReportsWhatIsMissing() async throws {
        let noTracer = try LinkHarness(services: [])
        await #expect(throws: TracerExchangeError.serviceNotFound) {
            try await TracerPeerExchange(client: noTracer.client).exchange(writing: PeerIDWrite(id: ourID))
        }
        await noTracer.close()

        let noIDCharacteristic = try LinkHarness(services: [GATTServiceDefinition(uuid: TracerService.serviceUUID, characteristics: [
            GATTCharacteristicDefinition(uuid: TracerService.peerIDWriteCharacteristicUUID, properties: .write),
        ])])
        await #expect(throws: TracerExchangeError.idCharacteristicMissing) {
            try await TracerPeerExchange(client: noIDCharacteristic.client).exchange(writing: PeerIDWrite(id: ourID))
        }
        await noIDCharacteristic.close()

        let shortID = try LinkHarness(services: [GATTServiceDefinition(uuid: TracerService.serviceUUID, characteristics: [
            GATTCharacteristicDefinition(uuid: TracerService.peerIDCharacteristicUUID, properties: .read, value: .constant([1, 2, 3])),
            GATTCharacteristicDefinition(uuid: TracerService.peerIDWriteCharacteristicUUID, properties: .write),
        ])])
        await #expect(throws: TracerExchangeError.idHasWrongLength(3)) {
            try await TracerPeerExchange(client: shortID.client).exchange(writing: PeerIDWrite(id: ourID))
        }
        await shortID.close()
    }

    /// Our client against the peripheral recorded in h4-reference.txt section 4: it must send
    /// exactly the recorded requests and understand the recorded answers.
    @Test func clientReplaysTheReferenceCapture() async throws {
        let (ours, theirs) = InMemoryFixedChannel.pair()
        let peer = RawATTPeer.attached(to: theirs)
        let bearer = ATTBearer(channel: ours, configuration: ATTBearerConfiguration(localMTU: 23))
        let client = GATTClient(bearer: bearer)
        typealias Capture = ReferenceCapture
        // Our discovery goes on past the recorded service; that last step is not in the capture.
        let notFoundAfterService: [UInt8] = [0x01, 0x06, 0x09, 0x00, 0x0A]
        let script: [([UInt8], [UInt8])] = [
            (Capture.attPDU(Capture.exchangeMTURequest), Capture.attPDU(Capture.exchangeMTUResponse)),
            (Capture.attPDU(Capture.findByTypeValueRequest), Capture.attPDU(Capture.findByTypeValueResponse)),
            (ATTFindByTypeValueRequest(range: .init(start: 9, end: 0xFFFF), attributeType: 0x2800,
                                       value: Capture.serviceUUID.littleEndianBytes).encode(), notFoundAfterService),
            (Capture.attPDU(Capture.readByTypeRequest4to8), Capture.attPDU(Capture.readByTypeResponseAt5)),
            (Capture.attPDU(Capture.readByTypeRequest6to8), Capture.attPDU(Capture.readByTypeResponseAt7)),
            (Capture.attPDU(Capture.readByTypeRequest8to8), Capture.attPDU(Capture.errorResponseNotFound)),
            (Capture.attPDU(Capture.readRequest), Capture.attPDU(Capture.readResponse)),
            (Capture.attPDU(Capture.writeRequest), Capture.attPDU(Capture.writeResponse)),
        ]
        let responder = Task {
            var mismatches: [String] = []
            for (expected, answer) in script {
                guard let request = await peer.next() else { mismatches.append("missing \(expected)"); break }
                if request != expected { mismatches.append("got \(request), expected \(expected)") }
                try await peer.send(answer)
            }
            return mismatches
        }

        #expect(try await client.exchangeMTU() == 23)
        let services = try await client.discoverPrimaryServices(uuid: Capture.serviceUUID)
        #expect(services == [GATTDiscoveredService(uuid: Capture.serviceUUID, handles: .init(start: 4, end: 8))])
        let characteristics = try await client.discoverCharacteristics(of: try #require(services.first))
        #expect(characteristics.map(\.valueHandle) == [6, 8])
        #expect(characteristics.map(\.properties) == [.read, .write])
        #expect(try await client.readValue(handle: 6) == [0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8])
        try await client.writeValue([0xD1, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8], handle: 8)
        #expect(try await responder.value == [])
        await bearer.close()
        ours.close()
    }
}
