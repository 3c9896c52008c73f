import CBlueZ
#if canImport(Glibc)
import Glibc
#endif

/// One of the kernel's Bluetooth adapters (hciN) as `tracer doctor` shows it.
public struct KernelAdapter: Sendable, Equatable {
    public let index: UInt16
    /// Most significant byte first ("00:1B:DC:07:32:A1").
    public let address: String
    /// Up: powered through the management interface, or opened by a user channel.
    public let isUp: Bool
    /// Listed by the kernel's management interface (bluetoothd's and btmgmt's view). The kernel
    /// hides an adapter a user channel holds from it, so an adapter that is up but not listed is
    /// held by a user channel.
    public let isManaged: Bool?

    public init(index: UInt16, address: String, isUp: Bool, isManaged: Bool?) {
        self.index = index
        self.address = address
        self.isUp = isUp
        self.isManaged = isManaged
    }
}

public enum KernelAdapterListFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// AF_BLUETOOTH is unavailable.
    case noKernelBluetooth
    case failed(String)

    public var description: String {
        switch self {
        case .noKernelBluetooth: "this kernel has no Bluetooth support (AF_BLUETOOTH is unavailable)"
        case .failed(let reason): reason
        }
    }
}

public enum KernelAdapters {
    /// Every adapter the kernel has: HCIGETDEVLIST and HCIGETDEVINFO (which see adapters a user
    /// channel holds), joined with the management interface's list (which says which it manages
    /// and whether they are powered). Needs no capability. `isManaged` is nil when the
    /// management interface could not be read.
    public static func list() throws(KernelAdapterListFailure) -> [KernelAdapter] {
        let descriptor = socket(tracer_af_bluetooth, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), tracer_btproto_hci)
        guard descriptor >= 0 else {
            throw errno == EAFNOSUPPORT ? .noKernelBluetooth : .failed("opening an HCI socket failed with \(describeErrno(errno))")
        }
        defer { Glibc.close(descriptor) }
        var ids = [UInt16](repeating: 0, count: Int(tracer_hci_max_dev))
        var flags = [UInt32](repeating: 0, count: Int(tracer_hci_max_dev))
        let count = tracer_hci_device_list(descriptor, &ids, &flags)
        guard count >= 0 else { throw .failed("listing the adapters (HCIGETDEVLIST) failed with \(describeErrno(errno))") }
        // Without the management interface the list still says which adapters are up.
        let managed = try? ManagementChannel.controllers()
        return (0..<Int(count)).map { position in
            let index = ids[position]
            var address = [UInt8](repeating: 0, count: 6)
            var deviceFlags = flags[position]
            if tracer_hci_device_info(descriptor, index, &address, &deviceFlags) != 0 { deviceFlags = flags[position] }
            let information = managed?[index]
            return KernelAdapter(index: index, address: information?.address ?? formatBluetoothAddress(address),
                                 isUp: information?.isPowered ?? (deviceFlags & tracer_hci_up_flag != 0),
                                 isManaged: managed.map { $0[index] != nil })
        }
    }
}
