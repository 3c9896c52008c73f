import Foundation
import IDRotation
import PositiveListFormat
import TracerCore

/// The outcome of the last object store sync, kept in the data directory (`object-store-sync.json`)
/// by every sync, in `serve` or `tracer-server sync` from cron alike, so that the console can say
/// when the bucket was last brought up to date and whether that worked.
public struct ObjectStoreSyncRecord: Codable, Sendable, Equatable {
    public var at: UnixSeconds
    public var succeeded: Bool
    /// What was done, or why it failed (an error's plain description; never a credential).
    public var detail: String

    public init(at: UnixSeconds, succeeded: Bool, detail: String) {
        self.at = at
        self.succeeded = succeeded
        self.detail = detail
    }

    /// The record at `path`; nil when there is none yet or it cannot be read.
    public static func read(from path: String) -> ObjectStoreSyncRecord? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(ObjectStoreSyncRecord.self, from: data)
    }

    /// Replaces the record atomically. A record that cannot be written is not a failed sync: the
    /// bucket is what matters, and the sync's own log says what happened.
    func write(to path: String) {
        guard let data = try? JSONEncoder().encode(self) else { return }
        try? AtomicFile.write(Array(data), to: path)
    }
}
