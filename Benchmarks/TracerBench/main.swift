import Foundation

// Usage: swift run -c release TracerBench [store]
let arguments = CommandLine.arguments.dropFirst()
let which = arguments.first ?? "store"
let directory = NSTemporaryDirectory() + "tracer-bench-" + UUID().uuidString
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

switch which {
case "store":
    try await StoreBenchmark(directory: directory).run()
default:
    FileHandle.standardError.write(Data("unknown benchmark '\(which)'; available: store\n".utf8))
    exit(2)
}
