import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An `HCITransport` over one open file descriptor (TCP or Unix socket, serial TTY, HCI user channel socket).
///
/// A dedicated reader thread blocks in `poll` on the descriptor and on a wake-up pipe; `close()` writes to the
/// pipe so the thread stops without racing a reused descriptor number: only the reader thread closes the
/// descriptor, and it does so holding the write lock after marking the transport closed.
public final class FileDescriptorTransport: HCITransport {
    public let incoming: AsyncThrowingStream<HCIPacket, any Error>
    public let name: String

    private let descriptor: Int32
    private let wakeReader: Int32
    private let wakeWriter: Int32
    private let isSocket: Bool
    private let isDatagram: Bool
    /// Guards every use of `descriptor` for writing and its closing: `true` once closed.
    private let writeSide = Mutex<Bool>(false)
    /// Why the reader stopped, once it has: what a later `send` reports.
    private let endReason = Mutex<HCITransportError?>(nil)
    private let continuation: AsyncThrowingStream<HCIPacket, any Error>.Continuation

    /// Takes ownership of `descriptor`; call `close()` to release it and stop the reader thread.
    /// `isDatagram`: each read returns exactly one H4 packet (the HCI user channel), so a malformed packet is
    /// skipped instead of desynchronising the stream for good.
    public init(descriptor: Int32, name: String, isSocket: Bool, isDatagram: Bool = false) throws(HCITransportError) {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw .ioFailed(operation: "pipe", errno: code)
        }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        self.descriptor = descriptor
        self.wakeReader = pipeEnds[0]
        self.wakeWriter = pipeEnds[1]
        self.isSocket = isSocket
        self.isDatagram = isDatagram
        self.name = name
        (incoming, continuation) = AsyncThrowingStream.makeStream(of: HCIPacket.self, throwing: (any Error).self)
        let thread = Thread { [self] in readLoop() }
        thread.name = "HCI reader \(name)"
        thread.start()
    }

    public func send(_ packet: HCIPacket) async throws(HCITransportError) {
        let bytes = packet.h4Encoded
        let failure: HCITransportError? = writeSide.withLock { isClosed in
            // After the reader saw the link end, say why rather than a bare "closed".
            if isClosed { return endReason.withLock { $0 } ?? .closed }
            return writeAll(bytes)
        }
        if let failure { throw failure }
    }

    public func close() async {
        // Under the lock, so the pipe cannot have been closed (and its number reused) by the reader meanwhile.
        writeSide.withLock { isClosed in
            guard !isClosed else { return }
            var byte: UInt8 = 1
            _ = Glibc.write(wakeWriter, &byte, 1)
        }
    }

    private func writeAll(_ bytes: [UInt8]) -> HCITransportError? {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                let start = base.advanced(by: offset)
                // MSG_NOSIGNAL: a peer that went away must surface as EPIPE, not kill the process with SIGPIPE.
                return isSocket
                    ? Glibc.send(descriptor, start, buffer.count - offset, Int32(MSG_NOSIGNAL))
                    : Glibc.write(descriptor, start, buffer.count - offset)
            }
            if written < 0 {
                let code = errno
                if code == EINTR || code == EAGAIN { continue }
                if code == EPIPE || code == ECONNRESET { return .disconnected(reason: describeErrno(code)) }
                return .ioFailed(operation: "write", errno: code)
            }
            offset += written
        }
        return nil
    }

    private func readLoop() {
        var parser = H4FrameParser()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var ending: HCITransportError?
        loop: while true {
            var watched = [
                pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&watched, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                ending = .ioFailed(operation: "poll", errno: errno)
                break
            }
            if watched[1].revents != 0 { break }  // close() was called
            guard watched[0].revents != 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 {
                ending = .disconnected(reason: "\(name): end of stream")
                break
            }
            if count < 0 {
                let code = errno
                if code == EINTR || code == EAGAIN { continue }
                ending = code == ECONNRESET || code == ENODEV || code == EIO
                    ? .disconnected(reason: "\(name): \(describeErrno(code))")
                    : .ioFailed(operation: "read", errno: code)
                break
            }
            // A datagram that ended mid-packet or held garbage must not affect the next one.
            if isDatagram { parser = H4FrameParser() }
            do {
                try parser.append(buffer[0..<count]) { continuation.yield($0) }
            } catch {
                if isDatagram { continue }
                ending = .framing(error)
                break loop
            }
        }
        endReason.withLock { $0 = ending }
        writeSide.withLock { isClosed in
            isClosed = true
            Glibc.close(descriptor)
            Glibc.close(wakeReader)
            Glibc.close(wakeWriter)
        }
        if let ending { continuation.finish(throwing: ending) } else { continuation.finish() }
    }
}
