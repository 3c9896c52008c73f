import Foundation
import BLEHost
import GATTExchange
import IDRotation
import Logging
import Matching
import Places
import Settings
import TracerCore
import TransparencyLog

/// Every setting the node reads. Adding a setting is one entry here plus its `NodeSettings`
/// property; the file reader, environment, flags and `tracer config` all follow this table.
enum SettingRegistry {
    static let all: [SettingDefinition] = node + log + server + check + list + risk + place

    static func definition(_ key: String) -> SettingDefinition? { all.first { $0.key == key } }

    static let sections: Set<String> = Set(all.map(\.section))

    private static let node: [SettingDefinition] = [
        .text(
            "node.transport", \.transport,
            .text(describe: "a transport: \(TransportSpec.acceptedForms)", problem: TextRules.transport),
            env: "TRACER_TRANSPORT", flag: "--transport",
            help: "The Bluetooth controller: hci0, serial:DEVICE[,BAUD], tcp:HOST:PORT or unix:PATH.",
            convert: { $0 }),
        .text(
            "node.database", \.database, .path, default: .computed(Defaults.database),
            env: StoreLocation.environmentVariable, flag: "--db",
            help: "The node's database file.", convert: { $0 }),
        .integer(
            "node.rotation_interval", \.rotationInterval, .integer(minimum: 5, maximum: 86_400, unit: "seconds"),
            default: RotationSchedule.defaultInterval, env: "TRACER_ROTATION_INTERVAL", flag: "--rotation-interval",
            help: "Seconds between id rotations."),
        .integer(
            "node.rotation_jitter", \.rotationJitter, .integer(minimum: 0, maximum: 43_200, unit: "seconds"),
            default: 0, env: "TRACER_ROTATION_JITTER", flag: "--rotation-jitter",
            help: "Largest random delay of a rotation after its boundary, in seconds; less than half the interval."),
        .text(
            "node.scan_schedule", \.scanPlan, .choice(ScanPlan.allCases.map(\.rawValue)),
            default: .value(.text(ScanPlan.standard.rawValue)), env: "TRACER_SCAN_SCHEDULE", flag: "--scan-schedule",
            help: "When the receiver listens: standard (a 270 ms window every 16 s: on 1.7 % of the time, a peer heard within about 20 s), low-power (every 32 s: 0.84 %, within about 40 s), continuous (always: for mains power, demos and tests), or minute-bursts (10 s of a 30 ms window every 60 ms each minute: 8.3 %, the older schedule, kept to compare against).",
            convert: { ScanPlan(rawValue: $0) ?? .standard }),
        .boolean(
            "node.continuous_scan", \.continuousScan, default: false,
            env: "TRACER_CONTINUOUS_SCAN", flag: "--continuous-scan",
            help: "Scan without pause, whatever node.scan_schedule says (costs battery; the same as node.scan_schedule = continuous)."),
        .boolean(
            "node.take_adapter", \.takeAdapter, default: false,
            env: "TRACER_TAKE_ADAPTER", flag: "--take-adapter",
            help: "With an hciN transport: when bluetoothd holds the adapter up, power it off through the kernel's management interface and take it (desktop Bluetooth on that adapter stops while the node runs)."),
        .integer(
            "node.watchdog_dark_limit", \.watchdogDarkLimit, .integer(minimum: 5, maximum: 86_400, unit: "seconds"),
            default: NodeRuntimeStatus.defaultWatchdogDarkLimit, env: "TRACER_WATCHDOG_DARK_LIMIT", flag: nil,
            help: "Under systemd's watchdog (WatchdogSec= in the unit): seconds the node may go without a working controller (reconnecting, or advertising or scanning off) before it stops answering the watchdog, so that systemd restarts it. A full disk or a locked database does not count: the node mends those itself."),
        .text(
            "node.metrics_file", \.metricsFile, .path,
            env: "TRACER_METRICS_FILE", flag: "--metrics-file",
            help: "Where `tracer run` keeps its metrics in Prometheus's text format, for node_exporter's textfile collector (a FILE.prom in its --collector.textfile.directory); unset: no metrics. Rewritten atomically at start, on every change of the node's state and every 60 s; never an id, a key, a place or a count per peer.",
            convert: { $0 }),
        .text(
            "node.metrics_listen", \.metricsListen,
            .text(describe: "a port, or an IPv4 address and a port such as 127.0.0.1:9465", problem: NodeMetricsListenAddress.problem),
            env: "TRACER_METRICS_LISTEN", flag: "--metrics-listen",
            help: "Where `tracer run` answers GET /metrics with the same metrics as node.metrics_file, as PORT (on 127.0.0.1) or HOST:PORT; unset: no endpoint. No authentication: keep it on loopback or a network only Prometheus reaches.",
            convert: { NodeMetricsListenAddress(parsing: $0) }),
        .text(
            "node.controller_quirks", \.controllerQuirks,
            .text(describe: "quirk names joined with commas, \"none\" or \"-name\" to turn off the model's", problem: TextRules.controllerQuirks),
            env: "TRACER_CONTROLLER_QUIRKS", flag: "--controller-quirks",
            help: "What the controller is known to do wrong, as quirk names joined with commas (\(ControllerQuirks.settingNames.joined(separator: ", "))); known models are recognised by themselves, so this is for a controller the node does not know. \"none\" turns off the quirks the known model's table selects, \"-name\" one of them.",
            convert: { (try? ControllerQuirkChoice(settingNames: $0)) ?? ControllerQuirkChoice() }),
    ]

