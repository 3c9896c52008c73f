import Testing
import TestTiers
@testable import BLEHost
import TracerCore
import BLEHostTestSupport

/// Every decoder, fed every prefix of every sample and random bytes, either decodes or throws; none traps.
@Suite(.tags(.unit)) struct FuzzTests {
    static let decoders: [(String, @Sendable ([UInt8]) throws -> Void)] = [
        ("HCIEvent", { _ = try HCIEvent(decoding: $0) }),
        ("LEMetaEvent", { _ = try LEMetaEvent(decoding: $0) }),
        ("LEAdvertisingReportEvent", { _ = try LEAdvertisingReportEvent(decoding: $0) }),
        ("LEExtendedAdvertisingReportEvent", { _ = try LEExtendedAdvertisingReportEvent(decoding: $0) }),
        ("LEConnectionCompleteEvent", { _ = try LEConnectionCompleteEvent(decoding: $0, enhanced: false) }),
        ("LEEnhancedConnectionCompleteEvent", { _ = try LEConnectionCompleteEvent(decoding: $0, enhanced: true) }),
        ("NumberOfCompletedPacketsEvent", { _ = try NumberOfCompletedPacketsEvent(decoding: $0) }),
        ("CommandCompleteEvent", { _ = try CommandCompleteEvent(decoding: $0) }),
        ("CommandStatusEvent", { _ = try CommandStatusEvent(decoding: $0) }),
        ("DisconnectionCompleteEvent", { _ = try DisconnectionCompleteEvent(decoding: $0) }),
        ("ACLDataPacket", { _ = try ACLDataPacket(decoding: $0) }),
        ("L2CAPBasicFrame", { _ = try L2CAPBasicFrame(decoding: $0) }),
        ("LESignalingCommand", { _ = try LESignalingCommand(decoding: $0) }),
        ("ConnectionParameterUpdateRequest", { _ = try ConnectionParameterUpdateRequest(decoding: $0) }),
        ("CommandReject", { _ = try CommandReject(decoding: $0) }),
        ("SecurityManagerPDU", { _ = try SecurityManagerPDU(decoding: $0) }),
        ("ReadLocalVersion", { _ = try ReadLocalVersionInformation.ReturnParameters(decoding: $0) }),
        ("ReadLocalCommands", { _ = try ReadLocalSupportedCommands.ReturnParameters(decoding: $0) }),
        ("ReadBufferSize", { _ = try ReadBufferSize.ReturnParameters(decoding: $0) }),
        ("LEReadBufferSize", { _ = try LEReadBufferSize.ReturnParameters(decoding: $0) }),
        ("ReadBDADDR", { _ = try ReadBDADDR.ReturnParameters(decoding: $0) }),
        ("ReadRSSI", { _ = try ReadRSSI.ReturnParameters(decoding: $0) }),
        ("AdvertisingData", { _ = AdvertisingData(parsing: $0).serviceUUIDs128 }),
        ("SignalingResponder", { _ = LESignalingResponder.reply(to: $0) }),
        ("SecurityManagerResponder", { _ = SecurityManagerResponder.reply(to: $0) }),
    ]

    /// Samples: the reference packets without their H4 byte, and the same with the event/ACL header stripped.
    static let samples: [[UInt8]] = Reference.controllerToHost.flatMap { packet -> [[UInt8]] in
        let body = Array(packet.dropFirst())
        return [body, Array(body.dropFirst(2)), Array(body.dropFirst(3)), Array(body.dropFirst(4))]
    } + [hex("01 01 04 00 12 00 08 00 18 00 28 00 00 00 2a 00"), hex("01 03 00 04 00 10 00 07 07")]

    @Test func everyPrefixOfEverySampleDecodesOrThrows() {
        var decodedCount = 0
        for sample in Self.samples {
            for length in 0...sample.count {
                let prefix = Array(sample.prefix(length))
                for (_, decode) in Self.decoders where (try? decode(prefix)) != nil { decodedCount += 1 }
            }
        }
        #expect(decodedCount > 0)
    }

    @Test func truncatedKnownEventsThrow() {
        for packet in Reference.controllerToHost where packet[0] == HCIPacketType.event.rawValue {
            let body = Array(packet.dropFirst())
            #expect(throws: (any Error).self) { try HCIEvent(decoding: Array(body.dropLast())) }
        }
    }

    @Test func randomBytesDecodeOrThrow() {
        var generator = SplitMix64(seed: 2024)
        for _ in 0..<3000 {
            let length = Int.random(in: 0...80, using: &generator)
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            // Make half the inputs look like well-formed LE Meta events so the subevent decoders run deep.
            if length > 3, Bool.random(using: &generator) {
                bytes[0] = 0x3E
                bytes[1] = UInt8(length - 2)
                bytes[2] = [0x01, 0x02, 0x03, 0x04, 0x0A, 0x0D].randomElement(using: &generator)!
            }
            for (_, decode) in Self.decoders { _ = try? decode(bytes) }
        }
    }

    @Test func randomFragmentsNeverGrowTheReassemblerPastItsCap() {
        var generator = SplitMix64(seed: 77)
        var reassembler = ACLReassembler(limits: .init(maximumFrameLength: 1024, timeout: .seconds(60)))
        for _ in 0..<5000 {
            let data = (0..<Int.random(in: 0...27, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let packet = ACLDataPacket(
                connectionHandle: UInt16.random(in: 0...3, using: &generator),
                packetBoundary: ACLPacketBoundary(rawValue: UInt8.random(in: 0...3, using: &generator))!, data: data)
            _ = reassembler.receive(packet)
            #expect(reassembler.bufferedByteCount <= 4 * (1024 + 4))
        }
    }
}
