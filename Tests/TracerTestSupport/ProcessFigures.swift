import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Figures read from /proc for a child process (tests and benchmarks).
public enum ProcessFigures {
    /// User and system CPU seconds `pid` has used (/proc/PID/stat).
    public static func cpuSeconds(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")")
        else { return 0 }
        // Fields after the command name: state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Every process below `pid` (children, their children …), from the parent pid in /proc/*/stat.
    public static func descendants(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var parents: [Int32: Int32] = [:]
        for entry in entries {
            guard let child = Int32(entry),
                  let text = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = text.lastIndex(of: ")")
            else { continue }
            // After the name: state, then the parent pid.
            let fields = text[text.index(after: close)...].split(separator: " ")
            if fields.count > 1, let parent = Int32(fields[1]) { parents[child] = parent }
        }
        var found: [Int32] = []
        var frontier = [pid]
        while let next = frontier.popLast() {
            let children = parents.filter { $0.value == next }.map(\.key)
            found += children
            frontier += children
        }
        return found
    }

    /// The 1-, 5- and 15-minute load averages, as /proc/loadavg gives them.
    public static func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// The most resident memory `pid` has had (VmHWM), in bytes.
    public static func peakResidentBytes(_ pid: Int32) -> Int { statusKilobytes(pid, "VmHWM") * 1024 }

    /// Resident memory now (VmRSS), in bytes.
    public static func residentBytes(_ pid: Int32) -> Int { statusKilobytes(pid, "VmRSS") * 1024 }

    /// A field of /proc/PID/status given in kB; 0 when the process or the field is gone.
    private static func statusKilobytes(_ pid: Int32, _ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes
    }

    /// Proportional and private resident memory in kB, from /proc/PID/smaps_rollup.
    public static func memoryShares(_ pid: Int32) -> (pss: Double, private: Double) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return (0, 0) }
        func field(_ name: String) -> Double {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return Double(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        return (field("Pss"), field("Private_Clean") + field("Private_Dirty"))
    }

    /// A SQLite database's bytes on disk, its write-ahead log included.
    public static func storeBytes(_ path: String) -> Int {
        [path, path + "-wal"].reduce(0) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0)
        }
    }
}
