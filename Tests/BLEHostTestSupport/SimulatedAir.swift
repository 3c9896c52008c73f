import BLEHost
import Synchronization
import TracerCore

/// Several `ScriptedController`s that hear each other, for crowds on a `ManualHostClock`: each node's
/// controller answers HCI commands as `ScriptedController` does, and the air adds what passes between
/// controllers. A test drives it with `step()`, once per clock advance.
///
/// What it models:
/// - Advertising: at each `step()`, every scanning controller reports one connectable advertising
///   event (ADV_IND, RSSI −60) of every other controller that advertises, from its random address and
///   with the data its host last set (LE Set Advertising Data).
/// - Connecting: at each `step()`, a controller initiating to the random address of one that advertises
///   forms a link: LE Connection Complete on both sides (central and peripheral), and the advertiser's
///   advertising stops, as a legacy advertiser's does on a real controller. An attempt to an address
///   nobody advertises stays pending until cancelled (`ScriptedController`'s rules).
/// - Data: ACL packets go to the other end of the link at once, under its handle; the sender gets its
///   buffer back at once (Number Of Completed Packets), so ATT and GATT run over the link.
/// - Disconnecting: HCI Disconnect ends the link on both sides (0x16 here, 0x13 at the peer).
/// - Controller trouble: a node's initiator can go deaf (`makeInitiatorStuck`) or its transport end
///   (`dropTransport`); a host that opens the node's transport again (`openTransport(of:)`) gets a
///   fresh controller in its place, as after a reset or a reconnect.
///
/// What it does not model: range, RSSI variation, lost or collided packets and advertisements,
/// scan responses, air time (everything arrives at the next `step()` or at once), supervision
/// timeouts, connection parameters, a controller that connects to the same peer twice, public addresses.
package final class SimulatedAir: Sendable {
    /// One controller on the air, as its host sees it.
    package final class Node: HCITransport {
        package let index: Int
        package let controller: ScriptedController
        private let air: SimulatedAir

        fileprivate init(index: Int, controller: ScriptedController, air: SimulatedAir) {
            self.index = index
            self.controller = controller
            self.air = air
        }

        package var incoming: AsyncThrowingStream<HCIPacket, any Error> { controller.incoming }

        package func close() async {
            // A replaced controller's links went with it; the node's place holds another's now.
            if air.holds(controller, at: index) { air.dropLinks(of: index) }
            await controller.close()
        }

        package func send(_ packet: HCIPacket) async throws(HCITransportError) {
            // A closed controller is off the air: nothing it is sent may reach the place another now holds.
            guard !controller.state.withLock({ $0.isClosed }) else { throw .closed }
            if packet.type == .aclData {
                air.carry(packet.body, from: index)
                return
            }
            if let opcode = FakeTransport.opcode(of: packet) {
                let parameters = Array(packet.body.dropFirst(3))
                if opcode == LESetAdvertisingData.opcode, let length = parameters.first {
                    air.setAdvertisingData(Array(parameters.dropFirst().prefix(Int(length))), of: index)
                }
                if opcode == Disconnect.opcode, parameters.count >= 2 {
                    air.disconnect(handle: UInt16(parameters[0]) | UInt16(parameters[1]) << 8, from: index)
                }
            }
            try await controller.send(packet)
        }
    }

    private struct Link {
        let node: Int
        let peer: Int
        let peerHandle: UInt16
    }

    private struct State {
        var controllers: [ScriptedController] = []
        var advertisingData: [[UInt8]] = []
        /// Nodes whose controller's connection attempts never complete, until it is replaced.
        var stuckInitiators: Set<Int> = []
        /// How many controllers each node has had: one, and one more per `replaceController`.
        var controllersOpened: [Int] = []
        /// Both ends of every link, by handle (handles are unique across the air).
        var links: [UInt16: Link] = [:]
        var nextHandle: UInt16 = 0x0040
        var linksFormed = 0
    }

    private let state = Mutex(State())

    package init() {}

    /// A new controller on the air, for one host.
    package func addNode() -> Node {
        let controller = ScriptedController()
        let index = state.withLock { state -> Int in
            state.controllers.append(controller)
            state.advertisingData.append([])
            state.controllersOpened.append(1)
            return state.controllers.count - 1
        }
        return Node(index: index, controller: controller, air: self)
    }

    /// The transport a host opens to node `index`: its controller while that is open, else (its
    /// host closed it, or it was dropped) a fresh one in its place (`replaceController`).
    package func openTransport(of index: Int) -> Node {
        let current = controller(of: index)
        guard current.state.withLock({ $0.isClosed }) else { return Node(index: index, controller: current, air: self) }
        return replaceController(of: index)
    }

    /// A fresh controller in node `index`'s place, as for a host that opens the node's transport
    /// again: nothing of the one before (advertising, address, links, a stuck initiator) stays on
    /// the air, as after HCI Reset or the adapter coming back. The host closes the one before.
    private func replaceController(of index: Int) -> Node {
        dropLinks(of: index)
        let controller = ScriptedController()
        state.withLock { state in
            state.controllers[index] = controller
            state.advertisingData[index] = []
            state.stuckInitiators.remove(index)
            state.controllersOpened[index] += 1
        }
        return Node(index: index, controller: controller, air: self)
    }

    /// Node `index`'s controller now, as its host last opened it.
    package func controller(of index: Int) -> ScriptedController {
        state.withLock { $0.controllers[index] }
    }

    /// How many controllers node `index` has had (see `replaceController`).
    package func controllersOpened(of index: Int) -> Int {
        state.withLock { $0.controllersOpened[index] }
    }

    /// Node `index`'s controller stops completing its own connection attempts: each stays pending
    /// until its host cancels it, as with a controller whose initiator went deaf
    /// (a stuck initiator, GATTExchange's `InitiatorHealth`), until the controller is replaced.
    /// It still advertises, scans and takes the links peers open to it.
    package func makeInitiatorStuck(_ index: Int) {
        _ = state.withLock { $0.stuckInitiators.insert(index) }
    }

    /// Node `index`'s transport ends, as when its adapter is unplugged: its links end at the peers,
    /// and its host sees the controller lost.
    package func dropTransport(of index: Int) async {
        dropLinks(of: index)
        await controller(of: index).close()
    }

    fileprivate func holds(_ controller: ScriptedController, at index: Int) -> Bool {
        state.withLock { $0.controllers[index] === controller }
    }

    /// Links formed so far.
    package var linksFormed: Int { state.withLock { $0.linksFormed } }

    /// One advertising event of every advertiser to every scanner, then the links that form.
    package func step() {
        let (controllers, data, stuck) = state.withLock { ($0.controllers, $0.advertisingData, $0.stuckInitiators) }
        let snapshots = controllers.map { $0.state.withLock { $0 } }
        for (scanner, scannerState) in zip(controllers, snapshots) where scannerState.scanning && !scannerState.isClosed {
            for (index, advertiser) in snapshots.enumerated() where advertiser.advertising && !advertiser.isClosed {
                guard let address = advertiser.randomAddress.flatMap({ try? BluetoothAddress(littleEndianBytes: $0) }),
                      controllers[index] !== scanner else { continue }
                scanner.advertise(from: address, encodedData: data[index])
            }
        }
        // A legacy advertiser stops at its first connection: one link per advertiser per step.
        var connected: Set<Int> = []
        for (central, centralState) in snapshots.enumerated() where !connected.contains(central) && !stuck.contains(central) {
            guard let target = centralState.initiating, !centralState.isClosed,
                  let peripheral = snapshots.firstIndex(where: { $0.advertising && !$0.isClosed && $0.randomAddress == target }),
                  peripheral != central, !connected.contains(peripheral),
                  let centralAddress = centralState.randomAddress.flatMap({ try? BluetoothAddress(littleEndianBytes: $0) })
            else { continue }
            let (centralHandle, peripheralHandle) = state.withLock { state -> (UInt16, UInt16) in
                let handles = (state.nextHandle, state.nextHandle + 1)
                state.nextHandle += 2
                state.links[handles.0] = Link(node: central, peer: peripheral, peerHandle: handles.1)
                state.links[handles.1] = Link(node: peripheral, peer: central, peerHandle: handles.0)
                state.linksFormed += 1
                return handles
            }
            connected.formUnion([central, peripheral])
            controllers[central].connectInitiatedConnection(handle: centralHandle)
            controllers[peripheral].acceptIncoming(handle: peripheralHandle, from: centralAddress)
        }
    }

    fileprivate func setAdvertisingData(_ data: [UInt8], of node: Int) {
        state.withLock { $0.advertisingData[node] = data }
    }

    fileprivate func carry(_ body: [UInt8], from node: Int) {
        guard body.count >= 4 else { return }
        let handle = (UInt16(body[0]) | UInt16(body[1]) << 8) & 0x0FFF
        let (link, sender) = state.withLock { state in (state.links[handle], state.controllers[node]) }
        if let link, link.node == node {
            let receiver = state.withLock { $0.controllers[link.peer] }
            let flags = body[1] & 0xF0
            receiver.inject([HCIPacketType.aclData.rawValue, UInt8(link.peerHandle & 0xFF), UInt8(link.peerHandle >> 8) | flags]
                + body.dropFirst(2))
        }
        // The buffer is free again, delivered or not (a link that just ended flushes it).
        sender.inject([0x04, 0x13, 0x05, 0x01, UInt8(handle & 0xFF), UInt8(handle >> 8), 0x01, 0x00])
    }

    /// The local side's Disconnection Complete comes from its `ScriptedController`; the peer hears
    /// "remote user terminated connection" (0x13).
    fileprivate func disconnect(handle: UInt16, from node: Int) {
        guard let (link, peer) = state.withLock({ state -> (Link, ScriptedController)? in
            guard let link = state.links[handle], link.node == node else { return nil }
            state.links[handle] = nil
            state.links[link.peerHandle] = nil
            return (link, state.controllers[link.peer])
        }) else { return }
        peer.inject([0x04, 0x05, 0x04, 0x00, UInt8(link.peerHandle & 0xFF), UInt8(link.peerHandle >> 8), 0x13])
    }

    /// A closed controller's links end at their peers, as when a device leaves.
    fileprivate func dropLinks(of node: Int) {
        let handles = state.withLock { state in state.links.filter { $0.value.node == node }.map(\.key) }
        for handle in handles { disconnect(handle: handle, from: node) }
    }
}

extension ManualHostClock {
    /// A wall clock that moves with this clock: `start` reads `startingAt`, and a sleep until a
    /// wall time waits on this clock (whole seconds).
    package func wallClock(startingAt wallStart: UnixSeconds) -> some WallClock {
        ManualWallClock(clock: self, wallStart: wallStart)
    }
}

private struct ManualWallClock: WallClock {
    let clock: ManualHostClock
    let wallStart: UnixSeconds

    func now() -> UnixSeconds { wallStart + clock.elapsed.components.seconds }

    func sleep(until time: UnixSeconds) async throws {
        try await clock.sleep(until: clock.start + .seconds(time - wallStart))
    }
}
