import Foundation
import TestTiers
#if canImport(Glibc)
import Glibc
#endif

/// TCP ports on 127.0.0.1, for the servers that tests and benchmarks start as child processes
/// (tracer-server, nginx) and then talk to.
public enum LoopbackPort {
    /// A TCP port free on 127.0.0.1 right now: the one the kernel picks for a socket bound to
    /// port 0. Another process may take it before the caller binds it, which is rare enough here.
    public static func free() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = Self.address(0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else { throw HarnessFailure(description: "cannot find a free port on 127.0.0.1") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// True when something accepts connections on 127.0.0.1:`port` right now.
    public static func isListening(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        return connectSocket(descriptor, to: port)
    }

    /// Waits until something accepts connections on the port, or throws after `timeout`, or as
    /// soon as `process` (the server expected to listen) has exited.
    public static func waitUntilListening(_ port: Int, timeout: Duration = .seconds(10), orExit process: Process? = nil) async throws {
        _ = await eventually(timeout: timeout, every: .milliseconds(50)) {
            (process.map { !$0.isRunning } ?? false) || isListening(port)
        }
        if let process, !process.isRunning {
            throw HarnessFailure(description: "the process exited (status \(process.terminationStatus)) before listening on \(port)")
        }
        if isListening(port) { return }
        throw HarnessFailure(description: "nothing listened on 127.0.0.1:\(port) within \(timeout)")
    }

    /// Connects the TCP socket `descriptor` to 127.0.0.1:`port`; true when that succeeded.
    public static func connectSocket(_ descriptor: Int32, to port: Int) -> Bool {
        var address = Self.address(port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// Sends all of `text` on the connected socket `descriptor`; false once the peer has closed
    /// the connection (or the send timed out).
    public static func send(_ text: String, on descriptor: Int32) -> Bool {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            // MSG_NOSIGNAL: a write after the peer closed gives EPIPE, not a SIGPIPE that ends the process.
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    private static func address(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }
}
