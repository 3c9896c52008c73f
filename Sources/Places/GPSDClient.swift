import Foundation
import IDRotation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Reads positions from gpsd over its JSON protocol (`?WATCH={"enable":true,"json":true}`, TPV
/// reports) and posts each one, rounded to the grid, to a `PlaceBoard`.
///
/// Its own actor, on a non-blocking socket polled between short sleeps: it never holds one of the
/// few cooperative threads (the exchange runs on them) waiting for gpsd. When gpsd is not there or
/// goes away it retries with back-off (1 s doubling to 30 s), and the board has no fix meanwhile.
/// Logs say whether gpsd is reachable and whether it has a fix, never where the node is.
public actor GPSDClient {
    public static let defaultHost = "127.0.0.1"
    public static let defaultPort = 2947
    static let watchCommand = Array(#"?WATCH={"enable":true,"json":true}"#.utf8) + [UInt8(ascii: "\n")]
    static let pollPause: Duration = .milliseconds(200)
    static let connectTimeout: Duration = .seconds(5)
    static let firstRetry: Duration = .seconds(1)
    static let longestRetry: Duration = .seconds(30)

    private let host: String
    private let port: Int
    private let precisionMeters: Int
    private let board: PlaceBoard
    private let logger: Logger
    private var hadFix = false

    public init(host: String, port: Int, precisionMeters: Int, board: PlaceBoard, logger: Logger) {
        self.host = host
        self.port = port
        self.precisionMeters = precisionMeters
        self.board = board
        self.logger = logger
    }

    private var endpoint: String { "\(host):\(port)" }

    /// Connects, reads and reconnects until the task is cancelled.
    public func run() async {
        var retry = Self.firstRetry
        var failuresInARow = 0
        while !Task.isCancelled {
            switch await session() {
            case .heardFromGPSD:
                retry = Self.firstRetry
                failuresInARow = 0
                logger.warning("gpsd at \(endpoint) closed the connection; no position until it is back (retrying)")
            case .failed(let reason):
                failuresInARow += 1
                if failuresInARow == 1 {
                    logger.warning("cannot read positions from gpsd at \(endpoint) (\(reason)); encounters get no position until it answers (retrying, place.gpsd_host, place.gpsd_port)")
                } else {
                    logger.debug("gpsd still unreachable", metadata: ["endpoint": "\(endpoint)", "reason": "\(reason)"])
                }
            case .cancelled:
                break
            }
            noteFix(nil)
            try? await Task.sleep(for: retry)
            retry = min(retry * 2, Self.longestRetry)
        }
    }

    enum SessionEnd {
        case heardFromGPSD
        case failed(String)
        case cancelled
    }

    private func session() async -> SessionEnd {
        let descriptor: Int32
        switch await connect() {
        case .success(let opened): descriptor = opened
        case .failure(let failure): return .failed(failure.reason)
        }
        defer { close(descriptor) }
        let sent = Self.watchCommand.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == Self.watchCommand.count else { return .failed("could not send WATCH: \(Self.errorText())") }
        var splitter = LineSplitter()
        var heard = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !Task.isCancelled {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                if !heard {
                    heard = true
                    logger.notice("reading positions from gpsd", metadata: ["endpoint": "\(endpoint)"])
                }
                for line in splitter.append(buffer[0..<count]) { handle(GPSDReport(line: line)) }
            } else if count == 0 {
                return heard ? .heardFromGPSD : .failed("it closed the connection at once")
            } else if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                try? await Task.sleep(for: Self.pollPause)
            } else {
                return heard ? .heardFromGPSD : .failed(Self.errorText())
            }
        }
        return .cancelled
    }

    private func handle(_ report: GPSDReport) {
        switch report {
        case .fix(let latitude, let longitude):
            noteFix(PlaceGrid.cell(latitude: latitude, longitude: longitude, precisionMeters: precisionMeters))
        case .noFix:
            noteFix(nil)
        case .ignored:
            break
        }
    }

    private func noteFix(_ position: Place.Position?) {
        board.record(position)
        let hasFix = position != nil
        if hasFix != hadFix {
            logger.info(hasFix ? "gpsd has a fix: encounters get a rounded position" : "gpsd has no fix: encounters get no position")
            hadFix = hasFix
        }
    }

    struct ConnectFailure: Error { var reason: String }

    /// A non-blocking TCP connection to gpsd, waited for between short sleeps.
    private func connect() async -> Result<Int32, ConnectFailure> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            return .failure(ConnectFailure(reason: "cannot resolve \(host): " + String(cString: gai_strerror(status))))
        }
        defer { freeaddrinfo(found) }
        let descriptor = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .failure(ConnectFailure(reason: Self.errorText())) }
        if Glibc.connect(descriptor, first.pointee.ai_addr, first.pointee.ai_addrlen) != 0 && errno != EINPROGRESS {
            let reason = Self.errorText()
            close(descriptor)
            return .failure(ConnectFailure(reason: reason))
        }
        let deadline = ContinuousClock.now + Self.connectTimeout
        while !Task.isCancelled && ContinuousClock.now < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            if poll(&poller, 1, 0) > 0 {
                var socketError: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &socketError, &length)
                if socketError == 0 { return .success(descriptor) }
                close(descriptor)
                return .failure(ConnectFailure(reason: String(cString: strerror(socketError))))
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        close(descriptor)
        return .failure(ConnectFailure(reason: "no answer within \(Self.connectTimeout)"))
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }

    /// What one look at gpsd found (`tracer doctor`); never the position itself.
    public enum Probe: Sendable, Equatable {
        case unreachable(String)
        /// Connected, but no position report came within the wait (no receiver attached?).
        case noReport
        case noFix
        case fix
    }

    /// Connects once, asks for reports and waits up to `wait` for one that says whether gpsd
    /// has a fix. Posts nothing to the board.
    public func probe(within wait: Duration) async -> Probe {
        let descriptor: Int32
        switch await connect() {
        case .success(let opened): descriptor = opened
        case .failure(let failure): return .unreachable(failure.reason)
        }
        defer { close(descriptor) }
        let sent = Self.watchCommand.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == Self.watchCommand.count else { return .unreachable("could not send WATCH: \(Self.errorText())") }
        var splitter = LineSplitter()
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + wait
        while !Task.isCancelled && ContinuousClock.now < deadline {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                for line in splitter.append(buffer[0..<count]) {
                    switch GPSDReport(line: line) {
                    case .fix: return .fix
                    case .noFix: return .noFix
                    case .ignored: continue
                    }
                }
            } else if count == 0 {
                return .unreachable("it closed the connection")
            } else if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                try? await Task.sleep(for: .milliseconds(50))
            } else {
                return .unreachable(Self.errorText())
            }
        }
        return .noReport
    }
}
