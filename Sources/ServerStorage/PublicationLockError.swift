import PositiveListFormat

/// Why a store did not give the right to publish (``SubmissionStore/lockPublication()``).
/// Publications and syncs report it as the same case of their own error (PublishError).
public enum PublicationLockError: Error, Sendable {
    case store(ServerStoreError)
    /// The SQLite store's lock file could not be created or locked.
    case file(FileWriteError)
    /// Another instance on the same PostgreSQL database holds the publication lock.
    case anotherInstancePublishing
}
