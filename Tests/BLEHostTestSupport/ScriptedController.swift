import BLEHost
import Synchronization

/// A controller that keeps the LE state a spec-faithful controller keeps (RootCanal 1.10.0's rules,
/// Core Vol 4 Part E 7.8) and refuses what such a controller refuses, with the moments a test
/// chooses for the events that end connection attempts. Init commands are answered as Bumble's
/// controller answers them (h4-reference.txt), except its identity (`State.localVersion`).
///
/// - LE Set Random Address: Command Disallowed while advertising, scanning or initiating.
/// - LE Set Advertising / Scan Parameters: Command Disallowed while that role is on.
/// - LE Create Connection: Command Disallowed while initiating.
/// - LE Create Connection Cancel: Command Disallowed when not initiating; otherwise initiating
///   stops and, after `cancelCompletionDelay`, the attempt ends as `onCancel` says.
package final class ScriptedController: HCITransport {
    /// What a cancelled attempt reports.
    package enum CancelEnding: Sendable {
        /// LE Connection Complete, 0x02 (the spec's answer).
        case unknownConnectionIdentifier
        /// The connection formed in the meantime: LE Connection Complete, success.
        case lateSuccess(handle: UInt16)
        /// Nothing at all, and the controller keeps initiating
        /// (`ControllerQuirks.cancelTakenWithoutEndingAttempt`).
        case ignored
    }

    package struct State {
        package var advertising = false
        package var scanning = false
        /// The peer address bytes of the LE Create Connection under way.
        package var initiating: [UInt8]?
        package var randomAddress: [UInt8]?
        package var cancelEnding = CancelEnding.unknownConnectionIdentifier
        package var cancelCompletionDelay: Duration = .milliseconds(30)
        /// Refuse LE Set Random Address with Command Disallowed regardless of state.
        package var refuseAddressChanges = false
        package var commands: [HCIOpcode] = []
        package var createConnections = 0
        /// LE Create Connection commands accepted while the scanner was off.
        package var createConnectionsWhileNotScanning = 0
        /// LE Create Connection commands refused because one was still under way.
        package var refusedCreateConnections = 0
        /// What happened to connection attempts, in order: "create XX:…", "cancel", "ended 0x02", "ended success".
        package var attemptTimeline: [String] = []
        /// LE Set Advertising Parameters, or LE Set Advertising Enable turning advertising on,
        /// received while initiating: what only another procedure's commands would be.
        package var advertisingCommandsWhileInitiating = 0
        /// The next command with this opcode gets its answer only at `releaseHeldAnswer()`, so that
        /// a test can act while a procedure waits on the controller.
        package var holdAnswerTo: HCIOpcode?
        package var heldAnswer: [UInt8]?
        package var isClosed = false
        /// Disconnect is answered (Command Status, success) but its Disconnection Complete never
        /// comes, as from a controller that lost track of the link.
        package var disconnectionsLeftIncomplete = false
        /// Disconnect is refused with Unknown Connection Identifier, as from a controller whose
        /// link ended without telling the host.
        package var disconnectsRefusedAsUnknown = false
        /// The return parameters of Read Local Version Information after its status: HCI version,
        /// subversion, LMP version, company identifier, LMP subversion (little-endian). A
        /// registered maker (0x05F1) with no known quirks, unless a test names another identity.
        package var localVersion: [UInt8] = [0x09, 0x00, 0x00, 0x09, 0xF1, 0x05, 0x00, 0x00]
    }

    package let incoming: AsyncThrowingStream<HCIPacket, any Error>
    private let continuation: AsyncThrowingStream<HCIPacket, any Error>.Continuation
    package let state = Mutex(State())
    private let initAnswers = FakeTransport.bumbleLike()

    package init() {
        (incoming, continuation) = AsyncThrowingStream.makeStream(of: HCIPacket.self, throwing: (any Error).self)
    }

    package func close() async {
        state.withLock { $0.isClosed = true }
        continuation.finish()
    }

    package func send(_ packet: HCIPacket) async throws(HCITransportError) {
        guard let opcode = FakeTransport.opcode(of: packet) else { return }
        let parameters = Array(packet.body.dropFirst(3))
        let closed = state.withLock { state -> Bool in
            state.commands.append(opcode)
            return state.isClosed
        }
        if closed { throw .closed }
        state.withLock { state in
            let advertisingOn = opcode == LESetAdvertisingParameters.opcode
                || (opcode == LESetAdvertisingEnable.opcode && parameters.first == 1)
            if advertisingOn, state.initiating != nil { state.advertisingCommandsWhileInitiating += 1 }
        }
        switch opcode {
        case LESetRandomAddress.opcode:
            let refused = state.withLock { state -> Bool in
                let busy = state.advertising || state.scanning || state.initiating != nil || state.refuseAddressChanges
                if !busy { state.randomAddress = parameters }
                return busy
            }
            complete(opcode, refused ? .commandDisallowed : .success)
        case LESetAdvertisingParameters.opcode:
            complete(opcode, state.withLock { $0.advertising } ? .commandDisallowed : .success)
        case LESetScanParameters.opcode:
            complete(opcode, state.withLock { $0.scanning } ? .commandDisallowed : .success)
        case LESetAdvertisingEnable.opcode:
            state.withLock { $0.advertising = parameters.first == 1 }
            complete(opcode, .success)
        case LESetScanEnable.opcode:
            state.withLock { $0.scanning = parameters.first == 1 }
            complete(opcode, .success)
        case LECreateConnection.opcode:
            let accepted = state.withLock { state -> Bool in
                guard state.initiating == nil else {
                    state.refusedCreateConnections += 1
                    return false
                }
                state.initiating = Array(parameters[6..<12])
                state.createConnections += 1
                if !state.scanning { state.createConnectionsWhileNotScanning += 1 }
                let peer = (try? BluetoothAddress(littleEndianBytes: Array(parameters[6..<12])))?.description ?? "?"
                state.attemptTimeline.append("create \(peer)")
                return true
            }
            status(opcode, accepted ? .success : .commandDisallowed)
        case LECreateConnectionCancel.opcode:
            let cancelled = state.withLock { state -> (peer: [UInt8], ending: CancelEnding, delay: Duration)? in
                guard let peer = state.initiating else { return nil }
                state.attemptTimeline.append("cancel")
                if case .ignored = state.cancelEnding {} else { state.initiating = nil }
                return (peer, state.cancelEnding, state.cancelCompletionDelay)
            }
            guard let cancelled else {
                complete(opcode, .commandDisallowed)
                return
            }
            complete(opcode, .success)
            switch cancelled.ending {
            case .ignored:
                break
            case .unknownConnectionIdentifier:
                later(cancelled.delay, Self.connectionComplete(status: .unknownConnectionIdentifier, handle: 0, role: .central,
                                                               peer: [0, 0, 0, 0, 0, 0]))
            case .lateSuccess(let handle):
                later(cancelled.delay, Self.connectionComplete(status: .success, handle: handle, role: .central, peer: cancelled.peer))
            }
        case ReadLocalVersionInformation.opcode:
            let version = state.withLock { $0.localVersion }
            answer(opcode, [0x04] + CommandCompleteEvent(numHCICommandPackets: 1, opcode: opcode, returnParameters: [0] + version).encode())
        case Disconnect.opcode:
            if state.withLock({ $0.disconnectsRefusedAsUnknown }) {
                status(opcode, .unknownConnectionIdentifier)
                return
            }
            status(opcode, .success)
            guard !state.withLock({ $0.disconnectionsLeftIncomplete }) else { return }
            let handle = UInt16(parameters[0]) | UInt16(parameters[1]) << 8
            inject([0x04, 0x05, 0x04, 0x00, UInt8(handle & 0xFF), UInt8(handle >> 8), 0x16])
        default:
            for reply in initAnswers(packet) { answer(opcode, reply) }
        }
    }

    // MARK: What a test makes the controller do

    /// The connection under way forms: LE Connection Complete, success, as central.
    package func connectInitiatedConnection(handle: UInt16) {
        guard let peer = state.withLock({ state -> [UInt8]? in
            defer { state.initiating = nil }
            return state.initiating
        }) else { return }
        inject(Self.connectionComplete(status: .success, handle: handle, role: .central, peer: peer))
    }

    /// A peer connects to our advertising: advertising stops (legacy), the link completes.
    package func acceptIncoming(handle: UInt16, from peer: BluetoothAddress) {
        state.withLock { $0.advertising = false }
        inject(Self.connectionComplete(status: .success, handle: handle, role: .peripheral, peer: peer.littleEndianBytes))
    }

    /// One connectable advertising event at `peer` carrying `advertisingData`, as the scanner
    /// reports it (LE Advertising Report, ADV_IND). The controller does not connect to it by
    /// itself: a test that wants the attempt to succeed calls `connectInitiatedConnection`.
    package func advertise(from peer: BluetoothAddress, data advertisingData: AdvertisingData, rssi: Int8 = -60) {
        advertise(from: peer, encodedData: (try? advertisingData.encode()) ?? [], rssi: rssi)
    }

    /// The same report, with advertising data as the advertiser's host set it (LE Set Advertising Data).
    package func advertise(from peer: BluetoothAddress, encodedData data: [UInt8], rssi: Int8 = -60) {
        let report: [UInt8] = [0x01, 0x00, 0x01] + peer.littleEndianBytes + [UInt8(data.count)] + data + [UInt8(bitPattern: rssi)]
        inject([0x04, 0x3E, UInt8(report.count + 1), 0x02] + report)
    }

    /// The controller stops initiating and says nothing: RootCanal 1.10.0 does so when the peer
    /// answers a connect request sent while an earlier, unanswered one is still pending (the link
    /// then exists on the peer's side only).
    package func dropInitiationSilently() {
        state.withLock { $0.initiating = nil }
    }

    /// Puts the controller in an initiating state nobody here asked for (a host before us, or a
    /// cancel it took without effect).
    package func startStrayInitiation(to peer: BluetoothAddress) {
        state.withLock { $0.initiating = peer.littleEndianBytes }
    }

    package var initiatingPeer: BluetoothAddress? {
        state.withLock { $0.initiating }.flatMap { try? BluetoothAddress(littleEndianBytes: $0) }
    }

    /// Sends the answer held back by `holdAnswerTo`.
    package func releaseHeldAnswer() {
        guard let answer = state.withLock({ state -> [UInt8]? in
            defer { state.heldAnswer = nil }
            return state.heldAnswer
        }) else { return }
        inject(answer)
    }

    /// Takes the answer held back by `holdAnswerTo` without sending it, for a test that sends it
    /// later, as a late answer, with `inject`.
    package func takeHeldAnswer() -> [UInt8]? {
        state.withLock { state in
            defer { state.heldAnswer = nil }
            return state.heldAnswer
        }
    }

    package var isHoldingAnswer: Bool { state.withLock { $0.heldAnswer != nil } }

    package func inject(_ h4: [UInt8]) {
        guard let first = h4.first, let type = HCIPacketType(rawValue: first) else { return }
        continuation.yield(HCIPacket(type: type, body: Array(h4.dropFirst())))
    }

    // MARK: Packets

    package static func connectionComplete(status: HCIStatusCode, handle: UInt16, role: LERole, peer: [UInt8]) -> [UInt8] {
        [0x04, 0x3E, 0x13, 0x01, status.rawValue, UInt8(handle & 0xFF), UInt8(handle >> 8), role.rawValue, 0x01] + peer
            + [0x18, 0x00, 0x00, 0x00, 0x90, 0x01, 0x00]
    }

    private func complete(_ opcode: HCIOpcode, _ status: HCIStatusCode) {
        answer(opcode, [0x04] + CommandCompleteEvent(numHCICommandPackets: 1, opcode: opcode, returnParameters: [status.rawValue]).encode())
    }

    private func status(_ opcode: HCIOpcode, _ status: HCIStatusCode) {
        answer(opcode, [0x04] + CommandStatusEvent(status: status, numHCICommandPackets: 1, opcode: opcode).encode())
    }

    private func answer(_ opcode: HCIOpcode, _ h4: [UInt8]) {
        let held = state.withLock { state -> Bool in
            guard state.holdAnswerTo == opcode else { return false }
            state.holdAnswerTo = nil
            state.heldAnswer = h4
            return true
        }
        if !held { inject(h4) }
    }

    private func later(_ delay: Duration, _ h4: [UInt8]) {
        Task {
            try? await Task.sleep(for: delay)
            state.withLock { $0.attemptTimeline.append(h4[4] == 0 ? "ended success" : "ended 0x\(String(h4[4], radix: 16))") }
            inject(h4)
        }
    }
}