    private static let log: [SettingDefinition] = [
        .text(
            "log.level", \.logLevel, .choice(["trace", "debug", "info", "notice", "warning", "error"]),
            default: .value(.text("info")), env: "TRACER_LOG_LEVEL", flag: "--log-level",
            help: "How much to log.", convert: { Logger.Level(rawValue: $0) ?? .info }),
        .text(
            "log.format", \.logFormat, .choice(["text", "json"]),
            default: .value(.text("text")), env: "TRACER_LOG_FORMAT", flag: "--log-format",
            help: "Log lines as text for people or JSON for machines.",
            convert: { NodeSettings.LogFormat(rawValue: $0) ?? .text }),
    ]

    private static let server: [SettingDefinition] = [
        .text(
            "server.url", \.serverURL, .text(describe: "an http or https URL", problem: TextRules.httpURL),
            env: "TRACER_SERVER_URL", flag: "--server",
            help: "The positive list server.", convert: { URL(string: $0) }),
        .text(
            "server.public_key", \.serverPublicKey,
            .text(describe: "the base64 of a 32-byte Ed25519 public key", problem: TextRules.ed25519PublicKey),
            env: "TRACER_SERVER_PUBLIC_KEY", flag: "--server-key",
            help: "The server's Ed25519 public key (base64), which must have signed the positive list.",
            convert: { Data(base64Encoded: $0) }),
        .text(
            "server.pinned_key", \.serverPinnedKey,
            .text(describe: "sha256//BASE64, or several joined with ;", problem: TextRules.pinnedKeys),
            env: "TRACER_SERVER_PINNED_KEY", flag: "--pinned-key",
            help: "SHA-256 hashes of the server's TLS public key to accept, as sha256//BASE64[;sha256//…].",
            convert: { text in
                // libcurl splits pins only on exactly ";sha256//": drop the spaces the rule allows.
                text.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ";")
            }),
        .integer(
            "server.timeout", \.serverTimeout, .integer(minimum: 1, maximum: 600, unit: "seconds"),
            default: 30, env: "TRACER_SERVER_TIMEOUT", flag: "--server-timeout",
            help: "Seconds one request may take, plus time for the expected size at 32 KiB/s; failed requests are retried 3 times."),
    ]

    private static let check: [SettingDefinition] = [
        .text(
            "check.cache_dir", \.cacheDirectory, .path, default: .computed(Defaults.cacheDirectory),
            env: "TRACER_CACHE_DIR", flag: "--cache-dir",
            help: "Where downloaded positive lists are kept.", convert: { $0 }),
        .integer(
            "check.interval", \.checkInterval, .integer(minimum: 60, maximum: 2_419_200, unit: "seconds"),
            default: 21_600, env: "TRACER_CHECK_INTERVAL", flag: "--check-interval",
            help: "Seconds between checks of the positive list."),
        .integer(
            "check.jitter", \.checkJitter, .integer(minimum: 0, maximum: 86_400, unit: "seconds"),
            default: 3_600, env: "TRACER_CHECK_JITTER", flag: "--check-jitter",
            help: "Largest random delay added to each check, in seconds."),
        .integer(
            "check.refresh_interval", \.refreshInterval, .integer(minimum: 0, maximum: 86_400, unit: "seconds"),
            default: 300, env: "TRACER_REFRESH_INTERVAL", flag: "--refresh-interval",
            help: "Seconds between cheap revalidations of the list (304 while unchanged) between checks; a changed list is checked at once. 0 turns them off."),
        .integer(
            "check.refresh_jitter", \.refreshJitter, .integer(minimum: 0, maximum: 86_400, unit: "seconds"),
            default: 60, env: "TRACER_REFRESH_JITTER", flag: "--refresh-jitter",
            help: "Largest random delay added to each revalidation, in seconds."),
        .boolean(
            "check.long_poll", \.longPoll, default: false,
            env: "TRACER_LONG_POLL", flag: "--long-poll",
            help: "Also wait on the server's GET /v1/generation (a server with longPollSeconds) and revalidate as soon as it publishes."),
        .text(
            "check.on_exposure", \.onExposure, .text(describe: "a shell command", problem: { _ in nil }),
            env: "TRACER_ON_EXPOSURE", flag: "--on-exposure",
            help: "A shell command to run when an exposure is found.", convert: { $0 }),
        .integer(
            "check.clock_skew", \.clockSkew, .integer(minimum: 0, maximum: 3_600, unit: "seconds"),
            default: 300, env: "TRACER_CLOCK_SKEW", flag: nil,
            help: "How far, in seconds, the server's clock may be from ours."),
        .integer(
            "check.max_list_age", \.maxListAge, .integer(minimum: 129_600, maximum: 2_419_200, unit: "seconds"),
            default: 172_800, env: "TRACER_MAX_LIST_AGE", flag: nil,
            help: "A list signed longer ago than this, in seconds, is treated as outdated (tracer-server signs one at least every 36 hours)."),
    ]

    /// The list as a log (docs/positive-list-format.md, "Following the log").
    private static let list: [SettingDefinition] = [
        .text(
            "list.format", \.retiredListFormat, .text(describe: "auto or log (retired: it changes nothing)", problem: TextRules.retiredListFormat),
            env: "TRACER_LIST_FORMAT", flag: nil,
            help: "Retired: this tracer follows only the list log (SERVER/log/). auto and log are still accepted and change nothing (tracer run and tracer check warn once; remove the line); index is refused.",
            convert: { $0 }),
        .text(
            "list.origin", \.listOrigin, .text(describe: "a log origin such as example.org/tracer-list", problem: TextRules.logOrigin),
            env: "TRACER_LIST_ORIGIN", flag: nil,
            help: "The origin every checkpoint of the list log must name: the server's logOrigin; unset, tracer-list/ and 16 hex digits of the SHA-256 of server.public_key (the server's default).",
            convert: { $0 }),
        .text(
            "list.witnesses", \.listWitnesses, .text(describe: "witness verifier keys (name+hash+base64) joined with ;", problem: TextRules.witnessKeys),
            env: "TRACER_LIST_WITNESSES", flag: nil,
            help: "Witnesses whose cosignatures on the list log's checkpoint this node knows, as printed by their tracer-server witness-keygen, joined with ;.",
            convert: { text in text.split(separator: ";").compactMap { try? NoteVerifierKey(text: $0.trimmingCharacters(in: .whitespaces)) } }),
        .integer(
            "list.witnesses_required", \.listWitnessesRequired, .integer(minimum: 0, maximum: 32, unit: ""),
            default: 0, env: "TRACER_LIST_WITNESSES_REQUIRED", flag: nil,
            help: "How many of list.witnesses must have cosigned a checkpoint before this node trusts it (0: none)."),
    ]

    private static let risk: [SettingDefinition] = [
        .integer(
            "risk.near_attenuation", \.risk.nearAttenuation, .integer(minimum: 0, maximum: 200, unit: "dB"),
            default: 51, env: "TRACER_RISK_NEAR_ATTENUATION", flag: nil,
            help: "Attenuation up to which a contact counts as near."),
        .integer(
            "risk.far_attenuation", \.risk.farAttenuation, .integer(minimum: 0, maximum: 200, unit: "dB"),
            default: 56, env: "TRACER_RISK_FAR_ATTENUATION", flag: nil,
            help: "Attenuation from which a contact counts as far; above near_attenuation."),
        .number(
            "risk.near_weight", \.risk.nearWeight, .number(minimum: 0, maximum: 1),
            default: 1.0, env: "TRACER_RISK_NEAR_WEIGHT", flag: nil, help: "Weight of a near minute."),
        .number(
            "risk.medium_weight", \.risk.mediumWeight, .number(minimum: 0, maximum: 1),
            default: 0.5, env: "TRACER_RISK_MEDIUM_WEIGHT", flag: nil, help: "Weight of a medium-distance minute."),
        .number(
            "risk.far_weight", \.risk.farWeight, .number(minimum: 0, maximum: 1),
            default: 0.0, env: "TRACER_RISK_FAR_WEIGHT", flag: nil, help: "Weight of a far minute."),
        .number(
            "risk.low_minutes", \.risk.lowMinutes, .number(minimum: 0, minimumIncluded: false),
            default: 5.8, env: "TRACER_RISK_LOW_MINUTES", flag: nil,
            help: "Weighted minutes from which an exposure is reported (low risk; tracer check exits 3)."),
        .number(
            "risk.high_minutes", \.risk.highMinutes, .number(minimum: 0, minimumIncluded: false),
            default: 18.4, env: "TRACER_RISK_HIGH_MINUTES", flag: nil,
            help: "Weighted minutes from which an exposure is reported as high risk; at least low_minutes."),
        .integer(
            "risk.assumed_tx_power", \.risk.assumedTxPower, .integer(minimum: -40, maximum: 20, unit: "dBm"),
            default: 0, env: "TRACER_RISK_ASSUMED_TX_POWER", flag: nil,
            help: "Transmit power assumed for peers that do not advertise theirs."),
        .integer(
            "risk.sampling_period", \.risk.samplingPeriod, .integer(minimum: 0, maximum: 3_600, unit: "seconds"),
            default: 60, env: "TRACER_RISK_SAMPLING_PERIOD", flag: nil,
            help: "Contact time one sighting stands for, added once to each encounter's span: 60 s by default, at least the scan cycle (16 s by node.scan_schedule = standard, 60 s by minute-bursts), so a brief contact counts as a minute."),
        .text(
            "risk.attenuation_summary", \.risk.attenuationSummary, .choice(RiskModel.AttenuationSummary.allCases.map(\.rawValue)),
            default: .value(.text("strongest")), env: "TRACER_RISK_ATTENUATION_SUMMARY", flag: nil,
            help: "Which RSSI of an id window decides its bucket: the strongest (the closest the devices came), the mean, upper_quartile (the strongest a quarter of the readings reach), or buckets (its time split by the readings' attenuations).",
            convert: { RiskModel.AttenuationSummary(rawValue: $0) ?? .strongest }),
        .text(
            "risk.directions", \.risk.directions, .choice(RiskModel.Directions.allCases.map(\.rawValue)),
            default: .value(.text("both")), env: "TRACER_RISK_DIRECTIONS", flag: nil,
            help: "Whose readings decide a window's bucket: both (ours or the RSSI the peer reported for us in the exchange, whichever is stronger), average (the mean of the two where both exist) or ours (the report only when we heard nothing).",
            convert: { RiskModel.Directions(rawValue: $0) ?? .both }),
        .integer(
            "risk.rssi_correction", \.risk.rssiCorrection, .integer(minimum: Int64(RSSICalibration.correctionRange.lowerBound), maximum: Int64(RSSICalibration.correctionRange.upperBound), unit: "dB"),
            default: 0, env: "TRACER_RISK_RSSI_CORRECTION", flag: nil,
            help: "Added to every RSSI this node measures: its radio's calibration (the Exposure Notification rssi_offset of a phone model); `tracer calibrate` measures it against a reference node at 1 m."),
        .text(
            "risk.weight_curve", \.risk.weightCurve, .choice(RiskModel.WeightCurve.allCases.map(\.rawValue)),
            default: .value(.text("steps")), env: "TRACER_RISK_WEIGHT_CURVE", flag: nil,
            help: "How attenuation becomes a weight: steps (the near, medium and far weights) or linear (from the near weight at near_attenuation down to the far weight at far_attenuation).",
            convert: { RiskModel.WeightCurve(rawValue: $0) ?? .steps }),
        .text(
            "risk.score", \.risk.score, .choice(RiskModel.DayScore.allCases.map(\.rawValue)),
            default: .value(.text("total")), env: "TRACER_RISK_SCORE", flag: nil,
            help: "What a day's level is decided on: total (its weighted minutes, against low_minutes and high_minutes; the default, chosen by its worst case under stresses), logistic (a probability from its weighted minutes and strongest attenuation, fitted on recorded contacts, with its own thresholds and min_contact_minutes; low_minutes and high_minutes then do not apply), best_window (the most in one id window) or best_half_hour (the most within half an hour); docs/risk-model.md.",
            convert: { RiskModel.DayScore(rawValue: $0) ?? .total }),
        .number(
            "risk.min_contact_minutes", \.risk.minContactMinutes, .number(minimum: 0),
            default: 10, env: "TRACER_RISK_MIN_CONTACT_MINUTES", flag: nil,
            help: "With risk.score = logistic, a day is an exposure only with at least this many contact minutes near or medium (the label's 15 minutes less one scan cycle of slack; 0 turns the floor off; docs/risk-model.md)."),
    ]

    static let constraints: [NodeSettingConstraint] = [
        NodeSettingConstraint(blamed: "node.rotation_jitter", other: "node.rotation_interval") { settings in
            settings.rotationJitter * 2 < settings.rotationInterval
                ? nil
                : "node.rotation_jitter (\(settings.rotationJitter) s) must be less than half of node.rotation_interval (\(settings.rotationInterval) s)"
        },
        NodeSettingConstraint(blamed: "list.witnesses_required", other: "list.witnesses") { settings in
            settings.listWitnessesRequired <= settings.listWitnesses.count
                ? nil
                : "list.witnesses_required (\(settings.listWitnessesRequired)) must be at most the number of list.witnesses (\(settings.listWitnesses.count))"
        },
        NodeSettingConstraint(blamed: "risk.far_attenuation", other: "risk.near_attenuation") { settings in
            settings.risk.farAttenuation > settings.risk.nearAttenuation
                ? nil
                : "risk.far_attenuation (\(settings.risk.farAttenuation) dB) must be greater than risk.near_attenuation (\(settings.risk.nearAttenuation) dB)"
        },
        NodeSettingConstraint(blamed: "risk.high_minutes", other: "risk.low_minutes") { settings in
            settings.risk.highMinutes >= settings.risk.lowMinutes
                ? nil
                : "risk.high_minutes (\(SettingValue.number(settings.risk.highMinutes))) must be at least risk.low_minutes (\(SettingValue.number(settings.risk.lowMinutes)))"
        },
    ]
}

