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

    var cache: ListCacheDirectory { ListCacheDirectory(directory: settings.cacheDirectory) }

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
            serverURL: try serverURL(), http: CurlHTTPClient(configuration: GenerationLongPoll.clientConfiguration(httpConfiguration)))
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

    /// The checker for `store`; offline checks use the cache only and need no server URL.
    func checker(store: NodeStore, offline: Bool) throws -> ExposureChecker {
        let log = try followedLog()
        return ExposureChecker(
            store: store, cache: cache, log: log, updater: offline ? nil : try homeUpdater(log, http: httpClient()),
            model: riskModel, clockSkewTolerance: settings.clockSkew,
            // The authority does not publish the largest jitter it allows; a deployment sets
            // node.rotation_jitter alike on every node, so this node's own is the best guess.
            keyWindowRule: DerivedWindowRule(maximumJitterSeconds: settings.rotationJitter), furtherLists: try furtherLists(offline: offline))
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
    /// list never uses (its log stays where it always was), with its own lock, state, log and
    /// evidence.
    func furtherCache(_ list: FurtherListSettings) -> ListCacheDirectory {
        ListCacheDirectory(directory: settings.cacheDirectory + "/lists/" + list.name)
    }

    func furtherLogStore(_ list: FurtherListSettings) -> FollowedLogStore {
        FollowedLogStore(directory: furtherCache(list).directory + "/log")
    }

    func furtherLog(_ list: FurtherListSettings) throws -> FollowedListLog {
        try Self.followedLog(
            key: try PositiveListPublicKey(base64: list.publicKey.base64EncodedString()), origin: list.origin, witnesses: list.witnesses,
            required: Int(list.witnessesRequired), store: furtherLogStore(list))
    }

    /// The updater of the home list's log, at `server.url`/log/.
    func homeUpdater(_ log: FollowedListLog, http: any HTTPTransferring) throws -> ListLogUpdater {
        logUpdater(log, url: try serverURL(), cache: cache, http: http)
    }

    /// The log at `server.url`/log/ as `server.public_key` and `list.*` describe it.
    func followedLog() throws -> FollowedListLog {
        try Self.followedLog(
            key: try publicKey(), origin: settings.listOrigin, witnesses: settings.listWitnesses,
            required: Int(settings.listWitnessesRequired), store: logStore)
    }

    /// One authority's log: its origin (nil: the key's default), the witnesses it must carry.
    private static func followedLog(
        key: PositiveListPublicKey, origin: String?, witnesses: [NoteVerifierKey], required: Int, store: FollowedLogStore
    ) throws -> FollowedListLog {
        let origin = origin ?? key.defaultLogOrigin
        let logKey = try NoteVerifierKey(name: origin, type: .ed25519, publicKey: key.key)
        let source = FollowedLogSource(origin: origin, logKey: logKey, witnesses: witnesses, requiredCosignatures: required)
        return FollowedListLog(source: source, store: store)
    }

    /// Where the followed log is kept: in the cache directory, under its lock.
    var logStore: FollowedLogStore { FollowedLogStore(directory: settings.cacheDirectory + "/log") }

    func logUpdater(_ log: FollowedListLog, url: String, cache: ListCacheDirectory, http: any HTTPTransferring) -> ListLogUpdater {
        ListLogUpdater(log: log, files: HTTPLogFiles(baseURL: url.trimmingSuffix("/") + "/log", http: http), cache: cache, maximumListAge: settings.maxListAge)
    }
}

private extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
