import ArgumentParser
import Crypto
import Foundation
import Hummingbird
import Logging
import PositiveListFormat
import PositiveListServer
import ServerApplication
import ServerHTTPAPI
import ServerStorage
import SQLiteServerStore
import TracerCore
import TransparencyLog

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Runs the HTTP API and serves the published files; publishes on the configured schedule.",
        discussion: "Stops gracefully on SIGTERM or SIGINT: requests in flight complete. Put TLS in a reverse proxy in front (see deploy/nginx).")

    @OptionGroup var location: LocationOptions

    @Option(name: .customLong("bind"), help: "HOST:PORT to listen on (env TRACER_SERVER_BIND).")
    var bind: String?

    func run() async throws {
        let text = bind ?? ProcessInfo.processInfo.environment["TRACER_SERVER_BIND"] ?? "127.0.0.1:8080"
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65_535).contains(port) else {
            throw CommandFailure.invalidBind(text)
        }
        let host = String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let logger = Logger(label: "tracer-server")
        let configuration = try location.loadConfiguration()
        // Before anything is opened: connections must stop short of the descriptor limit.
        let descriptorLimit = ConnectionLimits.currentDescriptorLimit()
        let limits: ConnectionLimits
        do {
            limits = try configuration.connectionLimits(descriptorLimit: descriptorLimit)
        } catch {
            throw CommandFailure.serverFailed(error.description)
        }
        logger.info("connection limits", metadata: [
            "openFiles": "\(descriptorLimit)", "maxConnections": "\(limits.total)", "maxConnectionsPerAddress": "\(limits.perAddress)",
        ])
        let store = try await location.openStore(configuration: configuration)
        let publisher = try location.makePublisher(
            store: store, configuration: configuration, logger: logger,
            pause: PublicationPause.fromEnvironment(ProcessInfo.processInfo.environment, logger: logger))
        try location.paths.published.prepare()
        // Before listening: a witness without its key must not start half-way.
        let witness = try location.makeWitness(configuration: configuration, logger: logger)
        if let witness {
            logger.info("witnessing logs at POST /v1/add-checkpoint", metadata: [
                "logs": "\(configuration.witnessedLogs.map(\.origin).joined(separator: ", "))", "witnessKey": "\(witness.identity.verifierKey.text)",
            ])
        }
        if !configuration.witnesses.isEmpty {
            logger.info("asking witnesses to cosign each checkpoint", metadata: [
                "witnesses": "\(configuration.witnesses.map { "\($0.key.name) at \($0.url)" }.joined(separator: ", "))",
            ])
        }
        if let console = configuration.console, console.enabled {
            logger.info("console enabled", metadata: ["listen": "\(console.host):\(console.port)", "authority": "\(console.authority)"])
        }
        if let metrics = configuration.metrics, metrics.enabled {
            // Never on the public API's address (nor the console's): /metrics is for the
            // operator's Prometheus, not for every client.
            if metrics.overlaps(host: host, port: port) { throw CommandFailure.metricsOnAPIAddress("\(metrics.host):\(metrics.port)", api: text) }
            if let console = configuration.console, console.enabled, metrics.overlaps(host: console.host, port: console.port) {
                throw CommandFailure.metricsOnAPIAddress("\(metrics.host):\(metrics.port)", api: "\(console.host):\(console.port) (the console's)")
            }
            logger.info("metrics enabled", metadata: ["listen": "\(metrics.host):\(metrics.port)", "path": "/metrics"])
        }
        // SQLite checks uploads against the live batches' ids in memory: read them from the
        // database before listening, so the first upload does not wait for it. Should that fail,
        // the server still serves the list; uploads are refused (503) with the same reason.
        // (PostgreSQL checks uploads in the database.)
        if let sqlite = store as? ServerStore {
            do {
                let loaded = try await sqlite.loadPublishedIDs()
                logger.info("published ids loaded", metadata: ["ids": "\(loaded.ids)", "megabytes": "\(loaded.bytes >> 20)"])
            } catch {
                logger.error("uploads will be refused", metadata: ["reason": "\(error)"])
            }
        }
        // Built before listening, so that missing or unreadable credentials stop the start.
        var sync: ObjectStoreSync?
        if let settings = configuration.objectStore, settings.syncAfterPublish {
            sync = try location.makeSync(settings: settings, store: store, logger: logger)
            logger.info("syncing to the object store after each publication", metadata: [
                "bucket": "\(settings.location.bucket)", "endpoint": "\(settings.location.endpoint)", "prefix": "\(settings.location.keyPrefix)",
            ])
        }
        let components = ServerComponents(
            configuration: configuration, store: store, publisher: publisher, directory: location.paths.published, clock: SystemWallClock(),
            objectStoreSync: sync, objectStoreSyncRecord: location.paths.objectStoreSyncRecord,
            publicKey: (try? SigningKeyFile.load(from: location.resolvedKeyPath)).map { PositiveListPublicKey($0.publicKey) },
            witness: witness)
        let application = PositiveListHTTPServer.makeApplication(components, address: .hostname(host, port: port), logger: logger)
        do {
            try await application.runService()
        } catch let error as ListenerInUse {
            throw CommandFailure.listenerInUse(error)
        } catch {
            throw CommandFailure.serverFailed(String(describing: error))
        }
    }
}

