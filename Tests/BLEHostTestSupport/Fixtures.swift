import BLEHost

/// A GATT server behind a bearer on one end of an in-memory channel, and a raw peer on the other.
package struct ServerHarness {
    package let server: GATTServer
    package let bearer: ATTBearer
    package let peer: RawATTPeer
    package let channel: InMemoryFixedChannel

    package init(services: [GATTServiceDefinition], localMTU: UInt16 = 247) throws {
        let (serverEnd, peerEnd) = InMemoryFixedChannel.pair()
        server = GATTServer(database: try GATTDatabase(services: services, deviceName: "Tracer"))
        bearer = ATTBearer(channel: serverEnd, configuration: ATTBearerConfiguration(localMTU: localMTU), serverHandler: server)
        peer = RawATTPeer.attached(to: peerEnd)
        channel = serverEnd
    }

    package func close() async {
        await bearer.close()
        channel.close()
    }
}

/// Our client bearer and our server bearer wired to each other.
package struct LinkHarness {
    package let server: GATTServer
    package let serverBearer: ATTBearer
    package let clientBearer: ATTBearer
    package let client: GATTClient
    package let channels: (InMemoryFixedChannel, InMemoryFixedChannel)

    package init(services: [GATTServiceDefinition], clientMTU: UInt16 = 247, serverMTU: UInt16 = 247,
                 valueHandler: (@Sendable (ATTHandleValue) async -> Void)? = nil) throws {
        let (serverEnd, clientEnd) = InMemoryFixedChannel.pair()
        server = GATTServer(database: try GATTDatabase(services: services, deviceName: "Tracer"))
        serverBearer = ATTBearer(channel: serverEnd, configuration: ATTBearerConfiguration(localMTU: serverMTU), serverHandler: server)
        clientBearer = ATTBearer(channel: clientEnd, configuration: ATTBearerConfiguration(localMTU: clientMTU), valueHandler: valueHandler)
        client = GATTClient(bearer: clientBearer)
        channels = (serverEnd, clientEnd)
    }

    package func close() async {
        await clientBearer.close()
        await serverBearer.close()
        channels.0.close()
    }
}
