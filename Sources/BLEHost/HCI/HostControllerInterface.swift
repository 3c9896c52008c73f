import Logging

/// The host side of HCI over one transport: sends commands and waits for their completion with flow control
/// and timeouts, meters ACL data against the controller's buffers, and fans events out to the layers above.
public actor HostControllerInterface {
    public struct Configuration: Sendable {
        /// Every command fails with `HCIError.commandTimedOut` if the controller does not answer in
        /// time: some never answer commands they do not implement. On every controller, as Linux's
        /// HCI_CMD_TIMEOUT, since a timeout costs nothing where answers come.
        /// A command whose opcode still owes a late answer waits for it at most this long too, and
        /// fails the same way if it does not come.
        public var commandTimeout: Duration = .seconds(2)
        /// Events buffered per subscriber before the oldest are dropped; advertising reports can arrive in floods.
        public var eventBufferLimit = 1024
        public init() {}
    }

    /// ACL data from the controller and the lifecycle of connections (LE Connection Complete, in
    /// success or failure, and Disconnection Complete), in arrival order and never dropped, for the
    /// L2CAP layer, which keeps the table of links every layer above follows. One stream for all,
    /// because a controller reuses a closed connection's handle: data of the next connection on that
    /// handle must not be taken for the closed one's, which separately consumed streams allowed.
    public nonisolated let incomingACL: AsyncStream<ACLTraffic>

    private let transport: any HCITransport
    private let configuration: Configuration
    private let clock: any HostClock
    private let logger: Logger
    private let aclContinuation: AsyncStream<ACLTraffic>.Continuation

    // Command flow control: credits granted by Num_HCI_Command_Packets.
    private var commandCredits = 1
    /// Commands waiting for a credit, earliest first; each is handed its credit by a fire.
    private var creditWaiters: [OnceSignal<Void>] = []
    /// Armed while commands wait for a credit: a controller that answered with
    /// Num_HCI_Command_Packets = 0 owes a later event that returns one (a NOP Command Complete),
    /// and one that never sends it would hold every later command for ever (Linux resets such a
    /// controller after 4 s: `hci_ncmd_timeout`).
    private var creditWatch: Task<Void, Never>?
    private var pendingCommands: [UInt64: PendingCommand] = [:]
    private var nextIdentifier: UInt64 = 0

    // Late answers. An answer names only its opcode, so the late answer to a command that timed out
    // would be taken for the answer to the next command with that opcode (Linux's hci_cmd_complete
    // matches by opcode alone and has this hole; a credit count does not close it, since the credit
    // comes back at the timeout). The host counts
    // the answers each opcode still owes, drops them when they come, and sends no command with an
    // owing opcode until they have come or HCI Reset has completed; other opcodes go on meanwhile.
    private var lateAnswersOwed: [HCIOpcode: Int] = [:]
    private var lateAnswerWaiters: [UInt64: LateAnswerWaiter] = [:]

    // ACL flow control.
    public private(set) var aclBuffers: ACLBufferSize?
    private var aclCredits = 0
    private var outstandingACL: [UInt16: Int] = [:]
    private var aclQueue: [QueuedACLPacket] = []
    private var aclBatchWaiters: [UInt64: OnceSignal<Result<Void, HCIError>>] = [:]
    private var isPumpingACL = false

    private var subscribers: [UInt64: AsyncStream<HCIEvent>.Continuation] = [:]
    private var transportFailure: HCITransportError?

    private enum CommandOutcome: Sendable {
        case complete(returnParameters: [UInt8])
        case status(HCIStatusCode)
    }

    private struct PendingCommand {
        var opcode: HCIOpcode
        /// The answer or the failure, the first that comes: the sender waits for it through a
        /// cancellation, since an answer nobody waits for would be taken for the next command's.
        let outcome = OnceSignal<Result<CommandOutcome, HCIError>>()
        var timeout: Task<Void, Never>?

        var result: Result<CommandOutcome, HCIError>? { outcome.value }
    }

    private struct LateAnswerWaiter {
        var opcode: HCIOpcode
        /// True when the late answer came (or the opcode was freed), false at the timeout.
        let came = OnceSignal<Bool>()
        var timeout: Task<Void, Never>?
    }

    private struct QueuedACLPacket {
        var packet: ACLDataPacket
        var batch: UInt64
        var isLastOfBatch: Bool
    }

    public init(transport: any HCITransport, configuration: Configuration = Configuration(),
                clock: any HostClock = SystemHostClock(), logger: Logger = Logger(label: "tracer.hci")) {
        self.transport = transport
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        (incomingACL, aclContinuation) = AsyncStream.makeStream(of: ACLTraffic.self, bufferingPolicy: .unbounded)
        // Ends by itself when the transport's stream finishes, which close() causes.
        Task { [weak self] in
            do {
                for try await packet in transport.incoming {
                    guard let self else { return }
                    await self.receive(packet)
                }
                await self?.transportEnded(.closed)
            } catch {
                await self?.transportEnded(error as? HCITransportError ?? .disconnected(reason: "\(error)"))
            }
        }
    }

    // MARK: Events

    /// A new stream of every event except Command Complete, Command Status and Number Of Completed Packets,
    /// which this actor consumes. Each caller gets its own stream; it finishes when the transport ends.
    public func events() -> AsyncStream<HCIEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: HCIEvent.self, bufferingPolicy: .bufferingNewest(configuration.eventBufferLimit))
        if transportFailure != nil {
            continuation.finish()
            return stream
        }
        let identifier = makeIdentifier()
        subscribers[identifier] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(identifier) }
        }
        return stream
    }

    private func unsubscribe(_ identifier: UInt64) { subscribers[identifier] = nil }

    /// The transport's failure, once it has failed.
    public var failure: HCITransportError? { transportFailure }

    // MARK: Commands

    /// Sends a command answered by Command Complete and returns its decoded return parameters.
    @discardableResult
    public func send<Command: HCICommandWithReturnParameters>(_ command: Command) async throws(HCIError) -> Command.ReturnParameters {
        let outcome = try await execute(command.packet, opcode: Command.opcode)
        switch outcome {
        case .status(let status):
            throw status.isSuccess ? .unexpectedCompletion(opcode: Command.opcode) : .commandFailed(opcode: Command.opcode, status: status)
        case .complete(let returnParameters):
            guard let statusByte = returnParameters.first else {
                throw .malformedReturnParameters(opcode: Command.opcode, .truncated(field: "Status", needed: 1, available: 0))
            }
            let status = HCIStatusCode(rawValue: statusByte)
            guard status.isSuccess else { throw .commandFailed(opcode: Command.opcode, status: status) }
            do {
                return try Command.ReturnParameters(decoding: Array(returnParameters.dropFirst()))
            } catch {
                throw .malformedReturnParameters(opcode: Command.opcode, error)
            }
        }
    }

    /// Sends a command answered by Command Status; returns once the controller has accepted it.
    /// Its outcome arrives later as an event (for example LE Connection Complete).
    public func send<Command: HCICommandWithStatus>(_ command: Command) async throws(HCIError) {
        let outcome = try await execute(command.packet, opcode: Command.opcode)
        let status: HCIStatusCode
        switch outcome {
        case .status(let code): status = code
        // Controllers answer some refused commands with a bare Command Complete instead.
        case .complete(let returnParameters): status = HCIStatusCode(rawValue: returnParameters.first ?? 0x01)
        }
        guard status.isSuccess else { throw .commandFailed(opcode: Command.opcode, status: status) }
    }

    private func execute(_ packet: HCIPacket, opcode: HCIOpcode) async throws(HCIError) -> CommandOutcome {
        while true {
            while lateAnswersOwed[opcode] != nil {
                if let transportFailure { throw .transport(transportFailure) }
                if await !lateAnswerCame(for: opcode) {
                    if let transportFailure { throw .transport(transportFailure) }
                    // A further timeout without the late answer: it is taken as lost, and this
                    // command goes out. Holding the opcode until a Reset would stop a node from ever
                    // connecting (or scanning) again while the transport stays up, since nothing else
                    // resets the controller then; an answer later still would be mistaken, a risk
                    // two timeouts late.
                    if lateAnswersOwed.removeValue(forKey: opcode) != nil {
                        logger.warning("the late answer never came; the opcode is free again", metadata: ["opcode": "\(opcode)"])
                        endLateAnswerWaits { $0 == opcode }
                    }
                }
            }
            if let transportFailure { throw .transport(transportFailure) }
            await acquireCommandCredit()
            if let transportFailure { throw .transport(transportFailure) }
            // Another command with this opcode may have timed out while this one waited for a credit.
            guard lateAnswersOwed[opcode] != nil else { break }
            commandCredits += 1
            grantCommandCredits()
        }

        // Registered before sending so that an answer arriving during the send is not lost.
        let identifier = makeIdentifier()
        let command = PendingCommand(opcode: opcode)
        pendingCommands[identifier] = command
        do {
            try await transport.send(packet)
        } catch {
            pendingCommands[identifier] = nil
            restoreCommandCreditIfIdle()
            // A write that fails means the link is gone, even if the reader has not seen the end
            // of the stream yet: report it now so that `failure` and every waiter agree.
            if error != .closed { transportEnded(error) }
            throw .transport(error)
        }
        pendingCommands[identifier]?.timeout = clock.timer(after: configuration.commandTimeout) { [weak self] in
            await self?.expireCommand(identifier)
        }

        // An answer that came during the send is taken without leaving the actor, as before the kit.
        let result: Result<CommandOutcome, HCIError>
        if let early = command.result {
            result = early
        } else {
            result = await command.outcome.waitThroughCancellation()
        }
        pendingCommands[identifier] = nil
        return try result.get()
    }

    private func acquireCommandCredit() async {
        if commandCredits > 0, creditWaiters.isEmpty {
            commandCredits -= 1
            return
        }
        watchForWithheldCredit()
        let credit = OnceSignal<Void>()
        creditWaiters.append(credit)
        // Through a cancellation: a credit handed to a waiter that left would be lost.
        await credit.waitThroughCancellation()
    }

    /// Timer: one command timeout for a credit to come back.
    private func watchForWithheldCredit() {
        guard creditWatch == nil else { return }
        creditWatch = clock.timer(after: configuration.commandTimeout) { [weak self] in
            await self?.creditWithheld()
        }
    }

    /// No credit came back within a command timeout. With a command in flight its own timeout
    /// returns the credit (`expireCommand`); with none, the controller took them all away
    /// (Num_HCI_Command_Packets = 0) and never gave one back: the host takes one, as it does for
    /// an unanswered command, so that the next command goes out and, if the controller is gone
    /// silent, fails by its own timeout instead of waiting for ever.
    private func creditWithheld() {
        creditWatch = nil
        guard !creditWaiters.isEmpty else { return }
        if commandCredits == 0, !pendingCommands.values.contains(where: { $0.result == nil }) {
            logger.warning("the controller gave no command credit back within the command timeout; sending the next command anyway",
                           metadata: ["waiting": "\(creditWaiters.count)"])
            commandCredits = 1
            grantCommandCredits()
        }
        if !creditWaiters.isEmpty { watchForWithheldCredit() }
    }

    /// Hands credits to waiting commands in arrival order; each resumed waiter owns the credit it was given.
    private func grantCommandCredits() {
        while commandCredits > 0, !creditWaiters.isEmpty {
            commandCredits -= 1
            creditWaiters.removeFirst().fire(())
        }
        // Nobody waits: a later wait gets a whole timeout of its own.
        if creditWaiters.isEmpty {
            creditWatch?.cancel()
            creditWatch = nil
        }
    }

    /// A command the controller never answered also never returns its credit; without this a single
    /// ignored command would block every later one.
    private func restoreCommandCreditIfIdle() {
        if commandCredits == 0, !pendingCommands.values.contains(where: { $0.result == nil }) {
            commandCredits = 1
        }
        grantCommandCredits()
    }

    private func expireCommand(_ identifier: UInt64) {
        guard let pending = pendingCommands[identifier], pending.result == nil else { return }
        logger.warning("HCI command not answered", metadata: ["opcode": "\(pending.opcode)"])
        // A late answer to Reset is harmless to the next Reset, which is also how the host recovers.
        if pending.opcode != Reset.opcode { lateAnswersOwed[pending.opcode, default: 0] += 1 }
        resolve(identifier, with: .failure(.commandTimedOut(opcode: pending.opcode, after: configuration.commandTimeout)))
        restoreCommandCreditIfIdle()
    }

    private func resolve(_ identifier: UInt64, with result: Result<CommandOutcome, HCIError>) {
        guard var pending = pendingCommands[identifier] else { return }
        pending.timeout?.cancel()
        pending.timeout = nil
        pendingCommands[identifier] = pending
        pending.outcome.fire(result)
    }

    private func completeCommand(opcode: HCIOpcode, numHCICommandPackets: UInt8, outcome: CommandOutcome) {
        commandCredits = Int(numHCICommandPackets)
        if let owed = lateAnswersOwed[opcode] {
            // Controllers answer commands of one opcode in the order they were sent: the oldest is the late one.
            logger.notice("dropping the late answer to a command that timed out", metadata: ["opcode": "\(opcode)"])
            lateAnswersOwed[opcode] = owed > 1 ? owed - 1 : nil
            if owed == 1 { endLateAnswerWaits { $0 == opcode } }
            grantCommandCredits()
            return
        }
        if opcode == Reset.opcode, !lateAnswersOwed.isEmpty {
            // A controller that has reset answers nothing sent before.
            lateAnswersOwed = [:]
            endLateAnswerWaits { _ in true }
        }
        // The oldest unanswered command with this opcode is the one being answered.
        let match = pendingCommands
            .filter { $0.value.opcode == opcode && $0.value.result == nil }
            .min { $0.key < $1.key }
        if let match {
            resolve(match.key, with: .success(outcome))
        } else if opcode.rawValue != 0 {
            logger.debug("answer to a command not waited for", metadata: ["opcode": "\(opcode)"])
        }
        grantCommandCredits()
    }

    /// Waits until `opcode` owes no late answer (true) or one command timeout has passed (false).
    private func lateAnswerCame(for opcode: HCIOpcode) async -> Bool {
        let identifier = makeIdentifier()
        let waiter = LateAnswerWaiter(
            opcode: opcode,
            timeout: clock.timer(after: configuration.commandTimeout) { [weak self] in
                await self?.endLateAnswerWait(identifier, came: false)
            })
        lateAnswerWaiters[identifier] = waiter
        return await waiter.came.waitThroughCancellation()
    }

    private func endLateAnswerWait(_ identifier: UInt64, came: Bool) {
        guard let waiter = lateAnswerWaiters.removeValue(forKey: identifier) else { return }
        waiter.timeout?.cancel()
        waiter.came.fire(came)
    }

    private func endLateAnswerWaits(where matches: (HCIOpcode) -> Bool) {
        for (identifier, waiter) in lateAnswerWaiters where matches(waiter.opcode) {
            endLateAnswerWait(identifier, came: true)
        }
    }

    // MARK: ACL data

    /// Sets the controller's ACL buffers; `initialize()` does this from the controller's answers.
    public func configureACLBuffers(_ buffers: ACLBufferSize) {
        let inFlight = outstandingACL.values.reduce(0, +)
        aclBuffers = buffers
        aclCredits = max(0, buffers.packetCount - inFlight)
        pumpACL()
    }

    /// ACL credits not in use, for tests and diagnostics.
    public var availableACLCredits: Int { aclCredits }

    /// Test seams: a sender parked at a credit gate shows here, so that a test awaits the parking
    /// instead of sleeping and then checking that nothing was sent.
    var commandsWaitingForCredit: Int { creditWaiters.count }
    var queuedACLPackets: Int { aclQueue.count }
    /// True while packets are being handed to the transport; once false, nothing more goes out
    /// until a credit returns or a packet is queued, so a test can check what was sent.
    var isDrainingACL: Bool { isPumpingACL }

    /// Queues ACL packets (the fragments of one L2CAP frame) to be sent in order as controller buffers free up,
    /// and returns once the last one has been handed to the transport. Fragments of different calls never interleave.
    public func sendACL(_ packets: [ACLDataPacket]) async throws(HCIError) {
        if let transportFailure { throw .transport(transportFailure) }
        guard aclBuffers != nil else { throw .aclBuffersUnknown }
        guard !packets.isEmpty else { return }
        let batch = makeIdentifier()
        for (index, packet) in packets.enumerated() {
            aclQueue.append(QueuedACLPacket(packet: packet, batch: batch, isLastOfBatch: index == packets.count - 1))
        }
        let sent = OnceSignal<Result<Void, HCIError>>()
        aclBatchWaiters[batch] = sent
        pumpACL()
        // Through a cancellation: the batch's fragments are queued and go out all the same.
        try await sent.waitThroughCancellation().get()
    }

    private func pumpACL() {
        guard !isPumpingACL else { return }
        isPumpingACL = true
        Task { await self.drainACLQueue() }
    }

    private func drainACLQueue() async {
        defer { isPumpingACL = false }
        while aclCredits > 0, !aclQueue.isEmpty {
            let next = aclQueue.removeFirst()
            aclCredits -= 1
            outstandingACL[next.packet.connectionHandle, default: 0] += 1
            do {
                try await transport.send(next.packet.packet)
            } catch {
                aclCredits += 1
                outstandingACL[next.packet.connectionHandle, default: 1] -= 1
                aclQueue.removeAll { $0.batch == next.batch }
                aclBatchWaiters.removeValue(forKey: next.batch)?.fire(.failure(.transport(error)))
                continue
            }
            if next.isLastOfBatch {
                aclBatchWaiters.removeValue(forKey: next.batch)?.fire(.success(()))
            }
        }
    }

    private func returnACLCredits(handle: UInt16, count: Int) {
        let outstanding = outstandingACL[handle, default: 0]
        // A controller that reports more than was sent must not inflate the credits beyond its buffers.
        let returned = min(count, outstanding)
        if returned < count {
            logger.debug("controller completed more ACL packets than were outstanding", metadata: ["handle": "\(handle)"])
        }
        outstandingACL[handle] = outstanding - returned == 0 ? nil : outstanding - returned
        aclCredits += returned
        pumpACL()
    }

    /// The host gives up on a link whose end the controller never reported (a Disconnect it
    /// accepted and never completed): as at its Disconnection Complete, the link's data-buffer
    /// credits come back and the sends still queued for it fail, so that links after it are not
    /// left waiting for buffers the controller will never report free.
    package func abandonConnection(handle: UInt16) {
        connectionEnded(handle: handle)
    }

    private func connectionEnded(handle: UInt16) {
        // The controller flushes a closed connection's buffers without reporting them as completed.
        returnACLCredits(handle: handle, count: outstandingACL[handle, default: 0])
        let abandoned = Set(aclQueue.filter { $0.packet.connectionHandle == handle }.map(\.batch))
        aclQueue.removeAll { abandoned.contains($0.batch) }
        for batch in abandoned {
            aclBatchWaiters.removeValue(forKey: batch)?.fire(.failure(.connectionClosed(handle: handle)))
        }
    }

    // MARK: Receiving

    private func receive(_ packet: HCIPacket) {
        switch packet.type {
        case .event:
            do {
                handle(try HCIEvent(decoding: packet.body))
            } catch {
                logger.warning("dropping malformed HCI event", metadata: ["error": "\(error)", "bytes": "\(packet.body.count)"])
            }
        case .aclData:
            do {
                aclContinuation.yield(.data(try ACLDataPacket(decoding: packet.body)))
            } catch {
                logger.warning("dropping malformed ACL packet", metadata: ["error": "\(error)"])
            }
        default:
            logger.debug("ignoring HCI packet", metadata: ["type": "\(packet.type)"])
        }
    }

    private func handle(_ event: HCIEvent) {
        switch event {
        case .commandComplete(let complete):
            completeCommand(
                opcode: complete.opcode, numHCICommandPackets: complete.numHCICommandPackets,
                outcome: .complete(returnParameters: complete.returnParameters))
            return
        case .commandStatus(let status):
            completeCommand(opcode: status.opcode, numHCICommandPackets: status.numHCICommandPackets, outcome: .status(status.status))
            return
        case .numberOfCompletedPackets(let completed):
            for entry in completed.entries {
                returnACLCredits(handle: entry.connectionHandle, count: Int(entry.completedPackets))
            }
            return
        case .disconnectionComplete(let disconnection) where disconnection.status.isSuccess:
            connectionEnded(handle: disconnection.connectionHandle)
            aclContinuation.yield(.connectionClosed(handle: disconnection.connectionHandle, reason: disconnection.reason))
        case .leMeta(let meta):
            if let completion = meta.connectionComplete {
                // A handle reused without a Disconnection Complete (a controller can drop it) takes
                // the old link's packets and credits with it.
                if completion.status.isSuccess, outstandingACL[completion.connectionHandle] != nil {
                    connectionEnded(handle: completion.connectionHandle)
                }
                aclContinuation.yield(.connectionComplete(completion))
            }
        case .hardwareError(let error):
            logger.error("controller hardware error", metadata: ["code": "\(error.hardwareCode)"])
        default:
            break
        }
        for subscriber in subscribers.values { subscriber.yield(event) }
    }

    private func transportEnded(_ error: HCITransportError) {
        guard transportFailure == nil else { return }
        transportFailure = error
        logger.notice("HCI transport ended", metadata: ["reason": "\(error)"])
        for identifier in pendingCommands.keys { resolve(identifier, with: .failure(.transport(error))) }
        endLateAnswerWaits { _ in true }
        commandCredits = 1
        for waiter in creditWaiters { waiter.fire(()) }
        creditWaiters = []
        creditWatch?.cancel()
        creditWatch = nil
        aclQueue = []
        for waiter in aclBatchWaiters.values { waiter.fire(.failure(.transport(error))) }
        aclBatchWaiters = [:]
        for subscriber in subscribers.values { subscriber.finish() }
        subscribers = [:]
        aclContinuation.finish()
    }

    /// Closes the transport; pending and later operations fail with `HCIError.transport(.closed)`.
    public func close() async {
        await transport.close()
        transportEnded(.closed)
    }

    private func makeIdentifier() -> UInt64 {
        nextIdentifier += 1
        return nextIdentifier
    }
}

/// What the L2CAP layer receives from the controller, in the order it arrived.
public enum ACLTraffic: Sendable, Equatable {
    case data(ACLDataPacket)
    /// LE Connection Complete or LE Enhanced Connection Complete, successful or not: a link opens
    /// on the handle, or a connection attempt ended without one.
    case connectionComplete(LEConnectionCompleteEvent)
    /// Disconnection Complete: the handle may next carry another connection.
    case connectionClosed(handle: UInt16, reason: HCIStatusCode)
}
