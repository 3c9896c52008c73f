/// One ATT bearer: the ATT protocol over one fixed L2CAP channel, in both roles at once.
///
/// As a client it runs one request at a time (callers queue) and matches each answer to it;
/// as a server it hands the peer's requests and commands, one at a time and in order, to an
/// `ATTServerHandler`. A request or indication unanswered within the transaction timeout
/// closes the bearer for good, as Core Spec Vol 3 Part F 3.3.3 requires.
public actor ATTBearer {
    /// The two kinds of transaction this side can start; each allows one outstanding at a time.
    private enum Direction: Hashable {
        case clientRequest
        case serverIndication
    }

    private struct PendingTransaction {
        let id: UInt64
        let requestOpcode: ATTOpcode
        let expectedAnswer: ATTOpcode
        /// The answer, the timeout or the bearer's end, the first that comes.
        let outcome: OnceSignal<Result<ATTPDU, ATTBearerError>>
        let timeoutTask: Task<Void, Never>
    }

    private struct TransactionSlot {
        var isBusy = false
        /// Callers waiting for the slot, earliest first: each is handed it, or the bearer's end.
        var waiters: [OnceSignal<Result<Void, ATTBearerError>>] = []
    }

    private static let peerInboxCapacity = 256

    public nonisolated let configuration: ATTBearerConfiguration
    private let clock: any HostClock
    /// The ATT_MTU in force: 23 until an exchange, then the negotiated value.
    public private(set) var mtu: Int = ATTBearerConfiguration.defaultMTU
    /// Set once, when the bearer closes.
    public private(set) var closeReason: ATTBearerCloseReason?

    private let serverHandler: (any ATTServerHandler)?
    private let valueHandler: (@Sendable (ATTHandleValue) async -> Void)?

    // All outgoing PDUs go through one queue so that they leave in the order they were produced.
    private let outbox: AsyncStream<[UInt8]>.Continuation
    // Peer-initiated PDUs are processed off the receive path, so a slow handler never delays
    // the matching of answers to our own transactions.
    private let serverInbox: AsyncStream<[UInt8]>.Continuation
    private let valueInbox: AsyncStream<[UInt8]>.Continuation

    private var slots: [Direction: TransactionSlot] = [:]
    /// Requests queued behind the one under way: a test's sign that a request reached the bearer
    /// and was held, not sent.
    var requestsWaitingTheirTurn: Int { slots[.clientRequest]?.waiters.count ?? 0 }
    private var pending: [Direction: PendingTransaction] = [:]
    private var transactionCounter: UInt64 = 0

    public init(
        channel: any L2CAPFixedChannel,
        configuration: ATTBearerConfiguration = ATTBearerConfiguration(),
        serverHandler: (any ATTServerHandler)? = nil,
        valueHandler: (@Sendable (ATTHandleValue) async -> Void)? = nil,
        clock: any HostClock = SystemHostClock()
    ) {
        self.configuration = configuration
        self.clock = clock
        self.serverHandler = serverHandler
        self.valueHandler = valueHandler
        let (outgoing, outbox) = AsyncStream.makeStream(of: [UInt8].self)
        // A conforming peer has at most one request outstanding, so only a hostile one can fill
        // these; the excess is dropped rather than held in memory.
        let (serverRequests, serverInbox) = AsyncStream.makeStream(
            of: [UInt8].self, bufferingPolicy: .bufferingOldest(Self.peerInboxCapacity))
        let (peerValues, valueInbox) = AsyncStream.makeStream(
            of: [UInt8].self, bufferingPolicy: .bufferingOldest(Self.peerInboxCapacity))
        self.outbox = outbox
        self.serverInbox = serverInbox
        self.valueInbox = valueInbox
        launchLoops(channel: channel, outgoing: outgoing, serverRequests: serverRequests, peerValues: peerValues)
    }

    // The loops hold the bearer weakly: dropping the last reference to the bearer ends them.
    private nonisolated func launchLoops(
        channel: any L2CAPFixedChannel,
        outgoing: AsyncStream<[UInt8]>,
        serverRequests: AsyncStream<[UInt8]>,
        peerValues: AsyncStream<[UInt8]>
    ) {
        Task { [weak self] in
            for await payload in channel.incoming {
                guard let bearer = self else { return }
                await bearer.route(payload)
            }
            await self?.close(reason: .channelClosed)
        }
        Task { [weak self] in
            for await pdu in outgoing {
                do {
                    try await channel.send(pdu)
                } catch {
                    await self?.close(reason: .sendFailed(String(describing: error)))
                    return
                }
            }
        }
        Task { [weak self] in
            for await payload in serverRequests {
                guard let bearer = self else { return }
                await bearer.serve(payload)
            }
        }
        Task { [weak self] in
            for await payload in peerValues {
                guard let bearer = self else { return }
                await bearer.deliverPeerValue(payload)
            }
        }
    }

    // MARK: Client role

    /// Sends `pdu` and waits for its response. An Error Response becomes `.errorResponse`.
    /// Requests from concurrent callers are sent one after another, never overlapping.
    public func request(_ pdu: ATTPDU) async throws(ATTBearerError) -> ATTPDU {
        guard pdu.opcode.role == .request, let expected = pdu.opcode.expectedResponse else {
            throw .notARequest(pdu.opcode)
        }
        let response = try await transact(pdu, direction: .clientRequest, expecting: expected)
        if case .exchangeMTUResponse(let exchange) = response {
            mtu = configuration.negotiatedMTU(peerRxMTU: exchange.serverRxMTU)
        }
        return response
    }

    /// Offers our receive MTU and returns the negotiated ATT_MTU.
    @discardableResult
    public func exchangeMTU() async throws(ATTBearerError) -> Int {
        _ = try await request(.exchangeMTURequest(ATTExchangeMTURequest(clientRxMTU: configuration.localMTU)))
        return mtu
    }

    /// Sends a command (for example a Write Command); commands are never answered.
    public func send(command: ATTPDU) throws(ATTBearerError) {
        guard command.opcode.role == .command else { throw .notACommand(command.opcode) }
        try enqueueChecked(command.encode())
    }

    // MARK: Server role

    /// Sends a Handle Value Notification.
    public func notify(handle: UInt16, value: [UInt8]) throws(ATTBearerError) {
        try enqueueChecked(ATTHandleValueNotification(handle: handle, value: value).encode())
    }

    /// Sends a Handle Value Indication and waits for the client's confirmation.
    public func indicate(handle: UInt16, value: [UInt8]) async throws(ATTBearerError) {
        let indication = ATTPDU.handleValueIndication(ATTHandleValueIndication(handle: handle, value: value))
        _ = try await transact(indication, direction: .serverIndication, expecting: .handleValueConfirmation)
    }

    /// Closes the bearer: outstanding and queued transactions fail with `.closed(.closedLocally)`.
    public func close() {
        close(reason: .closedLocally)
    }

    // MARK: Transactions

    private func transact(_ pdu: ATTPDU, direction: Direction, expecting expected: ATTOpcode) async throws(ATTBearerError) -> ATTPDU {
        try await acquireSlot(direction)
        defer { releaseSlot(direction) }
        if let closeReason { throw .closed(closeReason) }
        let bytes = pdu.encode()
        guard bytes.count <= mtu else { throw .pduExceedsMTU(length: bytes.count, mtu: mtu) }

        transactionCounter += 1
        let id = transactionCounter
        let timeoutTask = clock.timer(after: configuration.transactionTimeout) { [weak self] in
            await self?.transactionTimedOut(id: id, direction: direction)
        }
        let outcome = OnceSignal<Result<ATTPDU, ATTBearerError>>()
        pending[direction] = PendingTransaction(
            id: id, requestOpcode: pdu.opcode, expectedAnswer: expected,
            outcome: outcome, timeoutTask: timeoutTask)
        outbox.yield(bytes)
        // Through a cancellation: the request is on the air and holds the slot until its answer,
        // the transaction timeout or the bearer's end, one of which always comes.
        return try await outcome.waitThroughCancellation().get()
    }

    private func acquireSlot(_ direction: Direction) async throws(ATTBearerError) {
        if let closeReason { throw .closed(closeReason) }
        if slots[direction, default: TransactionSlot()].isBusy {
            let granted = OnceSignal<Result<Void, ATTBearerError>>()
            slots[direction, default: TransactionSlot()].waiters.append(granted)
            // Through a cancellation: a slot handed to a caller that left would stay busy.
            try await granted.waitThroughCancellation().get()
        } else {
            slots[direction, default: TransactionSlot()].isBusy = true
        }
    }

    /// Hands the slot straight to the next waiter, so a late caller cannot overtake a queued one.
    private func releaseSlot(_ direction: Direction) {
        if slots[direction, default: TransactionSlot()].waiters.isEmpty {
            slots[direction, default: TransactionSlot()].isBusy = false
        } else {
            let next = slots[direction, default: TransactionSlot()].waiters.removeFirst()
            next.fire(.success(()))
        }
    }

    private func complete(_ direction: Direction, with result: (PendingTransaction) -> Result<ATTPDU, ATTBearerError>) {
        guard let transaction = pending.removeValue(forKey: direction) else { return }
        transaction.timeoutTask.cancel()
        transaction.outcome.fire(result(transaction))
    }

    private func transactionTimedOut(id: UInt64, direction: Direction) {
        guard let transaction = pending[direction], transaction.id == id else { return }
        pending[direction] = nil
        close(reason: .transactionTimeout(transaction.requestOpcode))
        transaction.outcome.fire(.failure(.transactionTimedOut(request: transaction.requestOpcode)))
    }

    private func close(reason: ATTBearerCloseReason) {
        guard closeReason == nil else { return }
        closeReason = reason
        for (_, transaction) in pending {
            transaction.timeoutTask.cancel()
            transaction.outcome.fire(.failure(.closed(reason)))
        }
        pending.removeAll()
        for (direction, slot) in slots {
            for waiter in slot.waiters { waiter.fire(.failure(.closed(reason))) }
            slots[direction]?.waiters.removeAll()
        }
        outbox.finish()
        serverInbox.finish()
        valueInbox.finish()
    }

    private func enqueueChecked(_ bytes: [UInt8]) throws(ATTBearerError) {
        if let closeReason { throw .closed(closeReason) }
        guard bytes.count <= mtu else { throw .pduExceedsMTU(length: bytes.count, mtu: mtu) }
        outbox.yield(bytes)
    }

    // MARK: Receiving

    private func route(_ payload: [UInt8]) {
        guard closeReason == nil, let first = payload.first else { return }
        let opcode = ATTOpcode(first)
        switch opcode.role {
        case .request, .command:
            serverInbox.yield(payload)
        case .notification, .indication:
            valueInbox.yield(payload)
        case .response:
            completeClientRequest(with: payload, opcode: opcode)
        case .confirmation:
            // A confirmation nobody waits for is dropped, as is any unsolicited response.
            complete(.serverIndication) { transaction in
                do throws(PacketDecodingError) {
                    return .success(.handleValueConfirmation(try ATTHandleValueConfirmation(decoding: payload)))
                } catch {
                    return .failure(.malformedResponse(request: transaction.requestOpcode, error))
                }
            }
        }
    }

    private func completeClientRequest(with payload: [UInt8], opcode: ATTOpcode) {
        complete(.clientRequest) { transaction in
            let answer: ATTPDU
            do throws(PacketDecodingError) {
                answer = try ATTPDU(decoding: payload)
            } catch {
                return .failure(.malformedResponse(request: transaction.requestOpcode, error))
            }
            if case .errorResponse(let error) = answer, error.requestOpcode == transaction.requestOpcode {
                return .failure(.errorResponse(request: error.requestOpcode, handle: error.handle, code: error.errorCode))
            }
            guard opcode == transaction.expectedAnswer else {
                return .failure(.unexpectedResponse(request: transaction.requestOpcode, received: opcode))
            }
            return .success(answer)
        }
    }

    private func serve(_ payload: [UInt8]) async {
        guard closeReason == nil, let first = payload.first else { return }
        let opcode = ATTOpcode(first)
        let isRequest = opcode.role == .request
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU(decoding: payload)
        } catch {
            if isRequest { answer(.invalidPDU, to: opcode, handle: 0x0000) }
            return
        }
        let context = ATTRequestContext(mtu: mtu)

        if !isRequest {
            // Unknown commands are ignored (3.3.1), known ones never get an answer.
            if case .unknown = pdu { return }
            await serverHandler?.receive(command: pdu, context: context)
            return
        }
        switch pdu {
        case .exchangeMTURequest(let exchange):
            outbox.yield(ATTExchangeMTUResponse(serverRxMTU: configuration.localMTU).encode())
            // The new MTU applies after the response, which is already queued.
            mtu = configuration.negotiatedMTU(peerRxMTU: exchange.clientRxMTU)
        case .unknown:
            answer(.requestNotSupported, to: opcode, handle: 0x0000)
        default:
            guard let serverHandler else {
                answer(.requestNotSupported, to: opcode, handle: pdu.handleForErrorResponse)
                return
            }
            let response = await serverHandler.respond(to: pdu, context: context).encode()
            guard closeReason == nil else { return }
            // A handler bug must not put an oversized PDU on the air.
            if response.count > mtu {
                answer(.unlikelyError, to: opcode, handle: pdu.handleForErrorResponse)
            } else {
                outbox.yield(response)
            }
        }
    }

    private func answer(_ code: ATTErrorCode, to opcode: ATTOpcode, handle: UInt16) {
        outbox.yield(ATTErrorResponse(requestOpcode: opcode, handle: handle, errorCode: code).encode())
    }

    private func deliverPeerValue(_ payload: [UInt8]) async {
        guard closeReason == nil, let pdu = try? ATTPDU(decoding: payload) else { return }
        switch pdu {
        case .handleValueNotification(let notification):
            await valueHandler?(ATTHandleValue(handle: notification.handle, value: notification.value, kind: .notification))
        case .handleValueIndication(let indication):
            await valueHandler?(ATTHandleValue(handle: indication.handle, value: indication.value, kind: .indication))
            guard closeReason == nil else { return }
            outbox.yield(ATTHandleValueConfirmation().encode())
        default:
            return
        }
    }
}
