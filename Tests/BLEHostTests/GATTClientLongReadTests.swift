import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

@Suite("Long reads and MTU", .tags(.unit))
struct GATTClientLongReadTests {
    private static let longValue = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    private func longValueService(_ value: [UInt8] = GATTClientLongReadTests.longValue) -> GATTServiceDefinition {
        GATTServiceDefinition(uuid: 0xFFF0, characteristics: [
            GATTCharacteristicDefinition(uuid: 0xFFF1, properties: .read, value: .computed { value }),
            GATTCharacteristicDefinition(uuid: 0xFFF2, properties: .read, value: .constant(Array(value.prefix(22)))),
        ])
    }

    @Test func readBlobContinuesAValueLongerThanTheMTU() async throws {
        let link = try LinkHarness(services: [longValueService()])
        // Handles: 7 service, 8/9 first characteristic, 10/11 second.
        #expect(try await link.client.readValue(handle: 9) == Self.longValue)
        #expect(try await link.client.exchangeMTU() == 247)
        #expect(try await link.client.readValue(handle: 9) == Self.longValue)
        await link.close()
    }

    @Test func valueOfExactlyMTUMinusOneEndsAtAttributeNotLongOrAnEmptyPart() async throws {
        let link = try LinkHarness(services: [longValueService()])
        // Fixed 22-octet value: Read returns all 22 and the follow-up Read Blob gets an empty part.
        #expect(try await link.client.readValue(handle: 11) == Array(Self.longValue.prefix(22)))
        await link.close()

        let exact = try LinkHarness(services: [longValueService(Array(Self.longValue.prefix(44)))])
        #expect(try await exact.client.readValue(handle: 9) == Array(Self.longValue.prefix(44)))
        await exact.close()
    }

    @Test func writesLongerThanOnePDUAreRefusedBeforeSending() async throws {
        let link = try LinkHarness(services: [longValueService()])
        await #expect(throws: GATTClientError.valueTooLong(length: 21, maximum: 20)) {
            try await link.client.writeValue(Array(repeating: 0, count: 21), handle: 9)
        }
        await link.close()
    }
}
