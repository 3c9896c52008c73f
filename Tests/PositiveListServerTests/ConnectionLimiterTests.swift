import NIOCore
import NIOEmbedded
@testable import PositiveListServer
@testable import ServerHTTPAPI
import Testing
import TestTiers

/// The connection limits' arithmetic and choices, without sockets (the floods against a real
/// server are in HostileClientTests).
@Suite(.tags(.unit)) struct ConnectionLimiterTests {
    @Test func limitsFollowTheDescriptorLimitWithAReserve() throws {
        #expect(try ConnectionLimits.resolve(descriptorLimit: 1_024, configuredTotal: nil, configuredPerAddress: nil)
            == ConnectionLimits(total: 896, perAddress: 56))
        #expect(try ConnectionLimits.resolve(descriptorLimit: 65_536, configuredTotal: nil, configuredPerAddress: nil)
            == ConnectionLimits(total: 57_344, perAddress: 256))
        #expect(try ConnectionLimits.resolve(descriptorLimit: 256, configuredTotal: nil, configuredPerAddress: nil)
            == ConnectionLimits(total: 192, perAddress: 12))
        #expect(try ConnectionLimits.resolve(descriptorLimit: 256, configuredTotal: 100, configuredPerAddress: 5)
            == ConnectionLimits(total: 100, perAddress: 5))
        #expect(throws: ConnectionLimitError.totalAboveDescriptorLimit(total: 250, descriptorLimit: 256, available: 192)) {
            try ConnectionLimits.resolve(descriptorLimit: 256, configuredTotal: 250, configuredPerAddress: nil)
        }
        #expect(throws: ConnectionLimitError.descriptorLimitTooLow(descriptorLimit: 70)) {
            try ConnectionLimits.resolve(descriptorLimit: 70, configuredTotal: nil, configuredPerAddress: nil)
        }
    }

    @Test func anAddressAtItsLimitIsRefusedAndATrustedProxyIsNot() {
        let limiter = ConnectionLimiter(limits: ConnectionLimits(total: 100, perAddress: 2), unlimitedAddresses: ["127.0.0.1"])
        let channels = (0..<4).map { _ in EmbeddedChannel() }
        #expect(limiter.admit(channels[0], address: "10.0.0.1") == .admitted)
        #expect(limiter.admit(channels[1], address: "10.0.0.1") == .admitted)
        #expect(limiter.admit(channels[2], address: "10.0.0.1") == .refused(.addressAtLimit))
        limiter.release(channels[0])
        #expect(limiter.admit(channels[2], address: "10.0.0.1") == .admitted)
        for _ in 0..<5 { #expect(limiter.admit(EmbeddedChannel(), address: "127.0.0.1") == .admitted) }
        #expect(limiter.openConnections == 7)
    }

    /// An open channel, so that a close shows.
    func connected() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    @Test func aFullServerClosesTheLongestIdleConnectionOfTheBusiestAddress() throws {
        let limiter = ConnectionLimiter(limits: ConnectionLimits(total: 4, perAddress: 4))
        let flood = try (0..<3).map { _ in try connected() }
        let other = try connected()
        for channel in flood { #expect(limiter.admit(channel, address: "10.0.0.9") == .admitted) }
        #expect(limiter.admit(other, address: "10.0.0.2") == .admitted)
        // The flood's first connection is busy; its second is the longest idle of the busiest.
        limiter.requestStarted(flood[0])
        let newcomer = try connected()
        #expect(limiter.admit(newcomer, address: "10.0.0.3") == .admitted)
        #expect(!flood[1].isActive && flood[0].isActive && flood[2].isActive && other.isActive)
        #expect(limiter.openConnections == 4)
        // Every connection busy: nothing to close, the newcomer is refused.
        for channel in [flood[0], flood[2], other, newcomer] { limiter.requestStarted(channel) }
        #expect(limiter.admit(EmbeddedChannel(), address: "10.0.0.4") == .refused(.serverFull))
    }
}
