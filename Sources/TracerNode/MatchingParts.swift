import CurlHTTP
import Foundation
import IDRotation
import Matching
import PositiveListFormat
import TransparencyLog

/// Builds the matching parts a command needs from the effective settings; the one place where
/// settings turn into a list source, a cache, an HTTP client and a risk model.
struct MatchingParts {
    let settings: NodeSettings

    var cache: PositiveListCache { PositiveListCache(directory: settings.cacheDirectory) }

    func publicKey() throws -> PositiveListPublicKey {
        guard let raw = settings.serverPublicKey else { throw CommandFailure.missingSetting(.serverPublicKey) }
        return try PositiveListPublicKey(base64: raw.base64EncodedString())
    }

    func serverURL() throws -> String {
        guard let url = settings.serverURL else { throw CommandFailure.missingSetting(.serverURL) }
        return url.absoluteString
    }

    func httpClient() -> CurlHTTPClient {
        CurlHTTPClient(configuration: httpConfiguration)
    }

    private var httpConfiguration: HTTPClientConfiguration {
        var configuration = HTTPClientConfiguration()
        configuration.pinnedPublicKey = settings.serverPinnedKey
        configuration.baseTimeout = .seconds(settings.serverTimeout)
        return configuration
    }

    /// The long poll on the server's `GET /v1/generation` (check.long_poll).
    func longPoll() throws -> GenerationLongPoll {
        GenerationLongPoll(
            serverURL: try serverURL(), cache: cache, publicKey: try publicKey(), log: try followedLog(key: try publicKey()),
            http: CurlHTTPClient(configuration: GenerationLongPoll.clientConfiguration(httpConfiguration)))
    }

    var riskModel: RiskModel {
        var model = RiskModel.standard
        let risk = settings.risk
        model.nearAttenuation = Int(risk.nearAttenuation)
        model.farAttenuation = Int(risk.farAttenuation)
        model.nearWeight = risk.nearWeight
        model.mediumWeight = risk.mediumWeight
        model.farWeight = risk.farWeight
        model.lowMinutes = risk.lowMinutes
        model.highMinutes = risk.highMinutes
        model.assumedTxPower = Int(risk.assumedTxPower)
        model.samplingPeriodSeconds = Int(risk.samplingPeriod)
        model.attenuationSummary = risk.attenuationSummary
        model.directions = risk.directions
        model.rssiCorrection = Int(risk.rssiCorrection)
        model.weightCurve = risk.weightCurve
        model.dayScore = risk.score
        model.minContactMinutes = risk.minContactMinutes
        return model
    }

    func updater(url: String, key: PositiveListPublicKey, http: any HTTPTransferring) -> PositiveListUpdater {
        PositiveListUpdater(source: PositiveListSource(baseURL: url, publicKey: key), cache: cache, http: http, maximumListAge: settings.maxListAge)
    }

    /// The checker for `store`; offline checks use the cache only and need no server URL.
    func checker(store: NodeStore, offline: Bool) throws -> ExposureChecker {
        let key = try publicKey()
        let updating = offline ? ListUpdating(index: nil, log: nil) : try listUpdating(key: key, http: httpClient())
        return ExposureChecker(
            store: store, cache: cache, publicKey: key, updater: updating.index, model: riskModel, clockSkewTolerance: settings.clockSkew,
            // The authority does not publish the largest jitter it allows; a deployment sets
            // node.rotation_jitter alike on every node, so this node's own is the best guess.
            keyWindowRule: DerivedWindowRule(maximumJitterSeconds: settings.rotationJitter), log: try followedLog(key: key),
            logUpdater: updating.log, furtherLists: try furtherLists(offline: offline))
    }

    /// The further authorities' lists (`[lists.<name>]`), each followed as a log at its own url.
    /// Their client pins no key: `server.pinned_key` is the home server's certificate, and
    /// pinned on another authority's server it would fail every update there.
    func furtherLists(offline: Bool) throws -> [AuthorityList] {
        let http = CurlHTTPClient(configuration: furtherListsHTTPConfiguration)
        return try settings.furtherLists.map { list in
            let log = try furtherLog(list)
            let cache = furtherCache(list)
            let updater = offline ? nil : logUpdater(log, url: list.url.absoluteString, cache: cache, http: http)
            return AuthorityList(name: list.name, cache: cache, log: log, updater: updater)
        }
    }

    /// The home server's timeouts, without its pinned key.
    var furtherListsHTTPConfiguration: HTTPClientConfiguration {
        var configuration = httpConfiguration
        configuration.pinnedPublicKey = nil
        return configuration
    }

    /// Where a further list is kept: `lists/<name>` under the cache directory, a path the home
    /// list never uses (its index, batches, keys and log stay where they always were), with its
    /// own lock, state, log and evidence.
    func furtherCache(_ list: FurtherListSettings) -> PositiveListCache {
        PositiveListCache(directory: settings.cacheDirectory + "/lists/" + list.name)
    }

    func furtherLogStore(_ list: FurtherListSettings) -> FollowedLogStore {
        FollowedLogStore(directory: furtherCache(list).directory + "/log")
    }

    func furtherLog(_ list: FurtherListSettings) throws -> FollowedListLog {
        try Self.followedLog(
            key: try PositiveListPublicKey(base64: list.publicKey.base64EncodedString()), origin: list.origin, witnesses: list.witnesses,
            required: Int(list.witnessesRequired), store: furtherLogStore(list), logRequired: true)
    }

    /// The updaters of the list `list.format` follows: the index's unless the format is log,
    /// the log's unless it is index.
    func listUpdating(key: PositiveListPublicKey, http: any HTTPTransferring) throws -> ListUpdating {
        let url = try serverURL()
        return ListUpdating(
            index: settings.listFormat == .log ? nil : updater(url: url, key: key, http: http),
            log: try followedLog(key: key).map { logUpdater($0, url: url, cache: cache, http: http) })
    }

    /// The log at `server.url`/log/ as `list.*` describes it; nil with `list.format = index`.
    func followedLog(key: PositiveListPublicKey) throws -> FollowedListLog? {
        guard settings.listFormat != .index else { return nil }
        return try Self.followedLog(
            key: key, origin: settings.listOrigin, witnesses: settings.listWitnesses, required: Int(settings.listWitnessesRequired),
            store: logStore, logRequired: settings.listFormat == .log)
    }

    /// One authority's log: its origin (nil: the key's default), the witnesses it must carry.
    private static func followedLog(
        key: PositiveListPublicKey, origin: String?, witnesses: [NoteVerifierKey], required: Int, store: FollowedLogStore, logRequired: Bool
    ) throws -> FollowedListLog {
        let origin = origin ?? key.defaultLogOrigin
        let logKey = try NoteVerifierKey(name: origin, type: .ed25519, publicKey: key.key)
        let source = FollowedLogSource(origin: origin, logKey: logKey, witnesses: witnesses, requiredCosignatures: required)
        return FollowedListLog(source: source, store: store, required: logRequired)
    }

    /// Where the followed log is kept: beside the index, under the cache's lock.
    var logStore: FollowedLogStore { FollowedLogStore(directory: settings.cacheDirectory + "/log") }

    func logUpdater(_ log: FollowedListLog, url: String, cache: PositiveListCache, http: any HTTPTransferring) -> ListLogUpdater {
        ListLogUpdater(log: log, files: HTTPLogFiles(baseURL: url.trimmingSuffix("/") + "/log", http: http), cache: cache, maximumListAge: settings.maxListAge)
    }
}

private extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
