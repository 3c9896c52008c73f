import Testing
import TestTiers
@testable import GATTExchange

@Suite("Hostile ATT input: Tracer values", .tags(.unit))
struct PeerIDWriteHostileInputTests {
    @Test func peerIDWriteDecodingNeverTraps() {
        for length in 0...12 {
            let value = (0..<length).map { UInt8($0) }
            let decoded = try? PeerIDWrite(decoding: value)
            #expect((decoded != nil) == (length == 8 || length == 10))
            if let decoded { #expect(decoded.encode() == value) }
        }
    }
}
