/// What some controllers do that the specification (Core Vol 4 Part E) does not allow, named by
/// the behaviour, as Linux names its `HCI_QUIRK_…` flags: the host tests a named behaviour, never a
/// controller's make.
///
/// Two kinds. Most are handled whatever the set says, because the defence is safe on every
/// controller (parameters before every enable, a timeout on every command); they are named so that
/// code, comments and logs say what the controller does. Those the host adapts to are learned the
/// first time the controller shows them (`LEHost.quirks`), or known from the start when the
/// configuration says so (`LEHost.Configuration.knownQuirks`). Real controllers need none: the
/// default is the empty set.
public struct ControllerQuirks: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// LE Create Connection Cancel is answered with success, yet the attempt never ends: no LE
    /// Connection Complete follows and the controller may stay initiating. A cancel then proves
    /// nothing, so the audit stops probing for stray initiations with one, and a link that still
    /// forms for a given-up attempt is closed at once. Learned at the first cancel left without an end.
    public static let cancelTakenWithoutEndingAttempt = ControllerQuirks(rawValue: 1 << 0)

    /// The initiator drops an attempt without reporting its end, and then refuses the cancel as
    /// "not initiating" (Command Disallowed): a controller whose earlier connect request went
    /// unanswered does this. The host waits a short time for an end after such a refusal
    /// (`ConnectionAttempt.endAfterRefusedCancel`) on every controller. Learned when that wait runs out.
    public static let attemptDroppedWithoutEnd = ControllerQuirks(rawValue: 1 << 1)

    /// A connect request the advertiser left unanswered stays pending: the initiator ignores every
    /// advertiser from then on (its scanner still reports them) and the controller refuses its
    /// peers' connect requests, until a link to that same peer forms or HCI Reset. Handled always:
    /// an attempt whose peer is heard advertising without a link ends early
    /// (`GAPError.peerAdvertisedWithoutConnecting`), and the exchange asks that peer again, then
    /// resets the controller (GATTExchange's `InitiatorHealth`).
    public static let initiatorStuckOnUnansweredRequest = ControllerQuirks(rawValue: 1 << 6)

    /// Enabled without LE Set Advertising Parameters first, advertising runs at an interval of 0,
    /// a flood. Handled always: parameters precede every enable.
    public static let advertisingFloodsWithoutParameters = ControllerQuirks(rawValue: 1 << 2)

    /// Every enable restarts the advertising interval, so enabling advertising that is on leaves
    /// the node unheard for a moment each time. Handled always: advertising that is on is not
    /// enabled again.
    public static let advertisingEnableRestartsInterval = ControllerQuirks(rawValue: 1 << 3)

    /// Advertising goes on after the host's transport closes, luring peers to a node that no longer
    /// answers. Handled always: closing the host stops advertising first.
    public static let advertisingOutlivesHost = ControllerQuirks(rawValue: 1 << 4)

    /// Commands the controller does not implement are never answered. Handled always: every
    /// command has a timeout, and its credit comes back (`HostControllerInterface`).
    public static let commandsLeftUnanswered = ControllerQuirks(rawValue: 1 << 5)

    static let names: [(ControllerQuirks, String)] = [
        (.cancelTakenWithoutEndingAttempt, "cancel taken without ending the attempt"),
        (.attemptDroppedWithoutEnd, "attempt dropped without an end"),
        (.advertisingFloodsWithoutParameters, "advertising floods without parameters"),
        (.advertisingEnableRestartsInterval, "advertising enable restarts the interval"),
        (.advertisingOutlivesHost, "advertising outlives the host"),
        (.commandsLeftUnanswered, "commands left unanswered"),
        (.initiatorStuckOnUnansweredRequest, "initiator stuck on an unanswered request"),
    ]

    public var description: String {
        let named = Self.names.filter { contains($0.0) }.map(\.1)
        return named.isEmpty ? "none" : named.joined(separator: ", ")
    }
}
