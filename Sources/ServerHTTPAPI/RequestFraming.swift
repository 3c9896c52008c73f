import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import PositiveListServer

/// Before the HTTP/1 ↔ HTTP types codec, where the request's version and method are still
/// seen: an HTTP/1.0 request without `Connection: keep-alive` is marked `Connection: close`
/// (HTTP types carry no version, so Hummingbird would keep the connection open, RFC 9112 9.3),
/// and CONNECT is answered 501 at once.
///
/// NIO's response encoder drops the body of any answer to CONNECT (a 2xx to it opens a
/// tunnel and has none), so the refusal is written as raw bytes below the encoder, through
/// ``ConnectionAdmissionHandler``'s place at the front of the pipeline.
package final class RequestHeadPolicy: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPServerRequestPart

    private var refused = false

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        if head.method == .CONNECT {
            refused = true
            let refusal = APIError(
                .notImplemented, "method_not_implemented",
                "This server is not a proxy: CONNECT is not implemented. Use GET, HEAD or POST as docs/openapi.yaml lists.")
            Self.writeRaw(refusal, context: context)
            return
        }
        if head.version.major == 1, head.version.minor == 0, !head.isKeepAlive {
            head.headers.replaceOrAdd(name: "connection", value: "close")
            context.fireChannelRead(wrapInboundOut(.head(head)))
            return
        }
        context.fireChannelRead(data)
    }

    /// `refusal` as a whole HTTP/1.1 response, written below the HTTP encoder, then the close.
    private static func writeRaw(_ refusal: APIError, context: ChannelHandlerContext) {
        let bytes = refusal.closingHTTP1Response
        let channel = context.channel
        let front = try? context.pipeline.syncOperations.context(handlerType: ConnectionAdmissionHandler.self)
        (front ?? context).writeAndFlush(NIOAny(bytes)).whenComplete { _ in channel.close(promise: nil) }
    }
    package init() {}

}

/// Thrown into the request body when it arrives in more parts than a request may have.
struct TooManyBodyParts: Error {
    let limit: Int
}

/// After the HTTP/1 ↔ HTTP types codec, beside ``RequestReadDeadline``: keeps a request's body
/// from costing the server more than its bytes, and ends connections that must end.
///
/// - A body's parts (one per chunk, or per read) are joined into one part per socket read
///   before they reach Hummingbird: each part costs a task switch there, so a body of 300,000
///   one-byte chunks cost seconds of CPU and now costs what its bytes do. A request in more
///   than `maxBodyParts` parts is cut off with ``TooManyBodyParts`` (413).
/// - A request answered before its body has arrived (a 401, a 404, a route that takes no body)
///   is not read through: the answer says `Connection: close`, the server ends its side and
///   reads no more, and the connection is closed shortly after, so the client sees the answer.
/// - A request that says `Connection: close` (as ``RequestHeadPolicy`` makes an HTTP/1.0 one)
///   gets `Connection: close` and the connection is closed once the answer is out.
/// - Tells the ``ConnectionLimiter`` when the connection is busy and when idle.
///
/// One instance per connection.
package final class RequestFraming: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    /// How long a connection whose request was not read through stays half-closed, for the
    /// client to read the answer, before it is closed.
    static let lingerAfterEarlyAnswer = TimeAmount.seconds(1)
    /// Joined parts are passed on at this size even within one read.
    static let joinedPartBytes = 64 << 10

    private let maxBodyParts: Int
    private let limiter: ConnectionLimiter?

    /// A request's head was read and its end not yet.
    private var requestOpen = false
    private var clientAskedToClose = false
    private var bodyParts = 0
    private var pendingBody: ByteBuffer?
    /// The answer is going out with `Connection: close`.
    private var closeAfterAnswer = false
    /// Nothing more is read or passed on: the connection is ending.
    private var discarding = false

    package init(maxBodyParts: Int, limiter: ConnectionLimiter?) {
        self.maxBodyParts = maxBodyParts
        self.limiter = limiter
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !discarding else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            requestOpen = true
            bodyParts = 0
            clientAskedToClose = head.headerFields[values: .connection].contains { $0.lowercased().contains("close") }
            limiter?.requestStarted(context.channel)
            context.fireChannelRead(data)
        case .body(var part):
            bodyParts += 1
            guard bodyParts <= maxBodyParts else {
                pendingBody = nil
                discarding = true
                context.fireErrorCaught(TooManyBodyParts(limit: maxBodyParts))
                return
            }
            if pendingBody == nil {
                pendingBody = part
            } else {
                pendingBody!.writeBuffer(&part)
            }
            if pendingBody!.readableBytes >= Self.joinedPartBytes { passPendingBody(context) }
        case .end:
            passPendingBody(context)
            requestOpen = false
            context.fireChannelRead(data)
        }
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        passPendingBody(context)
        context.fireChannelReadComplete()
    }

    private func passPendingBody(_ context: ChannelHandlerContext) {
        guard let body = pendingBody else { return }
        pendingBody = nil
        context.fireChannelRead(wrapInboundOut(.body(body)))
    }

    package func read(context: ChannelHandlerContext) {
        // Hummingbird asks for the rest of an unread body after answering; it is not read.
        guard !discarding else { return }
        context.read()
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response) where clientAskedToClose || requestOpen:
            closeAfterAnswer = true
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .end where closeAfterAnswer:
            limiter?.responseFinished(context.channel)
            let bodyUnread = requestOpen
            if bodyUnread { discarding = true }
            let channel = context.channel
            let written = promise ?? context.eventLoop.makePromise()
            context.write(data, promise: written)
            written.futureResult.whenComplete { _ in
                guard bodyUnread else {
                    channel.close(promise: nil)
                    return
                }
                // A close with the body's bytes unread would reset the connection, which can
                // destroy the answer before the client reads it: end our side first.
                channel.close(mode: .output, promise: nil)
                channel.eventLoop.scheduleTask(in: Self.lingerAfterEarlyAnswer) { channel.close(promise: nil) }
            }
        case .end:
            limiter?.responseFinished(context.channel)
            context.write(data, promise: promise)
        default:
            context.write(data, promise: promise)
        }
    }
}
