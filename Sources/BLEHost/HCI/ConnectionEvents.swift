/// Disconnection Complete (0x05).
public struct DisconnectionCompleteEvent: Sendable, Equatable {
    public var status: HCIStatusCode
    public var connectionHandle: UInt16
    public var reason: HCIStatusCode

    public init(status: HCIStatusCode = .success, connectionHandle: UInt16, reason: HCIStatusCode) {
        self.status = status
        self.connectionHandle = connectionHandle
        self.reason = reason
    }

    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        status = try reader.readStatus()
        connectionHandle = try reader.readConnectionHandle()
        reason = try reader.readStatus("Reason")
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(status.rawValue)
        writer.write(connectionHandle)
        writer.write(reason.rawValue)
        return encodeEvent(code: HCIEvent.disconnectionCompleteCode, parameters: writer.bytes)
    }
}

/// Number Of Completed Packets (0x13): ACL buffers the controller has freed, per connection.
public struct NumberOfCompletedPacketsEvent: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var connectionHandle: UInt16
        public var completedPackets: UInt16
        public init(connectionHandle: UInt16, completedPackets: UInt16) {
            self.connectionHandle = connectionHandle
            self.completedPackets = completedPackets
        }
    }

    public var entries: [Entry]

    public init(entries: [Entry]) { self.entries = entries }

    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        var entries: [Entry] = []
        // Both arrays follow each other: all handles, then all counts (Core Spec Vol 4 Part E 7.7.19).
        let handles = try reader.readCountedList("Num_Handles") {
            (reader: inout ByteReader) throws(PacketDecodingError) in try reader.readConnectionHandle()
        }
        for handle in handles {
            entries.append(Entry(connectionHandle: handle, completedPackets: try reader.readUInt16("Num_Completed_Packets")))
        }
        self.entries = entries
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(UInt8(truncatingIfNeeded: entries.count))
        for entry in entries { writer.write(entry.connectionHandle) }
        for entry in entries { writer.write(entry.completedPackets) }
        return encodeEvent(code: HCIEvent.numberOfCompletedPacketsCode, parameters: writer.bytes)
    }
}

/// The local device's role on a connection.
public enum LERole: UInt8, Sendable, Equatable {
    case central = 0x00
    case peripheral = 0x01
}

/// LE Connection Complete (subevent 0x01) and LE Enhanced Connection Complete (0x0A) share this shape;
/// the enhanced form adds the resolvable private addresses in use.
public struct LEConnectionCompleteEvent: Sendable, Equatable {
    public var status: HCIStatusCode
    public var connectionHandle: UInt16
    /// Raw value kept so that a reserved role from a faulty controller is still reported.
    public var roleValue: UInt8
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    public var localResolvablePrivateAddress: BluetoothAddress?
    public var peerResolvablePrivateAddress: BluetoothAddress?
    /// In units of 1.25 ms.
    public var connectionInterval: UInt16
    public var peripheralLatency: UInt16
    /// In units of 10 ms.
    public var supervisionTimeout: UInt16
    public var centralClockAccuracy: UInt8

    public var role: LERole? { LERole(rawValue: roleValue) }

    public init(decoding parameters: [UInt8], enhanced: Bool) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        status = try reader.readStatus()
        connectionHandle = try reader.readConnectionHandle()
        roleValue = try reader.readUInt8("Role")
        peerAddressType = LEAddressType(rawValue: try reader.readUInt8("Peer_Address_Type"))
        peerAddress = try BluetoothAddress(reading: &reader, field: "Peer_Address")
        if enhanced {
            localResolvablePrivateAddress = try BluetoothAddress(reading: &reader, field: "Local_Resolvable_Private_Address")
            peerResolvablePrivateAddress = try BluetoothAddress(reading: &reader, field: "Peer_Resolvable_Private_Address")
        }
        connectionInterval = try reader.readUInt16("Connection_Interval")
        peripheralLatency = try reader.readUInt16("Peripheral_Latency")
        supervisionTimeout = try reader.readUInt16("Supervision_Timeout")
        centralClockAccuracy = try reader.readUInt8("Central_Clock_Accuracy")
    }
}

/// LE Connection Update Complete (subevent 0x03).
public struct LEConnectionUpdateCompleteEvent: Sendable, Equatable {
    public var status: HCIStatusCode
    public var connectionHandle: UInt16
    public var connectionInterval: UInt16
    public var peripheralLatency: UInt16
    public var supervisionTimeout: UInt16

    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        status = try reader.readStatus()
        connectionHandle = try reader.readConnectionHandle()
        connectionInterval = try reader.readUInt16("Connection_Interval")
        peripheralLatency = try reader.readUInt16("Peripheral_Latency")
        supervisionTimeout = try reader.readUInt16("Supervision_Timeout")
    }
}

/// LE Read Remote Features Complete (subevent 0x04).
public struct LEReadRemoteFeaturesCompleteEvent: Sendable, Equatable {
    public var status: HCIStatusCode
    public var connectionHandle: UInt16
    public var leFeatures: UInt64

    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        status = try reader.readStatus()
        connectionHandle = try reader.readConnectionHandle()
        leFeatures = try reader.readUInt64("LE_Features")
    }
}
