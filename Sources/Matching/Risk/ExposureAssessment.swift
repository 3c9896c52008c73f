import Foundation
import IDRotation
import TracerCore

/// The exposure found in one day (UTC) of encounters with diagnosed ids.
public struct ExposureDay: Sendable, Equatable, Codable {
    /// The day as YYYY-MM-DD, UTC.
    public var day: String
    public var dayStart: UnixSeconds
    /// Distinct diagnosed ids met that day.
    public var diagnosedIDs: Int
    /// Contact minutes by proximity bucket, before weighting.
    public var minutes: [RiskModel.Proximity: Double]
    public var weightedMinutes: Double
    public var level: RiskLevel
    /// Where this node was during the day's matched encounters, when it recorded a place: so the
    /// user can tell the bus from the office. Never stored with the last report nor given to the
    /// exposure hook (`withoutPlaces`); nil when none was recorded.
    public var places: [Place]? = nil
    /// What the level was decided on (`RiskModel.score(of:)`): weighted minutes, or a probability
    /// with `risk.score = logistic`; nil in reports written before it was kept.
    public var score: Double? = nil
    /// The day window by window; nil in reports written before it was kept.
    public var features: DayFeatures? = nil

    public var totalMinutes: Double { minutes.values.reduce(0, +) }

    /// The bucket holding most of the day's contact time.
    public var closest: RiskModel.Proximity? {
        for proximity in [RiskModel.Proximity.near, .medium, .far, .unknown] where (minutes[proximity] ?? 0) > 0 {
            return proximity
        }
        return nil
    }
}

/// The result of scoring matches with a risk model: per day, and overall.
public struct ExposureAssessment: Sendable, Equatable, Codable {
    public var days: [ExposureDay]
    public var level: RiskLevel

    /// Days whose level is low or high.
    public var exposureDays: [ExposureDay] { days.filter { $0.level > .none } }

    public init(matches: [ExposureMatch], model: RiskModel) {
        // The same encounter can be matched twice when an id is listed in two batches.
        var seen = Set<EncounterKey>()
        var byDay: [UnixSeconds: (ids: Set<UserID>, minutes: [RiskModel.Proximity: Double], weighted: Double, places: [Place],
                                  windows: [UnixSeconds: DayFeatures.Window])] = [:]
        for match in matches {
            let encounter = match.encounter
            guard seen.insert(EncounterKey(peer: encounter.peer, ownWindowStart: encounter.ownWindowStart)).inserted else { continue }
            let dayStart = encounter.firstSeen - encounter.firstSeen.modulo(UnixSeconds.secondsPerDay)
            var day = byDay[dayStart] ?? (ids: [], minutes: [:], weighted: 0, places: [], windows: [:])
            day.ids.insert(encounter.peer)
            if let place = encounter.place, !day.places.contains(place) { day.places.append(place) }
            for (proximity, minutes) in model.minutesByProximity(of: encounter) { day.minutes[proximity, default: 0] += minutes }
            let weighted = model.weightedMinutes(of: encounter)
            day.weighted += weighted
            var window = day.windows[encounter.ownWindowStart] ?? .init(start: encounter.ownWindowStart, weightedMinutes: 0, attenuation: nil)
            window.weightedMinutes += weighted
            // Unmeasured (the exchange alone proved the contact): in the middle of the medium range,
            // as `total` weighs such minutes like medium ones. Without it a day of unmeasured
            // contact could never reach the logistic score's thresholds.
            let attenuation = model.attenuation(of: encounter) ?? (model.nearAttenuation + model.farAttenuation) / 2
            window.attenuation = min(window.attenuation ?? attenuation, attenuation)
            window.closeMinutes += model.closeContactMinutes(of: encounter)
            day.windows[encounter.ownWindowStart] = window
            byDay[dayStart] = day
        }
        // A contact that runs over midnight (UTC) is split between two days; the floor of close
        // minutes counts the neighbouring day's windows that follow on from this day's, so that a
        // 15-minute contact from 23:52 is not two days of 8 minutes, each under the floor.
        func adjoiningCloseMinutes(_ dayStart: UnixSeconds) -> Double {
            let windows = byDay[dayStart]!.windows.keys
            guard let first = windows.min(), let last = windows.max() else { return 0 }
            let gap = DayFeatures.successiveWindowGap
            let before = byDay[dayStart - UnixSeconds.secondsPerDay]?.windows.values.filter { $0.start >= first - gap } ?? []
            let after = byDay[dayStart + UnixSeconds.secondsPerDay]?.windows.values.filter { $0.start <= last + gap } ?? []
            return (before + after).reduce(0) { $0 + $1.closeMinutes }
        }
        days = byDay.keys.sorted().map { dayStart in
            let day = byDay[dayStart]!
            var features = DayFeatures(windows: Array(day.windows.values), model: model)
            features.closeContactMinutes = (features.closeContactMinutes ?? 0) + adjoiningCloseMinutes(dayStart)
            // The sum in the order the encounters came, so `total` scores exactly as it always did.
            features.weightedMinutes = day.weighted
            let score = model.score(of: features)
            return ExposureDay(
                day: Self.dayName(dayStart), dayStart: dayStart, diagnosedIDs: day.ids.count, minutes: day.minutes,
                weightedMinutes: day.weighted, level: model.level(of: features),
                places: day.places.isEmpty ? nil : day.places, score: score, features: features)
        }
        level = days.map(\.level).max() ?? .none
    }

    private struct EncounterKey: Hashable {
        var peer: UserID
        var ownWindowStart: UnixSeconds
    }

    static func dayName(_ dayStart: UnixSeconds) -> String {
        UTCDay(containing: dayStart).date
    }
}

extension Int64 {
    /// The remainder with the sign of the divisor, so days before 1970 still start at midnight.
    func modulo(_ divisor: Int64) -> Int64 {
        let remainder = self % divisor
        return remainder < 0 ? remainder + divisor : remainder
    }
}