extension SettingRegistry {
    /// Where the node is, recorded with each encounter and kept on this machine (README, Privacy).
    fileprivate static let place: [SettingDefinition] = [
        .text(
            "place.name", \.placeName, .text(describe: "a short name such as \"Library, main entrance\"", problem: TextRules.placeName),
            env: "TRACER_PLACE_NAME", flag: "--place-name",
            help: "The name of this node's place (a fixed node: \"Library, main entrance\"), recorded with each encounter.",
            convert: { $0 }),
        .text(
            "place.source", \.placeSource, .choice(NodeSettings.PlaceSource.allCases.map(\.rawValue)),
            default: .value(.text("none")), env: "TRACER_PLACE_SOURCE", flag: "--place-source",
            help: "Where a moving node's position comes from: none, or gpsd (Linux's GPS daemon), rounded to place.precision.",
            convert: { NodeSettings.PlaceSource(rawValue: $0) ?? .none }),
        .text(
            "place.gpsd_host", \.gpsdHost, .text(describe: "a host name or IP address", problem: TextRules.hostName),
            default: .value(.text(GPSDClient.defaultHost)), env: "TRACER_PLACE_GPSD_HOST", flag: nil,
            help: "The host gpsd listens on.", convert: { $0 }),
        .integer(
            "place.gpsd_port", \.gpsdPort, .integer(minimum: 1, maximum: 65_535, unit: ""),
            default: Int64(GPSDClient.defaultPort), env: "TRACER_PLACE_GPSD_PORT", flag: nil,
            help: "The TCP port gpsd listens on."),
        .integer(
            "place.precision", \.placePrecision,
            .integer(minimum: Int64(PlaceGrid.precisionRange.lowerBound), maximum: Int64(PlaceGrid.precisionRange.upperBound), unit: "metres"),
            default: Int64(PlaceGrid.defaultPrecision), env: "TRACER_PLACE_PRECISION", flag: "--place-precision",
            help: "The size of the grid cells positions are rounded to, in metres: the node stores a cell's centre, never the fix."),
        .integer(
            "place.max_fix_age", \.placeMaxFixAge, .integer(minimum: 1, maximum: 3_600, unit: "seconds"),
            default: Int64(PlaceBoard.defaultMaximumFixAge.components.seconds), env: "TRACER_PLACE_MAX_FIX_AGE", flag: nil,
            help: "Seconds a gpsd fix stays in force; an older fix is no fix and encounters get no position."),
    ]
}

