import ArgumentParser
import IDRotation
import TracerCore

struct PurgeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Delete data older than the retention period now.",
        discussion: """
            The node purges on start and periodically by itself; this runs the same purge at once. \
            Encounters are kept at most 28 days; own ids at most as long as encounters, and a \
            daily key as long as the ids of its day.
            """)

    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("Keep encounters this many days (1-28).", valueName: "days"))
    var retentionDays = RetentionPolicy.defaultDays
    @Option(help: ArgumentHelp("Keep own ids this many days (at most --retention-days).", valueName: "days"))
    var ownIDRetentionDays: Int?
    @Flag(help: "Print JSON instead of a sentence.") var json = false

    func validate() throws {
        guard (1...RetentionPolicy.maximumDays).contains(retentionDays) else {
            throw ValidationError("--retention-days must be between 1 and \(RetentionPolicy.maximumDays); Tracer never keeps data longer.")
        }
        if let ownIDRetentionDays, !(1...retentionDays).contains(ownIDRetentionDays) {
            throw ValidationError("--own-id-retention-days must be between 1 and --retention-days (\(retentionDays)).")
        }
    }

    func run() throws {
        let policy = try RetentionPolicy(encounterDays: retentionDays, ownIDDays: ownIDRetentionDays)
        guard let opened = try store.openExisting() else { return }
        let result = try opened.purge(now: SystemWallClock().now(), policy: policy)
        if json {
            try Output.printJSON([
                "encountersDeleted": result.encountersDeleted, "ownIDsDeleted": result.ownIDsDeleted,
                "dailyKeysDeleted": result.dailyKeysDeleted, "placesDeleted": result.placesDeleted,
            ])
        } else {
            print("Deleted \(result.encountersDeleted) encounter(s) older than \(policy.encounterDays) days and \(result.ownIDsDeleted) own id(s) and \(result.dailyKeysDeleted) daily key(s) older than \(policy.ownIDDays) days, and \(result.placesDeleted) place(s) no kept encounter was logged at.")
        }
    }
}
