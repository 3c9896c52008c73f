import Foundation
import HTTPTypes
import NIOCore
import PositiveListServer
import Synchronization

/// Counts the open connections, in all and per client address, and decides at accept time
/// whether a new one may stay.
///
/// A new connection from an address already at its limit is refused. When all connections are
/// in use, the connection idle longest among those of the address holding the most is closed
/// to make room (a flood's keep-alive connections are idle between its requests, so the
/// flooder loses its own), and only when none is idle is the new one refused. So a flood holds
/// at most its address's share, and `/healthz` and uploads from anyone else keep answering.
///
/// Shared by all event loops: the state is behind a mutex, and a channel is closed through its
/// own event loop (`Channel.close` is thread-safe).
package final class ConnectionLimiter: Sendable {
    package enum Admission: Equatable {
        case admitted
        case refused(Refusal)
    }

    package enum Refusal: Equatable {
        case addressAtLimit
        case serverFull
    }

    private struct Connection {
        let address: String
        let channel: any Channel
        /// When the connection became idle (between requests, or before its first), by a
        /// counter that only grows; nil while a request is in progress.
        var idleSince: UInt64?
        /// Chosen to make room and being closed: no longer counted against the total.
        var evicted = false
    }

    private struct State {
        var connections: [ObjectIdentifier: Connection] = [:]
        var perAddress: [String: Int] = [:]
        /// Connections counted against the total: open ones not evicted.
        var counted = 0
        var tick: UInt64 = 0
    }

    let limits: ConnectionLimits
    /// Addresses not held to the per-address limit: the reverse proxies every request comes through.
    private let unlimitedAddresses: Set<String>
    private let state = Mutex(State())
    /// Counts refusals and evictions (`tracer_server_connections_shed_total`).
    private let metrics: ServerMetrics?

    package init(limits: ConnectionLimits, unlimitedAddresses: Set<String> = [], metrics: ServerMetrics? = nil) {
        self.limits = limits
        self.unlimitedAddresses = unlimitedAddresses
        self.metrics = metrics
    }

    /// Decides about a connection just accepted from `address`; an admitted one must be
    /// ``release(_:)``d when it closes.
    package func admit(_ channel: any Channel, address: String) -> Admission {
        let victim: (any Channel)?
        let admission: Admission
        (admission, victim) = state.withLock { state -> (Admission, (any Channel)?) in
            let fromAddress = state.perAddress[address, default: 0]
            if fromAddress >= limits.perAddress, !unlimitedAddresses.contains(address) {
                return (.refused(.addressAtLimit), nil)
            }
            var victim: (any Channel)?
            if state.counted >= limits.total {
                guard let chosen = Self.longestIdleOfBusiestAddress(state) else { return (.refused(.serverFull), nil) }
                state.connections[chosen]?.evicted = true
                state.counted -= 1
                victim = state.connections[chosen]?.channel
            }
            state.tick += 1
            state.connections[ObjectIdentifier(channel)] = Connection(address: address, channel: channel, idleSince: state.tick)
            state.perAddress[address] = fromAddress + 1
            state.counted += 1
            return (.admitted, victim)
        }
        if let victim {
            metrics?.connectionShed(.idleEvicted)
            victim.close(promise: nil)
        }
        switch admission {
        case .admitted: break
        case .refused(.addressAtLimit): metrics?.connectionShed(.addressAtLimit)
        case .refused(.serverFull): metrics?.connectionShed(.serverFull)
        }
        return admission
    }

    /// The connection has closed.
    package func release(_ channel: any Channel) {
        state.withLock { state in
            guard let connection = state.connections.removeValue(forKey: ObjectIdentifier(channel)) else { return }
            if !connection.evicted { state.counted -= 1 }
            let remaining = state.perAddress[connection.address, default: 1] - 1
            state.perAddress[connection.address] = remaining > 0 ? remaining : nil
        }
    }

    /// A request's head arrived: the connection is busy until its response is written.
    func requestStarted(_ channel: any Channel) {
        state.withLock { $0.connections[ObjectIdentifier(channel)]?.idleSince = nil }
    }

    /// A response was written: the connection is idle until its next request.
    func responseFinished(_ channel: any Channel) {
        state.withLock { state in
            state.tick += 1
            let tick = state.tick
            state.connections[ObjectIdentifier(channel)]?.idleSince = tick
        }
    }

    /// Open connections counted against the total, for tests and the log.
    package var openConnections: Int { state.withLock { $0.counted } }

    private static func longestIdleOfBusiestAddress(_ state: State) -> ObjectIdentifier? {
        var best: (key: ObjectIdentifier, held: Int, idleSince: UInt64)?
        for (key, connection) in state.connections where !connection.evicted {
            guard let idleSince = connection.idleSince else { continue }
            let held = state.perAddress[connection.address, default: 0]
            if let current = best, current.held > held || (current.held == held && current.idleSince <= idleSince) { continue }
            best = (key, held, idleSince)
        }
        return best?.key
    }
}

/// The first handler of every connection, placed once the ``ConnectionLimiter`` has decided
/// about it: an admitted connection gives its place back when it closes; a refused one is
/// answered 503 and closed as soon as it is active, and nothing it sends is read.
package final class ConnectionAdmissionHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer

    private let limiter: ConnectionLimiter
    /// nil for an admitted connection.
    private let refusal: ConnectionLimiter.Refusal?
    private var holdsPlace: Bool

    package init(limiter: ConnectionLimiter, refusal: ConnectionLimiter.Refusal?) {
        self.limiter = limiter
        self.refusal = refusal
        self.holdsPlace = refusal == nil
    }

    /// Raw bytes: the refused connection never reaches the HTTP parser or the application.
    static func refusal(_ reason: ConnectionLimiter.Refusal) -> ByteBuffer {
        let detail = reason == .addressAtLimit
            ? "Too many connections from this address; close some, or wait, and try again."
            : "The server has too many connections; try again in a few seconds."
        return APIError(.serviceUnavailable, "too_many_connections", detail, headers: [.retryAfter: "5"]).closingHTTP1Response
    }

    package func channelActive(context: ChannelHandlerContext) {
        guard let refusal else {
            context.fireChannelActive()
            return
        }
        // The answer and the close cost one write.
        let channel = context.channel
        context.writeAndFlush(NIOAny(Self.refusal(refusal))).whenComplete { _ in channel.close(promise: nil) }
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard refusal == nil else { return }
        context.fireChannelRead(data)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        if holdsPlace {
            holdsPlace = false
            limiter.release(context.channel)
        }
        context.fireChannelInactive()
    }
}
