import Foundation
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The POSIX transport over real descriptors: a socket pair and a Unix socket opened by spec.
@Suite(.tags(.unit)) struct FileDescriptorTransportTests {
    func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { return }
            offset += written
        }
    }

    func readExactly(_ descriptor: Int32, count: Int) -> [UInt8] {
        var collected: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while collected.count < count {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, min($0.count, count - collected.count)) }
            guard got > 0 else { break }
            collected += buffer[0..<got]
        }
        return collected
    }

    func socketPair() throws -> (Int32, Int32) {
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        return (ends[0], ends[1])
    }

    @Test func framesChunkedBytesAndReportsPeerCloseAsTypedDrop() async throws {
        let (local, remote) = try socketPair()
        let transport = try FileDescriptorTransport(descriptor: local, name: "socketpair", isSocket: true)
        let stream = Reference.readLocalCommandsComplete + Reference.attMTURequestFromController + Reference.resetComplete
        // Split mid-header and mid-payload; pacing: the pauses make each part a read of its own.
        writeAll(remote, Array(stream[0..<2]))
        try await Task.sleep(for: .milliseconds(20))
        writeAll(remote, Array(stream[2..<40]))
        try await Task.sleep(for: .milliseconds(20))
        writeAll(remote, Array(stream[40...]))
        Glibc.close(remote)

        var received: [HCIPacket] = []
        do {
            for try await packet in transport.incoming { received.append(packet) }
            Issue.record("stream ended without an error")
        } catch let error as HCITransportError {
            guard case .disconnected = error else {
                Issue.record("expected disconnected, got \(error)")
                return
            }
        }
        #expect(received.map(\.h4Encoded) == [Reference.readLocalCommandsComplete, Reference.attMTURequestFromController, Reference.resetComplete])
        // A send after the peer left says why the link ended, not just that it is closed.
        await #expect(throws: HCITransportError.disconnected(reason: "socketpair: end of stream")) {
            try await transport.send(Reset().packet)
        }
    }

    @Test func sendWritesH4AndCloseEndsTheStreamQuietly() async throws {
        let (local, remote) = try socketPair()
        defer { Glibc.close(remote) }
        let transport = try FileDescriptorTransport(descriptor: local, name: "socketpair", isSocket: true)
        try await transport.send(Reset().packet)
        try await transport.send(ACLDataPacket(connectionHandle: 1, packetBoundary: .firstNonFlushable, data: hex("03 00 04 00 03 17 00")).packet)
        #expect(readExactly(remote, count: 16) == Reference.resetCommand + Reference.attMTUResponseFromHost)
        await transport.close()
        var count = 0
        for try await _ in transport.incoming { count += 1 }
        #expect(count == 0)
        await transport.close()  // idempotent
    }

    @Test func garbageTypeByteIsTypedFramingError() async throws {
        let (local, remote) = try socketPair()
        defer { Glibc.close(remote) }
        let transport = try FileDescriptorTransport(descriptor: local, name: "socketpair", isSocket: true)
        writeAll(remote, Reference.resetComplete + [0x09, 0x00])
        var received = 0
        do {
            for try await _ in transport.incoming { received += 1 }
        } catch let error as HCITransportError {
            #expect(error == .framing(.unknownPacketType(0x09, streamOffset: 7)))
        }
        #expect(received == 1)
    }

    @Test func datagramModeSkipsMalformedPacketsLikeTheUserChannel() async throws {
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &ends) == 0)
        defer { Glibc.close(ends[1]) }
        let transport = try FileDescriptorTransport(descriptor: ends[0], name: "seqpacket", isSocket: true, isDatagram: true)
        writeAll(ends[1], [0x09, 0x00])                                // unknown type
        writeAll(ends[1], Array(Reference.readBDADDRComplete.prefix(5)))  // truncated
        writeAll(ends[1], Reference.resetComplete)
        var iterator = transport.incoming.makeAsyncIterator()
        #expect(try await iterator.next()?.h4Encoded == Reference.resetComplete)
        await transport.close()
    }

    @Test func unixSocketSpec() async throws {
        let path = "/tmp/tracer-hci-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        unlink(path)
        defer { unlink(path) }
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { Glibc.close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(listener, 1) == 0)

        let transport = try openHCITransport(TransportSpec(parsing: "unix:\(path)"))
        let accepted = accept(listener, nil, nil)
        try #require(accepted >= 0)
        defer { Glibc.close(accepted) }
        try await transport.send(Reset().packet)
        #expect(readExactly(accepted, count: 4) == Reference.resetCommand)
        writeAll(accepted, Reference.resetComplete)
        var iterator = transport.incoming.makeAsyncIterator()
        #expect(try await iterator.next()?.h4Encoded == Reference.resetComplete)
        await transport.close()
    }

    @Test func missingUnixSocketFailsToOpen() {
        #expect(throws: HCITransportError.self) { try openHCITransport(.unix(path: "/tmp/does-not-exist-\(getpid()).sock")) }
    }

    @Test func serialSpecOnNonTerminalExplainsWhy() {
        // No pseudo-terminal API is importable here without _XOPEN_SOURCE, so only the refusal path is exercised.
        do {
            _ = try openHCITransport(TransportSpec(parsing: "serial:/dev/null"))
            Issue.record("/dev/null accepted as a serial port")
        } catch {
            #expect("\(error)".contains("is not a terminal"))
        }
        #expect(throws: HCITransportError.self) { try openHCITransport(.serial(device: "/dev/does-not-exist", baudRate: 1_000_000)) }
    }
}
