import ArgumentParser
import IDRotation

struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version",
        abstract: "Show the versions of tracer, its store schema and SQLite.")

    @Flag(help: "Print JSON instead of text.") var json = false

    func run() throws {
        let schema = NodeStore.schemaVersions
        if json {
            try Output.printJSON([
                "tracer": Tracer.version, "storeSchemaVersion": "\(schema.count)", "sqlite": NodeStore.sqliteVersion,
            ])
        } else {
            print("tracer \(Tracer.version)")
            print("store schema version \(schema.count) (\(schema.last ?? "none"))")
            print("SQLite \(NodeStore.sqliteVersion)")
        }
    }
}
