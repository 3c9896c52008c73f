import CBlueZ
#if canImport(Glibc)
import Glibc
#endif

/// The Linux HCI user channel: exclusive access to one adapter, with H4 packet indicators on every packet.
enum HCIUserChannel {
    static func open(adapterIndex: UInt16) throws(HCITransportError) -> Int32 {
        let spec = TransportSpec.hciUserChannel(index: adapterIndex).description
        let descriptor = socket(tracer_af_bluetooth, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), tracer_btproto_hci)
        guard descriptor >= 0 else {
            throw .openFailed(spec: spec, reason: explainFailure(errno: errno, adapterIndex: adapterIndex, step: "socket"))
        }
        var address = sockaddr_hci()
        address.hci_family = sa_family_t(tracer_af_bluetooth)
        address.hci_dev = adapterIndex
        address.hci_channel = tracer_hci_channel_user
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_hci>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw .openFailed(spec: spec, reason: explainFailure(errno: code, adapterIndex: adapterIndex, step: "bind"))
        }
        return descriptor
    }

    /// Says why the kernel refused and what a person can do about it.
    static func explainFailure(errno code: Int32, adapterIndex: UInt16, step: String) -> String {
        let cause = "\(step) failed with \(describeErrno(code))"
        switch code {
        case EAFNOSUPPORT:
            return "\(cause): this kernel has no Bluetooth support (AF_BLUETOOTH is unavailable); use a tcp:, unix: or serial: transport instead"
        case EBUSY:
            return "\(cause): hci\(adapterIndex) is up or held by bluetoothd. Take it down with `sudo btmgmt --index \(adapterIndex) power off` or `sudo hciconfig hci\(adapterIndex) down`, and stop bluetoothd (`sudo systemctl stop bluetooth`)"
        case EPERM, EACCES:
            return "\(cause): the HCI user channel needs CAP_NET_ADMIN. Run as root or grant it: `sudo setcap cap_net_admin+ep <binary>`"
        case ENODEV:
            return "\(cause): there is no adapter hci\(adapterIndex) (list adapters with `btmgmt info` or `hciconfig`)"
        case EALREADY:
            return "\(cause): another process already holds the user channel of hci\(adapterIndex)"
        case ERFKILL:
            return "\(cause): hci\(adapterIndex) is blocked by rfkill (`sudo rfkill unblock bluetooth`)"
        default:
            return cause
        }
    }
}