struct Keygen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Creates the Ed25519 signing key (mode 0600) and prints its public key for node configuration.",
        discussion: "Refuses to replace an existing key.")

    @OptionGroup var location: LocationOptions

    func run() async throws {
        try location.prepareDataDirectory()
        let key = try SigningKeyFile.create(at: location.resolvedKeyPath)
        print(PositiveListPublicKey(key.publicKey).base64)
        FileHandle.standardError.write(Data("Signing key written to \(location.resolvedKeyPath); nodes need its public key, printed on standard output.\n".utf8))
        let origin = (try? location.loadConfigurationIfPresent())??.logOrigin
        if let identity = try? ListLogIdentity(origin: origin, publicKey: key.publicKey) {
            FileHandle.standardError.write(Data("Log verifier key (format version 3, log/checkpoint): \(identity.verifierKey.text)\n".utf8))
        }
    }
}

struct WitnessKeygen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "witness-keygen",
        abstract: "Creates the witness's Ed25519 key (DATA_DIR/witness-key, mode 0600) and prints its verifier key.",
        discussion: """
            The verifier key goes into the configuration of the logs this server witnesses (their \
            `witnesses` list, with this server's address and /v1) and of the nodes that count its \
            cosignatures (list.witnesses). Its name is witnessName from the configuration, or tracer-witness/ and 16 hex \
            digits of the key's SHA-256: set witnessName first if you want another, since the name is part \
            of the verifier key. Refuses to replace an existing key.
            """)

    @OptionGroup var location: LocationOptions

    func run() async throws {
        try location.prepareDataDirectory()
        let name = (try location.loadConfigurationIfPresent())?.witnessName
        let key = try SigningKeyFile.create(at: location.paths.witnessKey, kind: .witness)
        let identity: WitnessIdentity
        do {
            identity = try WitnessIdentity(name: name, publicKey: key.publicKey)
        } catch {
            throw CommandFailure.witnessName("\(error)")
        }
        print(identity.verifierKey.text)
        FileHandle.standardError.write(Data("""
            Witness key written to \(location.paths.witnessKey). Its verifier key, printed on standard output, goes into the \
            `witnesses` of each log this server witnesses (with this server's address and /v1 as url) and into the \
            list.witnesses of nodes that count its cosignatures; list those logs in this server's witnessedLogs.

            """.utf8))
    }
}

struct Append: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Appends an id or key history from a JSON file, as the given authority, without going through HTTP.",
        discussion: #"The file holds {"ids": [{"id": "16 hex digits", "validFrom": UNIX_SECONDS, "validUntil": UNIX_SECONDS}, ...]}, checked by the same rules as POST /v1/histories; with --keys, {"keys": [{"day": UTC_DAY_NUMBER, "intervalSeconds": SECONDS, "key": "32 hex digits"}, ...]}, checked as POST /v1/key-histories."#)

    @OptionGroup var location: LocationOptions

    @Option(help: "The authority appending (a name from the configuration).")
    var authority: String

    @Flag(help: "The file holds daily keys rather than ids.")
    var keys = false

    @Argument(help: "The history file.")
    var file: String

    func run() async throws {
        let configuration = try location.loadConfiguration()
        let registry = AuthorityRegistry(configuration.authorities)
        guard registry.authority(named: authority) != nil else {
            throw CommandFailure.unknownAuthority(authority, known: registry.names)
        }
        guard let data = FileManager.default.contents(atPath: file) else { throw CommandFailure.unreadableHistory(path: file) }
        let now = SystemWallClock().now()
        let store = try await location.openStore(configuration: configuration)
        let outcome: SubmissionOutcome
        if keys {
            let history: SubmittedKeyHistory
            do {
                history = try SubmittedKeyHistory(json: data)
            } catch {
                throw CommandFailure.invalidKeyHistoryFile(path: file, detail: error.detail)
            }
            let records: [DailyKeyRecord]
            do {
                records = try KeyHistoryRules(configuration).validate(history, now: now)
            } catch {
                throw CommandFailure.rejectedHistory(path: file, detail: error.detail)
            }
            outcome = try await store.appendKeyHistory(records, credential: .authority(name: authority), idempotencyKey: nil, now: now)
        } else {
            let history: SubmittedHistory
            do {
                history = try SubmittedHistory(json: data)
            } catch {
                throw CommandFailure.invalidHistoryFile(path: file, detail: error.detail)
            }
            let entries: [PositiveListEntry]
            do {
                entries = try HistoryRules(configuration).validate(history, now: now)
            } catch {
                throw CommandFailure.rejectedHistory(path: file, detail: error.detail)
            }
            outcome = try await store.appendHistory(entries, credential: .authority(name: authority), idempotencyKey: nil, now: now)
        }
        guard case .stored(let receipt) = outcome else {
            throw CommandFailure.rejectedHistory(path: file, detail: "\(outcome)")
        }
        if keys {
            print("Stored \(receipt.stored) new keys of \(receipt.received) as submission \(receipt.submission); each is published by the first `tracer-server publish` after its day has ended plus \(configuration.keyPublicationDelaySeconds) seconds.")
        } else {
            print("Stored \(receipt.stored) new ids of \(receipt.received) as submission \(receipt.submission); they appear in the next batch (`tracer-server publish`).")
        }
    }
}

