import CBlueZ
#if canImport(Glibc)
import Glibc
#endif

/// The Linux HCI user channel: exclusive access to one adapter, with H4 packet indicators on every packet.
enum HCIUserChannel {
    /// Binds the channel. When the adapter is up (EBUSY: bluetoothd holds it) and `heldAdapter` is
    /// `.take`, powers it off through the management interface, tells `onTaken`, and binds again.
    static func open(adapterIndex: UInt16, heldAdapter: HeldAdapterPolicy = .refuse,
                     onTaken: (UInt16) -> Void = { _ in }) throws(HCITransportError) -> Int32 {
        let spec = TransportSpec.hciUserChannel(index: adapterIndex).description
        let refusal: Int32
        switch bindChannel(adapterIndex: adapterIndex, spec: spec) {
        case .success(let descriptor): return descriptor
        case .failure(.other(let failure)): throw failure
        case .failure(.bindFailed(let code)): refusal = code
        }
        guard refusal == EBUSY, heldAdapter == .take else {
            throw .openFailed(spec: spec, reason: explainFailure(errno: refusal, adapterIndex: adapterIndex, step: "bind"))
        }
        do { try ManagementChannel.powerOff(index: adapterIndex) } catch {
            throw .openFailed(spec: spec, reason: "hci\(adapterIndex) is up or held by bluetoothd and node.take_adapter is set, but powering it off failed: \(error). Run `sudo btmgmt --index \(adapterIndex) power off` and check that the node has CAP_NET_ADMIN")
        }
        onTaken(adapterIndex)
        switch bindChannel(adapterIndex: adapterIndex, spec: spec) {
        case .success(let descriptor): return descriptor
        case .failure(.other(let failure)): throw failure
        case .failure(.bindFailed(let code)):
            throw .openFailed(spec: spec, reason: explainFailure(errno: code, adapterIndex: adapterIndex, step: "bind after powering the adapter off"))
        }
    }

    private enum BindFailure: Error {
        case bindFailed(Int32)
        case other(HCITransportError)
    }

    private static func bindChannel(adapterIndex: UInt16, spec: String) -> Result<Int32, BindFailure> {
        let descriptor = socket(tracer_af_bluetooth, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), tracer_btproto_hci)
        guard descriptor >= 0 else {
            return .failure(.other(.openFailed(spec: spec, reason: explainFailure(errno: errno, adapterIndex: adapterIndex, step: "socket"))))
        }
        guard bindHCISocket(descriptor, device: adapterIndex, channel: tracer_hci_channel_user) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            return .failure(.bindFailed(code))
        }
        return .success(descriptor)
    }

    /// Binds a Bluetooth HCI socket to `channel` of `device` (an adapter index, or `HCI_DEV_NONE`);
    /// bind's result, with errno set on failure.
    static func bindHCISocket(_ descriptor: Int32, device: UInt16, channel: UInt16) -> Int32 {
        var address = sockaddr_hci()
        address.hci_family = sa_family_t(tracer_af_bluetooth)
        address.hci_dev = device
        address.hci_channel = channel
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_hci>.size))
            }
        }
    }

    /// Says why the kernel refused and what a person can do about it.
    static func explainFailure(errno code: Int32, adapterIndex: UInt16, step: String) -> String {
        let cause = "\(step) failed with \(describeErrno(code))"
        switch code {
        case EAFNOSUPPORT:
            // A sandbox refuses the address family with the same errno as a kernel without Bluetooth.
            return "\(cause): AF_BLUETOOTH is unavailable to this process: this kernel has no Bluetooth support, or a sandbox forbids it (a systemd unit's RestrictAddressFamilies= must list AF_BLUETOOTH, as deploy/systemd/tracer.service does); without kernel Bluetooth use a tcp:, unix: or serial: transport instead"
        case EBUSY:
            return "\(cause): hci\(adapterIndex) is up or held by bluetoothd. Take it down with `sudo btmgmt --index \(adapterIndex) power off` or `sudo hciconfig hci\(adapterIndex) down`, and stop bluetoothd (`sudo systemctl stop bluetooth`); or let the node power it off itself at every start with `--take-adapter` (node.take_adapter = true), which stops desktop Bluetooth on hci\(adapterIndex) while the node runs"
        case EPERM, EACCES:
            return "\(cause): the HCI user channel needs CAP_NET_ADMIN: run as root or through the systemd unit (tracer.service), which grants it; or grant it to the binary with `sudo setcap cap_net_admin+ep $(command -v tracer)`"
        case ENODEV:
            // Also what a running node meets when its adapter vanishes (unplugged, or btattach stopped).
            return "\(cause): there is no adapter hci\(adapterIndex): it is unplugged, or its driver let it go (for a UART controller, btattach stopped). Plug it in or restart btattach; the node keeps retrying and takes it again when it returns. `tracer doctor` lists the adapters there are"
        case EALREADY:
            return "\(cause): another process already holds the user channel of hci\(adapterIndex)"
        case ERFKILL:
            return "\(cause): hci\(adapterIndex) is blocked by rfkill (`sudo rfkill unblock bluetooth`)"
        default:
            return cause
        }
    }
}

/// What opening the user channel does with an adapter that is up (bluetoothd powers every adapter it manages).
public enum HeldAdapterPolicy: Sendable, Equatable {
    /// Refuse with a message that says how to free the adapter (the default).
    case refuse
    /// Power it off through the management interface and take it (`node.take_adapter`).
    case take
}
