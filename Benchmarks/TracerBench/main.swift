import Foundation
import Logging

// Figures only: the stack's own info logs would interleave with them.
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .warning
    return handler
}

// Usage: swift run -c release TracerBench [store | link [ROUNDS] | exchange [ROUNDS] | server | crowd [MINUTES] [NODES]
//        | match [IDS] [ENCOUNTERS]]
let arguments = CommandLine.arguments.dropFirst()
let which = arguments.first ?? "store"
let directory = NSTemporaryDirectory() + "tracer-bench-" + UUID().uuidString
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

switch which {
case "store":
    try await StoreBenchmark(directory: directory).run()
case "link":
    // Run from the repository root: it starts Bumble from .venv-bumble and Tests/Support/bumble.
    let rounds = arguments.dropFirst().first.flatMap { Int($0) } ?? 50
    try await LinkBenchmark(repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath), rounds: rounds).run()
case "exchange":
    // Run from the repository root, like "link".
    // exchange [ROUNDS] [rootcanal]
    let rounds = arguments.dropFirst().first.flatMap { Int($0) } ?? 50
    try await ExchangeBenchmark(
        repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath), rounds: rounds,
        onRootCanal: arguments.dropFirst(2).first == "rootcanal").run()
case "server":
    // Run from the repository root: it starts nginx with deploy/nginx/tracer-server.conf.
    try await ServerBenchmark(directory: directory, repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).run()
case "crowd":
    // Run from the repository root, like "link"; build both first: swift build -c release --product tracer, then --product TracerBench.
    let minutes = arguments.dropFirst().first.flatMap { Double($0) } ?? 10
    let nodes = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 10
    try await CrowdBenchmark(
        repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath), directory: directory, nodes: nodes, minutes: minutes
    ).run()
case "match":
    // Run from the repository root: it runs Benchmarks/baselines/*.py, and `tracer check` from
    // the folder this binary is in, so build both (`--product` builds one product per call):
    // `swift build -c release --product tracer && swift build -c release --product TracerBench`.
    let ids = arguments.dropFirst().first.flatMap { Int($0) } ?? 10_000_000
    let encounters = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 100_000
    try MatchBenchmark(
        directory: directory, repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
        listedIDCount: ids, encounterCount: encounters
    ).run()
default:
    FileHandle.standardError.write(Data("unknown benchmark '\(which)'; available: store, link, exchange, server, crowd, match\n".utf8))
    exit(2)
}

/// Writes a line of figures straight to stdout, unbuffered, so that it reaches a file or pipe even
/// if a later step hangs and the run is killed.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
