extension HostControllerInterface {
    /// Brings the controller to a known state and learns what the host needs: reset, version, supported
    /// commands and features, public address, event masks (with the LE subevents this host handles), and
    /// LE ACL buffers (falling back to the shared buffers when the LE ones are reported as 0).
    public func initialize() async throws(HCIError) -> ControllerInfo {
        try await send(Reset())
        let version = try await send(ReadLocalVersionInformation())
        let commands = try await send(ReadLocalSupportedCommands())
        let features = try await send(ReadLocalSupportedFeatures())
        let address = try await send(ReadBDADDR())
        try await send(SetEventMask())
        try await send(LESetEventMask())
        let leBuffers = try await send(LEReadBufferSize())
        var buffers = ACLBufferSize(
            packetLength: Int(leBuffers.leACLDataPacketLength), packetCount: Int(leBuffers.totalNumLEACLDataPackets))
        if buffers.packetLength == 0 || buffers.packetCount == 0 {
            let shared = try await send(ReadBufferSize())
            buffers = ACLBufferSize(packetLength: Int(shared.aclDataPacketLength), packetCount: Int(shared.totalNumACLDataPackets))
        }
        let leFeatures = try await send(LEReadLocalSupportedFeatures())
        configureACLBuffers(buffers)
        return ControllerInfo(
            version: version, supportedCommands: commands.supportedCommands, lmpFeatures: features.lmpFeatures,
            leFeatures: leFeatures.leFeatures, publicAddress: address.address, aclBuffers: buffers)
    }
}
