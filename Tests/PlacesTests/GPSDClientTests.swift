import Foundation
import IDRotation
import Logging
@testable import Places
import Synchronization
import Testing
import TestTiers
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The gpsd client against a gpsd stand-in on loopback, in this process: it keeps retrying while
/// nothing listens, reads fixes once something does, drops the fix on a no-fix report and when the
/// connection goes, and comes back by itself.
@Suite(.tags(.integration)) struct GPSDClientTests {
    /// A listening socket on 127.0.0.1 whose accepted connections the test writes to by hand.
    final class StandIn: Sendable {
        let listener: Int32
        let port: Int

        init() throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.listener = listener
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
            }
            try #require(bound)
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        /// Bound but not listening: connections are refused until this.
        func listen() { _ = Glibc.listen(listener, 4) }

        /// Waits up to `seconds` for the client to connect; the connection's descriptor. Polls
        /// between short sleeps: a blocking poll would hold one of the few cooperative threads
        /// the client needs to connect (on 2 cores, with another test doing the same, none).
        func accept(within seconds: Int32) async -> Int32? {
            let deadline = ContinuousClock.now + .seconds(Int(seconds))
            while ContinuousClock.now < deadline {
                var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                if poll(&poller, 1, 0) > 0 {
                    let connection = Glibc.accept(listener, nil, nil)
                    return connection >= 0 ? connection : nil
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return nil
        }

        static func say(_ line: String, on connection: Int32) {
            let bytes = Array((line + "\n").utf8)
            _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }

        deinit { close(listener) }
    }

    @Test(.timeLimit(.minutes(1)))
    func retriesReadsFixesAndComesBackAfterAHangUp() async throws {
        let standIn = try StandIn()
        let board = PlaceBoard(name: nil)
        let log = LogCapture()
        let client = GPSDClient(host: "127.0.0.1", port: standIn.port, precisionMeters: 100, board: board, logger: log.logger)
        let running = Task { await client.run() }
        defer { running.cancel() }
        let cell = try #require(PlaceGrid.cell(latitude: 46.498293369, longitude: 7.567411672, precisionMeters: 100))

        // Refused at first (the client says so), and no position meanwhile; it retries after its back-off.
        #expect(await eventually { log.all.contains { $0.contains("cannot read positions from gpsd") } }, "no refusal was reported")
        #expect(board.current() == nil)
        standIn.listen()
        let first = try #require(await standIn.accept(within: 5), "the client did not retry within 5 s")
        var watch = [UInt8](repeating: 0, count: 256)
        let got = recv(first, &watch, watch.count, 0)
        #expect(String(decoding: watch.prefix(max(got, 0)), as: UTF8.self) == #"?WATCH={"enable":true,"json":true}"# + "\n")
        StandIn.say(#"{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}"#, on: first)
        StandIn.say(#"{"class":"TPV","device":"/dev/pts/1","mode":3,"lat":46.498293369,"lon":7.567411672}"#, on: first)
        #expect(await eventually { board.current()?.position == cell }, "no rounded fix on the board")
        StandIn.say(#"{"class":"TPV","device":"/dev/pts/1","mode":1}"#, on: first)
        #expect(await eventually { board.current() == nil }, "a no-fix report left the position")

        // A fix, then the connection goes: the fix goes with it, and the client comes back.
        StandIn.say(#"{"class":"TPV","mode":2,"lat":46.498293369,"lon":7.567411672}"#, on: first)
        #expect(await eventually { board.current()?.position == cell })
        close(first)
        #expect(await eventually { board.current() == nil }, "a hang-up left the position")
        let second = try #require(await standIn.accept(within: 5), "the client did not reconnect within 5 s")
        defer { close(second) }
        // Garbage and an overlong line first: ignored, and the next good line still counts.
        StandIn.say(String(repeating: "x", count: GPSDReport.maximumLineBytes + 100), on: second)
        StandIn.say("{\"class\":\"TPV\",\"mode\":3,\"lat\":\"north\"}", on: second)
        StandIn.say(#"{"class":"TPV","mode":3,"lat":46.498293369,"lon":7.567411672}"#, on: second)
        #expect(await eventually { board.current()?.position == cell }, "no fix after reconnecting")
        running.cancel()
    }

    /// `tracer doctor` and `tracer status` look at gpsd once: refused, a fix, no fix, or
    /// connected but silent.
    @Test(.timeLimit(.minutes(1)))
    func aProbeTellsUnreachableFixNoFixAndSilence() async throws {
        let standIn = try StandIn()
        let client = GPSDClient(host: "127.0.0.1", port: standIn.port, precisionMeters: 100, board: PlaceBoard(name: nil), logger: Logger(label: "test"))
        guard case .unreachable = await client.probe(within: .seconds(1)) else {
            Issue.record("a refused connection was not reported unreachable")
            return
        }
        standIn.listen()
        let cases: [(lines: [String], expected: GPSDClient.Probe)] = [
            ([#"{"class":"VERSION","release":"3.22"}"#, #"{"class":"TPV","mode":3,"lat":46.498293369,"lon":7.567411672}"#], .fix),
            ([#"{"class":"TPV","mode":1}"#], .noFix),
            ([#"{"class":"VERSION","release":"3.22"}"#], .noReport),
        ]
        for (lines, expected) in cases {
            let probing = Task { await client.probe(within: .milliseconds(700)) }
            let connection = try #require(await standIn.accept(within: 5), "the probe did not connect")
            for line in lines { StandIn.say(line, on: connection) }
            #expect(await probing.value == expected, "after \(lines)")
            close(connection)
        }
    }
}
