import Foundation
import PositiveListFormat

/// The steps of a publication at which a test may inject a crash.
public enum PublishStep: String, Sendable, CaseIterable {
    /// The due ids are read from the store, nothing written yet.
    case pendingEntriesRead
    /// The id batch is recorded with what it publishes.
    case batchRecorded
    /// The key batch is recorded with what it publishes.
    case keyBatchRecorded
    /// The log (format version 3): the new tiles and bundles are written, the checkpoint not yet.
    case logTilesWritten
    /// The new checkpoint is in place, the log state (log-state.json) not yet written.
    case logCheckpointReplaced
    /// Old history (Publisher+LogHistory.swift): the new boundary is recorded, nothing deleted yet.
    case logHistoryBoundaryRecorded
    /// One more old entry bundle or level-0 tile is deleted.
    case logHistoryFileDeleted

    public static let idSteps: [PublishStep] = [.batchRecorded]
    public static let keySteps: [PublishStep] = [.keyBatchRecorded]
    public static let logSteps: [PublishStep] = [.logTilesWritten, .logCheckpointReplaced]
    /// A fault in these stops the deletion of old history, never the publication.
    public static let historySteps: [PublishStep] = [.logHistoryBoundaryRecorded, .logHistoryFileDeleted]
}

public enum PublishError: Error, Sendable, CustomStringConvertible {
    case store(ServerStoreError)
    case file(FileWriteError)
    case signing(String)
    /// The pending entries do not make a batch (a bug: the store hands over only entries a batch
    /// can hold).
    case invalidEntries(PositiveListFormatError)
    case concurrentPublisher
    /// Another instance on the same PostgreSQL database holds the publication lock.
    case anotherInstancePublishing
    case injectedFault(PublishStep)
    /// The log (format version 3) could not be appended to; the batches were recorded.
    case log(String)

    public var description: String {
        switch self {
        case .store(let error): return error.description
        case .file(.diskFull(let path)):
            // Said for the operator of `serve`, whose schedule retries by itself; a `publish`
            // run from cron is run again by cron.
            return "The disk holding the published files (\((path as NSString).deletingLastPathComponent)) is full, so nothing new was published; the files already published are unchanged and still served whole, and no accepted upload is lost. Free some space there: `serve` publishes again by itself once there is (it tries again at most `publishRetryMaxSeconds` apart, 60 s by default), or run `tracer-server publish`."
        case .file(let error): return error.description
        case .signing(let detail): return "Signing failed (\(detail)); check the signing key with `tracer-server status`."
        case .invalidEntries(let error):
            return "The pending ids could not be written as a batch (\(error)); nothing was published. Please report this with the server's log."
        case .concurrentPublisher: return "Another publisher recorded a batch at the same time; publish again."
        case .anotherInstancePublishing:
            return "Another tracer-server instance is publishing right now; it publishes what is due, so nothing needs doing (or publish again later)."
        case .injectedFault(let step): return "Publication stopped after step \(step.rawValue) (injected fault)."
        case .log(let detail): return detail
        }
    }
}
