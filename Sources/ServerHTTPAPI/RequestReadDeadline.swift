import NIOCore
import NIOHTTPTypes
import PositiveListServer

/// Closes a connection whose request has not arrived whole within `limit` of its head.
///
/// Hummingbird's idle timeout restarts with every part it reads, and a body arrives in parts:
/// a client sending one byte every few seconds would hold the connection, and the handler
/// waiting for the body, for as long as it liked. This bounds the whole body instead. (A head
/// trickled in is the idle timeout's: Hummingbird sees no part until the head is whole.)
///
/// Sits after the HTTP/1 ↔ HTTP types codec, beside ``MalformedRequestResponder``. One instance
/// per connection.
package final class RequestReadDeadline: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart

    private let limit: TimeAmount
    private var deadline: Scheduled<Void>?

    package init(limit: TimeAmount) {
        self.limit = limit
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            deadline?.cancel()
            deadline = context.eventLoop.assumeIsolated().scheduleTask(in: limit) {
                // The handler waiting for the body sees the request end early, as when a
                // client leaves.
                context.close(promise: nil)
            }
        case .end:
            deadline?.cancel()
            deadline = nil
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }
}
