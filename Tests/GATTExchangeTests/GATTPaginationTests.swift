import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange

@Suite("Discovery across several responses", .tags(.unit))
struct GATTPaginationTests {
    @Test func characteristicDiscoveryContinuesUntilTheServiceEnds() async throws {
        let uuids: [BluetoothUUID] = (0..<10).map { BluetoothUUID(0xFF10 + UInt16($0)) }
        let service = GATTServiceDefinition(uuid: 0xFF00, characteristics: uuids.enumerated().map { index, uuid in
            GATTCharacteristicDefinition(uuid: uuid, properties: index.isMultiple(of: 3) ? [.read, .notify] : .read,
                                         value: .constant([UInt8(index)]))
        })
        let link = try LinkHarness(services: [service, TracerService.definition(currentID: { sampleID }, onPeerWrite: { _ in })])
        let found = try await link.client.discoverPrimaryServices(uuid: 0xFF00)
        let characteristics = try await link.client.discoverCharacteristics(of: try #require(found.first))
        #expect(characteristics.map(\.uuid) == uuids)
        for (index, characteristic) in characteristics.enumerated() {
            #expect(try await link.client.readValue(handle: characteristic.valueHandle) == [UInt8(index)])
        }
        // The Tracer service after it is still found whole.
        let tracer = try await link.client.discoverPrimaryServices(uuid: TracerService.serviceUUID)
        #expect(tracer.count == 1)
        #expect(try await link.client.discoverCharacteristics(of: try #require(tracer.first)).count == 2)
        await link.close()
    }
}
