import IDRotation
import Settings
import ArgumentParser
import TracerCore

struct IDsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ids",
        abstract: "Show the ids this node has used, with their validity windows.",
        discussion: """
            These are the ids a `tracer report` would upload if you are diagnosed. Times are local; \
            --json gives Unix seconds.
            """)

    @OptionGroup var store: StoreOptions
    @OptionGroup var reveal: RevealOption
    @Flag(help: "Print JSON instead of a table.") var json = false

    struct Entry: Encodable {
        var tag: String
        var id: String?
        var validFrom: UnixSeconds
        var validUntil: UnixSeconds
        var current: Bool
    }

    func run() throws {
        let ownIDs = try store.openExisting()?.ownIDs() ?? []
        let now = SystemWallClock().now()
        let entries = ownIDs.map {
            Entry(tag: $0.id.tag, id: reveal.reveal ? $0.id.hex : nil,
                  validFrom: $0.window.start, validUntil: $0.window.end, current: $0.window.contains(now))
        }
        if json {
            try Output.printJSON(["ownIDs": entries])
            return
        }
        guard !ownIDs.isEmpty else {
            print("No ids recorded yet.")
            return
        }
        let rows = ownIDs.map { own in
            [Output.localTime(own.window.start), Output.localTime(own.window.end),
             reveal.render(own.id) + (own.window.contains(now) ? "  (current)" : "")]
        }
        print(TextTable.render(header: ["VALID FROM", "VALID UNTIL", "ID"], rows: rows))
        print("\(ownIDs.count) id(s).")
    }
}
