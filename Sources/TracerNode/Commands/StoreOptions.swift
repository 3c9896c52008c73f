import ArgumentParser
import Foundation
import IDRotation
import TracerCore

/// The `--db` option shared by every command that reads or writes the node's database.
struct StoreOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The node's database file.",
            discussion: "Default: $TRACER_DB, else $XDG_DATA_HOME/tracer/tracer.db, else ~/.local/share/tracer/tracer.db.",
            valueName: "path"))
    var db: String?

    func location() throws -> StoreLocation {
        try StoreLocation.resolve(flag: db, environment: ProcessInfo.processInfo.environment)
    }

    /// Opens the store, creating it if needed.
    func open() throws -> NodeStore {
        try NodeStore.open(try location())
    }

    /// Opens the store if it exists; reading commands do not create an empty database.
    func openExisting() throws -> NodeStore? {
        try Self.openExisting(try location())
    }

    /// `forWriting`: for a command that must write to the store before it is done (`tracer
    /// report` keeps its pending upload there), a read-only file system fails here, with the
    /// store's own message, before the command asks or sends anything.
    static func openExisting(_ location: StoreLocation, forWriting: Bool = false) throws -> NodeStore? {
        guard location.exists else {
            FileHandle.standardError.write(Data("No Tracer data yet: there is no database at \(location.path).\n".utf8))
            return nil
        }
        do {
            return try NodeStore.open(location)
        } catch {
            // `catch .readOnlyFileSystem where !forWriting` crashes Swift 6.3.1's SIL optimizer
            // (MandatoryAllocBoxToStack), hence the guard.
            guard case .readOnlyFileSystem = error, !forWriting else { throw error }
            // What the disk still holds can be shown; a command that writes fails at its write, saying why.
            return try NodeStore.openReadOnly(location)
        }
    }
}

/// `--reveal`: full ids instead of short tags.
struct RevealOption: ParsableArguments {
    @Flag(help: "Show full 16-hex-digit ids instead of short tags. Mind who can see your screen.")
    var reveal = false

    func render(_ id: UserID) -> String { reveal ? id.hex : id.tag }
}
