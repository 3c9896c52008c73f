import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import PositiveListServer

/// Gives requests that NIO's HTTP/1.1 parser refuses the JSON error body every other refusal
/// has (docs/openapi.yaml).
///
/// A request whose head cannot be parsed (a Content-Length that is not a number or comes twice,
/// header fields over the decoder's limits, a malformed request line) never reaches the router:
/// Hummingbird's connection loop (`HTTPChannelHandler.handleHTTP`) catches the `HTTPParserError`
/// and writes `400` with an empty body itself, with no hook to change it. That response passes
/// through this handler on its way out, so this handler rewrites it: status and body from
/// ``APIError/unparsable(_:inHead:)`` (431 for header fields too large). It recognises the
/// response as Hummingbird's by its shape (400, no Content-Type): every response of the
/// application carries one, as ``JSONErrorResponder`` gives all its refusals a JSON body.
///
/// A parse error inside a request's body (a malformed chunk size, trailer fields over the limit,
/// the client leaving mid-body) reaches the application instead, through the body it reads, and
/// ``JSONErrorResponder`` answers it. Hummingbird then meets the same error again while it skips
/// the rest of the request, and writes its empty 400 a second time, after an answer was already
/// given: that one is dropped here.
///
/// Either way Hummingbird then ends its side of the connection (a FIN, not a close: closing with
/// the rest of a long head unread would make the kernel send a reset, which can destroy the
/// answer before the client reads it), since nothing after a framing error can be read as a
/// request; the client's close or the idle timeout ends the rest.
///
/// Sits after the HTTP/1 ↔ HTTP types codec, where errors from the decoder pass by as
/// `errorCaught` and responses as `HTTPResponsePart`s. One instance per connection.
package final class MalformedRequestResponder: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    package init() {}

    private enum State {
        /// No parse error on this connection.
        case parsing
        /// The parser failed before a request's head was complete; Hummingbird's answer to it
        /// is yet to come.
        case failedInHead(HTTPParserError)
        /// The parser failed inside a request the application has seen and answers.
        case failedInBody
        /// Writing the rewritten answer: its JSON body goes out before the end.
        case rewriting(body: ByteBuffer)
        /// The answer is out; anything more Hummingbird writes (the rest of a dropped second
        /// answer) is dropped.
        case answered
    }

    private var state = State.parsing
    /// A request's head was read and its end not yet.
    private var readingRequest = false

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: readingRequest = true
        case .end: readingRequest = false
        case .body: break
        }
        context.fireChannelRead(data)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if case .parsing = state, let parseError = error as? HTTPParserError {
            state = readingRequest ? .failedInBody : .failedInHead(parseError)
        }
        // Hummingbird's loop and the request body still need the error to stop reading.
        context.fireErrorCaught(error)
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let part = unwrapOutboundIn(data)
        switch (state, part) {
        case (.failedInHead(let error), .head(let head)) where Self.isHummingbirdsRefusal(head):
            let refusal = APIError.unparsable(error, inHead: true)
            let body = refusal.jsonBody
            var fields = refusal.headersWithContentType
            fields[.contentLength] = String(body.readableBytes)
            fields[.connection] = "close"
            state = .rewriting(body: body)
            context.write(wrapOutboundOut(.head(HTTPResponse(status: refusal.status, headerFields: fields))), promise: promise)
        case (.rewriting(let body), .end):
            state = .answered
            context.write(wrapOutboundOut(.body(body)), promise: nil)
            context.write(data, promise: promise)
        case (.failedInBody, .head(let head)) where Self.isHummingbirdsRefusal(head):
            // A second answer to a request the application answered: never sent.
            state = .answered
            promise?.succeed(())
        case (.answered, _):
            promise?.succeed(())
        default:
            context.write(data, promise: promise)
        }
    }

    /// Hummingbird's answer to a parse error: 400 with neither a body nor a Content-Type.
    private static func isHummingbirdsRefusal(_ head: HTTPResponse) -> Bool {
        head.status == .badRequest && head.headerFields[.contentType] == nil
    }
}
