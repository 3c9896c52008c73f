import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A one-line progress bar on standard error, shown only on a terminal and only once a download
/// has taken more than a second (a quick check stays quiet).
final class TerminalProgress: Sendable {
    private struct State {
        var started = Date()
        var shown = false
        var lastDrawn = Date.distantPast
    }

    private let label: String
    private let enabled: Bool
    private let state = Mutex(State())

    init(label: String) {
        self.label = label
        enabled = isatty(STDERR_FILENO) == 1
    }

    /// Called from the download's thread.
    func update(_ received: Int64, of total: Int64) {
        guard enabled else { return }
        let line: String? = state.withLock { state in
            let now = Date()
            guard now.timeIntervalSince(state.started) > 1, now.timeIntervalSince(state.lastDrawn) > 0.1 else { return nil }
            state.shown = true
            state.lastDrawn = now
            let fraction = total > 0 ? min(1, Double(received) / Double(total)) : 0
            let width = 30
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            return "\r\(label) [\(bar)] \(Int(fraction * 100))% \(Self.megabytes(received)) of \(Self.megabytes(total)) MB"
        }
        if let line { FileHandle.standardError.write(Data(line.utf8)) }
    }

    func finish() {
        let shown = state.withLock { $0.shown }
        if shown { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    private static func megabytes(_ bytes: Int64) -> String { String(format: "%.1f", Double(bytes) / 1_000_000) }
}
