import CBlueZ
#if canImport(Glibc)
import Glibc
#endif

/// The kernel's Bluetooth management interface (`HCI_CHANNEL_CONTROL`), through which bluetoothd
/// and btmgmt power adapters on and off. The node uses it to power off an adapter it is told to
/// take (`node.take_adapter`), and `tracer doctor` to read which adapters it manages.
enum ManagementChannel {
    /// Powers adapter `index` off and waits for the kernel's answer. The reason a failure carries
    /// is a sentence for the user.
    static func powerOff(index: UInt16, timeoutMilliseconds: Int32 = 3_000) throws(ManagementFailure) {
        let descriptor = try openChannel()
        defer { Glibc.close(descriptor) }
        _ = try perform(.setPowered(index: index, on: false), on: descriptor, timeoutMilliseconds: timeoutMilliseconds) { status in
            "the kernel refused to power hci\(index) off: \(status)"
        }
    }

    /// Every adapter the management interface manages, with its information (Read Controller
    /// Index List, then Read Controller Information for each). Adapters a user channel holds are
    /// not among them: the kernel hides those from this interface.
    static func controllers(timeoutMilliseconds: Int32 = 3_000) throws(ManagementFailure) -> [UInt16: ManagementControllerInformation] {
        let descriptor = try openChannel()
        defer { Glibc.close(descriptor) }
        let list = try perform(.readControllerIndexList(), on: descriptor, timeoutMilliseconds: timeoutMilliseconds) { status in
            "the kernel refused to list its adapters: \(status)"
        }
        let indices: [UInt16]
        do { indices = try decodeControllerIndexList(list) } catch { throw ManagementFailure("the adapter list was malformed: \(error)") }
        var controllers: [UInt16: ManagementControllerInformation] = [:]
        for index in indices {
            // An adapter can leave between the two commands (unplugged, taken by a user channel).
            guard let returned = try? perform(.readControllerInformation(index: index), on: descriptor,
                                              timeoutMilliseconds: timeoutMilliseconds, refusal: { _ in "" }),
                  let information = try? ManagementControllerInformation(decoding: returned) else { continue }
            controllers[index] = information
        }
        return controllers
    }

    private static func openChannel() throws(ManagementFailure) -> Int32 {
        let descriptor = socket(tracer_af_bluetooth, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), tracer_btproto_hci)
        guard descriptor >= 0 else { throw ManagementFailure("socket failed with \(describeErrno(errno))") }
        guard HCIUserChannel.bindHCISocket(descriptor, device: tracer_hci_dev_none, channel: tracer_hci_channel_control) == 0 else {
            let failure = ManagementFailure("binding the management channel failed with \(describeErrno(errno))")
            Glibc.close(descriptor)
            throw failure
        }
        return descriptor
    }

    /// Sends `command` and waits for its Command Complete; returns its return parameters.
    /// `refusal` words a status other than Success for the user.
    private static func perform(_ command: ManagementCommand, on descriptor: Int32, timeoutMilliseconds: Int32,
                                refusal: (String) -> String) throws(ManagementFailure) -> [UInt8] {
        let packet = command.encode()
        let written = packet.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == packet.count else { throw ManagementFailure("sending command 0x\(String(command.opcode, radix: 16)) failed with \(describeErrno(errno))") }

        var buffer = [UInt8](repeating: 0, count: 1_024)
        // Bounded, so that a stream of unrelated events cannot keep the caller waiting.
        for _ in 0..<256 {
            var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&waiting, 1, timeoutMilliseconds)
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { throw ManagementFailure("the kernel did not answer command 0x\(String(command.opcode, radix: 16)) within \(timeoutMilliseconds) ms") }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw ManagementFailure("reading the management channel failed with \(describeErrno(errno))") }
            // Other events (new settings, index changes) share the channel: skip them, and anything malformed.
            guard let event = try? ManagementEvent(decoding: buffer[0..<count]), event.index == command.index,
                  let reply = event.reply, reply.opcode == command.opcode else { continue }
            guard reply.status == 0 else { throw ManagementFailure(refusal(ManagementEvent.describeStatus(reply.status))) }
            if case .commandComplete(_, _, let returned) = event.kind { return returned }
            return []
        }
        throw ManagementFailure("the kernel's answer to command 0x\(String(command.opcode, radix: 16)) did not arrive among the management events")
    }
}

struct ManagementFailure: Error, Equatable, Sendable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
