import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One TCP connection to 127.0.0.1 driven byte by byte, for what HTTP clients will not do:
/// malformed framing, a head sent a byte at a time, many requests released at one instant,
/// a client that stays silent (the server's tests, and the node's metrics endpoint's).
/// Reads never block a thread (the server under test shares the process's few), they poll.
public final class RawConnection: Sendable {
    public let descriptor: Int32

    public struct Response: Sendable {
        public var text: String

        public init(text: String) { self.text = text }

        /// 0 when nothing that looks like a status line arrived.
        public var status: Int {
            let parts = text.split(separator: " ", maxSplits: 2)
            return parts.count >= 2 && parts[0].hasPrefix("HTTP/1.") ? Int(parts[1]) ?? 0 : 0
        }
        public var head: String { text.components(separatedBy: "\r\n\r\n").first ?? "" }
        public var body: String { text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? "" }

        /// A header's value (name compared without case), or nil.
        public func header(_ name: String) -> String? {
            for line in head.components(separatedBy: "\r\n").dropFirst() {
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() { return parts[1].trimmingCharacters(in: .whitespaces) }
            }
            return nil
        }

        /// The `error` code of a JSON error body.
        public var apiError: String? {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: String])?["error"]
        }
    }

    public init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard LoopbackPort.connectSocket(descriptor, to: port) else {
            Glibc.close(descriptor)
            throw HarnessFailure(description: "cannot connect to 127.0.0.1:\(port)")
        }
    }

    /// A connection from `source`, another loopback address (127.0.0.0/8), so that one test
    /// can be many clients to the server.
    public init(port: Int, from source: String) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard bound, LoopbackPort.connectSocket(descriptor, to: port) else {
            Glibc.close(descriptor)
            throw HarnessFailure(description: "cannot connect from \(source) to 127.0.0.1:\(port)")
        }
    }

    deinit { Glibc.close(descriptor) }

    /// Sends all of `text`; false once the server has closed the connection.
    @discardableResult
    public func send(_ text: String) -> Bool { LoopbackPort.send(text, on: descriptor) }

    /// Ends the connection as a client that leaves does.
    public func leave() { shutdown(descriptor, Int32(SHUT_RDWR)) }

    /// One response: its head, and as much body as its Content-Length announces (or what came
    /// before the server closed). Throws when nothing complete came within `timeout`.
    public func receiveResponse(timeout: Duration = .seconds(15)) async throws -> Response {
        let deadline = ContinuousClock.now + timeout
        var received: [UInt8] = []
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n") {
                let response = Response(text: text)
                let announced = response.header("content-length").flatMap(Int.init) ?? 0
                if text[end.upperBound...].utf8.count >= announced { return response }
            }
            switch readAvailable() {
            case .bytes(let bytes): received += bytes
            case .closed:
                guard !received.isEmpty else { throw HarnessFailure(description: "the server closed the connection without answering") }
                return Response(text: String(decoding: received, as: UTF8.self))
            case .nothingYet:
                guard ContinuousClock.now < deadline else {
                    throw HarnessFailure(description: "no whole response within \(timeout); got \(received.count) bytes: \(text.prefix(200))")
                }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    /// True once the server has closed the connection (whatever it sent before is skipped);
    /// false if it is still open after `timeout`.
    public func waitForClose(within timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if case .closed = readAvailable() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Everything until the server closes the connection, and how long that took; if no byte
    /// comes for `idleTimeout`, what came until then (so that a test never hangs).
    public func readToEnd(idleTimeout: Duration = .seconds(10)) async -> (text: String, closedAfter: Duration) {
        let start = ContinuousClock.now
        var lastByte = start
        var received: [UInt8] = []
        reading: while true {
            switch readAvailable() {
            case .bytes(let bytes):
                received += bytes
                lastByte = .now
            case .closed: break reading
            case .nothingYet:
                guard ContinuousClock.now - lastByte < idleTimeout else { break reading }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        return (String(decoding: received, as: UTF8.self), ContinuousClock.now - start)
    }

    private enum ReadOutcome {
        case bytes([UInt8])
        case closed
        case nothingYet
    }

    private func readAvailable() -> ReadOutcome {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count > 0 { return .bytes(Array(buffer[0..<count])) }
        if count == 0 { return .closed }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? .nothingYet : .closed
    }
}
