import Foundation
import Logging
import Settings
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `node.metrics_listen`: the IPv4 address and port of the node's metrics endpoint. A port alone
/// listens on loopback, so that turning the endpoint on never opens a port to the network by
/// accident.
struct NodeMetricsListenAddress: Equatable, Sendable, CustomStringConvertible {
    static let defaultHost = "127.0.0.1"

    var host: String
    var port: UInt16

    init(host: String = defaultHost, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// "PORT" (on 127.0.0.1) or "HOST:PORT", HOST an IPv4 address or localhost; nil for anything else.
    init?(parsing text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let portText = parts.last, portText.allSatisfy({ ("0"..."9").contains($0) }),
              let port = UInt16(portText), port > 0 else { return nil }
        var host = parts.count == 2 ? String(parts[0]) : Self.defaultHost
        if host == "localhost" { host = Self.defaultHost }
        var parsed = in_addr()
        guard inet_pton(AF_INET, host, &parsed) == 1 else { return nil }
        self.init(host: host, port: port)
    }

    /// The setting's check: nil for good text, else the problem.
    static func problem(_ text: String) -> String? {
        guard NodeMetricsListenAddress(parsing: text) == nil else { return nil }
        return "must be a port from 1 to 65535 (on 127.0.0.1) or an IPv4 address and a port such as 127.0.0.1:9465, got \(text.quotedForMessage)"
    }

    var description: String { "\(host):\(port)" }
}

/// Why the metrics endpoint cannot listen: said when `tracer run` starts, so that a node never
/// runs without the endpoint its operator turned on.
struct NodeMetricsEndpointError: Error, CustomStringConvertible {
    var address: NodeMetricsListenAddress
    /// The system call that failed: socket, bind or listen.
    var operation: String
    var errno: Int32

    var description: String {
        let cannot = "The node's metrics endpoint cannot listen on \(address) (node.metrics_listen)"
        switch errno {
        case EADDRINUSE:
            return "\(cannot): another program already uses that port. Choose another port in node.metrics_listen, or stop the program that holds it (`ss -ltnp 'sport = :\(address.port)'` names it)."
        case EACCES:
            return "\(cannot): ports below 1024 need privileges the node does not have. Choose a port from 1024 up, such as 9465."
        case EADDRNOTAVAIL:
            return "\(cannot): \(address.host) is not an address of this machine. Use 127.0.0.1, or an address `ip -4 addr` lists."
        default:
            return "\(cannot): \(operation) failed (\(String(cString: strerror(errno)))). Choose another address or port in node.metrics_listen, or leave it unset to run without the endpoint."
        }
    }
}

/// The HTTP of the metrics endpoint, as a function of the bytes received: `GET /metrics` (or
/// HEAD) is answered with the exposition, any other path 404, any other method on /metrics 405,
/// anything that is not an HTTP/1 request head 400, and a head longer than
/// `maximumRequestSize` 431. Pure, so that tests give bytes and read the answer.
enum NodeMetricsHTTP {
    /// A Prometheus scrape's head is about 250 bytes; a head this long is not one.
    static let maximumRequestSize = 4096

    /// Prometheus's text format, as the server's metrics listener answers it.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    struct Answer: Equatable, Sendable {
        var status: Int
        var headers: [String] = []
        var body: [UInt8] = []
        /// False for HEAD: the length is said, the body not sent.
        var sendsBody = true

        static let reasons = [200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                              431: "Request Header Fields Too Large", 503: "Service Unavailable"]

        /// The whole response; every connection is closed after one.
        var bytes: [UInt8] {
            var head = "HTTP/1.1 \(status) \(Self.reasons[status] ?? "Error")\r\n"
            for header in headers { head += header + "\r\n" }
            head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
            return Array(head.utf8) + (sendsBody ? body : [])
        }

        static func plain(_ status: Int, _ text: String, headers: [String] = []) -> Answer {
            Answer(status: status, headers: ["Content-Type: text/plain; charset=utf-8"] + headers, body: Array((text + "\n").utf8))
        }
    }

