import ServerStorage
/// Where the server keeps its files inside its data directory.
public struct ServerPaths: Sendable {
    public let dataDirectory: String

    public init(dataDirectory: String) {
        self.dataDirectory = dataDirectory
    }

    public var database: String { dataDirectory + "/server.db" }
    public var signingKey: String { dataDirectory + "/signing-key" }
    public var configuration: String { dataDirectory + "/config.json" }
    public var publishLock: String { dataDirectory + "/publish.lock" }
    /// The last object store sync's outcome (``OutcomeRecord``), shown by the console.
    public var objectStoreSyncRecord: String { dataDirectory + "/object-store-sync.json" }
    /// The last publication's outcome (``OutcomeRecord``), shown by `status` and `doctor`.
    public var publicationRecord: String { dataDirectory + "/publication.json" }
    /// Which batches the published log holds (``ListLogState``); written after each checkpoint.
    public var logState: String { dataDirectory + "/log-state.json" }
    /// The witness's Ed25519 key (`tracer-server witness-keygen`), apart from the list's signing key.
    public var witnessKey: String { dataDirectory + "/witness-key" }
    /// What the witness cosigned for each log it witnesses, and the evidence it kept (CheckpointWitness).
    public var witnessDirectory: String { dataDirectory + "/witness" }
    /// What each witness this server's log asks last answered (``WitnessCosigningRecord``), for `status`.
    public var witnessCosigningRecord: String { dataDirectory + "/witness-cosigning.json" }
    /// What nginx or a CDN serves; world-readable, holds nothing secret.
    public var published: PublishedDirectory { PublishedDirectory(path: dataDirectory + "/public") }
}
