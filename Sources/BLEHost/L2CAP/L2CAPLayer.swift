import Logging

/// What the layers above learn about links, in the order the controller reported it.
public enum LinkEvent: Sendable {
    /// A connection completed, with its ATT channel, or a connection attempt ended without a link
    /// (`attChannel` nil, `event.status` says why).
    case connectionComplete(LEConnectionCompleteEvent, attChannel: L2CAPChannel?)
    /// The link on `handle` closed; its ATT channel has finished.
    case closed(handle: UInt16, reason: HCIStatusCode)
}

/// L2CAP over LE ACL links: reassembles incoming ACL fragments into frames, routes them by channel ID
/// (ATT to an `L2CAPChannel` per connection, signaling and SMP answered here, anything else dropped),
/// and fragments outgoing frames to the controller's ACL buffer size.
///
/// It owns the table of open links by handle. The controller's connection events reach it in one
/// ordered stream with the ACL data, and it passes them on (`links`) in the same order, each
/// opened link with its channel, so that GAP and ATT follow the same table and a reused handle
/// never mixes two links.
public actor L2CAPLayer {
    public struct Configuration: Sendable {
        public var reassembly = ACLReassembler.Limits()
        /// ATT payloads buffered per channel before new ones are dropped, should the layer above stall.
        public var channelBufferLimit = 64
        public init() {}
    }

    private let hci: HostControllerInterface
    private let configuration: Configuration
    private let clock: any HostClock
    private let logger: Logger
    private var reassembler: ACLReassembler
    private var attChannels: [UInt16: L2CAPChannel] = [:]
    /// Handles whose LE Connection Complete has arrived and whose Disconnection Complete has not.
    private var openLinks: Set<UInt16> = []
    private let linkContinuation: AsyncStream<LinkEvent>.Continuation

    /// Links opening and closing, in controller order; never drops an event. One consumer (GAP).
    public nonisolated let links: AsyncStream<LinkEvent>

    /// Subscribes to the controller's events and ACL data; create exactly one per `HostControllerInterface`
    /// (ACL data has a single consumer) and keep it referenced: its background tasks hold it only weakly,
    /// so the layer stops when its owner lets go of it.
    public init(hci: HostControllerInterface, configuration: Configuration = Configuration(),
                clock: any HostClock = SystemHostClock(), logger: Logger = Logger(label: "tracer.l2cap")) async {
        self.hci = hci
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        reassembler = ACLReassembler(limits: configuration.reassembly)
        (links, linkContinuation) = AsyncStream.makeStream(of: LinkEvent.self, bufferingPolicy: .unbounded)
        let acl = hci.incomingACL
        Task { [weak self] in
            for await traffic in acl {
                switch traffic {
                case .data(let packet): await self?.receive(packet)
                case .connectionComplete(let event): await self?.connectionCompleted(event)
                case .connectionClosed(let handle, let reason): await self?.connectionClosed(handle: handle, reason: reason)
                }
            }
            await self?.closeAllChannels()
        }
        let sweepInterval = configuration.reassembly.timeout
        let firstSweep = clock.now.advanced(by: sweepInterval)
        Task { [weak self, clock] in
            var nextSweep = firstSweep
            while (try? await clock.sleep(until: nextSweep)) != nil {
                guard let self else { return }
                await self.expireStaleFrames()
                nextSweep = clock.now.advanced(by: sweepInterval)
            }
        }
    }

    /// The connections with an ATT channel: a test seam, so that a test awaits a frame's arrival
    /// instead of sleeping.
    var attChannelHandles: Set<UInt16> { Set(attChannels.keys) }

    /// The ATT channel of a connection. Call it when the connection completes; ATT data that arrives first is
    /// kept for it. The channel's `incoming` finishes when the connection closes.
    public func attChannel(connectionHandle: UInt16) -> L2CAPChannel {
        let handle = connectionHandle & 0x0FFF
        if let existing = attChannels[handle] { return existing }
        let channel = L2CAPChannel(
            connectionHandle: handle, channelID: L2CAPChannelIdentifier.attribute, layer: self,
            bufferLimit: configuration.channelBufferLimit)
        attChannels[handle] = channel
        return channel
    }

    private func connectionCompleted(_ event: LEConnectionCompleteEvent) {
        guard event.status.isSuccess else {
            linkContinuation.yield(.connectionComplete(event, attChannel: nil))
            return
        }
        let handle = event.connectionHandle & 0x0FFF
        if openLinks.contains(handle) {
            // The controller reused a handle whose Disconnection Complete never came: that link is
            // gone, and its channel must not carry the new link's data.
            logger.debug("handle reused without a disconnection; closing the old link", metadata: ["handle": "\(handle)"])
            connectionClosed(handle: handle, reason: .unknownConnectionIdentifier)
        }
        openLinks.insert(handle)
        // ATT data that arrived before the completion (controllers may send it first) waits in the
        // channel made for it.
        linkContinuation.yield(.connectionComplete(event, attChannel: attChannel(connectionHandle: handle)))
    }

    /// Forgets a connection: finishes its channel, drops any partly reassembled frame, and tells
    /// the layers above.
    public func connectionClosed(handle: UInt16, reason: HCIStatusCode) {
        reassembler.discard(connectionHandle: handle)
        attChannels.removeValue(forKey: handle)?.continuation.finish()
        if openLinks.remove(handle) != nil {
            linkContinuation.yield(.closed(handle: handle, reason: reason))
        }
    }

    /// Closes the link `channel` belongs to, if it is still open: for a link the controller no
    /// longer knows (it refused to disconnect it). A later link on the same handle is left alone.
    public func linkVanished(_ channel: L2CAPChannel) {
        guard attChannels[channel.connectionHandle] === channel else { return }
        connectionClosed(handle: channel.connectionHandle, reason: .unknownConnectionIdentifier)
    }

    func send(_ payload: [UInt8], on channel: L2CAPChannel) async throws(L2CAPError) {
        // A channel of a closed connection must not write to a later connection that reuses its handle.
        guard attChannels[channel.connectionHandle] === channel else {
            throw .channelClosed(connectionHandle: channel.connectionHandle, channelID: channel.channelID)
        }
        try await sendFrame(L2CAPBasicFrame(channelID: channel.channelID, payload: payload), handle: channel.connectionHandle)
    }

    private func sendFrame(_ frame: L2CAPBasicFrame, handle: UInt16) async throws(L2CAPError) {
        guard let buffers = await hci.aclBuffers else { throw .hci(.aclBuffersUnknown) }
        let fragments = ACLFragmentation.fragments(
            of: try frame.encode(), connectionHandle: handle, maximumPacketLength: buffers.packetLength)
        do {
            try await hci.sendACL(fragments)
        } catch {
            throw .hci(error)
        }
    }

    private func receive(_ packet: ACLDataPacket) async {
        switch reassembler.receive(packet, now: clock.now) {
        case .needMore:
            return
        case .dropped(let reason):
            logger.debug("dropping ACL data", metadata: ["reason": "\(reason)"])
        case .frame(let handle, let frame):
            await route(frame, handle: handle)
        }
    }

    private func route(_ frame: L2CAPBasicFrame, handle: UInt16) async {
        switch frame.channelID {
        case L2CAPChannelIdentifier.attribute:
            if case .dropped = attChannel(connectionHandle: handle).continuation.yield(frame.payload) {
                logger.warning("ATT channel backlog full, dropping PDU", metadata: ["handle": "\(handle)"])
            }
        case L2CAPChannelIdentifier.leSignaling:
            guard let reply = LESignalingResponder.reply(to: frame.payload) else { return }
            logger.debug("answering LE signaling", metadata: ["handle": "\(handle)", "code": "\(reply.code)"])
            await sendReply(L2CAPBasicFrame(channelID: frame.channelID, payload: reply.encode()), handle: handle)
        case L2CAPChannelIdentifier.securityManager:
            guard let reply = SecurityManagerResponder.reply(to: frame.payload) else { return }
            logger.debug("refusing pairing", metadata: ["handle": "\(handle)"])
            await sendReply(L2CAPBasicFrame(channelID: frame.channelID, payload: reply.encode()), handle: handle)
        default:
            logger.debug("dropping frame for unsupported channel", metadata: [
                "handle": "\(handle)", "cid": "0x\(String(frame.channelID, radix: 16))", "length": "\(frame.payload.count)",
            ])
        }
    }

    private func sendReply(_ frame: L2CAPBasicFrame, handle: UInt16) async {
        do {
            try await sendFrame(frame, handle: handle)
        } catch {
            logger.debug("could not send L2CAP reply", metadata: ["handle": "\(handle)", "error": "\(error)"])
        }
    }

    private func expireStaleFrames() {
        for handle in reassembler.expireStale(now: clock.now) {
            logger.debug("dropping unfinished L2CAP frame after timeout", metadata: ["handle": "\(handle)"])
        }
    }

    private func closeAllChannels() {
        for channel in attChannels.values { channel.continuation.finish() }
        attChannels = [:]
        openLinks = []
        linkContinuation.finish()
    }
}
