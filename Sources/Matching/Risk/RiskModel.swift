import IDRotation

/// How contact with diagnosed ids becomes a risk level, after the Exposure Notification model:
/// minutes of contact, weighted by how strong the signal was, summed per day, against thresholds.
/// docs/risk-model.md explains the defaults and the limits of signal strength as a proxy for
/// distance.
public struct RiskModel: Sendable, Equatable, Codable {
    /// Attenuation (TX power minus RSSI) below this is "near".
    public var nearAttenuation: Int
    /// Attenuation above this is "far"; between the two, "medium".
    public var farAttenuation: Int
    public var nearWeight: Double
    public var mediumWeight: Double
    public var farWeight: Double
    /// Weight of contact whose signal strength was never measured (the exchange still proves
    /// the two devices were within radio range).
    public var unknownWeight: Double
    /// Weighted minutes in one day from which the day counts as a low-risk exposure.
    public var lowMinutes: Double
    /// Weighted minutes in one day from which the day counts as a high-risk exposure.
    public var highMinutes: Double
    /// TX power assumed for a peer that did not advertise one, in dBm.
    public var assumedTxPower: Int
    /// The time one sighting stands for: the scan cycle, since a node hears a nearby peer once
    /// per cycle. An encounter lasts from its first to its last sighting plus one such period.
    public var samplingPeriodSeconds: Int
    /// Which of an encounter's RSSI values stands for it: their mean, or the strongest one.
    public var attenuationSummary: AttenuationSummary
    /// Added to every RSSI this node measured (dB): the receiver's calibration, as the Exposure
    /// Notification service's per-model `rssi_offset`. 0 for an uncalibrated node.
    public var rssiCorrection: Int
    /// Whether the RSSI the peer reported for us in the exchange counts beside our own readings.
    public var directions: Directions
    /// This node's advertised TX power (dBm): the reverse direction's attenuation is it minus the
    /// RSSI the peer reported. nil: the peer's TX power stands in, as it does between Linux nodes,
    /// which all advertise the same.
    public var ownTxPower: Int?
    /// How an attenuation becomes a weight: three steps, or a line between the thresholds.
    public var weightCurve: WeightCurve
    /// What a day's level is decided on: its total of weighted minutes, the most in one stretch,
    /// or a logistic score over its features (docs/risk-model.md, "Fifth round").
    public var dayScore: DayScore
    /// The coefficients and thresholds of `dayScore = .logistic`.
    public var logistic: LogisticScore
    /// With `dayScore = .logistic`, a day is an exposure only when its contact minutes near or
    /// medium (`DayFeatures.closeContactMinutes`) reach this. Not fitted: it follows from the
    /// label ("within 6 ft for at least 15 minutes"). A contact in range for 15 minutes counts
    /// more than 15 minutes less one scan cycle (the first and last sightings each fall within a
    /// cycle of its ends, and one cycle is added back), so 10 keeps every such contact for scan
    /// cycles up to 5 minutes (the recorded phones: 4-5; a node: 1), while a passer-by heard
    /// for a minute or two at a strong signal is no longer an exposure (docs/risk-model.md,
    /// "Sixth round"). The minute-based scores are not floored: their thresholds are minutes.
    public var minContactMinutes: Double

    /// What a day's level is decided on.
    public enum DayScore: String, Sendable, Codable, CaseIterable {
        /// The day's weighted minutes over all its id windows (GAEN's sum).
        case total
        /// The most weighted minutes in one id window.
        case bestWindow = "best_window"
        /// The most weighted minutes in id windows starting within half an hour: the label asks
        /// for 15 minutes in a row, which two successive 15-minute windows hold.
        case bestHalfHour = "best_half_hour"
        /// `logistic`'s probability, against its own thresholds.
        case logistic
    }

    /// Fitted on all 24 labelled tests of the MIT LL / U. Arizona recordings by the fifth round's
    /// procedure (docs/risk-model.md, "Fifth round"), over two features: log(1 + the day's
    /// weighted minutes) and its strongest attenuation, computed with the default steps (51/56 dB,
    /// strongest of both directions); exit 3 at the probability reaching training TPR 0.92, high
    /// at training FPR 0.20 (0.090758 and 0.208071, rounded down). The default from the sixth
    /// round to the seventh; `risk.score = logistic` still selects it. On its own it flags a brief
    /// contact at a strong signal, which these recordings (every test over half an hour) lack:
    /// `minContactMinutes` is what keeps such a contact from being an exposure.
    public static let fittedLogistic = LogisticScore(
        intercept: 2.857586, coefficients: [0.546458, 0, -0.112244, 0, 0, 0], lowProbability: 0.0907, highProbability: 0.208)

