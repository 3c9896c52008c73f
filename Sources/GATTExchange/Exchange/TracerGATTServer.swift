import BLEHost

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
            try GATTDatabase(services: [service(identity: identity, writes: writes, peer: peer)], deviceName: deviceName)
        }
    }

    /// The Tracer service on the link to `peer`.
    ///
    /// A write is acknowledged only once it is queued for the log. The writer takes our Write
    /// Response as the end of the exchange: it logs our id as read and does not connect to this
    /// address again in its window. A write answered but never logged thus leaves a one-sided
    /// encounter that nothing mends; refused, it fails the writer's exchange, which it tries
    /// again later. The queue refuses once the exchange has stopped taking writes (a session
    /// ending after a controller reset stops it while its links are still up) and, for a stream
    /// that drops the newest (`.bufferingOldest`), when it is full.
    static func service(
        identity: AdvertisedIdentity, writes: AsyncStream<PeerWriteEvent>.Continuation, peer: LinkPeer
    ) -> GATTServiceDefinition {
        TracerService.definition(
            currentID: {
                // Advertising starts only once an identity is set, so this is always there.
                PeerIDBytes(identity.ownID?.id.bytes ?? []) ?? PeerIDBytes(Array(repeating: 0, count: 8))!
            },
            onPeerWrite: { write throws(ATTErrorCode) in
                switch writes.yield(PeerWriteEvent(peer: peer, write: write)) {
                case .enqueued: return
                case .dropped, .terminated: throw ATTErrorCode.insufficientResources
                @unknown default: throw ATTErrorCode.insufficientResources
                }
            })
    }
}
