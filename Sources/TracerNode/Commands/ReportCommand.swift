import ArgumentParser
import Foundation
import IDRotation
import Matching
#if canImport(Glibc)
import Glibc
#endif

struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "After a positive diagnosis: upload your own ids with the code from your health authority.",
        discussion: """
            Uploads only the ids this node broadcast in the last 28 days, with their time windows, \
            so that people who met you can find out. Nothing about whom you met is uploaded. Shows \
            what will be sent and asks first, unless --yes is given. If the answer is lost, run the \
            same command again: the server recognizes the repeated request.
            """)

    @OptionGroup var config: ConfigOptions
    @OptionGroup var store: StoreOptions
    @OptionGroup var server: ListServerOptions
    @Option(help: ArgumentHelp("The one-time upload code from your health authority.", valueName: "code"))
    var code: String
    @Flag(help: "Upload without asking.") var yes = false

    func validate() throws {
        guard !code.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--code must not be empty.") }
    }

    func run() async throws {
        var flags = server.settingFlags
        flags["node.database"] = store.db
        let resolved = try config.resolve(flags: flags)
        let settings = resolved.settings
        let parts = MatchingParts(settings: settings)
        guard let opened = try StoreOptions.openExisting(resolved.storeLocation) else {
            throw CommandFailure.noHistoryToReport
        }
        let reporter = HistoryReporter(serverURL: try parts.serverURL(), store: opened, http: parts.httpClient())
        let upload = try reporter.pendingUpload()
        guard let first = upload.ids.first, let last = upload.ids.last else { throw ReportError.nothingToReport }

        let days = upload.days
        let span = days.count == 1 ? days[0] : "\(days[0]) to \(days[days.count - 1]) (\(days.count) days)"
        print("""
            This uploads \(upload.ids.count) of this node's own ids, broadcast \(span), \
            to \(redactedURL(reporter.serverURL)).
            It uploads nothing about whom you met. The server publishes these ids so that people \
            who met you can find out; they cannot learn who you are from them.
            Ids from \(Output.localTime(first.window.start)) to \(Output.localTime(last.window.end)).
            """)
        if !yes {
            guard isatty(STDIN_FILENO) == 1 else { throw CommandFailure.needsConfirmation("Uploading your ids") }
            print("Upload now? Type 'yes' to upload: ", terminator: "")
            guard readLine()?.trimmingCharacters(in: .whitespaces).lowercased() == "yes" else {
                print("Nothing was uploaded.")
                throw ExitCode.failure
            }
        }
        let receipt = try await reporter.upload(upload, code: code.trimmingCharacters(in: .whitespaces))
        print("""
            Uploaded \(receipt.ids) ids (\(receipt.stored) new to the server); they appear in its next \
            published list. Thank you for helping others find out.
            """)
    }
}
