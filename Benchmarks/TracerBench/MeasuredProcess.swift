import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// User plus system CPU time of this process so far, all threads: on shared cores a figure that
/// other processes' load moves much less than wall time.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// A child process run to completion with its wall time and peak resident memory.
///
/// The peak comes from GNU time (`/usr/bin/time -f %M`), not from this process's own `wait4`:
/// Linux carries a process's peak RSS across `exec`, and a child spawned from this process starts
/// out as a copy (or, with `posix_spawn`, a share) of it, so `ru_maxrss` of a direct child is at
/// least this benchmark's own RSS (about 90 MB here, which hid a 36 MB `tracer check`). GNU time
/// forks the command from its own small process. Without it, `wait4` on a direct child gives an
/// upper bound, and `peakIsUpperBound` says so.
struct MeasuredProcess {
    let exitCode: Int32
    let seconds: Double
    /// The child's peak resident set, in bytes.
    let peakResidentBytes: Int
    /// True when the peak could only be read as `ru_maxrss` of a direct child (no GNU time).
    let peakIsUpperBound: Bool
    /// User plus system CPU time of the child and the descendants it waited for (`wait4`'s
    /// rusage; through GNU time that is the command's, plus GNU time's own few milliseconds).
    let cpuSeconds: Double
    let standardOutput: String
    let standardError: String

    /// Runs `executable` (an absolute path) with `arguments`; its output goes through files in
    /// `scratchDirectory` so that a large output cannot block it on a full pipe.
    static func run(_ executable: String, _ arguments: [String], scratchDirectory: String) throws -> MeasuredProcess {
        let outputPath = scratchDirectory + "/child-stdout"
        let errorPath = scratchDirectory + "/child-stderr"
        let peakPath = scratchDirectory + "/child-peak-kilobytes"
        let gnuTime = "/usr/bin/time"
        let timed = FileManager.default.isExecutableFile(atPath: gnuTime)
        // GNU time exits with the command's exit code, and writes the peak to its own file.
        let command = timed ? [gnuTime, "-f", "%M", "-o", peakPath, executable] + arguments : [executable] + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)

        let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }

        let clock = ContinuousClock()
        let started = clock.now
        var pid: pid_t = 0
        let spawnResult = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
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
        // Both report kilobytes. GNU time's file ends with the figure (after a note when the
        // command failed).
        let peakKilobytes = timed
            ? (try? String(contentsOfFile: peakPath, encoding: .utf8))?.split(whereSeparator: \.isWhitespace).last.flatMap { Int($0) }
            : Int(usage.ru_maxrss)
        guard let peakKilobytes else { throw BenchmarkFailure("\(gnuTime) reported no peak memory for \(executable)") }
        return MeasuredProcess(
            exitCode: exitCode,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            peakResidentBytes: peakKilobytes * 1024,
            peakIsUpperBound: !timed,
            cpuSeconds: Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6,
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
