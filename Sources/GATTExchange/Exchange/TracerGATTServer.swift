import BLEHost
import IDRotation

/// A write of a peer's id to our Tracer service, with the link it came on.
public struct PeerWriteEvent: Sendable {
    public let peer: LinkPeer
    public let write: PeerIDWrite
}

/// The GATT side of a Tracer node: every link gets the Tracer service, whose read characteristic
/// serves the advertised identity and whose writes are reported with the link they came on.
public enum TracerGATTServer {
    public static func databaseForLink(
        identity: AdvertisedIdentity, writes: AsyncStream<PeerWriteEvent>.Continuation, deviceName: String = "Tracer"
    ) -> LEHost.DatabaseForLink {
        { peer in
            try GATTDatabase(services: [
                TracerService.definition(
                    currentID: {
                        // Advertising starts only once an identity is set, so this is always there.
                        PeerIDBytes(identity.ownID?.id.bytes ?? []) ?? PeerIDBytes(Array(repeating: 0, count: 8))!
                    },
                    onPeerWrite: { write in writes.yield(PeerWriteEvent(peer: peer, write: write)) }),
            ], deviceName: deviceName)
        }
    }
}
