import BLEHost

/// Whether the controller's initiator still works, judged from how connection attempts end. Plain
/// state, no I/O.
///
/// A controller whose connect request went unanswered (another initiator won the advertising event,
/// or the advertiser was itself stuck) can stay deaf to every advertiser until it is reset
/// (a stuck initiator; `LEHost.attemptPeerAdvertised` ends its attempts early, on every controller,
/// since none shows it in advance): such a controller clears its pending
/// connection only on a connection or HCI Reset, and while it is pending it also refuses its
/// peers' connect requests, which leaves them stuck in turn. The signs:
/// - a request went unanswered (the peer was heard advertising and no link followed) and asking
///   the same peer again, which is what clears it, brought no link either;
/// - an attempt timed out although its peer was heard advertising well into it (a controller that
///   listens connects at the first such advertisement); a peer that went away or changed address
///   proves nothing, so those timeouts count only towards the second sign;
/// - a long streak of timeouts with no link formed in either direction, whoever the peers were: a
///   backstop, since the first sign needs a target that stays on the air. An attempt refused
///   because the controller still initiates an earlier one it never ended counts as a timeout.
struct InitiatorHealth {
    /// Timeouts towards peers heard during the attempt, and how many peers they were.
    let resetAfterHeardTimeouts: (attempts: Int, peers: Int)
    /// Timeouts in a row, towards any peers.
    let resetAfterTimeoutStreak: Int
    private var heardTimeouts = 0
    private var heardPeers: Set<BluetoothAddress> = []
    private var streak = 0

    init(resetAfterHeardTimeouts: (attempts: Int, peers: Int), resetAfterTimeoutStreak: Int) {
        self.resetAfterHeardTimeouts = resetAfterHeardTimeouts
        self.resetAfterTimeoutStreak = resetAfterTimeoutStreak
    }

    /// A request went unanswered and the retry to the same peer brought no link: the reason to reset.
    mutating func requestStayedUnanswered(toward peer: BluetoothAddress) -> String {
        linkFormed()
        return "a connect request to \(peer) went unanswered, and asking that peer again brought no link"
    }

    /// Records a timed-out attempt; returns why the controller should be reset, or nil.
    mutating func attemptTimedOut(toward peer: BluetoothAddress, peerHeardDuringAttempt: Bool) -> String? {
        streak += 1
        if peerHeardDuringAttempt {
            heardTimeouts += 1
            heardPeers.insert(peer)
            if heardTimeouts >= resetAfterHeardTimeouts.attempts, heardPeers.count >= resetAfterHeardTimeouts.peers {
                return "\(heardTimeouts) connection attempts in a row towards \(heardPeers.count) peers that kept advertising "
                    + "timed out, and no link formed"
            }
        }
        if streak >= resetAfterTimeoutStreak {
            return "\(streak) connection attempts in a row timed out, and no link formed in either direction"
        }
        return nil
    }

    /// Records an attempt the controller refused to start because it still initiates an earlier
    /// one (Command Disallowed): one whose cancel it took without ending it
    /// (`ControllerQuirks.cancelTakenWithoutEndingAttempt`), which only a reset ends. It counts
    /// towards the streak as a timeout does: uncounted, a node whose ignored cancel was towards a
    /// peer that had gone never initiated again. Returns why to reset, or nil.
    mutating func attemptRefusedWhileInitiating() -> String? {
        streak += 1
        guard streak >= resetAfterTimeoutStreak else { return nil }
        return "\(streak) connection attempts in a row timed out or were refused by a controller still initiating, "
            + "and no link formed in either direction"
    }

    /// A link formed, in either direction: the controller connects.
    mutating func linkFormed() {
        heardTimeouts = 0
        heardPeers = []
        streak = 0
    }
}