struct IssueCode: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "issue-code", abstract: "Issues a one-time upload code for a diagnosed person.")

    @OptionGroup var location: LocationOptions

    @Option(help: "The issuing authority (a name from the configuration).")
    var authority: String

    @Option(name: .customLong("expires-in"), help: "Seconds until the code expires (default: the configured lifetime, 24 hours).")
    var expiresIn: Int64?

    func run() async throws {
        let configuration = try location.loadConfiguration()
        let registry = AuthorityRegistry(configuration.authorities)
        guard registry.authority(named: authority) != nil else {
            throw CommandFailure.unknownAuthority(authority, known: registry.names)
        }
        let lifetime = expiresIn ?? configuration.uploadCodeLifetimeSeconds
        guard (60...configuration.uploadCodeLifetimeSeconds).contains(lifetime) else {
            throw ValidationError("--expires-in must be between 60 and \(configuration.uploadCodeLifetimeSeconds) seconds.")
        }
        let store = try await location.openStore(configuration: configuration)
        let issued = try await store.issueUploadCode(authority: authority, lifetimeSeconds: lifetime, now: SystemWallClock().now())
        print(issued.code.display)
        FileHandle.standardError.write(Data("Valid once, until \(issued.expiresAt.utcText).\n".utf8))
    }
}

