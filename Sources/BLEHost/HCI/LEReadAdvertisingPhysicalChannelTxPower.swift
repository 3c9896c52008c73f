/// LE Read Advertising Physical Channel Tx Power (Core Vol 4 Part E 7.8.6): the power the
/// controller transmits legacy advertising packets at, which is what a peer's attenuation
/// (advertised TX power minus the RSSI it measures) needs.
public struct LEReadAdvertisingPhysicalChannelTxPower: HCICommandWithReturnParameters, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x0007)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        /// In dBm, -127 to 20 (the specification's range; ±1 dB accuracy).
        public var txPowerLevel: Int8

        public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
            var reader = ByteReader(bytes)
            txPowerLevel = try reader.readInt8("TX_Power_Level")
        }
    }
}