    /// How a window's attenuation turns into the weight of its minutes.
    public enum WeightCurve: String, Sendable, Codable, CaseIterable {
        /// Near, medium and far buckets, each with its weight (GAEN's attenuation buckets).
        case steps
        /// The near weight up to the near threshold, the far weight from the far threshold, and a
        /// straight line between (the medium weight is unused): a window 1 dB beyond a threshold
        /// then counts almost as one 1 dB inside it, and scores stop piling up in three values.
        case linear
    }

    /// Whose readings of the radio path between the two devices decide an encounter's bucket.
    public enum Directions: String, Sendable, Codable, CaseIterable {
        /// Ours; the peer's report stands in only for a window in which we measured nothing.
        case ours
        /// The stronger of ours and the peer's report: the path is the same both ways, and what
        /// shades one phone's readings (a pocket, a body) need not shade the other's at the same moment.
        case both
        /// The mean of ours and the peer's report in a window that has both, ours alone otherwise:
        /// each direction carries the sender's TX power error and the receiver's RSSI error, and
        /// the two directions carry different devices' errors, so their mean halves each one
        /// instead of taking whichever is more optimistic (docs/risk-model.md, "Seventh round").
        case average
    }

    /// How the RSSI values of one encounter (one peer id in one of our id windows) are summarised.
    public enum AttenuationSummary: String, Sendable, Codable, CaseIterable {
        /// The mean of all values: every fade and body in the way pulls it down.
        case mean
        /// The strongest value: the closest the two devices came in the window, as far as the
        /// radio can tell. Fades only ever weaken a signal, so the maximum is the robust summary.
        case strongest
        /// Every value: the window's contact time split across the buckets in proportion to the
        /// readings heard in each (GAEN's attenuation durations). A row logged before the node
        /// kept its readings' histogram (schema v3) is scored by its strongest value.
        case buckets
        /// The upper quartile: the strongest value that at least a quarter of the window's
        /// readings reach, so one lucky reading does not decide. A row without a histogram
        /// (logged before schema v3) is scored by its strongest value.
        case upperQuartile = "upper_quartile"
    }

    /// The defaults, measured on real recordings (docs/risk-model.md, "Measured on real
    /// recordings"): the strongest RSSI of each id window or the peer's report, whichever is
    /// stronger; near below 51 dB, medium up to 56 dB; a day's level from its total of weighted
    /// minutes, an exposure (exit 3) from 5.8, high from 18.4. Chosen in the seventh round by the
    /// worst case over stresses that stand in for another campaign (calibration shifts, another
    /// scan cycle, fewer readings, an environment left out): the third round's procedure (4
    /// numbers chosen on the data) did as well in the worst case as the logistic score (7), so the
    /// rule with fewer fitted numbers is the default. These are the numbers that procedure chooses
    /// on all 24 labelled tests. `risk.score = logistic` keeps the sixth round's score.
    public static let standard = RiskModel(
        nearAttenuation: 51, farAttenuation: 56, nearWeight: 1.0, mediumWeight: 0.5, farWeight: 0.0,
        unknownWeight: 0.5, lowMinutes: 5.8, highMinutes: 18.4, assumedTxPower: 0, samplingPeriodSeconds: 60,
        attenuationSummary: .strongest, directions: .both, dayScore: .total)

    /// The Exposure Notification example configuration, Tracer's defaults before they were
    /// measured: the mean RSSI, 55/70 dB, weights 1/0.5/0, high from 15 weighted minutes.
    public static let exposureNotificationExample = RiskModel(
        nearAttenuation: 55, farAttenuation: 70, nearWeight: 1.0, mediumWeight: 0.5, farWeight: 0.0,
        unknownWeight: 0.5, lowMinutes: 5, highMinutes: 15, assumedTxPower: 0, samplingPeriodSeconds: 60)

    public init(
        nearAttenuation: Int, farAttenuation: Int, nearWeight: Double, mediumWeight: Double, farWeight: Double,
        unknownWeight: Double, lowMinutes: Double, highMinutes: Double, assumedTxPower: Int, samplingPeriodSeconds: Int,
        attenuationSummary: AttenuationSummary = .mean, rssiCorrection: Int = 0, directions: Directions = .ours,
        ownTxPower: Int? = nil, weightCurve: WeightCurve = .steps, dayScore: DayScore = .total,
        logistic: LogisticScore = RiskModel.fittedLogistic, minContactMinutes: Double = 10
    ) {
        self.nearAttenuation = nearAttenuation
        self.farAttenuation = farAttenuation
        self.nearWeight = nearWeight
        self.mediumWeight = mediumWeight
        self.farWeight = farWeight
        self.unknownWeight = unknownWeight
        self.lowMinutes = lowMinutes
        self.highMinutes = highMinutes
        self.assumedTxPower = assumedTxPower
        self.samplingPeriodSeconds = samplingPeriodSeconds
        self.attenuationSummary = attenuationSummary
        self.rssiCorrection = rssiCorrection
        self.directions = directions
        self.ownTxPower = ownTxPower
        self.weightCurve = weightCurve
        self.dayScore = dayScore
        self.logistic = logistic
        self.minContactMinutes = minContactMinutes
    }

