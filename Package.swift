// swift-tools-version: 6.1
import PackageDescription

// Every module builds in the Swift 6 language mode (strict concurrency checking).
let package = Package(
    name: "Tracer",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tracer", targets: ["TracerNode"]),
        .library(name: "BLEHost", targets: ["BLEHost"]),
        .library(name: "GATTExchange", targets: ["GATTExchange"]),
        .library(name: "IDRotation", targets: ["IDRotation"]),
        .library(name: "Matching", targets: ["Matching"]),
        .library(name: "PositiveListServer", targets: ["PositiveListServer"]),
        .library(name: "PositiveListFormat", targets: ["PositiveListFormat"]),
        .executable(name: "tracer-server", targets: ["TracerServer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        // The list server's Prometheus metrics (its own registry per server, no global bootstrap).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // The basics every part shares, with no SQLite and no libcurl: UserID, DailyKey, the UTC
        // day and time, the wall clock, one hex codec, one seeded generator, and how ids follow
        // from a daily key and the rotation schedule's rules (IDDerivation, RotationSchedule).
        // Every module that names these imports it itself.
        .target(
            name: "TracerCore",
            dependencies: [
                "CLinuxTime", .product(name: "Crypto", package: "swift-crypto"),
                // The raw AES block and CTR helpers that derive userIds from daily keys (IDDerivation).
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]),
        // <sys/timerfd.h>, which Glibc's module leaves out; glibc itself, nothing to link.
        .systemLibrary(name: "CLinuxTime", path: "Sources/CLinuxTime"),
        // Settings as the node and the server share them: where a value came from (flag, environment,
        // file, default) and its words, how typed text reads, the flag argument, the `config` table.
        // Foundation only; each side keeps its own table of settings and its file reader.
        .target(name: "Settings"),
        // The few waits every part builds on (an event count, a one-shot signal, a FIFO lock, a
        // deadline on the caller's clock), each with its cancellation handled once. The standard
        // library only, so that the host stack and the server both depend on it.
        .target(name: "Waits"),
        // What the node's and the server's SQLite stores share, on GRDB: reading an SQLite error
        // as the condition a user can act on, and probing a file before a store takes it.
        .target(name: "SQLiteSupport", dependencies: [.product(name: "GRDB", package: "GRDB.swift")]),
        // Identity and the node's local record: userIds, their daily keys and rotation, and the SQLite store.
        .target(
            name: "IDRotation",
            dependencies: [
                "TracerCore",
                .product(name: "Crypto", package: "swift-crypto"),
                // The raw AES block and CTR helpers that derive userIds from daily keys.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                "SQLiteSupport",
            ]
        ),
        // Where the node is, for the place recorded with each encounter: a gpsd client (its JSON
        // protocol over TCP) and the grid positions are rounded to. Kept out of IDRotation, which
        // only stores places, and out of the exchange, which must never wait for it.
        .target(
            name: "Places",
            dependencies: ["IDRotation", "TracerCore", .product(name: "Logging", package: "swift-log")]
        ),
        // BlueZ headers only (sockaddr_hci, HCI_CHANNEL_USER) for the hci0 user-channel
        // transport; no libbluetooth symbol is used, so nothing is linked.
        .systemLibrary(name: "CBlueZ", path: "Sources/CBlueZ", providers: [.apt(["libbluetooth-dev"])]),
        // The BLE host stack: transport, HCI, L2CAP, ATT, GATT, GAP. Knows nothing of Tracer,
        // its ids or its store, so that it can be tested and reused on its own.
        .target(
            name: "BLEHost",
            dependencies: ["CBlueZ", "Waits", .product(name: "Logging", package: "swift-log")]
        ),
        // The Tracer profile (its GATT service and advertisement) and the id exchange, on BLEHost.
        .target(
            name: "GATTExchange",
            dependencies: [
                "BLEHost", "IDRotation", "TracerCore", "Waits",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // libcurl, through typed wrappers of its variadic setters, opened with dlopen on the first
        // request rather than linked, so `tracer run` never maps it (headers: libcurl4-openssl-dev).
        .target(name: "CCurl", path: "Sources/CCurl"),
        // The one HTTP client on libcurl: the node's downloads of the positive list (conditional
        // requests, long polls, retries) and the server's signed object-store requests.
        .target(name: "CurlHTTP", dependencies: ["CCurl"]),
        // Publication to S3-compatible object storage: a small SigV4 client on libcurl (which signs
        // itself, CURLOPT_AWS_SIGV4), so no AWS SDK or other new package is needed.
        .target(
            name: "ObjectStore",
            dependencies: ["CurlHTTP", "TracerCore", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // Fetching and verifying the positive list, and matching it against the store, locally.
        .target(
            name: "Matching",
            dependencies: [
                "IDRotation", "PositiveListFormat", "CurlHTTP", "TracerCore", "TransparencyLog", "Waits",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Replays recorded field data (sessions and RSSI readings as CSV) through the node's store,
        // matcher and risk model, and scores the verdicts against ground truth: what TracerBench's
        // `verdicts` measures is what `tracer check` ships. Its own module so that neither the node
        // nor Matching carries CSV parsing.
        .target(name: "ExposureReplay", dependencies: ["IDRotation", "Matching", "PositiveListFormat", "TracerCore"]),
        // The published positive list's log entry (format version 3), written by the server, read
        // and verified by nodes, so it depends on no server code; and the readers of the retired
        // formats 1-2 (batches, indexes, Ed25519 trailers) that the server's upgrade uses.
        .target(
            name: "PositiveListFormat",
            dependencies: ["TracerCore", "TransparencyLog", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // A verifiable append-only log as static tiles, signed checkpoints and proofs; knows nothing of Tracer.
        .target(name: "TransparencyLog", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        // libpq, PostgreSQL's C client, for the server's optional PostgreSQL store. A system
        // library like SQLite and curl: it adds no Swift package, and so no BoringSSL or
        // NIO-SSL compile to a clean 2-core CI build (postgres-nio would add several minutes).
        .systemLibrary(name: "CLibPQ", path: "Sources/CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // What the server's stores promise and trade in, with no database library: the
        // SubmissionStore and ConsoleStore protocols, their records and errors, upload codes,
        // console password hashes and the published directory's layout the upgrade reads.
        // Each back end and the server's upper layers depend on it; it depends on neither.
        .target(
            name: "ServerStorage",
            dependencies: [
                "PositiveListFormat", "TracerCore",
                .product(name: "Crypto", package: "swift-crypto"),
                // Scrypt, for the console's passwords.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The server's PostgreSQL store (several `serve` instances sharing one database), on
        // libpq; its connection, pool and rows stay inside it.
        .target(
            name: "PostgresServerStore",
            dependencies: [
                "ServerStorage", "CLibPQ", "PositiveListFormat", "TracerCore", "Waits",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The server's SQLite store (one file, the default), on GRDB: its schema and migrations,
        // batch ledger, in-memory indexes of pending and published ids, console tables and the
        // data directory's publication lock file.
        .target(
            name: "SQLiteServerStore",
            dependencies: [
                "ServerStorage", "SQLiteSupport", "PositiveListFormat", "TracerCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // The positive list server's core: its configuration, the submission rules, upload codes,
        // publication (the publisher, its scheduler on an injected clock, object-store sync, the
        // witness and cosigning) and the metrics registry. No HTTP server: the layers above serve it.
        .target(
            name: "PositiveListServer",
            dependencies: [
                "ServerStorage", "PostgresServerStore", "SQLiteServerStore", "PositiveListFormat",
                "ObjectStore", "TracerCore", "Settings", "TransparencyLog", "Waits",
                // The log's requests to witnesses (tlog-witness), through the one HTTP client.
                "CurlHTTP",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                // ServiceLifecycle (the scheduler is a service) and HTTPTypes (the metrics' labels).
                .product(name: "Hummingbird", package: "hummingbird"),
                // The metrics registry and exposition (`metrics` in the configuration).
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // The server's HTTP API on Hummingbird: submission and upload codes, the published files,
        // the long poll, the witness's endpoint, the metrics listener, and the connection-level
        // defences (connection limits, request framing and read deadlines, failed-attempt limits).
        .target(
            name: "ServerHTTPAPI",
            dependencies: [
                "PositiveListServer", "ServerStorage", "PositiveListFormat", "TracerCore", "TransparencyLog", "Waits",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        // The health authority staff's web console (`console` in the configuration): sign-in,
        // upload codes, accounts and the publication's state, on its own listener, over the HTTP
        // API's defences.
        .target(
            name: "AuthorityConsole",
            dependencies: [
                "ServerHTTPAPI", "PositiveListServer", "ServerStorage", "PositiveListFormat", "TracerCore", "TransparencyLog",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        // Wires one running server together: the API, the console, the metrics listener and the
        // publication scheduler, from the configuration and the store.
        .target(
            name: "ServerApplication",
            dependencies: [
                "AuthorityConsole", "ServerHTTPAPI", "PositiveListServer", "ServerStorage", "PositiveListFormat", "TracerCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        // How both programs end: one mapping from what a command threw to its exit code and message.
        .target(name: "CommandLineMain", dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")]),
        .executableTarget(
            name: "TracerServer",
            dependencies: [
                "ServerApplication", "AuthorityConsole", "ServerHTTPAPI", "PositiveListServer", "ServerStorage", "PostgresServerStore",
                "SQLiteServerStore", "PositiveListFormat", "CommandLineMain", "ObjectStore", "Settings", "TracerCore", "TransparencyLog",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        .executableTarget(
            name: "TracerNode",
            dependencies: [
                "IDRotation", "BLEHost", "GATTExchange", "Matching", "PositiveListFormat", "CommandLineMain", "Places",
                "TracerCore", "CurlHTTP", "Settings", "TransparencyLog",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                // The exposition of node.metrics_file (node_exporter's textfile collector), as the
                // server's: a registry of its own, no global bootstrap.
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),

        // Synthetic load for tests and the demo: fills a store with made-up encounters, or writes
        // sightings until the crash-safety test kills it.
        .executableTarget(
            name: "TracerSimulator",
            dependencies: [
                "IDRotation", "TracerCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/Support/TracerSimulator"
        ),
        // Harness code shared by the test targets and the benchmarks: free loopback ports, nginx
        // over deploy/nginx/tracer-server.conf, the HTTP fixture server, a log capture, throwaway
        // Prometheus and node_exporter processes (their HTTP read through CurlHTTP), a real tracer-server
        // (ListServerProcess), the own-id histories a node reports. A plain library (Foundation,
        // swift-log, CurlHTTP, TracerCore and IDRotation for the ids and keys it uploads, and TestTiers
        // for RequiredTool), not a test target.
        .target(
            name: "TracerTestSupport", dependencies: ["TestTiers", "CurlHTTP", "TracerCore", "IDRotation", .product(name: "Logging", package: "swift-log")],
            path: "Tests/TracerTestSupport"),
        // Fakes and harnesses of the BLE host stack's tests, shared by BLEHostTests and
        // GATTExchangeTests: scripted controllers, in-memory channels, a manual clock, the reference
        // bytes, the Bumble and RootCanal launchers. A plain library on BLEHost and TestTiers (and Testing,
        // for the virtual controllers' test descriptions), not a test target.
        .target(name: "BLEHostTestSupport", dependencies: ["BLEHost", "TracerCore", "TestTiers"], path: "Tests/BLEHostTestSupport"),
        // Fixtures of the server's tests: a scratch server (data directory, store, signing key,
        // manual clocks), histories shaped like a node's, `tracer-server` and its console as child
        // processes, nginx in front, PostgreSQL fixtures and the store-backend parameter, and the
        // published log read back from its files. A plain library, not a test target.
        .target(
            name: "ServerTestSupport",
            dependencies: [
                "ServerApplication", "PositiveListServer", "ServerStorage", "PostgresServerStore", "SQLiteServerStore",
                "PositiveListFormat", "TransparencyLog", "TracerCore", "TracerTestSupport", "TestTiers",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/ServerTestSupport"),
        // Writers of the retired list files (formats 1 and 2), which no program writes any more:
        // for the tests of the decoders and of the upgrade that reads them.
        .target(
            name: "RetiredFormatWriters", dependencies: ["PositiveListFormat", "TracerCore", .product(name: "Crypto", package: "swift-crypto")],
            path: "Tests/RetiredFormatWriters"),
        // The test tiers' tags (.unit, .integration, .endToEnd), seen by every test target.
        .target(name: "TestTiers", path: "Tests/TestTiers"),
        .executableTarget(
            name: "TracerBench",
            dependencies: [
                "IDRotation", "BLEHost", "GATTExchange", "Matching", "ServerApplication", "AuthorityConsole", "ServerHTTPAPI", "PositiveListServer", "ServerStorage", "PostgresServerStore", "SQLiteServerStore", "PositiveListFormat", "TracerTestSupport",
                "ObjectStore", "ExposureReplay", "Places", "TracerCore", "CurlHTTP",
                .product(name: "Crypto", package: "swift-crypto"),
                // AES.permute, for the per-id baseline of the key-matching benchmark.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/TracerBench"
        ),

        .testTarget(name: "TracerCoreTests", dependencies: ["TracerCore", "TestTiers"]),
        .testTarget(name: "SettingsTests", dependencies: ["Settings", "TestTiers"]),
        .testTarget(name: "WaitsTests", dependencies: ["Waits", "TestTiers"]),
        .testTarget(name: "TransparencyLogTests", dependencies: ["TransparencyLog", "TestTiers"]),
        .testTarget(name: "IDRotationTests", dependencies: ["IDRotation", "TracerCore", "TestTiers", .product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(name: "PlacesTests", dependencies: ["Places", "IDRotation", "TracerCore", "TestTiers", "TracerTestSupport"]),
        // The BLE host stack's own tests: BLEHost and its fakes only, no Tracer profile, ids or store.
        .testTarget(name: "BLEHostTests", dependencies: ["BLEHost", "BLEHostTestSupport", "TracerCore", "TestTiers"]),
        .testTarget(
            name: "GATTExchangeTests",
            dependencies: ["BLEHost", "BLEHostTestSupport", "GATTExchange", "IDRotation", "TracerCore", "TestTiers", .product(name: "Logging", package: "swift-log")]
        ),
        // BLEHostTestSupport: the RootCanal launcher of the kernel bed's suite (KernelBedTests.swift).
        .testTarget(
            name: "TracerNodeTests",
            dependencies: [
                "IDRotation", "Places", "TracerTestSupport", "BLEHostTestSupport", "CommandLineMain", "TestTiers", "TracerCore",
                // The node's own types, for its unit tests (NodeWatchdogTests).
                "TracerNode", "BLEHost",
                // The exchange under the watchdog, on a scripted controller (NodeWatchdogStuckOperationTests).
                "GATTExchange",
                // The node's log follower against a real server and nginx (ListLogOverNginxTests).
                "Matching", "CurlHTTP", "PositiveListFormat", "TransparencyLog",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "MatchingTests",
            dependencies: [
                "Matching", "CurlHTTP", "IDRotation", "PositiveListFormat", "RetiredFormatWriters", "TracerTestSupport", "ExposureReplay", "TestTiers", "TracerCore", "TransparencyLog",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "PositiveListServerTests",
            dependencies: [
                "ServerApplication", "AuthorityConsole", "ServerHTTPAPI", "PositiveListServer", "ServerStorage", "PostgresServerStore",
                "SQLiteServerStore", "PositiveListFormat", "RetiredFormatWriters", "IDRotation", "TracerTestSupport", "ServerTestSupport",
                "ObjectStore", "Matching", "TestTiers", "TracerCore", "CurlHTTP", "TransparencyLog", "Waits",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ]
        ),
    ]
)
