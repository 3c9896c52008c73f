import TracerCore

/// Everything one exposure check found, as printed by `tracer check --json` and kept in the
/// store so `tracer status` can show the last result.
public struct ExposureCheckReport: Codable, Sendable, Equatable {
    public struct ListStatus: Codable, Sendable, Equatable {
        /// When the server last confirmed the list used (nil: never).
        public var lastUpdated: UnixSeconds?
        public var generation: UInt64
        public var publishedAt: UnixSeconds
        public var batches: Int
        /// Why this check could not update the list, when it could not; the check then used the
        /// last verified list.
        public var updateFailure: String?
        /// True when the check was asked not to contact the server.
        public var offline: Bool
        /// Key batches matched; nil when the server publishes no keys (and in reports stored
        /// before key matching).
        public var keyBatches: Int? = nil
        /// The followed log's size (its entries), which `generation` repeats, with `publishedAt`
        /// when the log signed it; nil in a report an older tracer stored after matching the
        /// signed index.
        public var logEntries: UInt64? = nil
        /// Signed log entries that did not parse and were skipped; nil when there were none.
        public var unreadableLogEntries: Int? = nil
    }

    public var checkedAt: UnixSeconds
    public var list: ListStatus
    /// Listed ids and ids derived from published keys, probed against the encounters.
    public var idsChecked: Int
    /// Published daily keys expanded; nil when the server publishes no keys.
    public var keysChecked: Int? = nil
    public var encountersChecked: Int
    public var matchedIDs: Int
    public var idsSeenOutsideTheirWindow: Int
    public var assessment: ExposureAssessment
    /// True when this check found a day at a higher level than any check before it notified.
    public var newExposure: Bool
    /// With several lists (`[lists.<name>]`), each authority's list, the home one (`list`) first:
    /// whether it is up to date and what it matched. nil for a node following one list.
    public var lists: [AuthorityListStatus]? = nil

    public var exposureFound: Bool { assessment.level > .none }
    /// This report with every place removed: what is kept in the store beyond the check and what
    /// the exposure hook (a command that may send it elsewhere) receives.
    public var withoutPlaces: ExposureCheckReport {
        var copy = self
        for index in copy.assessment.days.indices { copy.assessment.days[index].places = nil }
        return copy
    }

    /// True when the list, or one of several, could have missed newer diagnoses (or could not be
    /// used at all): the check then never answers a plain "no exposure".
    public var listIsStale: Bool { list.updateFailure != nil || !listsNotUpToDate.isEmpty }

    /// The lists of several that were not brought up to date (empty for one list).
    public var listsNotUpToDate: [AuthorityListStatus] { lists?.filter { !$0.isUpToDate } ?? [] }
}
