import BLEHost

/// A node's 8-byte peer id as it travels over GATT. The node's `UserID` converts to and from it.
public struct PeerIDBytes: Sendable, Hashable, CustomStringConvertible {
    public static let length = 8
    public let bytes: [UInt8]

    /// Nil unless `bytes` has exactly 8 octets.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == Self.length else { return nil }
        self.bytes = bytes
    }

    public var description: String { bytes.map { HexFormat.format($0, digits: 2, uppercase: false) }.joined() }
}

/// What a peer writes to the Tracer write characteristic: its id, and optionally how it heard us.
/// On air: 8 octets of id, or 8 octets of id, the RSSI it measured for us (int8 dBm),
/// then its TX power (int8 dBm).
public struct PeerIDWrite: Sendable, Equatable {
    public let id: [UInt8]
    public let reportedRSSI: Int8?
    public let txPower: Int8?

    /// The short form: the id alone.
    public init(id: PeerIDBytes) {
        self.id = id.bytes
        self.reportedRSSI = nil
        self.txPower = nil
    }

    /// The long form: the id, the RSSI the writer measured for the reader, and the writer's TX power.
    public init(id: PeerIDBytes, reportedRSSI: Int8, txPower: Int8) {
        self.id = id.bytes
        self.reportedRSSI = reportedRSSI
        self.txPower = txPower
    }

    /// Accepts exactly 8 or 10 octets.
    public init(decoding value: [UInt8]) throws(PacketDecodingError) {
        guard value.count == 8 || value.count == 10 else {
            throw .invalidValue(field: "peer id write length", value: value.count)
        }
        var reader = ByteReader(value)
        id = try reader.readBytes(PeerIDBytes.length, "peer id")
        if reader.isAtEnd {
            reportedRSSI = nil
            txPower = nil
        } else {
            reportedRSSI = try reader.readInt8("reported RSSI")
            txPower = try reader.readInt8("TX power")
        }
    }

    public var peerID: PeerIDBytes? { PeerIDBytes(id) }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(capacity: 10)
        writer.write(contentsOf: id)
        if let reportedRSSI, let txPower {
            writer.write(reportedRSSI)
            writer.write(txPower)
        }
        return writer.bytes
    }
}

/// The Tracer GATT service. Phone apps outside this project depend on these UUIDs and value
/// layouts, so they never change.
public enum TracerService {
    public static let serviceUUID = BluetoothUUID(0xA09A_0000_5AAA_47F2, 0x9C7F_93BD_B3A6_5376)
    /// Read: the node's current 8-byte id, computed at read time.
    public static let peerIDCharacteristicUUID = BluetoothUUID(0xA09A_0001_5AAA_47F2, 0x9C7F_93BD_B3A6_5376)
    /// Write or Write Without Response: a `PeerIDWrite`. Not readable.
    public static let peerIDWriteCharacteristicUUID = BluetoothUUID(0xA09A_0002_5AAA_47F2, 0x9C7F_93BD_B3A6_5376)

    /// The service definition for a `GATTDatabase`. `currentID` runs on every read, so rotated
    /// ids are served at once; `onPeerWrite` runs only for well-formed writes, and the error it
    /// throws, if any, answers a Write Request in place of the Write Response.
    public static func definition(
        currentID: @escaping @Sendable () async -> PeerIDBytes,
        onPeerWrite: @escaping @Sendable (PeerIDWrite) async throws(ATTErrorCode) -> Void
    ) -> GATTServiceDefinition {
        GATTServiceDefinition(uuid: serviceUUID, characteristics: [
            GATTCharacteristicDefinition(
                uuid: peerIDCharacteristicUUID,
                properties: .read,
                value: .computed { await currentID().bytes }),
            GATTCharacteristicDefinition(
                uuid: peerIDWriteCharacteristicUUID,
                properties: [.write, .writeWithoutResponse],
                onWrite: { value, _ in
                    let write: PeerIDWrite
                    do {
                        write = try PeerIDWrite(decoding: value)
                    } catch {
                        throw ATTErrorCode.invalidAttributeValueLength
                    }
                    try await onPeerWrite(write)
                }),
        ])
    }
}

public enum TracerExchangeError: Error, Sendable, Equatable, CustomStringConvertible {
    case serviceNotFound
    case idCharacteristicMissing
    case writeCharacteristicMissing
    /// The peer's id characteristic returned a value that is not 8 octets.
    case idHasWrongLength(Int)
    /// Discovery, the read or the write failed underneath.
    case gatt(GATTClientError)

    public var description: String {
        switch self {
        case .serviceNotFound: return "peer has no Tracer service"
        case .idCharacteristicMissing: return "Tracer service lacks a readable id characteristic"
        case .writeCharacteristicMissing: return "Tracer service lacks a writable id characteristic"
        case .idHasWrongLength(let length): return "peer id has \(length) octets instead of 8"
        case .gatt(let error): return "GATT failure: \(error)"
        }
    }
}

/// The central's half of an id exchange over an established connection.
public struct TracerPeerExchange: Sendable {
    public let client: GATTClient

    public init(bearer: ATTBearer) { self.client = GATTClient(bearer: bearer) }
    public init(client: GATTClient) { self.client = client }

    /// Finds the Tracer service, reads the peer's id, then writes `ours` (8- or 10-byte form),
    /// with a Write Request when the peer offers it so that a rejection is noticed.
    public func exchange(writing ours: PeerIDWrite) async throws(TracerExchangeError) -> PeerIDBytes {
        let client = self.client
        let services = try await gatt { () async throws(GATTClientError) in
            try await client.discoverPrimaryServices(uuid: TracerService.serviceUUID)
        }
        guard let service = services.first else { throw .serviceNotFound }
        let characteristics = try await gatt { () async throws(GATTClientError) in
            try await client.discoverCharacteristics(of: service)
        }
        guard let idCharacteristic = characteristics.first(where: {
            $0.uuid == TracerService.peerIDCharacteristicUUID && $0.properties.contains(.read)
        }) else { throw .idCharacteristicMissing }
        guard let writeCharacteristic = characteristics.first(where: {
            $0.uuid == TracerService.peerIDWriteCharacteristicUUID
                && !$0.properties.isDisjoint(with: [.write, .writeWithoutResponse])
        }) else { throw .writeCharacteristicMissing }

        let value = try await gatt { () async throws(GATTClientError) in
            try await client.readValue(handle: idCharacteristic.valueHandle)
        }
        guard let peerID = PeerIDBytes(value) else { throw .idHasWrongLength(value.count) }

        let encoded = ours.encode()
        try await gatt { () async throws(GATTClientError) in
            if writeCharacteristic.properties.contains(.write) {
                try await client.writeValue(encoded, handle: writeCharacteristic.valueHandle)
            } else {
                try await client.writeValueWithoutResponse(encoded, handle: writeCharacteristic.valueHandle)
            }
        }
        return peerID
    }

    private func gatt<Result>(_ step: () async throws(GATTClientError) -> Result) async throws(TracerExchangeError) -> Result {
        do { return try await step() } catch { throw .gatt(error) }
    }
}
