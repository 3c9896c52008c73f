/// A primary service found on the peer: its declaration handle through its group end.
public struct GATTDiscoveredService: Sendable, Equatable {
    public var uuid: BluetoothUUID
    public var handles: ATTHandleRange
    public init(uuid: BluetoothUUID, handles: ATTHandleRange) {
        self.uuid = uuid
        self.handles = handles
    }
}

public struct GATTDiscoveredCharacteristic: Sendable, Equatable {
    public var uuid: BluetoothUUID
    public var properties: GATTCharacteristicProperties
    public var declarationHandle: UInt16
    public var valueHandle: UInt16
    public init(uuid: BluetoothUUID, properties: GATTCharacteristicProperties, declarationHandle: UInt16, valueHandle: UInt16) {
        self.uuid = uuid
        self.properties = properties
        self.declarationHandle = declarationHandle
        self.valueHandle = valueHandle
    }
}

public enum GATTClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The ATT transaction failed, including Error Responses other than the ones a procedure expects.
    case att(ATTBearerError)
    /// The server's answer is well-formed ATT but breaks a GATT rule (for example handles going backwards).
    case malformedDiscoveryData(String)
    /// The value does not fit one PDU and long writes are not supported.
    case valueTooLong(length: Int, maximum: Int)

    public var description: String {
        switch self {
        case .att(let error): return error.description
        case .malformedDiscoveryData(let reason): return "malformed GATT data: \(reason)"
        case .valueTooLong(let length, let maximum): return "value of \(length) octets exceeds \(maximum)"
        }
    }
}

/// The GATT client procedures Tracer needs (Core Spec Vol 3 Part G 4), over an `ATTBearer`.
public struct GATTClient: Sendable {
    public let bearer: ATTBearer

    public init(bearer: ATTBearer) { self.bearer = bearer }

    /// Exchange MTU (4.3.1); returns the ATT_MTU now in force.
    @discardableResult
    public func exchangeMTU() async throws(GATTClientError) -> Int {
        do { return try await bearer.exchangeMTU() } catch { throw .att(error) }
    }

    /// Discover Primary Service by Service UUID (4.4.2), over the whole handle range.
    public func discoverPrimaryServices(uuid: BluetoothUUID) async throws(GATTClientError) -> [GATTDiscoveredService] {
        var services: [GATTDiscoveredService] = []
        var start: UInt16 = 0x0001
        while true {
            let request = ATTFindByTypeValueRequest(
                range: ATTHandleRange(start: start, end: 0xFFFF),
                attributeType: 0x2800,
                value: uuid.littleEndianBytes)
            guard let response = try await requestEndingAtNotFound(.findByTypeValueRequest(request)) else { break }
            guard case .findByTypeValueResponse(let found) = response else {
                throw .att(.unexpectedResponse(request: .findByTypeValueRequest, received: response.opcode))
            }
            var lastEnd = start
            for entry in found.handles {
                guard entry.foundHandle >= start, entry.groupEndHandle >= entry.foundHandle else {
                    throw .malformedDiscoveryData("service handles 0x\(String(entry.foundHandle, radix: 16))-0x\(String(entry.groupEndHandle, radix: 16)) outside the searched range")
                }
                services.append(GATTDiscoveredService(
                    uuid: uuid, handles: ATTHandleRange(start: entry.foundHandle, end: entry.groupEndHandle)))
                lastEnd = max(lastEnd, entry.groupEndHandle)
            }
            guard lastEnd < 0xFFFF else { break }
            start = lastEnd + 1
        }
        return services
    }

    /// Discover All Primary Services (4.4.1).
    public func discoverAllPrimaryServices() async throws(GATTClientError) -> [GATTDiscoveredService] {
        var services: [GATTDiscoveredService] = []
        var start: UInt16 = 0x0001
        while true {
            let request = ATTReadByGroupTypeRequest(range: ATTHandleRange(start: start, end: 0xFFFF), groupType: .primaryService)
            guard let response = try await requestEndingAtNotFound(.readByGroupTypeRequest(request)) else { break }
            guard case .readByGroupTypeResponse(let found) = response else {
                throw .att(.unexpectedResponse(request: .readByGroupTypeRequest, received: response.opcode))
            }
            var lastEnd = start
            for entry in found.entries {
                guard entry.handle >= start, entry.endGroupHandle >= entry.handle else {
                    throw .malformedDiscoveryData("service group 0x\(String(entry.handle, radix: 16)) outside the searched range")
                }
                let uuid: BluetoothUUID
                do { uuid = try BluetoothUUID(littleEndianBytes: entry.value) } catch {
                    throw .malformedDiscoveryData("service UUID of \(entry.value.count) octets")
                }
                services.append(GATTDiscoveredService(uuid: uuid, handles: ATTHandleRange(start: entry.handle, end: entry.endGroupHandle)))
                lastEnd = max(lastEnd, entry.endGroupHandle)
            }
            guard lastEnd < 0xFFFF else { break }
            start = lastEnd + 1
        }
        return services
    }

