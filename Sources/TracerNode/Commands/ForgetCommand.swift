import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
import IDRotation
#endif

struct ForgetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Delete all of this node's local data.",
        discussion: """
            Erases every own id, daily key and encounter, then removes the database files. This cannot be \
            undone; afterwards you could no longer report your ids or be told of an exposure from \
            the past. Asks first, unless --yes is given.
            """)

    @OptionGroup var store: StoreOptions
    @Flag(help: "Do not ask for confirmation.") var yes = false

    func run() throws {
        let location = try store.location()
        // Encounters a node kept in a runtime directory when it stopped with a store that
        // refused writes (`EncounterSpill`) are this node's data too.
        let spill = EncounterSpill(forStoreAt: location.path, environment: ProcessInfo.processInfo.environment)
        guard location.exists || !spill.existing.isEmpty else {
            print("Nothing to delete: there is no database at \(location.path).")
            return
        }
        // Before asking: on a file system that refuses writes nothing can be erased or removed,
        // and a "yes" would only be followed by a failure.
        guard !ReadOnlyFileSystem.holds(location.path) else {
            throw CommandFailure.cannotForgetOnReadOnlyFileSystem(path: location.path)
        }
        if !yes {
            guard isatty(STDIN_FILENO) == 1 else {
                throw CommandFailure.needsConfirmation("Deleting all Tracer data")
            }
            let counts = location.exists ? try? NodeStore.open(location).counts() : nil
            let summary = counts.map {
                " (\($0.ownIDs) own id(s), \($0.dailyKeys) daily key(s), \($0.encounters) encounter(s))"
            } ?? ""
            print("This deletes all Tracer data in \(location.path)\(summary). It cannot be undone.")
            print("Type 'yes' to delete: ", terminator: "")
            guard readLine()?.trimmingCharacters(in: .whitespaces).lowercased() == "yes" else {
                print("Nothing was deleted.")
                throw ExitCode.failure
            }
        }
        try NodeStore.deleteAllData(at: location)
        try spill.discardAll()
        print("All Tracer data in \(location.path) was deleted.")
    }
}
