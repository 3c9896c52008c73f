import Testing
import TestTiers
@testable import BLEHost
@testable import GATTExchange
import IDRotation
import TracerCore

@Suite(.tags(.unit)) struct PeerRegistryTests {
    let address = BluetoothAddress.randomNonResolvablePrivate()
    let start = ContinuousClock.now

    @Test func aNewAddressIsWorthOneExchange() {
        var registry = PeerRegistry(configuration: ExchangeConfiguration())
        #expect(registry.heard(address, at: start) == nil)
        #expect(registry.shouldConnect(to: address, at: start))
        registry.connecting(to: address, at: start)
        #expect(!registry.shouldConnect(to: address, at: start), "no second attempt while one is under way")
        let id = UserID.random()
        registry.learned(id, at: address, now: start)
        #expect(!registry.shouldConnect(to: address, at: start + .seconds(3600)))
        #expect(registry.heard(address, at: start + .seconds(1)) == id, "later sightings are filed under the learned id")
    }

    @Test func aPeerThatWroteToUsIsNotConnectedBack() {
        var registry = PeerRegistry(configuration: ExchangeConfiguration())
        registry.learned(.random(), at: address, now: start)
        #expect(!registry.shouldConnect(to: address, at: start))
    }

    @Test func failuresBackOffExponentiallyUpToTheCap() {
        var configuration = ExchangeConfiguration()
        configuration.failureBackoffBase = .seconds(2)
        configuration.failureBackoffCap = .seconds(20)
        var registry = PeerRegistry(configuration: configuration)
        var now = start
        for expected in [2, 4, 8, 16, 20, 20] {
            registry.connecting(to: address, at: now)
            registry.failed(address, at: now)
            #expect(!registry.shouldConnect(to: address, at: now + .seconds(expected) - .milliseconds(1)))
            #expect(registry.shouldConnect(to: address, at: now + .seconds(expected)))
            now = now + .seconds(expected)
        }
        registry.learned(.random(), at: address, now: now)
        #expect(registry.entry(address)?.consecutiveFailures == 0)
    }

    @Test func addressesNotHeardAreForgotten() {
        var registry = PeerRegistry(configuration: ExchangeConfiguration())
        let other = BluetoothAddress.randomNonResolvablePrivate()
        _ = registry.heard(address, at: start)
        _ = registry.heard(other, at: start + .seconds(100))
        registry.forget(olderThan: start + .seconds(50))
        #expect(registry.entry(address) == nil)
        #expect(registry.entry(other) != nil)
    }

    /// The peer's id is known, but it has not learned ours since we moved to a new address: one
    /// exchange from the new address is owed (whichever side makes it), and then no more.
    @Test func ourNewAddressIsWorthOneMoreExchangeWithAKnownPeer() {
        var registry = PeerRegistry(configuration: ExchangeConfiguration())
        registry.weMoved(to: .randomNonResolvablePrivate())
        let id = UserID.random()
        registry.learned(id, at: address, now: start)
        #expect(!registry.shouldConnect(to: address, at: start))
        registry.weMoved(to: .randomNonResolvablePrivate())
        #expect(registry.shouldConnect(to: address, at: start), "the peer does not know our new id")
        #expect(registry.heard(address, at: start + .seconds(1)) == id, "its sightings are still filed under its id")
        registry.learned(id, at: address, now: start + .seconds(2))
        #expect(!registry.shouldConnect(to: address, at: start + .seconds(2)))
    }

    /// A turn is decided once per pair of addresses and attempt: heard again later, the peer keeps
    /// it; once we move to a new address, or a link with it opened, a new one is drawn.
    @Test func aTurnIsKeptUntilWeMove() {
        var registry = PeerRegistry(configuration: ExchangeConfiguration())
        registry.weMoved(to: .randomNonResolvablePrivate())
        _ = registry.heard(address, at: start)
        #expect(registry.turn(of: address) == nil)
        registry.setTurn(of: address, to: start + .seconds(3))
        _ = registry.heard(address, at: start + .seconds(20))
        #expect(registry.turn(of: address) == start + .seconds(3))
        registry.weMoved(to: .randomNonResolvablePrivate())
        #expect(registry.turn(of: address) == nil, "a turn decided from our old address")
        registry.setTurn(of: address, to: start + .seconds(30))
        registry.connecting(to: address, at: start + .seconds(30))
        registry.failed(address, at: start + .seconds(31))
        #expect(registry.turn(of: address) == nil, "a retry draws its delay anew")
    }

    @Test func othersHeardCountsRecentPeersButNotTheOneAskedAbout() {
        var registry = PeerRegistry(configuration: ExchangeConfiguration())
        let others = (0..<3).map { _ in BluetoothAddress.randomNonResolvablePrivate() }
        _ = registry.heard(address, at: start)
        _ = registry.heard(others[0], at: start)
        _ = registry.heard(others[1], at: start + .seconds(5))
        _ = registry.heard(others[2], at: start + .seconds(9))
        #expect(registry.othersHeard(since: start + .seconds(4), besides: address) == 2)
        #expect(registry.othersHeard(since: start + .seconds(4), besides: others[2]) == 1)
        #expect(registry.othersHeard(since: start + .seconds(10), besides: address) == 0)
    }

    /// Two nodes alone: the one that rotated appears at a new address while its old one is still
    /// remembered. That is no crowd, so the pair meets at once; a third node, or a known address
    /// heard beside another, still is one.
    @Test func aNewcomerBesideASingleRememberedPeerIsNoCrowd() {
        var registry = PeerRegistry(configuration: ExchangeConfiguration())
        let oldAddress = BluetoothAddress.randomNonResolvablePrivate()
        let third = BluetoothAddress.randomNonResolvablePrivate()
        _ = registry.heard(oldAddress, at: start)
        let cutoff = start - .seconds(10)
        #expect(!registry.mayBeCrowded(around: address, newcomer: true, since: cutoff))
        #expect(registry.mayBeCrowded(around: address, newcomer: false, since: cutoff))
        _ = registry.heard(third, at: start + .milliseconds(100))
        #expect(registry.mayBeCrowded(around: address, newcomer: true, since: cutoff), "two others make a crowd")
        #expect(!registry.mayBeCrowded(around: address, newcomer: true, since: start + .seconds(1)), "nobody heard since")
    }
}