/// Checks of text settings; each returns nil for good text or the problem.
private enum TextRules {
    static func placeName(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.count <= 200, !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            return "must be a name of 1 to 200 characters on one line, such as \"Library, main entrance\""
        }
        return nil
    }

    static func logOrigin(_ text: String) -> String? {
        guard text.utf8.count <= 255, !text.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0 == "+" || $0.value < 0x20 || $0.value == 0x7f }),
              !text.hasPrefix("cosignature/")
        else { return "must be the server's logOrigin: 1 to 255 bytes without spaces, + or control characters, got \(text.quotedForMessage)" }
        return nil
    }

    static func witnessKeys(_ text: String) -> String? {
        for part in text.split(separator: ";", omittingEmptySubsequences: false) {
            let key = part.trimmingCharacters(in: .whitespaces)
            do {
                let parsed = try NoteVerifierKey(text: key)
                guard parsed.type == .cosignatureV1 else {
                    return "must list witness keys of type cosignature/v1 (as tracer-server witness-keygen prints them); \(key.quotedForMessage) is another kind of key"
                }
            } catch {
                return "must be witness verifier keys (name+hash+base64) joined with ;, got \(key.quotedForMessage): \(error)"
            }
        }
        return nil
    }

    static func hostName(_ text: String) -> String? {
        guard !text.isEmpty, text.count <= 253, !text.contains(where: { $0.isWhitespace || $0 == "/" }) else {
            return "must be a host name or IP address such as 127.0.0.1, got \(text.quotedForMessage)"
        }
        return nil
    }

    /// `list.format` names a choice a node no longer has: the values that meant the log still
    /// load (they change nothing), the index is refused, since a node set to it would silently
    /// follow another list than its operator chose.
    static func retiredListFormat(_ text: String) -> String? {
        switch text {
        case "auto", "log": nil
        case "index": "is index, but this tracer follows only the list log (SERVER/log/), never the signed index; remove the list.format line"
        default: "must be auto or log, got \(text.quotedForMessage); the setting is retired (this tracer follows only the list log), so remove the line"
        }
    }

    static func controllerQuirks(_ text: String) -> String? {
        do {
            _ = try ControllerQuirkChoice(settingNames: text)
            return nil
        } catch {
            return "must be quirk names joined with commas, from: \(ControllerQuirks.settingNames.joined(separator: ", ")) (\"none\" turns off the quirks the controller's model selects, \"-name\" one of them); got \(error.name.quotedForMessage), which is no quirk"
        }
    }

    static func transport(_ text: String) -> String? {
        do {
            _ = try TransportSpec(parsing: text)
            return nil
        } catch {
            return "must be one of \(TransportSpec.acceptedForms) (\(error.problem)), got \(text.quotedForMessage)"
        }
    }

    static func httpURL(_ text: String) -> String? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else { return "must be an http or https URL such as https://tracer.example.org, got \(text.quotedForMessage)" }
        return nil
    }

    static func ed25519PublicKey(_ text: String) -> String? {
        guard let key = Data(base64Encoded: text) else {
            return "must be the base64 of a 32-byte Ed25519 public key, got \(text.quotedForMessage), which is not base64"
        }
        guard key.count == 32 else {
            return "must be the base64 of a 32-byte Ed25519 public key, got \(key.count) bytes"
        }
        return nil
    }

    static func pinnedKeys(_ text: String) -> String? {
        for pin in text.split(separator: ";", omittingEmptySubsequences: false) {
            let trimmed = pin.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("sha256//"), let hash = Data(base64Encoded: String(trimmed.dropFirst(8))), hash.count == 32
            else {
                return "must be sha256// followed by the base64 of a 32-byte SHA-256 hash, several joined with ;, got \(String(pin).quotedForMessage)"
            }
        }
        return nil
    }
}

/// Defaults that depend on where the user's directories are.
private enum Defaults {
    static func database(_ environment: [String: String]) -> (value: SettingValue, detail: String)? {
        // TRACER_DB is this setting's own variable, handled before defaults; StoreLocation keeps
        // the one rule for the default place.
        var withoutVariable = environment
        withoutVariable.removeValue(forKey: StoreLocation.environmentVariable)
        guard let location = try? StoreLocation.resolve(flag: nil, environment: withoutVariable) else { return nil }
        return (.text(location.path), location.source.rawValue)
    }

    static func cacheDirectory(_ environment: [String: String]) -> (value: SettingValue, detail: String)? {
        // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
        if let cacheHome = environment["XDG_CACHE_HOME"], cacheHome.hasPrefix("/") {
            return (.text(cacheHome + "/tracer"), "$XDG_CACHE_HOME")
        }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return (.text(home + "/.cache/tracer"), "~/.cache")
    }
}