    public enum Proximity: String, Sendable, Codable, CodingKeyRepresentable, CaseIterable {
        case near, medium, far, unknown
    }

    public func proximity(of encounter: Encounter) -> Proximity {
        guard let attenuation = attenuation(of: encounter) else { return .unknown }
        return proximity(ofAttenuation: attenuation)
    }

    public func proximity(ofAttenuation attenuation: Int) -> Proximity {
        if attenuation < nearAttenuation { return .near }
        if attenuation <= farAttenuation { return .medium }
        return .far
    }

    /// TX power minus the RSSI we measured (its mean or its strongest value, corrected by this
    /// node's calibration); when we measured none, or with `directions = .both` when it is
    /// smaller, the attenuation the peer reported for us (our TX power minus its RSSI); with
    /// `directions = .average` the mean of the two, rounded down (towards near).
    public func attenuation(of encounter: Encounter) -> Int? {
        let reverse = reverseAttenuation(of: encounter)
        guard encounter.rssiCount > 0 else { return reverse }
        let txPower = Int(encounter.txPower ?? Int8(clamping: assumedTxPower))
        let measured: Int
        switch attenuationSummary {
        case .mean: measured = Int((Double(encounter.rssiSum) / Double(encounter.rssiCount)).rounded())
        case .strongest, .buckets: measured = Int(encounter.rssiMax ?? Int8(clamping: encounter.rssiSum / encounter.rssiCount))
        case .upperQuartile:
            measured = Int(Self.upperQuartile(of: encounter.rssiHistogram) ?? encounter.rssiMax ?? Int8(clamping: encounter.rssiSum / encounter.rssiCount))
        }
        let forward = txPower - (measured + rssiCorrection)
        guard let reverse else { return forward }
        switch directions {
        case .ours: return forward
        case .both: return min(forward, reverse)
        case .average: return Int((Double(forward + reverse) / 2).rounded(.down))
        }
    }

    /// The largest RSSI that at least a quarter of the readings reach or exceed; nil when empty.
    static func upperQuartile(of histogram: RSSIHistogram) -> Int8? {
        let needed = (histogram.total + 3) / 4
        var reached = 0
        for (rssi, count) in histogram.counts.sorted(by: { $0.key > $1.key }) {
            reached += count
            if reached >= needed { return rssi }
        }
        return nil
    }

    /// Our TX power (or the peer's, when ours is not set) minus the RSSI the peer reported for us.
    func reverseAttenuation(of encounter: Encounter) -> Int? {
        guard let reported = encounter.reportedRSSI else { return nil }
        return (ownTxPower ?? Int(encounter.txPower ?? Int8(clamping: assumedTxPower))) - Int(reported)
    }

    public func weight(of proximity: Proximity) -> Double {
        switch proximity {
        case .near: nearWeight
        case .medium: mediumWeight
        case .far: farWeight
        case .unknown: unknownWeight
        }
    }

    /// The weight of a minute at `attenuation`, on the model's curve.
    public func weight(ofAttenuation attenuation: Int) -> Double {
        switch weightCurve {
        case .steps:
            return weight(of: proximity(ofAttenuation: attenuation))
        case .linear:
            if attenuation <= nearAttenuation { return nearWeight }
            if attenuation >= farAttenuation { return farWeight }
            let fraction = Double(attenuation - nearAttenuation) / Double(farAttenuation - nearAttenuation)
            return nearWeight + (farWeight - nearWeight) * fraction
        }
    }

    /// An encounter's contact minutes, weighted: what a day's level is decided on.
    public func weightedMinutes(of encounter: Encounter) -> Double {
        switch weightCurve {
        case .steps:
            return minutesByProximity(of: encounter).reduce(0) { $0 + $1.value * weight(of: $1.key) }
        case .linear:
            let minutes = Double(contactSeconds(of: encounter)) / 60
            let histogram = encounter.rssiHistogram
            if attenuationSummary == .buckets, !histogram.isEmpty {
                let txPower = Int(encounter.txPower ?? Int8(clamping: assumedTxPower))
                let readings = Double(histogram.total)
                return histogram.counts.reduce(0) { sum, reading in
                    sum + minutes * Double(reading.value) / readings * weight(ofAttenuation: txPower - (Int(reading.key) + rssiCorrection))
                }
            }
            guard let attenuation = attenuation(of: encounter) else { return minutes * unknownWeight }
            return minutes * weight(ofAttenuation: attenuation)
        }
    }

