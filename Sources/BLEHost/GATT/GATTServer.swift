/// Answers one connection's ATT requests from a `GATTDatabase` (Core Spec Vol 3 Part F 3.4,
/// Part G 4). Create one per connection: it keeps that client's CCCD values.
/// Exchange MTU and unknown opcodes are answered by the `ATTBearer` before they reach it.
public actor GATTServer: ATTServerHandler {
    /// The longest attribute value ATT allows (Core Spec Vol 3 Part F 3.2.9).
    public static let maximumValueLength = 512

    public nonisolated let database: GATTDatabase
    /// CCCD value per characteristic value handle; absent means 0 (nothing enabled).
    private var clientConfigurations: [UInt16: UInt16] = [:]

    public init(database: GATTDatabase) {
        self.database = database
    }

    /// Whether the client enabled notifications (0x0001) or indications (0x0002) for a value.
    public func clientConfiguration(forValueHandle handle: UInt16) -> UInt16 {
        clientConfigurations[handle] ?? 0
    }

    public func respond(to request: ATTPDU, context: ATTRequestContext) async -> ATTPDU {
        let opcode = request.opcode
        let failure = { (code: ATTErrorCode, handle: UInt16) -> ATTPDU in
            .errorResponse(ATTErrorResponse(requestOpcode: opcode, handle: handle, errorCode: code))
        }
        let result: Result<ATTPDU, HandleError>
        switch request {
        case .exchangeMTURequest:
            // Normally answered by the bearer, which owns the MTU.
            result = .success(.exchangeMTUResponse(ATTExchangeMTUResponse(serverRxMTU: UInt16(clamping: context.mtu))))
        case .findInformationRequest(let pdu):
            result = findInformation(pdu, mtu: context.mtu)
        case .findByTypeValueRequest(let pdu):
            result = findByTypeValue(pdu, mtu: context.mtu)
        case .readByTypeRequest(let pdu):
            result = await readByType(pdu, mtu: context.mtu)
        case .readByGroupTypeRequest(let pdu):
            result = readByGroupType(pdu, mtu: context.mtu)
        case .readRequest(let pdu):
            result = await read(pdu, mtu: context.mtu)
        case .readBlobRequest(let pdu):
            result = await readBlob(pdu, mtu: context.mtu)
        case .writeRequest(let pdu):
            if let code = await write(pdu.value, toHandle: pdu.handle, kind: .request) {
                result = .failure(HandleError(code, pdu.handle))
            } else {
                result = .success(.writeResponse(ATTWriteResponse()))
            }
        case .prepareWriteRequest(let pdu):
            // Long and reliable writes are not offered: no characteristic here needs them.
            result = .failure(HandleError(.requestNotSupported, pdu.handle))
        default:
            result = .failure(HandleError(.requestNotSupported, request.handleForErrorResponse))
        }
        switch result {
        case .success(let response): return response
        case .failure(let error): return failure(error.code, error.handle)
        }
    }

    public func receive(command: ATTPDU, context: ATTRequestContext) async {
        guard case .writeCommand(let pdu) = command else { return }
        // A command is never answered, so a rejected write leaves no trace (3.4.5.3).
        _ = await write(pdu.value, toHandle: pdu.handle, kind: .command)
    }

    // MARK: Discovery

    private struct HandleError: Error {
        let code: ATTErrorCode
        let handle: UInt16
        init(_ code: ATTErrorCode, _ handle: UInt16) {
            self.code = code
            self.handle = handle
        }
    }

    private func validated(_ range: ATTHandleRange) -> HandleError? {
        range.isValid ? nil : HandleError(.invalidHandle, range.start)
    }

    private func findInformation(_ request: ATTFindInformationRequest, mtu: Int) -> Result<ATTPDU, HandleError> {
        if let error = validated(request.range) { return .failure(error) }
        let candidates = database.attributes(in: request.range)
        guard let first = candidates.first else { return .failure(HandleError(.attributeNotFound, request.range.start)) }
        // One response carries one UUID width: stop at the first attribute of the other width.
        let width = first.type.width
        let maximumEntries = (mtu - 2) / (2 + width.rawValue)
        let entries = candidates.prefix { $0.type.width == width }.prefix(maximumEntries)
            .map { ATTFindInformationResponse.Entry(handle: $0.handle, type: $0.type) }
        return .success(.findInformationResponse(ATTFindInformationResponse(entries: entries)))
    }

    private func findByTypeValue(_ request: ATTFindByTypeValueRequest, mtu: Int) -> Result<ATTPDU, HandleError> {
        if let error = validated(request.range) { return .failure(error) }
        let type = BluetoothUUID(request.attributeType)
        let maximumEntries = (mtu - 1) / 4
        var found: [ATTFindByTypeValueResponse.HandlesInformation] = []
        for attribute in database.attributes(in: request.range) where attribute.type == type {
            guard found.count < maximumEntries else { break }
            guard let value = searchableValue(of: attribute), Self.valuesMatch(value, request.value, type: type) else { continue }
            found.append(.init(foundHandle: attribute.handle, groupEndHandle: attribute.groupEndHandle))
        }
        guard !found.isEmpty else { return .failure(HandleError(.attributeNotFound, request.range.start)) }
        return .success(.findByTypeValueResponse(ATTFindByTypeValueResponse(handles: found)))
    }

    /// Service UUIDs match in either width, so a 128-bit query finds a 16-bit service.
    private static func valuesMatch(_ stored: [UInt8], _ requested: [UInt8], type: BluetoothUUID) -> Bool {
        if type == .primaryService || type == .secondaryService,
           let storedUUID = try? BluetoothUUID(littleEndianBytes: stored),
           let requestedUUID = try? BluetoothUUID(littleEndianBytes: requested) {
            return storedUUID == requestedUUID
        }
        return stored == requested
    }

    /// Values known without running application code; computed values are not searched,
    /// so a discovery request never triggers a read callback.
    private func searchableValue(of attribute: GATTAttribute) -> [UInt8]? {
        switch attribute.role {
        case .serviceDeclaration, .characteristicDeclaration:
            return attribute.declarationValue
        case .characteristicValue(let definition):
            guard definition.properties.contains(.read), case .constant(let value) = definition.value else { return nil }
            return value
        case .clientCharacteristicConfiguration(let valueHandle, _):
            return Self.littleEndian(clientConfiguration(forValueHandle: valueHandle))
        }
    }

    private func readByType(_ request: ATTReadByTypeRequest, mtu: Int) async -> Result<ATTPDU, HandleError> {
        if let error = validated(request.range) { return .failure(error) }
        let maximumValueLength = min(mtu - 4, 253)
        var entries: [ATTReadByTypeResponse.Entry] = []
        var used = 2
        matching: for attribute in database.attributes(in: request.range) where attribute.type == request.attributeType {
            let value: [UInt8]
            switch await readValue(of: attribute) {
            case .success(let read):
                value = Array(read.prefix(maximumValueLength))
            case .failure(let code):
                // Only the first match may fail the request; later failures end the list (3.4.4.1).
                if entries.isEmpty { return .failure(HandleError(code, attribute.handle)) }
                break matching
            }
            if let first = entries.first, first.value.count != value.count { break }
            guard used + 2 + value.count <= mtu else { break }
            entries.append(.init(handle: attribute.handle, value: value))
            used += 2 + value.count
        }
        guard let response = ATTReadByTypeResponse(entries: entries) else {
            return .failure(HandleError(.attributeNotFound, request.range.start))
        }
        return .success(.readByTypeResponse(response))
    }

    private func readByGroupType(_ request: ATTReadByGroupTypeRequest, mtu: Int) -> Result<ATTPDU, HandleError> {
        if let error = validated(request.range) { return .failure(error) }
        guard request.groupType == .primaryService || request.groupType == .secondaryService else {
            return .failure(HandleError(.unsupportedGroupType, request.range.start))
        }
        let maximumValueLength = min(mtu - 6, 251)
        var entries: [ATTReadByGroupTypeResponse.Entry] = []
        var used = 2
        for attribute in database.attributes(in: request.range) where attribute.type == request.groupType {
            let value = Array(attribute.declarationValue.prefix(maximumValueLength))
            if let first = entries.first, first.value.count != value.count { break }
            guard used + 4 + value.count <= mtu else { break }
            entries.append(.init(handle: attribute.handle, endGroupHandle: attribute.groupEndHandle, value: value))
            used += 4 + value.count
        }
        guard let response = ATTReadByGroupTypeResponse(entries: entries) else {
            return .failure(HandleError(.attributeNotFound, request.range.start))
        }
        return .success(.readByGroupTypeResponse(response))
    }

    // MARK: Reading and writing

    private func read(_ request: ATTReadRequest, mtu: Int) async -> Result<ATTPDU, HandleError> {
        guard let attribute = database.attribute(at: request.handle) else {
            return .failure(HandleError(.invalidHandle, request.handle))
        }
        switch await readValue(of: attribute) {
        case .success(let value):
            return .success(.readResponse(ATTReadResponse(value: Array(value.prefix(mtu - 1)))))
        case .failure(let code):
            return .failure(HandleError(code, request.handle))
        }
    }

    private func readBlob(_ request: ATTReadBlobRequest, mtu: Int) async -> Result<ATTPDU, HandleError> {
        guard let attribute = database.attribute(at: request.handle) else {
            return .failure(HandleError(.invalidHandle, request.handle))
        }
        let value: [UInt8]
        switch await readValue(of: attribute) {
        case .success(let read): value = read
        case .failure(let code): return .failure(HandleError(code, request.handle))
        }
        let offset = Int(request.offset)
        guard offset <= value.count else { return .failure(HandleError(.invalidOffset, request.handle)) }
        // The spec lets a server refuse Read Blob on a fixed-length value that a single Read
        // returns whole (3.4.4.5). Computed values may change length, so they are always served.
        if Self.hasFixedLength(attribute), value.count <= mtu - 3 {
            return .failure(HandleError(.attributeNotLong, request.handle))
        }
        let part = value[offset..<min(value.count, offset + mtu - 1)]
        return .success(.readBlobResponse(ATTReadBlobResponse(partOfValue: Array(part))))
    }

    private static func hasFixedLength(_ attribute: GATTAttribute) -> Bool {
        if case .characteristicValue(let definition) = attribute.role, case .computed = definition.value { return false }
        return true
    }

    private func readValue(of attribute: GATTAttribute) async -> Result<[UInt8], ATTErrorCode> {
        switch attribute.role {
        case .serviceDeclaration, .characteristicDeclaration:
            return .success(attribute.declarationValue)
        case .clientCharacteristicConfiguration(let valueHandle, _):
            return .success(Self.littleEndian(clientConfiguration(forValueHandle: valueHandle)))
        case .characteristicValue(let definition):
            guard definition.properties.contains(.read) else { return .failure(.readNotPermitted) }
            switch definition.value {
            case .constant(let value):
                return .success(Array(value.prefix(Self.maximumValueLength)))
            case .computed(let compute):
                do {
                    return .success(Array(try await compute().prefix(Self.maximumValueLength)))
                } catch let code as ATTErrorCode {
                    return .failure(code)
                } catch {
                    return .failure(.unlikelyError)
                }
            }
        }
    }

    /// Nil when the write was accepted, else the code to reject it with.
    private func write(_ value: [UInt8], toHandle handle: UInt16, kind: GATTWriteKind) async -> ATTErrorCode? {
        guard let attribute = database.attribute(at: handle) else { return .invalidHandle }
        switch attribute.role {
        case .serviceDeclaration, .characteristicDeclaration:
            return .writeNotPermitted
        case .clientCharacteristicConfiguration(let valueHandle, let allowedBits):
            guard value.count == 2 else { return .invalidAttributeValueLength }
            let bits = UInt16(value[0]) | UInt16(value[1]) << 8
            // Bits the characteristic does not support are reserved; they are not stored.
            clientConfigurations[valueHandle] = bits & allowedBits
            return nil
        case .characteristicValue(let definition):
            let required: GATTCharacteristicProperties = kind == .request ? .write : .writeWithoutResponse
            guard definition.properties.contains(required) else { return .writeNotPermitted }
            guard value.count <= Self.maximumValueLength else { return .invalidAttributeValueLength }
            guard let onWrite = definition.onWrite else { return nil }
            do {
                try await onWrite(value, kind)
                return nil
            } catch let code as ATTErrorCode {
                return code
            } catch {
                return .unlikelyError
            }
        }
    }

    private static func littleEndian(_ value: UInt16) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)]
    }
}
