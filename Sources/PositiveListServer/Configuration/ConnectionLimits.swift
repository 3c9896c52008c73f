import Foundation

/// How many connections the server holds at once: in all, and from one client address.
///
/// Every connection costs a file descriptor, and so does every file the server opens to answer,
/// the database, the publisher's files and the runtime's own. A server that lets connections
/// take its last descriptor fails in all of those (published files answered 404 before they
/// were answered 503, `/healthz` timing out), and then dies: libdispatch's worker monitor on
/// Linux opens /proc/TID/stat for each worker thread every second and, when that open fails
/// (EMFILE), stops the process with DISPATCH_CLIENT_CRASH, "workq: registered worker exited
/// prematurely", a SIGILL (src/event/workqueue.c; seen under gdb at a37380a). So connections
/// stop well below the descriptor limit, leaving a reserve for everything else.
public struct ConnectionLimits: Sendable, Equatable {
    /// Connections open at once, from all clients together.
    public var total: Int
    /// Connections open at once from one client address (trusted proxies excepted).
    public var perAddress: Int

    public init(total: Int, perAddress: Int) {
        self.total = total
        self.perAddress = perAddress
    }

    /// The fewest descriptors kept out of the connections' reach: the database, the published
    /// files being served and written, the log, and the runtime's own.
    public static let minimumReserve = 64

    /// The descriptors kept for everything but connections, for a process allowed `descriptorLimit`.
    public static func reserve(descriptorLimit: Int) -> Int {
        max(minimumReserve, descriptorLimit / 8)
    }

    /// The limits for a process allowed `descriptorLimit` descriptors: `configuredTotal` and
    /// `configuredPerAddress` when the operator set them, else derived from the limit.
    /// Throws when a configured total leaves the reserve too small.
    public static func resolve(
        descriptorLimit: Int, configuredTotal: Int?, configuredPerAddress: Int?
    ) throws(ConnectionLimitError) -> ConnectionLimits {
        let available = descriptorLimit - reserve(descriptorLimit: descriptorLimit)
        guard available >= 16 else { throw .descriptorLimitTooLow(descriptorLimit: descriptorLimit) }
        let total = configuredTotal ?? available
        guard total <= available else {
            throw .totalAboveDescriptorLimit(total: total, descriptorLimit: descriptorLimit, available: available)
        }
        // One client (or one NAT) gets a sixteenth of the total, within 8...256: a node uploads
        // on one connection and a health authority's tool on a few.
        let perAddress = configuredPerAddress ?? min(256, max(8, total / 16))
        return ConnectionLimits(total: total, perAddress: min(perAddress, total))
    }

    /// The soft `RLIMIT_NOFILE` of this process (what `ulimit -n` and systemd's `LimitNOFILE` set).
    public static func currentDescriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1_024 }
        // RLIM_INFINITY is all bits set.
        return limit.rlim_cur == rlim_t.max ? Int(Int32.max) : Int(clamping: limit.rlim_cur)
    }
}

public enum ConnectionLimitError: Error, Sendable, Equatable, CustomStringConvertible {
    case descriptorLimitTooLow(descriptorLimit: Int)
    case totalAboveDescriptorLimit(total: Int, descriptorLimit: Int, available: Int)

    public var description: String {
        switch self {
        case .descriptorLimitTooLow(let limit):
            return "The server may open only \(limit) files (ulimit -n); raise it (LimitNOFILE= in the systemd unit, or ulimit -n 65536) and start again."
        case .totalAboveDescriptorLimit(let total, let limit, let available):
            return "maxConnections is \(total), but with a limit of \(limit) open files (ulimit -n) at most \(available) connections leave enough descriptors in reserve; lower maxConnections or raise the limit (LimitNOFILE= in the systemd unit)."
        }
    }
}
