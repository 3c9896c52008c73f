/// Who holds a kernel adapter, and what a person does to run the node on it: `tracer doctor`'s
/// adapter list.
extension KernelAdapter {
    public enum Holder: Equatable, Sendable {
        /// Managed by the kernel and powered off: the node can bind its user channel.
        case free
        /// Powered through the management interface: by bluetoothd when it runs (it powers every
        /// adapter it manages), else by a tool such as btmgmt.
        case managementInterface(bluetoothd: Bool)
        /// Hidden from the management interface and up: another program's user channel (another
        /// Tracer, btproxy, a test tool), or this node's.
        case userChannel
        /// Hidden from the management interface and down: the kernel is still setting it up, or
        /// it needs configuration.
        case settingUp
        /// Up, but the management interface could not be read to say by whom.
        case unknown
    }

    public func holder(bluetoothdRunning: Bool) -> Holder {
        switch (isManaged, isUp) {
        case (true?, false): .free
        case (true?, true): .managementInterface(bluetoothd: bluetoothdRunning)
        case (false?, true): .userChannel
        case (false?, false): .settingUp
        case (nil, false): .free
        case (nil, true): .unknown
        }
    }

    public var name: String { "hci\(index)" }

    /// One sentence: address, state, holder and what to do. `heldByThisNode` is the pid of a
    /// running node whose transport is this adapter.
    public func describe(bluetoothdRunning: Bool, heldByThisNode pid: Int32? = nil) -> String {
        let prefix = "\(address), \(isUp ? "powered" : "powered off"), "
        switch holder(bluetoothdRunning: bluetoothdRunning) {
        case .free:
            return prefix + "free: use --transport \(name)"
        case .managementInterface(let bluetoothd):
            let by = bluetoothd ? "held by bluetoothd (through the kernel's management interface)"
                                : "powered through the kernel's management interface (bluetoothd is not running)"
            let restart = bluetoothd ? ", and bluetoothd powers it on again whenever it is released" : ""
            return prefix + by + ": to use it, power it off with `sudo btmgmt --index \(index) power off`\(restart); "
                + "or run the node with --take-adapter (node.take_adapter = true), which powers it off at every start "
                + "and stops desktop Bluetooth on \(name) while the node runs"
        case .userChannel:
            if let pid { return prefix + "in use by this node's user channel (pid \(pid))" }
            return prefix + "in use by a user channel (another Tracer or a tool such as btproxy): stop that program, or choose another adapter"
        case .settingUp:
            return prefix + "not yet set up by the kernel (still initialising, or unconfigured): wait a moment and run doctor again"
        case .unknown:
            return prefix + "held by bluetoothd or a user channel (the management interface could not be read to say which)"
        }
    }

    /// Which adapter to run the node on, in one sentence: the first free one; else the first the
    /// management interface holds, with how to free it; nil when there is none to suggest.
    public static func recommendation(_ adapters: [KernelAdapter], bluetoothdRunning: Bool) -> String? {
        if let free = adapters.first(where: { $0.holder(bluetoothdRunning: bluetoothdRunning) == .free }) {
            return "use --transport \(free.name): it is free"
        }
        if let held = adapters.first(where: { if case .managementInterface = $0.holder(bluetoothdRunning: bluetoothdRunning) { true } else { false } }) {
            return "no adapter is free; \(held.name) can be freed with `sudo btmgmt --index \(held.index) power off`, or taken with --take-adapter"
        }
        return nil
    }
}
