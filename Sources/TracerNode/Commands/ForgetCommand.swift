import ArgumentParser
import Foundation
import IDRotation
#if canImport(Glibc)
import Glibc
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
        guard location.exists else {
            print("Nothing to delete: there is no database at \(location.path).")
            return
        }
        if !yes {
            guard isatty(STDIN_FILENO) == 1 else {
                throw CommandFailure.needsConfirmation("Deleting all Tracer data")
            }
            let counts = try? NodeStore.open(location).counts()
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
        print("All Tracer data in \(location.path) was deleted.")
    }
}
