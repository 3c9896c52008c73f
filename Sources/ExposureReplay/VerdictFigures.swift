import Foundation
import TracerCore

/// A proportion with its 95 % Wilson score interval (sound for small counts and for 0 or 1).
public struct Proportion: Sendable, Equatable {
    public var successes: Int
    public var trials: Int

    public init(_ successes: Int, of trials: Int) {
        self.successes = successes
        self.trials = trials
    }

    public var value: Double { trials == 0 ? .nan : Double(successes) / Double(trials) }

    public var wilson95: (low: Double, high: Double) {
        guard trials > 0 else { return (.nan, .nan) }
        let z = 1.959_963_985
        let n = Double(trials), p = value
        let centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        let half = z / (1 + z * z / n) * ((p * (1 - p) / n + z * z / (4 * n * n)).squareRoot())
        return (max(0, centre - half), min(1, centre + half))
    }

    /// "0.93 [0.83, 0.97] (51/55)".
    public var formatted: String {
        guard trials > 0 else { return "n/a (0/0)" }
        let interval = wilson95
        return String(format: "%.2f [%.2f, %.2f] (%d/%d)", value, interval.low, interval.high, successes, trials)
    }
}

/// How well a yes/no verdict matches the ground truth.
public struct VerdictCounts: Sendable, Equatable {
    public var truePositives = 0, falseNegatives = 0, falsePositives = 0, trueNegatives = 0

    public init() {}

    public init<Pairs: Sequence>(_ pairs: Pairs) where Pairs.Element == (verdict: Bool, truth: Bool) {
        for pair in pairs { add(verdict: pair.verdict, truth: pair.truth) }
    }

    public mutating func add(verdict: Bool, truth: Bool) {
        switch (verdict, truth) {
        case (true, true): truePositives += 1
        case (false, true): falseNegatives += 1
        case (true, false): falsePositives += 1
        case (false, false): trueNegatives += 1
        }
    }

    public var truePositiveRate: Proportion { Proportion(truePositives, of: truePositives + falseNegatives) }
    public var falsePositiveRate: Proportion { Proportion(falsePositives, of: falsePositives + trueNegatives) }
    public var precision: Proportion { Proportion(truePositives, of: truePositives + falsePositives) }
}

/// A continuous score against the ground truth: the ROC curve and the area under it.
public struct ScoredTruths: Sendable {
    public var scores: [(score: Double, truth: Bool)]

    public init(_ scores: [(score: Double, truth: Bool)]) { self.scores = scores }

    /// The probability that a positive scores above a negative (ties count half): the ROC area.
    public var areaUnderCurve: Double {
        let sorted = scores.sorted { $0.score < $1.score }
        let positives = Double(sorted.filter(\.truth).count), negatives = Double(sorted.count) - positives
        guard positives > 0, negatives > 0 else { return .nan }
        // Mann-Whitney U from mid-ranks.
        var rankSum = 0.0
        var index = 0
        while index < sorted.count {
            var end = index
            while end + 1 < sorted.count && sorted[end + 1].score == sorted[index].score { end += 1 }
            let midRank = Double(index + end) / 2 + 1
            for tied in index...end where sorted[tied].truth { rankSum += midRank }
            index = end + 1
        }
        return (rankSum - positives * (positives + 1) / 2) / (positives * negatives)
    }

    /// "score ≥ t" at every distinct t, from the highest score down: its threshold and the
    /// (false-positive rate, true-positive rate) it gives. Empty without both classes.
    private var thresholdSweep: [(threshold: Double, fpr: Double, tpr: Double)] {
        let positives = Double(scores.filter(\.truth).count), negatives = Double(scores.count) - positives
        guard positives > 0, negatives > 0 else { return [] }
        let sorted = scores.sorted { $0.score > $1.score }
        var sweep: [(threshold: Double, fpr: Double, tpr: Double)] = []
        var truePositives = 0.0, falsePositives = 0.0
        var index = 0
        while index < sorted.count {
            let score = sorted[index].score
            while index < sorted.count && sorted[index].score == score {
                if sorted[index].truth { truePositives += 1 } else { falsePositives += 1 }
                index += 1
            }
            sweep.append((score, falsePositives / negatives, truePositives / positives))
        }
        return sweep
    }

