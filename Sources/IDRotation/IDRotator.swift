import Logging
import TracerCore

/// One id this node used, with the window in which it was valid.
public struct OwnID: Hashable, Sendable {
    public let id: UserID
    public let window: IDWindow

    public init(id: UserID, window: IDWindow) {
        self.id = id
        self.window = window
    }
}

/// A change of the node's id. The BLE layer receives it inside the rotation step and must, before
/// returning, make the radio match it: stop advertising, set a new random address, switch the id
/// it serves, resume. The rotator waits for that, so no observer sees the new id with the old
/// address or the old id with the new address.
public struct Rotation: Sendable, Equatable {
    /// nil on the node's first id, and after a restart that resumes no id.
    public let previous: OwnID?
    public let current: OwnID
}

/// Where the rotator keeps every id it hands out, and the daily keys it derives them from; the
/// node's store implements it.
public protocol OwnIDHistory: Sendable {
    /// The id with the latest window, if any.
    func latestOwnID() throws -> OwnID?
    /// Records a new id. Must be durable before it returns: an id goes on air only once recorded.
    func recordOwnID(_ ownID: OwnID) throws
    /// The key of `day` for windows of `intervalSeconds`: the one already recorded, or else
    /// `newKey`, recorded durably before this returns. One call both reads and, if needed,
    /// writes, so that a day never gets two keys for one interval.
    func dailyKey(for day: UTCDay, intervalSeconds: Int64, recordingIfAbsent newKey: DailyKey) throws -> DailyKey
}

/// Issues userIds on a `RotationSchedule` and records each one before it is used.
///
/// Each id is derived from the key of its window's UTC day (`IDDerivation`). The first window of
/// a day draws the day's key and records it; later windows, after a restart too, use the
/// recorded one, so a node has one key per day (per rotation interval) and a published key
/// covers every id it used that day.
///
/// The rotator never moves backwards: if the wall clock steps back, the current id stays in use
/// until the clock passes the end of its window again.
public actor IDRotator {
    public typealias RotationHandler = @Sendable (Rotation) async -> Void
    public typealias RotationEndHandler = @Sendable (OwnID) async -> Void

    private let schedule: RotationSchedule
    private let derivation: IDDerivation
    private let history: any OwnIDHistory
    /// The clock the windows are read from; the exchange reads the same one, so that what it
    /// counts as the end of our window is the moment this rotator rotates.
    public nonisolated let clock: any WallClock
    private let makeKey: @Sendable () -> DailyKey
    private let logger: Logger
    private var current: OwnID?
    /// The key of the day of the latest window, so that only a day's first window goes to the
    /// store for it.
    private var currentDayKey: (day: UTCDay, key: DailyKey)?

    public init(
        schedule: RotationSchedule,
        history: any OwnIDHistory,
        clock: any WallClock = SystemWallClock(),
        makeKey: @escaping @Sendable () -> DailyKey = { DailyKey.random() },
        logger: Logger = Logger(label: "tracer.rotation")
    ) {
        self.schedule = schedule
        self.derivation = IDDerivation(schedule: schedule)
        self.history = history
        self.clock = clock
        self.makeKey = makeKey
        self.logger = logger
    }

    /// The id in use now. On the first call after a restart it resumes the recorded id whose
    /// window has not ended, so a restarted node keeps its id until the window ends.
    public func currentID() throws -> OwnID {
        if let rotation = try rotateIfDue() { return rotation.current }
        guard let current else { preconditionFailure("rotateIfDue always leaves a current id") }
        return current
    }

    /// Moves to a new id when the current window has ended (or there is none yet), returning the
    /// change, or nil when the current id is still valid.
    @discardableResult
    public func rotateIfDue() throws -> Rotation? {
        let now = clock.now()
        if current == nil, let latest = try history.latestOwnID() {
            current = latest
            if now < latest.window.end {
                logger.info("resuming id", metadata: ["id": "\(latest.id)", "until": "\(latest.window.end)"])
                return Rotation(previous: nil, current: latest)
            }
        }
        if let current, now < current.window.end { return nil }

        let window = schedule.window(after: current?.window, at: now)
        let next = OwnID(id: try derivedID(for: window), window: window)
        try history.recordOwnID(next)
        let rotation = Rotation(previous: current, current: next)
        current = next
        logger.info("rotated id", metadata: [
            "id": "\(next.id)", "from": "\(window.start)", "until": "\(window.end)",
        ])
        return rotation
    }

    private func derivedID(for window: IDWindow) throws -> UserID {
        guard let index = derivation.windowIndex(ofWindowStartingAt: window.start) else {
            // Only a clock reading before 1970 (or centuries ahead) gets here. The node keeps
            // working with an id no key derives: it can still be reported as an id.
            logger.warning("the clock is outside the range daily keys cover; this window's id is random, not derived", metadata: [
                "from": "\(window.start)",
            ])
            return UserID.random()
        }
        let day = derivation.day(ofWindowIndex: index)
        if let currentDayKey, currentDayKey.day == day {
            return derivation.id(key: currentDayKey.key, windowIndex: index)
        }
        let key = try history.dailyKey(for: day, intervalSeconds: schedule.interval, recordingIfAbsent: makeKey())
        currentDayKey = (day, key)
        // The day only: a key never goes to a log, not even as a tag.
        logger.info("using the daily key", metadata: ["day": "\(day)", "interval": "\(schedule.interval)"])
        return derivation.id(key: key, windowIndex: index)
    }

    /// Rotates on schedule until cancelled, calling `onRotation` for the first id and for every
    /// change; the next rotation waits until the handler has returned.
    ///
    /// At each window's end `onWindowEnd` runs first, with the id whose window ended, before the
    /// next id is recorded: recording may take seconds (SQLite waits up to its busy timeout for a
    /// database another program holds locked) or fail, and the ended id must not stay on the air
    /// meanwhile.
    ///
    /// Should the clock step back between the wake and the recording, so that the ended id is
    /// valid again, `onRotation` brings that same id back on the air (previous == current).
    public func run(onWindowEnd: RotationEndHandler = { _ in }, onRotation: RotationHandler) async throws {
        var next = try rotateIfDue()
        while true {
            if let rotation = next { await onRotation(rotation) }
            guard let ending = current else {
                next = try rotateIfDue()
                continue
            }
            try await clock.sleep(until: ending.window.end)
            await onWindowEnd(ending)
            next = try rotateIfDue() ?? Rotation(previous: ending, current: current ?? ending)
        }
    }
}
