/// Which list a node brings up to date, in one place for `tracer check`, `tracer run` and
/// `tracer doctor`: the followed log when there is one, else the signed index (a server from
/// before the log, with `list.format = auto`, until the node first follows a log).
public struct ListUpdating: Sendable {
    /// The signed index's updater; nil with `list.format = log`, or offline.
    public let index: PositiveListUpdater?
    /// The log's updater; nil with `list.format = index`, or offline.
    public let log: ListLogUpdater?

    public init(index: PositiveListUpdater?, log: ListLogUpdater?) {
        self.index = index
        self.log = log
    }

    /// What an update brought, in a line for people.
    public struct Outcome: Sendable {
        public var changed: Bool
        public var summary: String
    }

    /// Updates the list; the caller holds the cache's lock.
    public func update(
        progress: (@Sendable (ListDownloadProgress) -> Void)? = nil, holding lock: CacheLock
    ) async throws(ListUpdateError) -> Outcome {
        if let log {
            do {
                let update = try await log.update(holding: lock)
                return Outcome(changed: update.changed, summary: "the list log verifies (\(update.treeSize) entries, \(update.newEntries) new)")
            } catch {
                guard case .logNotPublished = error, !log.log.isFollowed, index != nil else { throw error }
            }
        }
        guard let index else { return Outcome(changed: false, summary: "offline") }
        let update = try await index.update(progress: progress, holding: lock)
        return Outcome(changed: update.changed,
                       summary: "the list verifies (generation \(update.index.generation), \(update.index.batches.count) batches)")
    }
}
