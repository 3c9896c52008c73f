import BLEHost
import TracerCore

/// One end of an in-memory ATT channel; what one end sends, the other receives, in order.
package final class InMemoryFixedChannel: L2CAPFixedChannel {
    package struct ClosedError: Error {}

    package let incoming: AsyncStream<[UInt8]>
    private let ownInbox: AsyncStream<[UInt8]>.Continuation
    private let peerInbox: AsyncStream<[UInt8]>.Continuation

    private init(incoming: AsyncStream<[UInt8]>, ownInbox: AsyncStream<[UInt8]>.Continuation, peerInbox: AsyncStream<[UInt8]>.Continuation) {
        self.incoming = incoming
        self.ownInbox = ownInbox
        self.peerInbox = peerInbox
    }

    package static func pair() -> (InMemoryFixedChannel, InMemoryFixedChannel) {
        let (streamA, inboxA) = AsyncStream.makeStream(of: [UInt8].self)
        let (streamB, inboxB) = AsyncStream.makeStream(of: [UInt8].self)
        return (InMemoryFixedChannel(incoming: streamA, ownInbox: inboxA, peerInbox: inboxB),
                InMemoryFixedChannel(incoming: streamB, ownInbox: inboxB, peerInbox: inboxA))
    }

    package func send(_ payload: [UInt8]) async throws {
        guard case .enqueued = peerInbox.yield(payload) else { throw ClosedError() }
    }

    /// Models a disconnection: both directions end.
    package func close() {
        ownInbox.finish()
        peerInbox.finish()
    }
}

/// A test-driven ATT peer speaking raw bytes, to provoke a bearer with exact or hostile PDUs.
package actor RawATTPeer {
    package let channel: InMemoryFixedChannel
    private var received: [[UInt8]] = []
    // The caller of `next` waiting for a PDU, woken by the PDU or by its timeout, whichever comes first.
    private var waiter: (id: UInt64, continuation: CheckedContinuation<[UInt8]?, Never>)?
    private var waiterCount: UInt64 = 0

    private init(channel: InMemoryFixedChannel) { self.channel = channel }

    package static func attached(to channel: InMemoryFixedChannel) -> RawATTPeer {
        let peer = RawATTPeer(channel: channel)
        Task {
            for await payload in channel.incoming { await peer.store(payload) }
        }
        return peer
    }

    private func store(_ payload: [UInt8]) {
        if let waiter {
            self.waiter = nil
            waiter.continuation.resume(returning: payload)
        } else {
            received.append(payload)
        }
    }

    private func expire(_ id: UInt64) {
        guard let waiter, waiter.id == id else { return }
        self.waiter = nil
        waiter.continuation.resume(returning: nil)
    }

    package func send(_ bytes: [UInt8]) async throws { try await channel.send(bytes) }

    /// The next PDU the bearer sent, as soon as it comes, or nil if none came within `timeout`.
    package func next(timeout: Duration = .seconds(2)) async -> [UInt8]? {
        if !received.isEmpty { return received.removeFirst() }
        waiterCount += 1
        let id = waiterCount
        let expiry = Task { [weak self] in
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            await self?.expire(id)
        }
        defer { expiry.cancel() }
        return await withCheckedContinuation { waiter = (id, $0) }
    }

    /// Sends `request` and returns the single PDU that answers it.
    package func exchange(_ request: [UInt8]) async throws -> [UInt8]? {
        try await send(request)
        return await next()
    }

    package var pendingCount: Int { received.count }
}

/// Collects values delivered to application callbacks.
package actor CallbackRecorder<Value: Sendable> {
    package private(set) var values: [Value] = []
    package init() {}
    package func record(_ value: Value) { values.append(value) }
}


/// "02 17 00" -> [0x02, 0x17, 0x00]; whitespace is ignored.
package func bytesFromHex(_ text: String) -> [UInt8] {
    let digits = text.filter { !$0.isWhitespace }
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        bytes.append(UInt8(digits[index..<next], radix: 16) ?? 0)
        index = next
    }
    return bytes
}