    /// Discover All Characteristics of a Service (4.6.1).
    public func discoverCharacteristics(of service: GATTDiscoveredService) async throws(GATTClientError) -> [GATTDiscoveredCharacteristic] {
        var characteristics: [GATTDiscoveredCharacteristic] = []
        var start = service.handles.start
        let end = service.handles.end
        while start <= end {
            let request = ATTReadByTypeRequest(range: ATTHandleRange(start: start, end: end), attributeType: .characteristic)
            guard let response = try await requestEndingAtNotFound(.readByTypeRequest(request)) else { break }
            guard case .readByTypeResponse(let found) = response else {
                throw .att(.unexpectedResponse(request: .readByTypeRequest, received: response.opcode))
            }
            var last = start
            for entry in found.entries {
                guard entry.handle >= start, entry.handle <= end else {
                    throw .malformedDiscoveryData("characteristic declaration 0x\(String(entry.handle, radix: 16)) outside the service")
                }
                characteristics.append(try Self.decodeCharacteristicDeclaration(entry))
                last = max(last, entry.handle)
            }
            guard last < end else { break }
            start = last + 1
        }
        return characteristics
    }

    private static func decodeCharacteristicDeclaration(_ entry: ATTReadByTypeResponse.Entry) throws(GATTClientError) -> GATTDiscoveredCharacteristic {
        var reader = ByteReader(entry.value)
        do {
            let properties = GATTCharacteristicProperties(rawValue: try reader.readUInt8("properties"))
            let valueHandle = try reader.readUInt16("value handle")
            let uuid = try BluetoothUUID(littleEndianBytes: reader.readRemaining())
            return GATTDiscoveredCharacteristic(uuid: uuid, properties: properties, declarationHandle: entry.handle, valueHandle: valueHandle)
        } catch {
            throw .malformedDiscoveryData("characteristic declaration at 0x\(String(entry.handle, radix: 16)): \(error)")
        }
    }

    /// Read Characteristic Value (4.8.1), continued with Read Blob (4.8.3) while the value
    /// fills whole responses, up to the 512-octet attribute limit.
    public func readValue(handle: UInt16) async throws(GATTClientError) -> [UInt8] {
        let mtu = await bearer.mtu
        let first = try await request(.readRequest(ATTReadRequest(handle: handle)))
        guard case .readResponse(let response) = first else {
            throw .att(.unexpectedResponse(request: .readRequest, received: first.opcode))
        }
        var value = response.value
        var lastPartLength = value.count
        while lastPartLength == mtu - 1, value.count < GATTServer.maximumValueLength {
            let blobRequest = ATTReadBlobRequest(handle: handle, offset: UInt16(value.count))
            let answer: ATTPDU
            do {
                answer = try await bearer.request(.readBlobRequest(blobRequest))
            } catch .errorResponse(_, _, .attributeNotLong) {
                break
            } catch {
                throw .att(error)
            }
            guard case .readBlobResponse(let part) = answer else {
                throw .att(.unexpectedResponse(request: .readBlobRequest, received: answer.opcode))
            }
            value += part.partOfValue
            lastPartLength = part.partOfValue.count
        }
        return value
    }

    /// Write Characteristic Value (4.9.3): a Write Request, answered by the server.
    public func writeValue(_ value: [UInt8], handle: UInt16) async throws(GATTClientError) {
        let maximum = await bearer.mtu - 3
        guard value.count <= maximum else { throw .valueTooLong(length: value.count, maximum: maximum) }
        let answer = try await request(.writeRequest(ATTWriteRequest(handle: handle, value: value)))
        guard case .writeResponse = answer else {
            throw .att(.unexpectedResponse(request: .writeRequest, received: answer.opcode))
        }
    }

    /// Write Without Response (4.9.1): a Write Command; the server's verdict is never known.
    public func writeValueWithoutResponse(_ value: [UInt8], handle: UInt16) async throws(GATTClientError) {
        let maximum = await bearer.mtu - 3
        guard value.count <= maximum else { throw .valueTooLong(length: value.count, maximum: maximum) }
        do {
            try await bearer.send(command: .writeCommand(ATTWriteCommand(handle: handle, value: value)))
        } catch {
            throw .att(error)
        }
    }

    private func request(_ pdu: ATTPDU) async throws(GATTClientError) -> ATTPDU {
        do { return try await bearer.request(pdu) } catch { throw .att(error) }
    }

    /// Discovery procedures end when the server answers Attribute Not Found: that is nil here.
    private func requestEndingAtNotFound(_ pdu: ATTPDU) async throws(GATTClientError) -> ATTPDU? {
        do {
            return try await bearer.request(pdu)
        } catch .errorResponse(_, _, .attributeNotFound) {
            return nil
        } catch {
            throw .att(error)
        }
    }
}
