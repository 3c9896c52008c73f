import Testing
import TestTiers
@testable import BLEHost
@testable import GATTExchange

/// Which advertiser the node connects to next, and when its controller's initiator counts as stuck.
@Suite(.tags(.unit)) struct ConnectionCandidatesTests {
    let start = ContinuousClock.now
    let peerA = BluetoothAddress(string: "3A:00:00:00:00:0A")!
    let peerB = BluetoothAddress(string: "3B:00:00:00:00:0B")!
    let peerC = BluetoothAddress(string: "3C:00:00:00:00:0C")!

    func candidate(_ address: BluetoothAddress, heard: Duration, eligible: Duration) -> ConnectionCandidates.Candidate {
        .init(address: address, addressType: .random, rssi: -60, txPower: 0, heardAt: start + heard, eligibleAt: start + eligible)
    }

    @Test func theCandidateWhoseTurnCameFirstGoesFirst() {
        var candidates = ConnectionCandidates(lifetime: .seconds(2))
        candidates.offer(candidate(peerA, heard: .zero, eligible: .milliseconds(900)))
        candidates.offer(candidate(peerB, heard: .milliseconds(100), eligible: .milliseconds(300)))
        candidates.offer(candidate(peerC, heard: .milliseconds(200), eligible: .milliseconds(1500)))
        #expect(candidates.next(at: start + .milliseconds(200)) == nil, "nobody's turn yet")
        #expect(candidates.next(at: start + .seconds(1))?.address == peerB)
        #expect(candidates.next(at: start + .seconds(1))?.address == peerA)
        #expect(candidates.next(at: start + .seconds(1)) == nil, "peer C's turn comes at 1.5 s")
        #expect(candidates.next(at: start + .milliseconds(1600))?.address == peerC)
    }

    /// What a waiting slot decides on changes with a new candidate, or one heard again that now
    /// lives to see its turn; not with a refresh of one that still waits (`ProximityExchange`
    /// announces only the former).
    @Test func onlyANewOrRevivedCandidateChangesWhatASlotDecidesOn() {
        var candidates = ConnectionCandidates(lifetime: .seconds(2))
        func offer(_ address: BluetoothAddress, heard: Duration, eligible: Duration) -> Bool {
            candidates.offer(candidate(address, heard: heard, eligible: eligible))
        }
        #expect(offer(peerA, heard: .zero, eligible: .seconds(1)), "a new candidate")
        #expect(!offer(peerA, heard: .milliseconds(500), eligible: .seconds(1)), "heard again, still waiting")
        #expect(offer(peerA, heard: .milliseconds(2600), eligible: .seconds(1)), "heard again after going unheard too long")
        // Its turn (3 s) comes after it goes unheard too long (2.1 s): hearing it again brings the turn within reach.
        #expect(offer(peerB, heard: .milliseconds(100), eligible: .seconds(3)))
        #expect(offer(peerB, heard: .milliseconds(1500), eligible: .seconds(3)), "its turn now within reach")
        #expect(!offer(peerB, heard: .milliseconds(1600), eligible: .seconds(3)), "heard again, still waiting")
    }

    /// The instants the exchange sets its timers by: the next turn (a slot waits for it) and the
    /// moment the last candidate goes unheard too long (a scan burst's extension waits for it).
    @Test func theNextTurnAndTheLastExpiryAreTheTimersDeadlines() {
        var candidates = ConnectionCandidates(lifetime: .seconds(2))
        #expect(candidates.nextEligibility(after: start) == nil)
        #expect(candidates.lastExpiry(at: start) == nil)
        candidates.offer(candidate(peerA, heard: .zero, eligible: .milliseconds(900)))
        candidates.offer(candidate(peerB, heard: .milliseconds(100), eligible: .milliseconds(300)))
        // Its turn comes after it has gone unheard too long: only hearing it again brings it back.
        candidates.offer(candidate(peerC, heard: .zero, eligible: .milliseconds(2500)))
        #expect(candidates.nextEligibility(after: start) == start + .milliseconds(300))
        #expect(candidates.nextEligibility(after: start + .milliseconds(300)) == start + .milliseconds(900))
        #expect(candidates.nextEligibility(after: start + .milliseconds(900)) == nil)
        #expect(candidates.lastExpiry(at: start) == start + .milliseconds(2100))
        #expect(candidates.lastExpiry(at: start + .milliseconds(2100)) == nil, "every candidate has gone unheard too long")
    }

    @Test func hearingAPeerAgainKeepsItsTurn() {
        var candidates = ConnectionCandidates(lifetime: .seconds(2))
        candidates.offer(candidate(peerA, heard: .zero, eligible: .milliseconds(500)))
        candidates.offer(candidate(peerA, heard: .milliseconds(250), eligible: .seconds(3)))
        #expect(candidates.eligibleAt(peerA) == start + .milliseconds(500))
        let taken = candidates.next(at: start + .milliseconds(600))
        #expect(taken?.heardAt == start + .milliseconds(250), "the latest sighting's figures are used")
    }

    /// What the scanner rests until (`ExchangeConfiguration.scannerRestsUntilTurns`): the first
    /// turn, only while every candidate still heard waits for one and none waits for a slot.
    @Test func theEarliestTurnIsTheFirstOfThoseStillHeardWhileNoneIsDue() {
        var candidates = ConnectionCandidates(lifetime: .seconds(2))
        #expect(candidates.earliestTurn(at: start) == nil, "no candidate")
        candidates.offer(candidate(peerA, heard: .zero, eligible: .seconds(4)))
        candidates.offer(candidate(peerB, heard: .zero, eligible: .seconds(3)))
        #expect(candidates.earliestTurn(at: start + .milliseconds(300)) == start + .seconds(3))
        candidates.offer(candidate(peerC, heard: .milliseconds(400), eligible: .milliseconds(200)))
        #expect(candidates.earliestTurn(at: start + .milliseconds(500)) == nil, "one candidate's turn has come")
        #expect(candidates.earliestTurn(at: start + .milliseconds(2300)) == nil, "peer C is still heard, and due")
        #expect(candidates.earliestTurn(at: start + .milliseconds(2450)) == nil, "none is still heard")
    }

    /// A peer that reset its controller comes back under another address; its old one, unheard
    /// since, is not worth a connection timeout (nor a connect request the scanner cannot witness).
    @Test func aPeerUnheardForTheLifetimeIsDropped() {
        var candidates = ConnectionCandidates(lifetime: .seconds(2))
        candidates.offer(candidate(peerA, heard: .zero, eligible: .seconds(1)))
        candidates.offer(candidate(peerB, heard: .zero, eligible: .seconds(1)))
        candidates.offer(candidate(peerB, heard: .milliseconds(2500), eligible: .seconds(1)))
        #expect(candidates.next(at: start + .milliseconds(2600))?.address == peerB)
        #expect(candidates.next(at: start + .milliseconds(2600)) == nil, "peer A, unheard for 2.6 s, is gone")
        #expect(candidates.isEmpty)
    }

    @Test func aTimeoutTowardsAPeerHeardDuringTheAttemptMeansStuck() {
        var health = InitiatorHealth(resetAfterHeardTimeouts: (1, 1), resetAfterTimeoutStreak: 6)
        let reason = health.attemptTimedOut(toward: peerA, peerHeardDuringAttempt: true)
        #expect(reason?.contains("kept advertising") == true)
    }

    @Test func timeoutsTowardsVanishedPeersMeanStuckOnlyInALongStreak() {
        var health = InitiatorHealth(resetAfterHeardTimeouts: (1, 1), resetAfterTimeoutStreak: 4)
        for peer in [peerA, peerB, peerC] {
            #expect(health.attemptTimedOut(toward: peer, peerHeardDuringAttempt: false) == nil)
        }
        let reason = health.attemptTimedOut(toward: peerA, peerHeardDuringAttempt: false)
        #expect(reason?.contains("4 connection attempts in a row timed out") == true)
    }

    @Test func aRequestThatStayedUnansweredIsAResetAndStartsTheCountsAgain() {
        var health = InitiatorHealth(resetAfterHeardTimeouts: (2, 2), resetAfterTimeoutStreak: 2)
        #expect(health.attemptTimedOut(toward: peerA, peerHeardDuringAttempt: true) == nil)
        #expect(health.requestStayedUnanswered(toward: peerB).contains("\(peerB)"))
        #expect(health.attemptTimedOut(toward: peerC, peerHeardDuringAttempt: true) == nil, "the counts started again")
    }

    @Test func aLinkInEitherDirectionEndsTheStreak() {
        var health = InitiatorHealth(resetAfterHeardTimeouts: (2, 2), resetAfterTimeoutStreak: 3)
        #expect(health.attemptTimedOut(toward: peerA, peerHeardDuringAttempt: true) == nil)
        #expect(health.attemptTimedOut(toward: peerB, peerHeardDuringAttempt: false) == nil)
        health.linkFormed()
        #expect(health.attemptTimedOut(toward: peerB, peerHeardDuringAttempt: true) == nil, "the count started again")
        #expect(health.attemptTimedOut(toward: peerC, peerHeardDuringAttempt: false) == nil)
        #expect(health.attemptTimedOut(toward: peerA, peerHeardDuringAttempt: true) != nil, "two heard timeouts, two peers")
    }
}
