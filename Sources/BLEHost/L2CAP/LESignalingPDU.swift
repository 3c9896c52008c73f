/// One command on the LE signaling channel (CID 0x0005): code, identifier, length, data.
public struct LESignalingCommand: Sendable, Equatable {
    public var code: UInt8
    /// Matches a response to its request; 0 is never valid.
    public var identifier: UInt8
    public var data: [UInt8]

    public static let commandRejectCode: UInt8 = 0x01
    public static let disconnectionResponseCode: UInt8 = 0x07
    public static let connectionParameterUpdateRequestCode: UInt8 = 0x12
    public static let connectionParameterUpdateResponseCode: UInt8 = 0x13
    public static let leCreditBasedConnectionResponseCode: UInt8 = 0x15
    public static let flowControlCreditIndicationCode: UInt8 = 0x16
    public static let creditBasedConnectionResponseCode: UInt8 = 0x18
    public static let creditBasedReconfigureResponseCode: UInt8 = 0x1A

    /// Codes that must never be answered with Command Reject, to avoid reject loops between two hosts.
    public var isResponseOrIndication: Bool {
        [Self.commandRejectCode, Self.disconnectionResponseCode, Self.connectionParameterUpdateResponseCode,
         Self.leCreditBasedConnectionResponseCode, Self.flowControlCreditIndicationCode,
         Self.creditBasedConnectionResponseCode, Self.creditBasedReconfigureResponseCode].contains(code)
    }

    public init(code: UInt8, identifier: UInt8, data: [UInt8]) {
        self.code = code
        self.identifier = identifier
        self.data = data
    }

    public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(bytes)
        code = try reader.readUInt8("Code")
        identifier = try reader.readUInt8("Identifier")
        let length = Int(try reader.readUInt16("Length"))
        data = try reader.readBytes(length, "Data")
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(capacity: 4 + data.count)
        writer.write(code)
        writer.write(identifier)
        writer.write(UInt16(truncatingIfNeeded: data.count))
        writer.write(contentsOf: data)
        return writer.bytes
    }
}

/// L2CAP_CONNECTION_PARAMETER_UPDATE_REQ data (a peripheral asking the central for new connection parameters).
public struct ConnectionParameterUpdateRequest: Sendable, Equatable {
    /// In units of 1.25 ms.
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var latency: UInt16
    /// In units of 10 ms.
    public var timeout: UInt16

    public init(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16) {
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.latency = latency
        self.timeout = timeout
    }

    public init(decoding data: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(data)
        intervalMin = try reader.readUInt16("Interval_Min")
        intervalMax = try reader.readUInt16("Interval_Max")
        latency = try reader.readUInt16("Latency")
        timeout = try reader.readUInt16("Timeout")
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(capacity: 8)
        writer.write(intervalMin)
        writer.write(intervalMax)
        writer.write(latency)
        writer.write(timeout)
        return writer.bytes
    }
}

/// L2CAP_CONNECTION_PARAMETER_UPDATE_RSP data.
public struct ConnectionParameterUpdateResponse: Sendable, Equatable {
    public static let accepted: UInt16 = 0x0000
    public static let rejected: UInt16 = 0x0001

    public var result: UInt16

    public init(result: UInt16) { self.result = result }

    public init(decoding data: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(data)
        result = try reader.readUInt16("Result")
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(capacity: 2)
        writer.write(result)
        return writer.bytes
    }
}

/// L2CAP_COMMAND_REJECT_RSP data.
public struct CommandReject: Sendable, Equatable {
    public static let commandNotUnderstood: UInt16 = 0x0000
    public static let signalingMTUExceeded: UInt16 = 0x0001
    public static let invalidCIDInRequest: UInt16 = 0x0002

    public var reason: UInt16
    public var reasonData: [UInt8]

    public init(reason: UInt16, reasonData: [UInt8] = []) {
        self.reason = reason
        self.reasonData = reasonData
    }

    public init(decoding data: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(data)
        reason = try reader.readUInt16("Reason")
        reasonData = reader.readRemaining()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(capacity: 2 + reasonData.count)
        writer.write(reason)
        writer.write(contentsOf: reasonData)
        return writer.bytes
    }
}
