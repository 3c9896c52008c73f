import Foundation
import TracerCore

/// What one day's matched encounters look like, window by window: the figures a day's score can
/// be computed from besides its total of weighted minutes (docs/risk-model.md, "Fifth round").
/// A window is one of this node's id windows (`Encounter.ownWindowStart`).
public struct DayFeatures: Sendable, Equatable, Codable {
    /// The day's weighted minutes over all its windows (the `total` score).
    public var weightedMinutes: Double
    /// The most weighted minutes in one id window.
    public var bestWindowMinutes: Double
    /// The most weighted minutes in id windows that start within half an hour of the first of
    /// them: a contact of 15 minutes in a row falls in two successive 15-minute windows at most.
    public var bestHalfHourMinutes: Double
    /// The smallest attenuation of the day (dB); nil when no window's signal was measured.
    public var strongestAttenuation: Int?
    /// The median over windows of each window's attenuation (dB); nil as above.
    public var medianAttenuation: Double?
    /// Windows with any contact.
    public var windows: Int
    /// The longest run of successive windows (each starting at most `successiveWindowGap` after the
    /// previous one) whose attenuation was near.
    public var longestNearRun: Int
    /// The day's contact minutes, unweighted, in windows whose attenuation was near or medium (at or
    /// under the far threshold): the time the label's "within 6 ft for 15 minutes" can be about.
    /// Windows whose signal was never measured count too (`ExposureAssessment` puts them in the
    /// middle of the medium range), and so do the neighbouring day's windows that follow on from
    /// this day's over midnight. nil in reports written before it was kept.
    public var closeContactMinutes: Double?

    /// Windows further apart than this (seconds) do not follow one another: 15-minute windows
    /// with some jitter.
    public static let successiveWindowGap: UnixSeconds = 1_200
    /// The half hour of `bestHalfHourMinutes`.
    public static let stretchSeconds: UnixSeconds = 1_800

    public init(weightedMinutes: Double, bestWindowMinutes: Double, bestHalfHourMinutes: Double, strongestAttenuation: Int?,
                medianAttenuation: Double?, windows: Int, longestNearRun: Int, closeContactMinutes: Double? = nil) {
        self.weightedMinutes = weightedMinutes
        self.bestWindowMinutes = bestWindowMinutes
        self.bestHalfHourMinutes = bestHalfHourMinutes
        self.strongestAttenuation = strongestAttenuation
        self.medianAttenuation = medianAttenuation
        self.windows = windows
        self.longestNearRun = longestNearRun
        self.closeContactMinutes = closeContactMinutes
    }

    /// One window's share of a day: its start, weighted minutes, attenuation (the smallest of
    /// its encounters'; nil when none was measured) and contact minutes near or medium.
    public struct Window: Sendable, Equatable {
        public var start: UnixSeconds
        public var weightedMinutes: Double
        public var attenuation: Int?
        public var closeMinutes: Double

        public init(start: UnixSeconds, weightedMinutes: Double, attenuation: Int?, closeMinutes: Double = 0) {
            self.start = start
            self.weightedMinutes = weightedMinutes
            self.attenuation = attenuation
            self.closeMinutes = closeMinutes
        }
    }

    /// The features of a day's windows (in any order; one entry per window start) under `model`,
    /// whose near threshold says which windows are near.
    public init(windows unsorted: [Window], model: RiskModel) {
        let windows = unsorted.sorted { $0.start < $1.start }
        weightedMinutes = windows.reduce(0) { $0 + $1.weightedMinutes }
        bestWindowMinutes = windows.map(\.weightedMinutes).max() ?? 0
        var bestStretch = 0.0
        for (index, first) in windows.enumerated() {
            let stretch = windows[index...].prefix { $0.start < first.start + Self.stretchSeconds }
            bestStretch = max(bestStretch, stretch.reduce(0) { $0 + $1.weightedMinutes })
        }
        bestHalfHourMinutes = bestStretch
        let attenuations = windows.compactMap(\.attenuation).sorted()
        strongestAttenuation = attenuations.first
        if attenuations.isEmpty {
            medianAttenuation = nil
        } else if attenuations.count % 2 == 1 {
            medianAttenuation = Double(attenuations[attenuations.count / 2])
        } else {
            medianAttenuation = Double(attenuations[attenuations.count / 2 - 1] + attenuations[attenuations.count / 2]) / 2
        }
        self.windows = windows.count
        var longest = 0, run = 0
        var previous: UnixSeconds?
        for window in windows {
            let near = window.attenuation.map { model.proximity(ofAttenuation: $0) == .near } ?? false
            let follows = previous.map { window.start - $0 <= Self.successiveWindowGap } ?? false
            run = near ? (follows ? run + 1 : 1) : 0
            longest = max(longest, run)
            previous = window.start
        }
        longestNearRun = longest
        closeContactMinutes = windows.reduce(0) { $0 + $1.closeMinutes }
    }
}

/// A logistic score over a day's features: the probability, by a model fitted on the labelled
/// recordings, that the day held a contact within 6 ft for 15 minutes. Its own two thresholds
/// replace `risk.low_minutes` and `risk.high_minutes`, which count minutes.
public struct LogisticScore: Sendable, Equatable, Codable {
    /// The intercept, then one coefficient per feature in `Self.featureNames` order.
    public var intercept: Double
    public var coefficients: [Double]
    /// The probability from which a day is an exposure (exit 3), and from which it is high.
    public var lowProbability: Double
    public var highProbability: Double

    public static let featureNames = [
        "log(1 + weighted minutes)", "log(1 + best half hour's weighted minutes)", "strongest attenuation (dB)",
        "median window attenuation (dB)", "windows", "longest near run (windows)",
    ]

    /// Stands for a day's attenuation in features without one (`ExposureAssessment` gives an
    /// unmeasured window the middle of the medium range, so only features built elsewhere lack
    /// it): beyond any near or medium threshold.
    public static let unmeasuredAttenuation = 100.0

    public init(intercept: Double, coefficients: [Double], lowProbability: Double, highProbability: Double) {
        self.intercept = intercept
        self.coefficients = coefficients
        self.lowProbability = lowProbability
        self.highProbability = highProbability
    }

    /// The features in `featureNames` order.
    public static func inputs(_ features: DayFeatures) -> [Double] {
        [
            log(1 + features.weightedMinutes), log(1 + features.bestHalfHourMinutes),
            features.strongestAttenuation.map(Double.init) ?? unmeasuredAttenuation,
            features.medianAttenuation ?? unmeasuredAttenuation, Double(features.windows), Double(features.longestNearRun),
        ]
    }

    public func probability(of features: DayFeatures) -> Double {
        let inputs = Self.inputs(features)
        var logit = intercept
        for (coefficient, input) in zip(coefficients, inputs) { logit += coefficient * input }
        return 1 / (1 + exp(-logit))
    }
}
