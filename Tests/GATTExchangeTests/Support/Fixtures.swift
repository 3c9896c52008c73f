import BLEHost
import GATTExchange

/// A GATT server behind a bearer on one end of an in-memory channel, and a raw peer on the other.
struct ServerHarness {
    let server: GATTServer
    let bearer: ATTBearer
    let peer: RawATTPeer
    let channel: InMemoryFixedChannel

    init(services: [GATTServiceDefinition], localMTU: UInt16 = 247) throws {
        let (serverEnd, peerEnd) = InMemoryFixedChannel.pair()
        server = GATTServer(database: try GATTDatabase(services: services, deviceName: "Tracer"))
        bearer = ATTBearer(channel: serverEnd, configuration: ATTBearerConfiguration(localMTU: localMTU), serverHandler: server)
        peer = RawATTPeer.attached(to: peerEnd)
        channel = serverEnd
    }

    func close() async {
        await bearer.close()
        channel.close()
    }
}

/// Our client bearer and our server bearer wired to each other.
struct LinkHarness {
    let server: GATTServer
    let serverBearer: ATTBearer
    let clientBearer: ATTBearer
    let client: GATTClient
    let channels: (InMemoryFixedChannel, InMemoryFixedChannel)

    init(services: [GATTServiceDefinition], clientMTU: UInt16 = 247, serverMTU: UInt16 = 247,
         valueHandler: (@Sendable (ATTHandleValue) async -> Void)? = nil) throws {
        let (serverEnd, clientEnd) = InMemoryFixedChannel.pair()
        server = GATTServer(database: try GATTDatabase(services: services, deviceName: "Tracer"))
        serverBearer = ATTBearer(channel: serverEnd, configuration: ATTBearerConfiguration(localMTU: serverMTU), serverHandler: server)
        clientBearer = ATTBearer(channel: clientEnd, configuration: ATTBearerConfiguration(localMTU: clientMTU), valueHandler: valueHandler)
        client = GATTClient(bearer: clientBearer)
        channels = (serverEnd, clientEnd)
    }

    func close() async {
        await clientBearer.close()
        await serverBearer.close()
        channels.0.close()
    }
}

let sampleID = PeerIDBytes([0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])!

/// The Tracer service with a fixed id and a recorder of accepted writes.
func tracerService(id: PeerIDBytes = sampleID, writes: CallbackRecorder<PeerIDWrite>) -> GATTServiceDefinition {
    TracerService.definition(currentID: { id }, onPeerWrite: { await writes.record($0) })
}

/// Handles of the database built from the GAP and GATT services followed by the Tracer service.
enum TracerLayout {
    static let gapService: UInt16 = 1
    static let deviceNameValue: UInt16 = 3
    static let appearanceValue: UInt16 = 5
    static let gattService: UInt16 = 6
    static let tracerService: UInt16 = 7
    static let idDeclaration: UInt16 = 8
    static let idValue: UInt16 = 9
    static let writeDeclaration: UInt16 = 10
    static let writeValue: UInt16 = 11
    static let last: UInt16 = 11
}
