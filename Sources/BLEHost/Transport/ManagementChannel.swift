import CBlueZ
#if canImport(Glibc)
import Glibc
#endif

/// The kernel's Bluetooth management interface (`HCI_CHANNEL_CONTROL`), through which bluetoothd
/// and btmgmt power adapters on and off. The node uses it only to power off an adapter it is
/// told to take (`node.take_adapter`).
enum ManagementChannel {
    /// Powers adapter `index` off and waits for the kernel's answer. The reason a failure carries
    /// is a sentence for the user.
    static func powerOff(index: UInt16, timeoutMilliseconds: Int32 = 3_000) throws(ManagementFailure) {
        let descriptor = socket(tracer_af_bluetooth, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), tracer_btproto_hci)
        guard descriptor >= 0 else { throw ManagementFailure("socket failed with \(describeErrno(errno))") }
        defer { Glibc.close(descriptor) }
        guard HCIUserChannel.bindHCISocket(descriptor, device: tracer_hci_dev_none, channel: tracer_hci_channel_control) == 0 else { throw ManagementFailure("binding the management channel failed with \(describeErrno(errno))") }
        let command = ManagementCommand.setPowered(index: index, on: false)
        let packet = command.encode()
        let written = packet.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == packet.count else { throw ManagementFailure("sending Set Powered failed with \(describeErrno(errno))") }

        var buffer = [UInt8](repeating: 0, count: 1_024)
        // Bounded, so that a stream of unrelated events cannot keep the node waiting.
        for _ in 0..<256 {
            var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&waiting, 1, timeoutMilliseconds)
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { throw ManagementFailure("the kernel did not answer Set Powered within \(timeoutMilliseconds) ms") }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw ManagementFailure("reading the management channel failed with \(describeErrno(errno))") }
            // Other events (new settings, index changes) share the channel: skip them, and anything malformed.
            guard let event = try? ManagementEvent(decoding: buffer[0..<count]), event.index == index,
                  let reply = event.reply, reply.opcode == command.opcode else { continue }
            guard reply.status == 0 else {
                throw ManagementFailure("the kernel refused to power hci\(index) off: \(ManagementEvent.describeStatus(reply.status))")
            }
            return
        }
        throw ManagementFailure("the kernel's answer to Set Powered did not arrive among the management events")
    }
}

struct ManagementFailure: Error, Equatable, Sendable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
