import ArgumentParser
import CurlHTTP
import Foundation
import IDRotation
import Matching
#if canImport(Glibc)
import Glibc
#endif

struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "After a positive diagnosis: upload your own ids, or your daily keys, with the code from your health authority.",
        discussion: """
            Uploads what lets people who met you find out: either the ids this node broadcast in \
            the last 28 days, with their time windows, or the daily keys those ids were derived \
            from. Nothing about whom you met is uploaded.

            Ids (--ids) are published one by one, and nobody can link one to another. Daily keys \
            (--keys) are compact, one 16-byte key a day instead of about 96 ids, but once a day's \
            key is published, anyone who logged some of your ids that day (a neighbour's node, a \
            sensor in a shop) can compute all of them and link those sightings to each other: \
            where you went that day. The server publishes a key only after its day has ended \
            plus a delay (2 hours by default), so that nobody can broadcast your ids while they \
            are still valid.

            The health authority decides which it accepts and publishes that, signed by the list \
            log's key, in log/uploads; this command reads it and offers only what the server takes. \
            Without --ids or --keys it asks which to upload. With --yes and neither flag it \
            uploads ids, never keys: a server that takes only keys then needs --keys.

            Shows what will be sent and asks first, unless --yes is given. If the answer is lost, \
            run the same command again: the server recognizes the repeated request.
            """)

    @OptionGroup var config: ConfigOptions
    @OptionGroup var store: StoreOptions
    @OptionGroup var server: ListServerOptions
    @Option(help: ArgumentHelp("The one-time upload code from your health authority.", valueName: "code"))
    var code: String
    @Flag var kind: ReportKind?
    @Flag(help: "Upload without asking (ids, unless --keys is given).") var yes = false

    func validate() throws {
        guard !code.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--code must not be empty.") }
    }

    func run() async throws {
        var flags = server.settingFlags
        flags["node.database"] = store.db
        let resolved = try config.resolve(flags: flags)
        let settings = resolved.settings
        let parts = MatchingParts(settings: settings)
        // Before any question: the upload is kept in the store (its key before it is sent, the
        // receipt after), so a store that cannot be written ends the command here.
        guard let opened = try StoreOptions.openExisting(resolved.storeLocation, forWriting: true) else {
            throw CommandFailure.noHistoryToReport
        }
        let canAsk = !yes && isatty(STDIN_FILENO) == 1
        guard yes || canAsk else { throw CommandFailure.needsConfirmation("Uploading your history") }
        let reporter = HistoryReporter(serverURL: try parts.serverURL(), store: opened, http: parts.httpClient())
        // The signed setting needs the list's public key; without one the server has the last word.
        let acceptance = try await reporter.acceptance(
            publicKey: settings.serverPublicKey == nil ? nil : try parts.publicKey(), logOrigin: settings.listOrigin)
        let decision = try acceptance.decide(requested: kind?.uploadKind, canAsk: canAsk)

        print(ReportWording.tradeOff)
        if let line = ReportWording.serverLine(acceptance, requested: kind?.uploadKind) { print(line) }
        let chosen: UploadKind
        switch decision {
        case .upload(let kind):
            chosen = kind
        case .ask:
            guard let answer = Self.ask("Upload ids or daily keys? Type 'ids' or 'keys' (anything else cancels): "),
                  let kind = UploadKind(rawValue: answer)
            else {
                print("Nothing was uploaded.")
                throw ExitCode.failure
            }
            chosen = kind
        }
        print("")

        let serverName = redactedURL(reporter.serverURL)
        let code = self.code.trimmingCharacters(in: .whitespaces)
        let receipt: ReportReceipt
        switch chosen {
        case .ids:
            let upload = try reporter.pendingUpload()
            guard let first = upload.ids.first, let last = upload.ids.last else { throw ReportError.nothingToReport }
            print(ReportWording.summary(upload, first: first, last: last, server: serverName))
            try confirm(.ids)
            receipt = try await reporter.upload(upload, code: code)
        case .keys:
            let upload = try reporter.pendingKeyUpload()
            guard !upload.keys.isEmpty else { throw ReportError.noKeysToReport }
            let keyDays = Set(upload.days)
            let uncovered = try reporter.pendingUpload().days.filter { !keyDays.contains($0) }
            print(ReportWording.summary(upload, uncoveredDays: uncovered, server: serverName))
            try confirm(.keys)
            receipt = try await reporter.upload(upload, code: code)
        }
        print(ReportWording.thanks(receipt))
    }

    /// Asks before anything leaves the machine, naming what leaves, unless --yes was given.
    private func confirm(_ kind: UploadKind) throws {
        guard !yes else { return }
        guard Self.ask("Upload now? Type 'yes' to upload your \(ReportWording.name(of: kind)): ") == "yes" else {
            print("Nothing was uploaded.")
            throw ExitCode.failure
        }
    }

    /// The user's answer to `question`, trimmed and in lower case; the question is flushed
    /// first, since it ends without a newline.
    private static func ask(_ question: String) -> String? {
        print(question, terminator: "")
        fflush(nil)  // every stream: naming `stdout` is shared mutable state to Swift 6
        return readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
    }
}

