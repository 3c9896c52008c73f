import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// systemd's notification protocol (sd_notify(3)), spoken directly rather than through
/// libsystemd, which the node would otherwise need only for this: one datagram of
/// newline-separated `NAME=value` lines to the AF_UNIX socket named by `$NOTIFY_SOCKET`, a file
/// system path or, with a leading "@", a name in the abstract namespace. systemd learns the
/// sender's pid from the kernel (SCM_CREDENTIALS), so with `NotifyAccess=main` only the node itself
/// is heard, never a child such as the `--on-exposure` command, which inherits the variables.
struct SystemdNotifier: Sendable {
    enum Failure: Error, Equatable, CustomStringConvertible {
        /// `$NOTIFY_SOCKET` names something other than a path or an abstract name (such as a
        /// `vsock:` address, which only a virtual machine's systemd uses), or one too long.
        case unsupportedAddress(String)
        case sendFailed(address: String, errno: Int32)

        var description: String {
            switch self {
            case .unsupportedAddress(let address):
                return "NOTIFY_SOCKET=\(address) is not a socket path or an abstract name (@NAME) of at most 107 bytes, so systemd cannot be told that the node is ready or alive; run the unit with Type=notify on a systemd that sets a path"
            case .sendFailed(let address, let code):
                return "could not notify systemd through \(address): \(String(cString: strerror(code)))"
            }
        }
    }

    /// `$NOTIFY_SOCKET` as given.
    let address: String
    /// `$WATCHDOG_USEC` when the watchdog is meant for this process: systemd expects a
    /// `WATCHDOG=1` within each such period.
    let watchdogTimeout: Duration?

    /// The notifier systemd asked for in `environment`, or nil when it asked for none
    /// (`NOTIFY_SOCKET` unset or empty: not run by systemd, or a unit of `Type=simple`), so that
    /// the node run by hand or by another supervisor sends nothing. A `WATCHDOG_PID` that is not
    /// `pid` means the watchdog is another process's (a parent that set it for itself).
    init?(environment: [String: String] = ProcessInfo.processInfo.environment, pid: Int32 = getpid()) {
        guard let address = environment["NOTIFY_SOCKET"], !address.isEmpty else { return nil }
        self.address = address
        let forThisProcess = environment["WATCHDOG_PID"].map { Int32($0) == pid } ?? true
        if forThisProcess, let text = environment["WATCHDOG_USEC"], let micro = Int64(text), micro > 0 {
            watchdogTimeout = .microseconds(micro)
        } else {
            watchdogTimeout = nil
        }
    }

    /// Sends `assignments` (such as "READY=1", "STATUS=running") in one datagram.
    func send(_ assignments: [String]) throws(Failure) {
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        // An abstract name has no terminating NUL: its length is part of the name.
        let abstract = address.hasPrefix("@")
        let name = abstract ? [0] + Array(address.utf8.dropFirst()) : Array(address.utf8)
        let capacity = MemoryLayout.size(ofValue: socketAddress.sun_path)
        guard address.hasPrefix("/") || abstract, name.count < capacity, name.count > 1 else {
            throw .unsupportedAddress(address)
        }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: name) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + name.count + (abstract ? 0 : 1))

        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .sendFailed(address: address, errno: errno) }
        defer { close(descriptor) }
        let message = Array(assignments.joined(separator: "\n").utf8)
        let sent = withUnsafePointer(to: &socketAddress) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                message.withUnsafeBytes { sendto(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), target, length) }
            }
        }
        guard sent == message.count else { throw .sendFailed(address: address, errno: sent < 0 ? errno : EMSGSIZE) }
    }
}
