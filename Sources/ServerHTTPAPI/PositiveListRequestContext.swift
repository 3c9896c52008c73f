import Hummingbird
import PositiveListServer

/// Hummingbird's request context plus the peer's address, which the brute-force limit needs.
public struct PositiveListRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let peerAddress: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
    }
}
