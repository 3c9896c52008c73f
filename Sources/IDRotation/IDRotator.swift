import Logging

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

/// Where the rotator keeps every id it hands out; the node's store implements it.
public protocol OwnIDHistory: Sendable {
    /// The id with the latest window, if any.
    func latestOwnID() throws -> OwnID?
    /// Records a new id. Must be durable before it returns: an id goes on air only once recorded.
    func recordOwnID(_ ownID: OwnID) throws
}

/// Issues userIds on a `RotationSchedule` and records each one before it is used.
///
/// The rotator never moves backwards: if the wall clock steps back, the current id stays in use
/// until the clock passes the end of its window again.
public actor IDRotator {
    public typealias RotationHandler = @Sendable (Rotation) async -> Void

    private let schedule: RotationSchedule
    private let history: any OwnIDHistory
    private let clock: any WallClock
    private let makeID: @Sendable () -> UserID
    private let logger: Logger
    private var current: OwnID?

    public init(
        schedule: RotationSchedule,
        history: any OwnIDHistory,
        clock: any WallClock = SystemWallClock(),
        makeID: @escaping @Sendable () -> UserID = { UserID.random() },
        logger: Logger = Logger(label: "tracer.rotation")
    ) {
        self.schedule = schedule
        self.history = history
        self.clock = clock
        self.makeID = makeID
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
        let next = OwnID(id: makeID(), window: window)
        try history.recordOwnID(next)
        let rotation = Rotation(previous: current, current: next)
        current = next
        logger.info("rotated id", metadata: [
            "id": "\(next.id)", "from": "\(window.start)", "until": "\(window.end)",
        ])
        return rotation
    }

    /// Rotates on schedule until cancelled, calling `onRotation` for the first id and for every
    /// change; the next rotation waits until the handler has returned.
    public func run(onRotation: RotationHandler) async throws {
        while true {
            if let rotation = try rotateIfDue() {
                await onRotation(rotation)
            }
            guard let end = current?.window.end else { continue }
            try await clock.sleep(until: end)
        }
    }
}
