import PositiveListFormat
import TracerCore

/// What the credential and idempotency checks decided, before anything is stored.
package enum SubmissionAdmission {
    /// A replay, or a refusal: the request's answer, nothing to store.
    case answered(SubmissionOutcome)
    /// Store the history for this authority (the upload code, if one, is now used).
    case accepted(authority: String)
}

/// What a history adds to the pending ids, as both stores decide it.
package enum SubmittedEntries {
    /// The entries whose ids are not `known`, each id once, sorted by id (so publication merges
    /// sorted runs); of ids repeated in one history, the first wins.
    package static func new(_ entries: [PositiveListEntry], known: (UInt64) -> Bool) -> [PositiveListEntry] {
        var fresh: [PositiveListEntry] = []
        fresh.reserveCapacity(entries.count)
        var previous: UserID?
        // Ties broken by position keep repeated ids in their upload order.
        for position in entries.indices.sorted(by: { (entries[$0].id, $0) < (entries[$1].id, $1) }) {
            let entry = entries[position]
            defer { previous = entry.id }
            guard entry.id != previous, !known(entry.id.rawValue) else { continue }
            fresh.append(entry)
        }
        return fresh
    }
}
