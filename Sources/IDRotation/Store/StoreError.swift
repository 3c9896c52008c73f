/// Failures a user of the node's store can meet, each with what to do next.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case noHomeDirectory
    case cannotCreateDirectory(path: String, reason: String)
    case cannotCreateFile(path: String, reason: String)
    case notATracerDatabase(path: String)
    case newerSchema(path: String, unknownMigrations: [String])
    case busy(path: String)
    case readOnly(path: String)
    /// The file system holding the database refuses every write: mounted read-only, or turned
    /// read-only by Linux after a disk error. Unlike a full disk, this does not pass by itself.
    case readOnlyFileSystem(path: String)
    case diskFull(path: String)
    case damaged(path: String, detail: String)
    case sqlite(path: String, detail: String)
    case invalidRetention(encounterDays: Int, ownIDDays: Int)

    public var description: String {
        switch self {
        case .noHomeDirectory:
            return "Cannot tell where to keep Tracer's data because HOME is not set; set HOME, or pass --db PATH (or TRACER_DB)."
        case .cannotCreateDirectory(let path, let reason):
            return "Cannot create the data directory \(path) (\(reason)); check its permissions or choose another place with --db."
        case .cannotCreateFile(let path, let reason):
            return "Cannot create the database \(path) (\(reason)); check the directory's permissions or choose another file with --db."
        case .notATracerDatabase(let path):
            return "The file \(path) is not a Tracer database; point --db (or TRACER_DB) at a Tracer database or at a new file name."
        case .newerSchema(let path, let unknown):
            return "The database \(path) was written by a newer version of tracer (schema steps \(unknown.joined(separator: ", ")) are unknown to this one); upgrade tracer, or use another --db. Nothing was changed."
        case .busy(let path):
            return "The database \(path) is locked by another process; wait for it to finish, or stop the other tracer using it."
        case .readOnly(let path):
            return "The database \(path) cannot be written; check the file's and directory's permissions."
        case .readOnlyFileSystem(let path):
            return "The file system holding \(path) is read-only: \(StoreError.readOnlyFileSystemCauses) Or give the database a working disk with --db (or TRACER_DB)."
        case .diskFull(let path):
            return "The disk holding \(path) is full; free some space and try again. No recorded data was lost."
        case .damaged(let path, let detail):
            return "The database \(path) is damaged (\(detail)); move it aside and start a new one with `tracer forget`, or restore it from a backup."
        case .sqlite(let path, let detail):
            return "The database \(path) could not be used (\(detail)); check the file and try again."
        case .invalidRetention(let encounterDays, let ownIDDays):
            return "Own ids must not be kept longer than encounters (own ids: \(ownIDDays) days, encounters: \(encounterDays) days); lower the own-id retention."
        }
    }

    /// The two ways a file system becomes read-only and what mends each, for both messages.
    public static let readOnlyFileSystemCauses = "If Linux turned it read-only after a disk error (as failing SD cards make it do; `dmesg` says so), check the disk: for the root file system reboot, which runs the check, otherwise unmount it and run `fsck`, then mount it read-write again. If it is mounted read-only on purpose (or systemd's ProtectSystem= covers it), mount it read-write or allow the path with ReadWritePaths=."

    /// What a running node cannot record because of a store error.
    public enum RunningRecord: Sendable {
        /// The next id: nothing is kept for it, the node stays off the air until it is recorded.
        case ids
        /// Encounters: they are kept in memory and written when the store works again.
        case encounters
    }

    /// What a running node says while this keeps it from recording `what` (`tracer status`,
    /// `tracer doctor`): the problem and what to do, then, for encounters, that nothing is lost.
    /// The node retries by itself, so there is no "try again"; a fix that replaces the database
    /// needs the node stopped first.
    public func whileRunning(_ what: RunningRecord) -> String {
        let stopFirst = "stop the node first (`systemctl stop tracer`), then"
        let problem: String
        switch self {
        case .diskFull(let path):
            problem = "the disk holding \(path) is full; free some space."
        case .busy(let path):
            problem = "the database \(path) is locked by another process; stop the other process using it."
        case .readOnlyFileSystem(let path):
            problem = "the file system holding \(path) is read-only; \(stopFirst) mend it and start the node again. \(StoreError.readOnlyFileSystemCauses)"
        case .readOnly(let path):
            problem = "the database \(path) cannot be written; check the file's and directory's permissions."
        case .damaged(let path, let detail):
            problem = "the database \(path) is damaged (\(detail)); \(stopFirst) move it aside and start a new one with `tracer forget`, or restore it from a backup."
        case .notATracerDatabase(let path):
            problem = "the file \(path) is not a Tracer database; \(stopFirst) point --db (or TRACER_DB) at a Tracer database or at a new file name."
        case .sqlite(let path, let detail):
            problem = "the database \(path) could not be used (\(detail)); check the file."
        case .noHomeDirectory, .cannotCreateDirectory, .cannotCreateFile, .newerSchema, .invalidRetention:
            problem = description.prefix(1).lowercased() + description.dropFirst()
        }
        if case .readOnlyFileSystem = self {
            // No retry mends this: the kernel wants the file system checked before it writes again.
            switch what {
            case .ids: return problem + " Until then the node stays off the air."
            case .encounters: return problem + " Encounters are kept in memory, then at a stop in its runtime directory."
            }
        }
        switch what {
        case .ids: return problem + " The node advertises again once it can record its next id."
        case .encounters: return problem + " Encounters are kept in memory and written when the database can be written again."
        }
    }
}