struct Publish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cuts a batch from ids and keys accepted since the last one, expires old batches and appends to the signed list log now.")

    @OptionGroup var location: LocationOptions

    /// A flag of this one-shot command only, never a configuration setting, so that no server's
    /// schedule can carry it: a demo or test must type it every time, and is warned every time.
    @Option(
        name: .customLong("demo-key-clock"),
        help: ArgumentHelp(
            "For demos and tests only: release daily keys and ids as if it were this Unix time (at most 3 days ahead), so that today's key, or ids still valid, can be published now. Never on a server real people rely on: a key or an id published early lets anyone replay ids while they are still valid.",
            valueName: "unix-seconds"))
    var demoKeyClock: Int64?

    func validate() throws {
        // Milliseconds, or a typo: too far ahead to be a demo's "tomorrow".
        if let demoKeyClock, demoKeyClock > SystemWallClock().now() + Self.demoKeyClockLimit {
            throw ValidationError("--demo-key-clock must be a Unix time in seconds at most 3 days from now (it is \(demoKeyClock)).")
        }
    }

    func run() async throws {
        let configuration = try location.loadConfiguration()
        if let demoKeyClock { Self.warnAboutDemoKeyClock(demoKeyClock, delay: configuration.keyPublicationDelaySeconds) }
        let store = try await location.openStore(configuration: configuration)
        let publisher = try location.makePublisher(store: store, configuration: configuration, logger: Logger(label: "tracer-server"))
        let report = try await publisher.publish(demoKeyClock: demoKeyClock)
        if let batch = report.newBatch {
            print("Published batch \(batch.number) with \(batch.idCount) ids.")
        } else {
            print("No new ids to publish.")
        }
        if !report.quarantinedSubmissions.isEmpty {
            let numbers = report.quarantinedSubmissions.map(String.init).joined(separator: ", ")
            print("Warning: the stored ids of submissions \(numbers) are damaged and were not published; they are kept in the database's damaged_pending_histories table. Ask the authority to send those histories again.")
        }
        if !report.expiredBatches.isEmpty {
            print("Removed expired batches: \(report.expiredBatches.map(String.init).joined(separator: ", ")).")
        }
        print("\(report.liveBatches) live batches of ids.")
        if let batch = report.newKeyBatch {
            let padding = batch.fakeKeyCount > 0 ? " and \(batch.fakeKeyCount) fake keys" : ""
            print("Published key batch \(batch.number) with \(batch.keyCount) keys\(padding).")
        }
        if report.waitingIDs > 0 {
            print("\(report.waitingIDs) ids wait until they are no longer valid (validUntil plus \(configuration.clockSkewSeconds) seconds).")
        }
        if report.waitingKeys > 0 {
            print("\(report.waitingKeys) keys wait for their day to end plus the publication delay.")
        }
        if !report.expiredKeyBatches.isEmpty {
            print("Removed expired key batches: \(report.expiredKeyBatches.map(String.init).joined(separator: ", ")).")
        }
        print("\(report.liveKeyBatches) live batches of keys.")
        if let log = report.log {
            let appended = log.appendedEntries == 0 ? "nothing appended" : "\(log.appendedEntries) entries appended"
            print("Log holds \(log.treeSize) entries (\(appended)\(log.checkpointSigned ? ", checkpoint signed" : "")).")
            if log.deletedHistoryFiles > 0, let kept = log.historyKeptFromEntry {
                print("Log history kept from entry \(kept); \(log.deletedHistoryFiles) older entry bundles and tiles deleted.")
            }
            if !log.cosignedBy.isEmpty {
                print("Checkpoint cosigned by \(log.cosignedBy.joined(separator: ", ")).")
            }
            if !log.witnessesFailed.isEmpty {
                print("Warning: \(log.witnessesFailed.joined(separator: ", ")) did not cosign the checkpoint, published without; `tracer-server status` says why.")
            }
        }
    }
}

extension Publish {
    static let demoKeyClockLimit: Int64 = 3 * 86_400

    /// Says loudly, on stderr, what the flag does.
    static func warnAboutDemoKeyClock(_ time: Int64, delay: Int64) {
        FileHandle.standardError.write(Data("""
            WARNING: --demo-key-clock releases daily keys and ids as if it were \(time.utcText), not now. \
            A key is normally published only after its day has ended plus \(delay) seconds, and an id \
            after it stopped being valid, so that nobody can broadcast ids while they are still valid; \
            ids published by this run may still be valid. For demos and tests only: never use it on a server whose list real people rely on.

            """.utf8))
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Shows the server's data: submissions, unpublished ids, batches, open codes, public key.",
        discussion: "Exits with 1 when the last publication or object store sync failed, after saying why and what to do.")

    @OptionGroup var location: LocationOptions