/// `--ids` or `--keys`: what to upload, chosen on the command line instead of by the question.
enum ReportKind: String, EnumerableFlag {
    case ids
    case keys

    var uploadKind: UploadKind { self == .ids ? .ids : .keys }

    static func help(for value: ReportKind) -> ArgumentHelp? {
        switch value {
        case .ids: return "Upload your ids, each on its own: nobody can link them to each other."
        case .keys:
            return "Upload your daily keys: compact, but once published they let anyone who logged some of your ids link that day's ids to each other."
        }
    }
}

/// What `tracer report` tells its user, in one place so that the trade-off reads the same
/// wherever it appears.
enum ReportWording {
    static let tradeOff = """
        You can upload one of two things. Both let people who met you find out; neither says whom you met.
          ids         your ids, each published on its own (96 a day at 15-minute ids): nobody can link one to another.
          daily keys  one key a day, from which every id of that day can be computed: much smaller, but
                      once a day's key is published, anyone who logged some of your ids that day (a
                      neighbour's node, a sensor in a shop) can link those sightings to each other: where
                      you went that day.
        """

    static func name(of kind: UploadKind) -> String { kind == .ids ? "ids" : "daily keys" }

    /// What the server takes, when that narrows the choice or could not be read.
    static func serverLine(_ acceptance: UploadAcceptance, requested: UploadKind?) -> String? {
        switch (acceptance.source, acceptance.onlyKind) {
        case (.unknown, _):
            return "This node has no server public key (server.public_key), so it cannot read which of the two the server accepts; the server refuses one it does not take."
        case (.signedUploadPolicy, let only?):
            return requested == nil ? "Your health authority's server accepts only \(name(of: only)), so \(name(of: only)) are uploaded." : nil
        case (.signedUploadPolicy, nil):
            return nil
        }
    }

    static func summary(_ upload: HistoryUpload, first: OwnID, last: OwnID, server: String) -> String {
        """
        This uploads \(upload.ids.count) of this node's own ids, broadcast \(span(upload.days)), to \(server).
        It uploads nothing about whom you met. The server publishes these ids so that people \
        who met you can find out; they cannot learn who you are from them.
        Ids from \(Output.localTime(first.window.start)) to \(Output.localTime(last.window.end)).
        """
    }

    static func summary(_ upload: KeyHistoryUpload, uncoveredDays: [String], server: String) -> String {
        var text = """
            This uploads \(keys(upload.keys.count)) of this node, for \(span(upload.days)) (UTC), to \(server).
            It uploads nothing about whom you met. The server publishes each key only after its \
            day has ended plus a delay (today's key tomorrow at the earliest), so that nobody can \
            broadcast your ids while they are still valid.
            """
        if !uncoveredDays.isEmpty {
            text += "\nNot covered: your ids of \(span(uncoveredDays)), drawn before daily keys; upload ids (--ids) to include those days."
        }
        return text
    }

    static func thanks(_ receipt: ReportReceipt) -> String {
        switch receipt.kind {
        case .ids:
            return """
                Uploaded \(receipt.ids) ids (\(receipt.stored) new to the server); they appear in its next \
                published list. Thank you for helping others find out.
                """
        case .keys:
            return """
                Uploaded \(keys(receipt.keys ?? 0)) (\(receipt.stored) new to the server); each appears in \
                its published list once its day has ended plus the server's delay. Thank you for helping others find out.
                """
        }
    }

    private static func keys(_ count: Int) -> String { count == 1 ? "1 daily key" : "\(count) daily keys" }

    private static func span(_ days: [String]) -> String {
        guard let first = days.first, let last = days.last else { return "no day" }
        return days.count == 1 ? first : "\(first) to \(last) (\(days.count) days)"
    }
}