    /// The answer to `received`, or nil while its head is incomplete and within the limit.
    /// `exposition`: the current metrics, nil before the node wrote them a first time.
    static func answer(to received: [UInt8], exposition: () -> [UInt8]?) -> Answer? {
        guard let headEnd = endOfHead(received) else {
            return received.count >= maximumRequestSize ? .plain(431, "request head too large") : nil
        }
        guard headEnd <= maximumRequestSize else { return .plain(431, "request head too large") }
        let lineEnd = received.firstIndex(of: UInt8(ascii: "\n")) ?? headEnd
        let line = String(decoding: received[..<lineEnd], as: UTF8.self).trimmingCharacters(in: CharacterSet(charactersIn: "\r"))
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/") else {
            return .plain(400, "not an HTTP/1 request")
        }
        let path = parts[1].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard path == "/metrics" else { return .plain(404, "not found: the node's metrics are at /metrics") }
        guard parts[0] == "GET" || parts[0] == "HEAD" else { return .plain(405, "only GET and HEAD", headers: ["Allow: GET, HEAD"]) }
        guard let body = exposition() else {
            return .plain(503, "the node has not written its metrics yet", headers: ["Retry-After: 1"])
        }
        return Answer(status: 200, headers: ["Content-Type: \(contentType)"], body: body, sendsBody: parts[0] == "GET")
    }

    /// The index just past the blank line that ends the head (CRLF CRLF, or bare LF LF), if received.
    private static func endOfHead(_ bytes: [UInt8]) -> Int? {
        let newline = UInt8(ascii: "\n"), carriageReturn = UInt8(ascii: "\r")
        var index = 0
        while index < bytes.count {
            if bytes[index] == newline {
                var next = index + 1
                if next < bytes.count, bytes[next] == carriageReturn { next += 1 }
                if next < bytes.count, bytes[next] == newline { return next + 1 }
            }
            index += 1
        }
        return nil
    }
}

/// The node's metrics endpoint (`node.metrics_listen`): answers `GET /metrics` with the same
/// exposition as `node.metrics_file`, the text the node last rendered (`publish(_:)`: at every
/// change of its status and every 60 s), so that a scrape costs no rendering and never waits for
/// the node.
///
/// One thread owns the listening socket and every connection, all non-blocking, in one `poll`
/// loop; nothing else touches a descriptor but `stop()`, which only wakes the thread through a
/// pipe. A hostile local client cannot wedge it: a connection must send its whole head (at most
/// `NodeMetricsHTTP.maximumRequestSize` bytes) and take its answer within `requestTimeout`, or is
/// closed; at most `maximumConnections` are open at once, and one more is closed as soon as it is
/// accepted.
final class NodeMetricsEndpoint: Sendable {
    static let defaultRequestTimeout: Duration = .seconds(5)
    static let defaultMaximumConnections = 8

    /// Where it listens; the port the kernel gave when asked for port 0 (tests).
    let address: NodeMetricsListenAddress
    private let requestTimeout: Duration
    private let maximumConnections: Int
    /// Told when the serving thread ends on its own (a `poll` that fails), which leaves the node
    /// without the endpoint its operator turned on.
    private let logger: Logger
    private let exposition = Mutex<[UInt8]?>(nil)
    private let wakeWriter: Int32
    /// True once `stop()` woke the thread or the thread ended; guards the wake pipe's write end,
    /// which the thread closes, so that `stop()` never writes to a descriptor number reused since.
    private let stopping = Mutex(false)

