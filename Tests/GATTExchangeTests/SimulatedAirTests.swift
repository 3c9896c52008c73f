import IDRotation
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange
import TracerCore

/// `SimulatedAir` itself, with two hosts on it: what it promises to model (advertising reports to
/// scanners, a link when one initiates to an advertiser, data both ways, disconnection on both sides).
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct SimulatedAirTests {
    struct Side {
        let link: SimulatedAir.Node
        let host: LEHost
        let address: BluetoothAddress
        let id: UserID
        let writes: AsyncStream<PeerWriteEvent>
    }

    static func side(on air: SimulatedAir, clock: ManualHostClock) async throws -> Side {
        let link = air.addNode()
        let id = UserID.random()
        let identity = AdvertisedIdentity(OwnID(id: id, window: IDWindow(start: 0, end: 600)))
        let (writes, continuation) = AsyncStream.makeStream(of: PeerWriteEvent.self)
        let host = try await LEHost.open(
            transport: link, databaseForLink: TracerGATTServer.databaseForLink(identity: identity, writes: continuation),
            configuration: LEHost.Configuration(), clock: clock)
        let address = BluetoothAddress.randomNonResolvablePrivate()
        try await host.setRandomAddress(address)
        return Side(link: link, host: host, address: address, id: id, writes: writes)
    }

    /// Advances the clock and steps the air, 100 ms at a time, until cancelled.
    static func drive(_ clock: ManualHostClock, _ air: SimulatedAir) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                clock.advance(by: .milliseconds(100))
                air.step()
                try? await Task.sleep(for: .milliseconds(2))
            }
        }
    }

    @Test func aScannerHearsAnAdvertiserConnectsAndExchangesIDsOverTheLink() async throws {
        let clock = ManualHostClock()
        let air = SimulatedAir()
        let peripheral = try await Self.side(on: air, clock: clock)
        let central = try await Self.side(on: air, clock: clock)
        let driver = Self.drive(clock, air)
        defer { driver.cancel() }

        try await peripheral.host.startAdvertising(TracerService.advertisingData(txPower: 0))
        let sightings = try await central.host.startScanning()
        var heard: AdvertisementSighting?
        for await sighting in sightings {
            heard = sighting
            break
        }
        #expect(heard?.address == peripheral.address)
        #expect(heard?.data == TracerService.advertisingData(txPower: 0), "the report carries what the advertiser's host set")
        try await central.host.stopScanning()

        let connection = try await central.host.connect(to: peripheral.address, type: .random)
        #expect(connection.role == .central)
        var incoming: LEConnection?
        for await accepted in peripheral.host.incomingConnections {
            incoming = accepted
            break
        }
        #expect(incoming?.peerAddress == central.address)

        let ours = PeerIDWrite(id: PeerIDBytes(central.id.bytes)!)
        let read = try await TracerPeerExchange(bearer: connection.bearer).exchange(writing: ours)
        #expect(read.bytes == peripheral.id.bytes, "the central read the peripheral's id over the link")
        var written: PeerWriteEvent?
        for await event in peripheral.writes {
            written = event
            break
        }
        #expect(written?.write.id == central.id.bytes, "the peripheral got the central's write")

        await central.host.disconnect(connection)
        #expect(await incoming?.disconnected() == .remoteUserTerminatedConnection, "the peer heard the link end")
        #expect(air.linksFormed == 1)
        driver.cancel()
        await central.host.close()
        await peripheral.host.close()
    }
}
