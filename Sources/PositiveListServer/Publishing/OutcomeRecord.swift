import Foundation
import PositiveListFormat
import TracerCore

/// The outcome of the last publication (`publication.json`) or object store sync
/// (`object-store-sync.json`), kept in the data directory by every attempt, in `serve` or a command
/// run from cron alike, so that `tracer-server status`, `doctor` and the console can say when it last
/// worked, and why it fails when it does: the process that failed may be a `serve` whose log nobody
/// reads.
public struct OutcomeRecord: Codable, Sendable, Equatable {
    public var at: UnixSeconds
    public var succeeded: Bool
    /// What was done, or why it failed (an error's plain description; never a credential).
    public var detail: String
    /// What a publication that succeeded left undone and needs an operator: the list log waiting
    /// for a batch's content (``PublishReport/logWaiting``). Absent from older records.
    public var warning: String?

    public init(at: UnixSeconds, succeeded: Bool, detail: String, warning: String? = nil) {
        self.at = at
        self.succeeded = succeeded
        self.detail = detail
        self.warning = warning
    }

    /// The record at `path`; nil when there is none yet or it cannot be read.
    public static func read(from path: String) -> OutcomeRecord? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(OutcomeRecord.self, from: data)
    }

    /// Replaces the record atomically. A record that cannot be written (the disk that is full may
    /// be this one) fails nothing: the published files and the bucket are what matter, and the
    /// log says what happened.
    func write(to path: String) {
        guard let data = try? JSONEncoder().encode(self) else { return }
        try? AtomicFile.write(Array(data), to: path)
    }
}
