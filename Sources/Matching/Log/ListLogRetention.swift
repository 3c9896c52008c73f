import Foundation
import IDRotation
import PositiveListFormat
import TracerCore

/// Which entries of a list log a node still needs: those with a record that can match an
/// encounter it keeps. Entries whose records all ended before the node's oldest encounter are
/// dropped by a following node and never downloaded by a fresh one (docs/positive-list-format.md,
/// "Retention").
public struct ListLogRetention: Sendable {
    /// Records that ended before this may be forgotten: the node's encounter cutoff, less a day of
    /// margin for clock skew, rotation jitter and a key's windows running past its day.
    public let cutoff: UnixSeconds

    public init(retention: RetentionPolicy, now: UnixSeconds) {
        cutoff = retention.encounterCutoff(now: now) - .secondsPerDay
    }

    /// True when the entry holds a record that ends at or after the cutoff, or does not parse
    /// (what the node cannot read it does not throw away): the rule the server's deletion of old
    /// history shares (`ListLogEntry.isLive`).
    public func isLive(_ bytes: some Collection<UInt8>) -> Bool {
        ListLogEntry.isLive([UInt8](bytes), cutoff: cutoff)
    }

    /// Where a node holding `held` (its entries before an update; nil after a fresh start) and
    /// then `new` may start keeping them: the start of the first bundle (256 entries) holding a
    /// live entry, so that what it keeps is what a fresh node would take. nil when nothing can
    /// be dropped. Reads the held entries only up to the first live one.
    public func firstKeptIndex(firstIndex: UInt64, held: HeldLogEntries?, new: [Data]) throws(FollowedLogStoreError) -> UInt64? {
        let heldCount = held?.count ?? 0
        let total = heldCount + new.count
        var live = try held?.firstPosition(where: isLive)
        if live == nil { live = new.firstIndex(where: isLive).map { heldCount + $0 } }
        // With nothing live, the newest bundle is kept, as a fresh node takes it.
        guard let position = live ?? (total == 0 ? nil : total - 1) else { return nil }
        let bundleStart = (firstIndex + UInt64(position)) / 256 * 256
        return bundleStart > firstIndex ? bundleStart : nil
    }
}
