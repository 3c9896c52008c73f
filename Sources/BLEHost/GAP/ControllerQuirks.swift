/// What some controllers do that the specification (Core Vol 4 Part E) does not allow, named by
/// the behaviour, as Linux names its `HCI_QUIRK_…` flags: the host tests a named behaviour, never a
/// controller's make.
///
/// A quirk gates code: the host takes a path that would cost something on a spec-faithful
/// controller only where the quirk is known from the start, named in the node's settings
/// (`LEHost.Configuration.knownQuirks`, by `settingName`) or selected by the controller's identity
/// (`ControllerQuirks.known(for:)`, as Linux's drivers set `hdev->quirks` per chip), or learned the
/// first time the controller shows it (`LEHost.quirks`). Real controllers need none: the default
/// is the empty set.
///
/// What the host defends against on every controller is no quirk, as Linux sets advertising
/// parameters before every enable and times out every command with no flag: the defence is safe
/// and cheap everywhere, and its explanation stands at the code that runs it. Settings that still
/// name one are accepted (`retiredSettingNames`).
public struct ControllerQuirks: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// LE Create Connection Cancel is answered with success, yet the attempt never ends: no LE
    /// Connection Complete follows and the controller may stay initiating. A cancel then proves
    /// nothing, so the audit stops probing for stray initiations with one, and a link that still
    /// forms for a given-up attempt is closed at once. Learned at the first cancel left without an end.
    public static let cancelTakenWithoutEndingAttempt = ControllerQuirks(rawValue: 1 << 0)

    /// Each quirk with the name settings use and the words logs use.
    static let names: [(quirk: ControllerQuirks, settingName: String, words: String)] = [
        (.cancelTakenWithoutEndingAttempt, "cancel-taken-without-ending-attempt", "cancel taken without ending the attempt"),
    ]

    /// Names that settings once used for behaviours the host now handles on every controller:
    /// `ControllerQuirkChoice` accepts them, with or without "-", so that an older setting still
    /// starts the node, and keeps them (`namesHandledAlways`) for the node to say that they change
    /// nothing and can be removed from the setting. Where each is handled:
    public static let retiredSettingNames: [String] = [
        "attempt-dropped-without-end",            // ConnectionAttempt.endAfterRefusedCancel
        "initiator-stuck-on-unanswered-request",  // LEHost.attemptPeerAdvertised, and GATTExchange's InitiatorHealth
        "advertising-floods-without-parameters",  // LEHost.enableAdvertising
        "advertising-enable-restarts-interval",   // LEHost.advertisingIsOn
        "advertising-outlives-host",              // LEHost.close
        "commands-left-unanswered",               // HostControllerInterface.Configuration.commandTimeout
    ]

    /// Every name `init(settingNames:)` accepts, in a stable order.
    public static var settingNames: [String] { names.map(\.settingName) }

    /// The quirks named in a comma-separated list such as "cancel-taken-without-ending-attempt"
    /// (spaces around names allowed; the empty list names none).
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
/// A retired name (`ControllerQuirks.retiredSettingNames`), plain or with "-", changes nothing.
public struct ControllerQuirkChoice: Sendable, Hashable {
    public var added: ControllerQuirks
    public var removed: ControllerQuirks
    /// The retired names the list gave, each once, in its order: behaviours the host handles on
    /// every controller, which the setting need not name.
    public var namesHandledAlways: [String]

    public init(added: ControllerQuirks = [], removed: ControllerQuirks = [], namesHandledAlways: [String] = []) {
        self.added = added
        self.removed = removed
        self.namesHandledAlways = namesHandledAlways
    }

    /// The word that turns off every quirk the table selects.
    public static let noneName = "none"

    /// Parses a comma-separated list such as "none, cancel-taken-without-ending-attempt" or
    /// "-cancel-taken-without-ending-attempt" (spaces around names allowed; the empty list changes nothing).
    public init(settingNames list: String) throws(UnknownControllerQuirk) {
        self.init()
        for part in list.split(separator: ",") {
            let name = String(part.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            guard !name.isEmpty else { continue }
            let turnsOff = name.hasPrefix("-")
            let quirkName = turnsOff ? String(name.dropFirst()) : name
            if ControllerQuirks.retiredSettingNames.contains(quirkName) {
                if !namesHandledAlways.contains(quirkName) { namesHandledAlways.append(quirkName) }
            } else if name == Self.noneName {
                removed = ControllerQuirks(rawValue: ~0)
            } else if turnsOff {
                // "-" alone or "-none" names no quirk: refused rather than read as nothing.
                guard !quirkName.isEmpty, quirkName != Self.noneName else { throw UnknownControllerQuirk(name: name) }
                removed.formUnion(try ControllerQuirks(settingNames: quirkName))
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
    /// The one table of controller models with known quirks, as seen in this project's test beds
    /// (`LEHost.Configuration.controllerModels` defaults to it). Real controllers of registered
    /// makers have shown none, and so the table is empty. The virtual controller the crowd tests
    /// use (company 0x00E0, HCI 5.3, LMP subversion 0, which no chip reports) had a row, for
    /// behaviours the host now handles on every controller (`retiredSettingNames`). No row for
    /// company 0xFFFF (reserved by the SIG for tests): real development firmware reports it too
    /// (NimBLE's controller does by default, with the same version fields as a virtual controller),
    /// and the quirks of one would be taken for the other's. A virtual controller reporting 0xFFFF
    /// gets its quirks from `node.controller_quirks`.
    public static let knownModels: [ControllerModel] = []

    /// The quirks the table knows for a controller that identifies itself this way.
    public static func known(for version: ReadLocalVersionInformation.ReturnParameters,
                             in models: [ControllerModel] = knownModels) -> ControllerQuirks {
        models.filter { $0.matches(version) }.reduce(into: []) { $0.formUnion($1.quirks) }
    }
}
