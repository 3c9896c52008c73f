import BLEHost
import Foundation
import GATTExchange
import Logging
import Matching
import Settings
import TransparencyLog

/// The node's effective configuration, typed. Build it with `NodeSettings.resolve`; the initial
/// values below are placeholders, since every setting with a default gets it from
/// `SettingRegistry` (the one place defaults are written down).
struct NodeSettings: Equatable, Sendable {
    enum LogFormat: String, Sendable { case text, json }

    struct Risk: Equatable, Sendable {
        var nearAttenuation: Int64 = 0
        var farAttenuation: Int64 = 0
        var nearWeight: Double = 0
        var mediumWeight: Double = 0
        var farWeight: Double = 0
        var lowMinutes: Double = 0
        var highMinutes: Double = 0
        var assumedTxPower: Int64 = 0
        var samplingPeriod: Int64 = 0
        var attenuationSummary: RiskModel.AttenuationSummary = .mean
        var directions: RiskModel.Directions = .ours
        var rssiCorrection: Int64 = 0
        var weightCurve: RiskModel.WeightCurve = .steps
        var score: RiskModel.DayScore = .total
        var minContactMinutes: Double = 0
    }

    // [node]
    var transport: String?
    var database: String = ""
    var rotationInterval: Int64 = 0
    var rotationJitter: Int64 = 0
    var scanPlan = ScanPlan.standard
    var continuousScan = false
    var takeAdapter = false
    var watchdogDarkLimit: Int64 = 0
    /// The Prometheus textfile the node keeps its metrics in; nil: none.
    var metricsFile: String?
    /// Where the node's metrics endpoint listens; nil: no endpoint.
    var metricsListen: NodeMetricsListenAddress?
    var controllerQuirks = ControllerQuirkChoice()
    // [log]
    var logLevel: Logger.Level = .info
    var logFormat: LogFormat = .text
    // [server]
    var serverURL: URL?
    /// The raw 32-byte Ed25519 public key that signs the positive list.
    var serverPublicKey: Data?
    /// In curl's CURLOPT_PINNEDPUBLICKEY form: "sha256//BASE64[;sha256//BASE64…]".
    var serverPinnedKey: String?
    /// The base of each request's overall timeout, in seconds.
    var serverTimeout: Int64 = 0
    // [check]
    var cacheDirectory: String = ""
    var checkInterval: Int64 = 0
    var checkJitter: Int64 = 0
    var refreshInterval: Int64 = 0
    var refreshJitter: Int64 = 0
    /// Wait on the server's long poll (`GET /v1/generation`) besides the refresh timer.
    var longPoll = false
    /// A shell command run when an exposure is found.
    var onExposure: String?
    var clockSkew: Int64 = 0
    /// A list signed longer ago than this, in seconds, counts as outdated.
    var maxListAge: Int64 = 0
    // [list]
    /// `list.format` as a configuration or flag still sets it (auto or log): retired, it
    /// changes nothing; nil when unset.
    var retiredListFormat: String?
    /// nil: the server's default origin for server.public_key.
    var listOrigin: String?
    var listWitnesses: [NoteVerifierKey] = []
    var listWitnessesRequired: Int64 = 0
    // [lists.<name>]
    /// Further authorities' lists, followed as logs besides the home list, in file order.
    var furtherLists: [FurtherListSettings] = []
    // [risk]
    var risk = Risk()
    // [place]
    /// The name of a fixed node's place, recorded with each encounter.
    var placeName: String?
    var placeSource: PlaceSource = .none
    var gpsdHost: String = ""
    var gpsdPort: Int64 = 0
    /// The grid cell size positions are rounded to, in metres.
    var placePrecision: Int64 = 0
    /// A fix older than this, in seconds, is no fix.
    var placeMaxFixAge: Int64 = 0

    enum PlaceSource: String, Sendable, CaseIterable { case none, gpsd }
}

extension NodeSettings {
    /// What `tracer run` and `tracer check` say, once, of a `list.format` still set: that it
    /// changes nothing and can go.
    var retiredListFormatWarning: String? {
        retiredListFormat.map { "list.format = \($0) is retired: this tracer follows only the list log, so the setting changes nothing and can be removed" }
    }
}

/// The settings plus, for each key, its value and where that came from.
struct ResolvedSettings: Sendable {
    typealias Entry = SettingResolution<NodeSettings>.Entry

    var settings: NodeSettings
    /// Every setting, in the registry's order.
    var entries: [Entry]
    var configFile: ConfigFileLocation

    func source(of key: String) -> SettingSource? { entries.first { $0.row.key == key }?.source }
}
