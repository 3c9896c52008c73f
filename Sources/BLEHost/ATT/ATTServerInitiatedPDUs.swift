// Values the server pushes to the client (Core Spec Vol 3 Part F 3.4.7).

public struct ATTHandleValueNotification: ATTHandleValuePDU {
    public static let opcode = ATTOpcode.handleValueNotification
    public var handle: UInt16
    public var value: [UInt8]

    public init(handle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }
}

public struct ATTHandleValueIndication: ATTHandleValuePDU {
    public static let opcode = ATTOpcode.handleValueIndication
    public var handle: UInt16
    public var value: [UInt8]

    public init(handle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }
}

public struct ATTHandleValueConfirmation: ATTOpcodeOnlyPDU {
    public static let opcode = ATTOpcode.handleValueConfirmation
    public init() {}
}
