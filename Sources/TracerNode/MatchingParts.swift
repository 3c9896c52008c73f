import CurlHTTP
import Foundation
import IDRotation
import Matching
import PositiveListFormat

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
            serverURL: try serverURL(), cache: cache, publicKey: try publicKey(),
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
        let updater = offline ? nil : updater(url: try serverURL(), key: key, http: httpClient())
        return ExposureChecker(
            store: store, cache: cache, publicKey: key, updater: updater, model: riskModel, clockSkewTolerance: settings.clockSkew,
            // The authority does not publish the largest jitter it allows; a deployment sets
            // node.rotation_jitter alike on every node, so this node's own is the best guess.
            keyWindowRule: DerivedWindowRule(maximumJitterSeconds: settings.rotationJitter))
    }
}