    func run() async throws {
        // Without a configuration file, the data directory's SQLite file; a configuration that
        // does not read is an error, so that a PostgreSQL server's status never shows an empty SQLite store.
        let configuration = try location.loadConfigurationIfPresent()
        let summary: StoreSummary
        let withoutContent: [String]
        do {
            let store = try await location.openStore(configuration: configuration)
            summary = try await store.summary(now: SystemWallClock().now())
            withoutContent = try await store.batchesWithoutContent()
        } catch {
            // A database that is down is when the operator most needs what `serve`'s last
            // publication and sync met (recorded in the data directory, not in the database).
            print("Data directory:    \(location.paths.dataDirectory)")
            print("Database UNREACHABLE: \(error)")
            _ = showFailingOutcomes()
            throw ExitCode(1)
        }
        print("Data directory:    \(location.paths.dataDirectory)")
        print("Published files:   \(location.paths.published.path)")
        if let key = try? SigningKeyFile.load(from: location.resolvedKeyPath) {
            print("Public key:        \(PositiveListPublicKey(key.publicKey).base64)")
            // What nodes configure to follow the log (format version 3): origin, key id, key.
            if let identity = try? ListLogIdentity(origin: configuration?.logOrigin, publicKey: key.publicKey) {
                print("Log verifier key:  \(identity.verifierKey.text)")
            }
        } else {
            print("Public key:        none yet (run `tracer-server keygen`)")
        }
        print("Submissions:       \(summary.submissions)")
        print("Stored ids:        \(summary.storedIDs)")
        print("Unpublished ids:   \(summary.unpublishedIDs)")
        print("Live batches:      \(summary.liveBatches)")
        print("Stored keys:       \(summary.storedKeys)")
        print("Waiting keys:      \(summary.unpublishedKeys)")
        print("Live key batches:  \(summary.liveKeyBatches)")
        // The open deletes the retired files once the database holds what they held.
        let retired = location.paths.published.retiredFilesPresent()
        if !retired.isEmpty {
            let why = withoutContent.isEmpty
                ? "they hold batches this database never recorded (another database's?); start tracer-server with the configuration that names its database, whose open deletes them"
                : "the database does not hold what \(withoutContent.joined(separator: ", ")) published yet; restore the batch file the server's warning names and restart, which deletes them"
            print("Retired files:     \(retired.joined(separator: ", ")) kept in \(location.paths.published.path): \(why)")
        }
        if let configuration {
            let accepts = configuration.acceptUploads
            let kinds = accepts == .both ? "ids and keys" : accepts == .keys ? "keys only" : "ids only"
            print("Accepted uploads:  \(kinds) (acceptUploads; published in log/uploads)")
        }
        print("Last publication:  \(summary.lastPublishedAt?.utcText ?? "never")")
        if let bytes = FileManager.default.contents(atPath: location.paths.published.logCheckpointPath),
           let note = try? SignedNote(parsing: bytes), let checkpoint = try? Checkpoint(text: note.text) {
            print("Log entries:       \(checkpoint.treeSize) (log/checkpoint)")
            if let kept = Publisher.logHistoryKeptFromEntry(statePath: location.paths.logState) {
                print("Log history kept from entry \(kept); older entry bundles deleted")
            }
        } else {
            print("Log entries:       none published yet (log/checkpoint is written at the next publication)")
        }
        print("Open upload codes: \(summary.openUploadCodes)")
        let witnessFailing = showWitnesses(configuration)
        let outcomesFailing = showFailingOutcomes()
        if witnessFailing || outcomesFailing { throw ExitCode(1) }
    }

    /// What the last attempts said: a `serve` that cannot publish or sync (a full disk, the
    /// database or the object store down) keeps serving and retrying, so only this shows it.
    /// True when one failed.
    private func showFailingOutcomes() -> Bool {
        var failing = false
        for (what, path) in [("Publication", location.paths.publicationRecord), ("Object store sync", location.paths.objectStoreSyncRecord)] {
            guard let record = OutcomeRecord.read(from: path) else { continue }
            if !record.succeeded {
                failing = true
                print("\(what) FAILING (last tried \(record.at.utcText)): \(record.detail)")
            } else if let warning = record.warning {
                // Nodes follow only the log: a publication that left it behind is a failure to them.
                failing = true
                print("\(what) INCOMPLETE (last at \(record.at.utcText)): \(warning)")
            }
        }
        return failing
    }

    /// Both witness roles: the logs this server witnesses (what it cosigned, the evidence it
    /// kept) and the witnesses its log asks (what each last answered). True when a witness this
    /// log asks did not cosign the last time: nodes that require its cosignature refuse the list.
    private func showWitnesses(_ configuration: ServerConfiguration?) -> Bool {
        if let key = try? SigningKeyFile.load(from: location.paths.witnessKey, kind: .witness),
           let identity = try? WitnessIdentity(name: configuration?.witnessName, publicKey: key.publicKey) {
            print("Witness key:       \(identity.verifierKey.text)")
        }
        let store = WitnessStateStore(directory: location.paths.witnessDirectory)
        for log in configuration?.witnessedLogs ?? [] {
            do {
                if let held = try store.read(origin: log.origin) {
                    print("Witnessing:        \(log.origin), cosigned size \(held.treeSize) (first at \(held.cosignedAt.utcText))")
                } else {
                    print("Witnessing:        \(log.origin), nothing cosigned yet")
                }
            } catch {
                print("Witnessing:        \(log.origin) FAILING: \(error)")
            }
        }
        let evidence = store.evidenceFolders()
        if !evidence.isEmpty {
            print("Witness EVIDENCE:  \(evidence.count) refused checkpoints that do not extend the tree cosigned, kept in \(store.directory)/evidence (each folder's reason.txt says what it shows)")
        }
        var failing = false
        let records = WitnessCosigningRecord.read(from: location.paths.witnessCosigningRecord)
        for witness in configuration?.witnesses ?? [] {
            let label = "Witness \(witness.key.name)"
            guard let record = records[witness.key.text] else {
                print("\(label): not asked yet (at the next publication)")
                continue
            }
            if record.succeeded {
                print("\(label): \(record.detail) (\(record.at.utcText))")
            } else {
                failing = true
                print("\(label) FAILING (last tried \(record.at.utcText)): \(record.detail)")
            }
        }
        return failing
    }
}