    /// (false-positive rate, true-positive rate) for "score ≥ t" at every distinct t, from (0,0)
    /// to (1,1).
    public var rocPoints: [(fpr: Double, tpr: Double)] {
        let sweep = thresholdSweep
        guard !sweep.isEmpty else { return [] }
        return [(0, 0)] + sweep.map { ($0.fpr, $0.tpr) }
    }

    /// The lowest false-positive rate at which "score ≥ t" reaches a true-positive rate of at
    /// least `tpr`, and that threshold t.
    public func lowestFalsePositiveRate(reaching tpr: Double) -> (fpr: Double, threshold: Double)? {
        thresholdSweep.first { $0.tpr >= tpr }.map { ($0.fpr, $0.threshold) }
    }

    /// The lowest threshold t at which "score ≥ t" keeps the false-positive rate at or below
    /// `fpr`, with the true-positive rate it reaches; nil when even the highest score exceeds it.
    public func lowestThreshold(keepingFalsePositiveRateAtMost fpr: Double) -> (tpr: Double, threshold: Double)? {
        thresholdSweep.prefix { $0.fpr <= fpr }.last.map { ($0.tpr, $0.threshold) }
    }
}

/// 95 % intervals that do not treat pairs as independent: pairs of one test share the room, the
/// phones and the day, so the test is the unit that is resampled. Each of `resamples` draws
/// takes as many tests as there are, with replacement, keeping every pair of each drawn test;
/// the interval is the 2.5th and 97.5th percentile of the statistic over the draws.
public struct ClusterBootstrap: Sendable {
    /// One labelled pair: its test (the cluster), its yes/no verdict, its score and the truth.
    public struct Pair: Sendable, Equatable {
        public var cluster: String
        public var verdict: Bool
        public var score: Double
        public var truth: Bool

        public init(cluster: String, verdict: Bool, score: Double, truth: Bool) {
            self.cluster = cluster
            self.verdict = verdict
            self.score = score
            self.truth = truth
        }
    }

    public struct Intervals: Sendable, Equatable {
        public var truePositiveRate: (low: Double, high: Double)
        public var falsePositiveRate: (low: Double, high: Double)
        public var areaUnderCurve: (low: Double, high: Double)

        public static func == (lhs: Intervals, rhs: Intervals) -> Bool {
            lhs.truePositiveRate == rhs.truePositiveRate && lhs.falsePositiveRate == rhs.falsePositiveRate
                && lhs.areaUnderCurve == rhs.areaUnderCurve
        }
    }

    public var resamples: Int
    /// The generator's seed: the same seed gives the same intervals, so reruns print the same figures.
    public var seed: UInt64

    public init(resamples: Int = 1000, seed: UInt64 = 26) {
        self.resamples = resamples
        self.seed = seed
    }

    /// nil without pairs. A draw without positives (or negatives) has no TPR (FPR, area) and is
    /// left out of that statistic's percentiles.
    public func intervals(_ pairs: [Pair]) -> Intervals? {
        let clusters = Dictionary(grouping: pairs, by: \.cluster)
        let names = clusters.keys.sorted()
        guard !names.isEmpty, resamples > 0 else { return nil }
        var generator = SplitMix64(seed: seed)
        var tprs: [Double] = [], fprs: [Double] = [], areas: [Double] = []
        for _ in 0..<resamples {
            var draw: [Pair] = []
            for _ in names.indices { draw += clusters[names[Int(generator.next() % UInt64(names.count))]]! }
            let counts = VerdictCounts(draw.map { ($0.verdict, $0.truth) })
            let area = ScoredTruths(draw.map { ($0.score, $0.truth) }).areaUnderCurve
            if counts.truePositiveRate.trials > 0 { tprs.append(counts.truePositiveRate.value) }
            if counts.falsePositiveRate.trials > 0 { fprs.append(counts.falsePositiveRate.value) }
            if !area.isNaN { areas.append(area) }
        }
        return Intervals(truePositiveRate: Self.percentiles(tprs), falsePositiveRate: Self.percentiles(fprs),
                         areaUnderCurve: Self.percentiles(areas))
    }

    /// The 2.5th and 97.5th percentiles (nearest rank); NaN for no values.
    static func percentiles(_ values: [Double]) -> (low: Double, high: Double) {
        guard !values.isEmpty else { return (.nan, .nan) }
        let sorted = values.sorted()
        func rank(_ fraction: Double) -> Double {
            sorted[min(sorted.count - 1, max(0, Int((fraction * Double(sorted.count)).rounded(.up)) - 1))]
        }
        return (rank(0.025), rank(0.975))
    }
}
