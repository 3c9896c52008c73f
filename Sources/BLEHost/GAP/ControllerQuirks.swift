/// What some controllers do that the specification (Core Vol 4 Part E) does not allow, named by
/// the behaviour, as Linux names its `HCI_QUIRK_…` flags: the host tests a named behaviour, never a
/// controller's make.
///
/// Two kinds. Most are handled whatever the set says, because the defence is safe on every
/// controller (parameters before every enable, a timeout on every command); they are named so that
/// code, comments and logs say what the controller does. Those the host adapts to are learned the
/// first time the controller shows them (`LEHost.quirks`), or known from the start: named in the
/// node's settings (`LEHost.Configuration.knownQuirks`, by `settingName`), or selected by the
/// controller's identity (`ControllerQuirks.known(for:)`, as Linux's drivers set `hdev->quirks`
/// per chip). Real controllers need none: the default is the empty set.
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

    /// Each quirk with the name settings use and the words logs use.
    static let names: [(quirk: ControllerQuirks, settingName: String, words: String)] = [
        (.cancelTakenWithoutEndingAttempt, "cancel-taken-without-ending-attempt", "cancel taken without ending the attempt"),
        (.attemptDroppedWithoutEnd, "attempt-dropped-without-end", "attempt dropped without an end"),
        (.advertisingFloodsWithoutParameters, "advertising-floods-without-parameters", "advertising floods without parameters"),
        (.advertisingEnableRestartsInterval, "advertising-enable-restarts-interval", "advertising enable restarts the interval"),
        (.advertisingOutlivesHost, "advertising-outlives-host", "advertising outlives the host"),
        (.commandsLeftUnanswered, "commands-left-unanswered", "commands left unanswered"),
        (.initiatorStuckOnUnansweredRequest, "initiator-stuck-on-unanswered-request", "initiator stuck on an unanswered request"),
    ]

    /// Every name `init(settingNames:)` accepts, in a stable order.
    public static var settingNames: [String] { names.map(\.settingName) }

    /// The quirks named in a comma-separated list such as "commands-left-unanswered,
    /// advertising-outlives-host" (spaces around names allowed; the empty list names none).
    public init(settingNames list: String) throws(UnknownControllerQuirk) {
        self = []
        for part in list.split(separator: ",") {
            let name = String(part.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            guard !name.isEmpty else { continue }
            guard let entry = Self.names.first(where: { $0.settingName == name }) else {
                throw UnknownControllerQuirk(name: name)
            }
            insert(entry.quirk)
        }
    }

    /// The names of the quirks in this set, as settings write them, comma-separated.
    public var settingValue: String {
        Self.names.filter { contains($0.quirk) }.map(\.settingName).joined(separator: ",")
    }

    public var description: String {
        let named = Self.names.filter { contains($0.quirk) }.map(\.words)
        return named.isEmpty ? "none" : named.joined(separator: ", ")
    }
}

/// What the node's settings say about the controller's quirks (`node.controller_quirks`): quirks
/// to add to those the table of known models selects, and quirks of that table's choice to turn
/// off, for a controller the table misjudges. "none" turns the table's whole choice off; "-name"
/// turns one quirk off; a plain name adds it (and wins over "none" or "-name" in the same list).
public struct ControllerQuirkChoice: Sendable, Hashable {
    public var added: ControllerQuirks
    public var removed: ControllerQuirks

    public init(added: ControllerQuirks = [], removed: ControllerQuirks = []) {
        self.added = added
        self.removed = removed
    }

    /// The word that turns off every quirk the table selects.
    public static let noneName = "none"

    /// Parses a comma-separated list such as "none, commands-left-unanswered" or
    /// "-attempt-dropped-without-end" (spaces around names allowed; the empty list changes nothing).
    public init(settingNames list: String) throws(UnknownControllerQuirk) {
        self.init()
        for part in list.split(separator: ",") {
            let name = String(part.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            guard !name.isEmpty else { continue }
            if name == Self.noneName {
                removed = ControllerQuirks(rawValue: ~0)
            } else if name.hasPrefix("-") {
                removed.formUnion(try ControllerQuirks(settingNames: String(name.dropFirst())))
            } else {
                added.formUnion(try ControllerQuirks(settingNames: name))
            }
        }
    }

    /// The quirks of a controller for which the table of known models selects `tableChoice`.
    public func applied(to tableChoice: ControllerQuirks) -> ControllerQuirks {
        tableChoice.subtracting(removed).union(added)
    }
}

/// A quirk name that `ControllerQuirks(settingNames:)` does not know.
public struct UnknownControllerQuirk: Error, Equatable, Sendable, CustomStringConvertible {
    public var name: String

    public var description: String {
        "unknown controller quirk \"\(name)\"; known quirks: \(ControllerQuirks.settingNames.joined(separator: ", ")) (\"\(ControllerQuirkChoice.noneName)\" turns off those the controller's model selects, \"-name\" one of them)"
    }
}

/// A controller model by its answer to HCI Read Local Version Information, and the quirks it is
/// known to have. A field left nil matches any value.
public struct ControllerModel: Sendable {
    public var companyIdentifier: UInt16
    public var hciVersion: UInt8?
    public var lmpSubversion: UInt16?
    public var quirks: ControllerQuirks

    public func matches(_ version: ReadLocalVersionInformation.ReturnParameters) -> Bool {
        version.companyIdentifier == companyIdentifier
            && (hciVersion.map { $0 == version.hciVersion } ?? true)
            && (lmpSubversion.map { $0 == version.lmpSubversion } ?? true)
    }
}

extension ControllerQuirks {
    /// The one table of controller models with known quirks, as seen in this project's test beds.
    /// Real controllers of registered makers have shown none.
    public static let knownModels: [ControllerModel] = [
        // No row for company 0xFFFF (reserved by the SIG for tests): real development firmware
        // reports it too (NimBLE's controller does by default, with the same version fields as a
        // virtual controller), and the quirks of one would leave the other's initiator stuck. A
        // virtual controller reporting 0xFFFF gets its quirks from `node.controller_quirks`.
        // Company 0x00E0 with HCI 5.3 (0x0C) and LMP subversion 0: the default identity of the
        // virtual controller the crowd tests use (no chip reports subversion 0). It drops attempts
        // without an end, leaves its initiator stuck on an unanswered request, and restarts the
        // advertising interval at every enable.
        ControllerModel(
            companyIdentifier: 0x00E0, hciVersion: 0x0C, lmpSubversion: 0x0000,
            quirks: [.attemptDroppedWithoutEnd, .initiatorStuckOnUnansweredRequest, .advertisingEnableRestartsInterval]),
    ]

    /// The quirks the table knows for a controller that identifies itself this way.
    public static func known(for version: ReadLocalVersionInformation.ReturnParameters,
                             in models: [ControllerModel] = knownModels) -> ControllerQuirks {
        models.filter { $0.matches(version) }.reduce(into: []) { $0.formUnion($1.quirks) }
    }
}
