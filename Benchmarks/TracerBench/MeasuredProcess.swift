import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process run to completion with its wall time and peak resident memory.
///
/// Spawned and reaped here (posix_spawn, wait4) rather than through Foundation's `Process`, which
/// reaps its children itself: `wait4` is the one way to get the peak memory of exactly this child,
/// where `getrusage(RUSAGE_CHILDREN)` would report the largest of every child so far.
struct MeasuredProcess {
    let exitCode: Int32
    let seconds: Double
    /// `ru_maxrss`: the child's peak resident set, in bytes.
    let peakResidentBytes: Int
    let standardOutput: String
    let standardError: String

    /// Runs `executable` (an absolute path) with `arguments`; its output goes through files in
    /// `scratchDirectory` so that a large output cannot block it on a full pipe.
    static func run(_ executable: String, _ arguments: [String], scratchDirectory: String) throws -> MeasuredProcess {
        let outputPath = scratchDirectory + "/child-stdout"
        let errorPath = scratchDirectory + "/child-stderr"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }

        let clock = ContinuousClock()
        let started = clock.now
        var pid: pid_t = 0
        let spawnResult = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawnResult == 0 else {
            throw BenchmarkFailure("cannot start \(executable): \(String(cString: strerror(spawnResult)))")
        }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw BenchmarkFailure("wait4 for \(executable) failed: \(String(cString: strerror(errno)))") }
        }
        let elapsed = clock.now - started

        // The wait status: low 7 bits are the terminating signal (0 when it exited), the next
        // byte the exit code. Killed by a signal reads as 128 + signal, as shells report it.
        let signal = status & 0x7F
        let exitCode = signal == 0 ? (status >> 8) & 0xFF : 128 + signal
        return MeasuredProcess(
            exitCode: exitCode,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            peakResidentBytes: Int(usage.ru_maxrss) * 1024,  // Linux reports kilobytes
            standardOutput: (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "",
            standardError: (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "")
    }

    /// Standard output parsed as one JSON object.
    func jsonReport() throws -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(standardOutput.utf8)) as? [String: Any] else {
            throw BenchmarkFailure("expected a JSON report, got: \(standardOutput.prefix(500)) \(standardError.prefix(500))")
        }
        return object
    }
}
