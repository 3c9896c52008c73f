import ArgumentParser

struct Tracer: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "tracer",
        abstract: "A decentralized Bluetooth LE contact-tracing node.",
        discussion: """
            Tracer swaps short-lived random ids with nearby nodes over Bluetooth LE and keeps what \
            it learned on this machine only, for 28 days. Exit codes: 0 success, 1 failure, 2 usage error.
            """,
        version: Tracer.version,
        subcommands: [
            RunCommand.self, CheckCommand.self, ReportCommand.self, StatusCommand.self, DoctorCommand.self, IDsCommand.self, EncountersCommand.self, ExportCommand.self, PlacesCommand.self, ForgetCommand.self, CalibrateCommand.self,
            PurgeCommand.self, VersionCommand.self,
            ConfigCommand.self,
        ]
    )
}