    /// Binds `address` and starts answering; throws when it cannot listen there.
    init(listeningOn address: NodeMetricsListenAddress, requestTimeout: Duration = defaultRequestTimeout,
         maximumConnections: Int = defaultMaximumConnections,
         logger: Logger = Logger(label: "tracer.node.metrics")) throws(NodeMetricsEndpointError)
    {
        let listener = try Self.listen(on: address)
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            let code = Glibc.errno
            close(listener.descriptor)
            throw NodeMetricsEndpointError(address: address, operation: "pipe", errno: code)
        }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        self.address = listener.address
        self.requestTimeout = requestTimeout
        self.maximumConnections = maximumConnections
        self.logger = logger
        wakeWriter = pipeEnds[1]
        let wakeReader = pipeEnds[0]
        let thread = Thread { [self] in serve(listener: listener.descriptor, wake: wakeReader) }
        thread.name = "metrics endpoint"
        thread.start()
    }

    /// The exposition scrapes get from now on.
    func publish(_ text: String) {
        exposition.withLock { $0 = Array(text.utf8) }
    }

    /// Stops listening and closes every connection (the thread does, soon after). The thread holds
    /// the endpoint until then.
    func stop() {
        stopping.withLock { stopping in
            guard !stopping else { return }
            stopping = true
            var byte: UInt8 = 1
            _ = write(wakeWriter, &byte, 1)
        }
    }

    private static func listen(on address: NodeMetricsListenAddress) throws(NodeMetricsEndpointError) -> (descriptor: Int32, address: NodeMetricsListenAddress) {
        func failure(_ operation: String) -> NodeMetricsEndpointError {
            NodeMetricsEndpointError(address: address, operation: operation, errno: Glibc.errno)
        }
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw failure("socket") }
        // A restarted node gets its port back while the last one's connections are in TIME_WAIT.
        var yes: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = address.port.bigEndian
        _ = inet_pton(AF_INET, address.host, &socketAddress.sin_addr)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        guard bound else {
            let error = failure("bind")
            close(descriptor)
            throw error
        }
        guard Glibc.listen(descriptor, 16) == 0 else {
            let error = failure("listen")
            close(descriptor)
            throw error
        }
        return (descriptor, NodeMetricsListenAddress(host: address.host, port: UInt16(bigEndian: socketAddress.sin_port)))
    }

    /// A connection being served: what it sent until its head is complete, then what is left to send.
    private struct Connection {
        var descriptor: Int32
        var deadline: ContinuousClock.Instant
        var received: [UInt8] = []
        var unsent: [UInt8]?
    }

    private func serve(listener: Int32, wake: Int32) {
        var connections: [Connection] = []
        var buffer = [UInt8](repeating: 0, count: NodeMetricsHTTP.maximumRequestSize)
        let clock = ContinuousClock()
        while true {
            var watched = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0), pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            watched += connections.map { pollfd(fd: $0.descriptor, events: Int16($0.unsent == nil ? POLLIN : POLLOUT), revents: 0) }
            let timeout: Int32 = connections.map(\.deadline).min().map { deadline in
                let left = clock.now.duration(to: deadline)
                return left <= .zero ? 0 : Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            } ?? -1
            if poll(&watched, nfds_t(watched.count), timeout) < 0, Glibc.errno != EINTR {
                let reason = String(cString: strerror(Glibc.errno))
                logger.error("The metrics endpoint on \(address) stopped: poll failed (\(reason)); scrapes go unanswered until the node restarts (node.metrics_file, if set, is still written)")
                break
            }
            if watched[0].revents != 0 { break }
            var open: [Connection] = []
            for (index, var connection) in connections.enumerated() {
                let events = watched[index + 2].revents
                if events != 0, serviceOne(&connection, buffer: &buffer) == .done || clock.now >= connection.deadline {
                    close(connection.descriptor)
                } else if events == 0, clock.now >= connection.deadline {
                    // Too slow to send its head or take its answer: a hostile or broken client.
                    close(connection.descriptor)
                } else {
                    open.append(connection)
                }
            }
            connections = open
            if watched[1].revents != 0 {
                while true {
                    // accept4 is not in Swift's Glibc; the listener is non-blocking, so this ends at EAGAIN.
                    let accepted = accept(listener, nil, nil)
                    guard accepted >= 0 else { break }
                    _ = fcntl(accepted, F_SETFD, FD_CLOEXEC)
                    _ = fcntl(accepted, F_SETFL, fcntl(accepted, F_GETFL) | O_NONBLOCK)
                    if connections.count >= maximumConnections {
                        close(accepted)
                    } else {
                        connections.append(Connection(descriptor: accepted, deadline: clock.now.advanced(by: requestTimeout)))
                    }
                }
            }
        }
        for connection in connections { close(connection.descriptor) }
        close(listener)
        stopping.withLock { stopping in
            stopping = true
            close(wake)
            close(wakeWriter)
        }
    }

    private enum Progress { case going, done }

    /// Reads what `connection` sent, or sends it what is left of its answer.
    private func serviceOne(_ connection: inout Connection, buffer: inout [UInt8]) -> Progress {
        if var unsent = connection.unsent {
            let sent = unsent.withUnsafeBytes { send(connection.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 { return Glibc.errno == EAGAIN || Glibc.errno == EINTR ? .going : .done }
            unsent.removeFirst(sent)
            connection.unsent = unsent
            if unsent.isEmpty {
                shutdown(connection.descriptor, Int32(SHUT_WR))
                return .done
            }
            return .going
        }
        let room = NodeMetricsHTTP.maximumRequestSize - connection.received.count + 1
        let count = buffer.withUnsafeMutableBytes { recv(connection.descriptor, $0.baseAddress, min(room, $0.count), 0) }
        if count < 0 { return Glibc.errno == EAGAIN || Glibc.errno == EINTR ? .going : .done }
        if count == 0 { return .done }
        connection.received += buffer[0..<count]
        if let answer = NodeMetricsHTTP.answer(to: connection.received, exposition: { exposition.withLock { $0 } }) {
            connection.unsent = answer.bytes
            // Most answers fit the socket's buffer at once.
            return serviceOne(&connection, buffer: &buffer)
        }
        return .going
    }
}