    /// An encounter's contact minutes by proximity bucket: all in one bucket, or with `.buckets`
    /// split in proportion to the readings of each attenuation.
    public func minutesByProximity(of encounter: Encounter) -> [Proximity: Double] {
        let minutes = Double(contactSeconds(of: encounter)) / 60
        let histogram = encounter.rssiHistogram
        guard attenuationSummary == .buckets, !histogram.isEmpty else { return [proximity(of: encounter): minutes] }
        let txPower = Int(encounter.txPower ?? Int8(clamping: assumedTxPower))
        let readings = Double(histogram.total)
        var split: [Proximity: Double] = [:]
        for (rssi, count) in histogram.counts {
            split[proximity(ofAttenuation: txPower - (Int(rssi) + rssiCorrection)), default: 0] += minutes * Double(count) / readings
        }
        return split
    }

    /// An encounter's contact minutes near, medium or unmeasured, unweighted (those a
    /// `minContactMinutes` floor counts; unmeasured minutes count as `total` counts them, like
    /// medium ones).
    public func closeContactMinutes(of encounter: Encounter) -> Double {
        let minutes = minutesByProximity(of: encounter)
        return (minutes[.near] ?? 0) + (minutes[.medium] ?? 0) + (minutes[.unknown] ?? 0)
    }

    /// Contact time an encounter stands for, in seconds.
    public func contactSeconds(of encounter: Encounter) -> Int64 {
        max(0, encounter.lastSeen - encounter.firstSeen) + Int64(samplingPeriodSeconds)
    }

    /// A day's score under `dayScore`: weighted minutes, or with `.logistic` a probability, which
    /// is 0 for a day with fewer close contact minutes than `minContactMinutes` (so no threshold
    /// makes it an exposure; features from before they were counted count none).
    public func score(of features: DayFeatures) -> Double {
        switch dayScore {
        case .total: features.weightedMinutes
        case .bestWindow: features.bestWindowMinutes
        case .bestHalfHour: features.bestHalfHourMinutes
        case .logistic: (features.closeContactMinutes ?? 0) >= minContactMinutes ? logistic.probability(of: features) : 0
        }
    }

    /// A day's level: from its score, and with `.logistic` none under the floor of close contact
    /// minutes whatever the thresholds.
    public func level(of features: DayFeatures) -> RiskLevel {
        if dayScore == .logistic, (features.closeContactMinutes ?? 0) < minContactMinutes { return .none }
        return level(score: score(of: features))
    }

    /// A day's level from its score (`score(of:)`): the logistic score has its own thresholds.
    public func level(score: Double) -> RiskLevel {
        guard dayScore == .logistic else { return level(weightedMinutes: score) }
        if score >= logistic.highProbability { return .high }
        if score >= logistic.lowProbability { return .low }
        return .none
    }

    public func level(weightedMinutes: Double) -> RiskLevel {
        if weightedMinutes >= highMinutes { return .high }
        if weightedMinutes >= lowMinutes { return .low }
        return .none
    }

    /// Why these values cannot be used, or nil.
    public var problem: String? {
        if farAttenuation <= nearAttenuation { return "risk.far_attenuation must be greater than risk.near_attenuation" }
        for (name, weight) in [("near", nearWeight), ("medium", mediumWeight), ("far", farWeight), ("unknown", unknownWeight)]
        where !(0...1).contains(weight) {
            return "risk.\(name)_weight must be between 0 and 1"
        }
        if !(lowMinutes > 0) { return "risk.low_minutes must be greater than 0" }
        if !(highMinutes >= lowMinutes) { return "risk.high_minutes must be at least risk.low_minutes" }
        if samplingPeriodSeconds < 0 { return "the sampling period cannot be negative" }
        if !(minContactMinutes >= 0) { return "risk.min_contact_minutes cannot be negative" }
        return nil
    }
}

public enum RiskLevel: String, Sendable, Codable, Comparable {
    case none, low, high

    public static func < (lhs: RiskLevel, rhs: RiskLevel) -> Bool { lhs.rank < rhs.rank }

    private var rank: Int {
        switch self {
        case .none: 0
        case .low: 1
        case .high: 2
        }
    }
}
