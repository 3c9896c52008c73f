import Testing
import TestTiers
@testable import BLEHost
import TracerCore
import BLEHostTestSupport

@Suite(.tags(.unit)) struct H4FrameParserTests {
    let stream = Reference.controllerToHost.flatMap { $0 } + Reference.attMTUResponseFromHost + Reference.resetCommand

    var expected: [HCIPacket] {
        (Reference.controllerToHost + [Reference.attMTUResponseFromHost, Reference.resetCommand]).map {
            HCIPacket(type: HCIPacketType(rawValue: $0[0])!, body: Array($0.dropFirst()))
        }
    }

    @Test func framesWholeStreamAtOnce() throws {
        var parser = H4FrameParser()
        #expect(try parser.append(stream) == expected)
        #expect(parser.pendingByteCount == 0)
    }

    @Test func framesByteByByte() throws {
        var parser = H4FrameParser()
        var packets: [HCIPacket] = []
        for byte in stream { packets += try parser.append([byte]) }
        #expect(packets == expected)
    }

    @Test(arguments: [1, 2, 3, 7, 42])
    func framesRandomChunks(seed: UInt64) throws {
        var generator = SplitMix64(seed: seed)
        var parser = H4FrameParser()
        var packets: [HCIPacket] = []
        var offset = 0
        while offset < stream.count {
            let length = Int.random(in: 1...64, using: &generator)
            let end = min(stream.count, offset + length)
            packets += try parser.append(stream[offset..<end])
            offset = end
        }
        #expect(packets == expected)
    }

    @Test func packetTypesWithoutPayload() throws {
        var parser = H4FrameParser()
        let packets = try parser.append(hex("01 03 0c 00 02 01 20 00 00 04 0e 00 05 01 00 00 00 03 01 00 00"))
        #expect(packets.map(\.type) == [.command, .aclData, .event, .isochronousData, .synchronousData])
    }

    @Test func isochronousLengthUsesFourteenBits() throws {
        var parser = H4FrameParser()
        // Length field 0xC002: the top two bits are reserved, so the payload is 2 bytes.
        let packets = try parser.append(hex("05 01 00 02 c0 aa bb 04 0e 00"))
        #expect(packets == [HCIPacket(type: .isochronousData, body: hex("01 00 02 c0 aa bb")), HCIPacket(type: .event, body: hex("0e 00"))])
    }

    @Test func unknownPacketTypeIsTypedErrorAndSticks() throws {
        var parser = H4FrameParser()
        #expect(try parser.append(Reference.resetComplete).count == 1)
        #expect(throws: H4FramingError.unknownPacketType(0x07, streamOffset: 7)) {
            try parser.append([0x07, 0x04, 0x0e])
        }
        #expect(throws: H4FramingError.self) { try parser.append(Reference.resetComplete) }
    }

    @Test func keepsPartialPacketAcrossCalls() throws {
        var parser = H4FrameParser()
        #expect(try parser.append(Reference.readLocalCommandsComplete.prefix(30)).isEmpty)
        #expect(parser.pendingByteCount == 29)
        #expect(try parser.append(Reference.readLocalCommandsComplete.dropFirst(30)).count == 1)
    }

    @Test func hostileBytesNeverTrap() {
        var generator = SplitMix64(seed: 99)
        for _ in 0..<300 {
            var parser = H4FrameParser()
            let bytes = (0..<Int.random(in: 0...300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = try? parser.append(bytes)
            // Only known types reach the header stage, so a random stream must either frame or fail cleanly.
        }
    }
}

@Suite(.tags(.unit)) struct H4FrameParserEmitTests {
    @Test func packetsBeforeABadIndicatorAreStillEmitted() {
        var parser = H4FrameParser()
        var emitted: [HCIPacket] = []
        #expect(throws: H4FramingError.unknownPacketType(0x00, streamOffset: 7)) {
            try parser.append(Reference.resetComplete + [0x00, 0x01]) { emitted.append($0) }
        }
        #expect(emitted.map(\.h4Encoded) == [Reference.resetComplete])
    }
}
