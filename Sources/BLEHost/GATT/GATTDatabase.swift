/// One attribute of the database, with the handle it was assigned.
public struct GATTAttribute: Sendable {
    public enum Role: Sendable {
        case serviceDeclaration(endGroupHandle: UInt16)
        case characteristicDeclaration
        case characteristicValue(GATTCharacteristicDefinition)
        /// The CCCD of the characteristic whose value has `valueHandle`; `allowedBits` are the
        /// notify (0x0001) and indicate (0x0002) bits its properties permit.
        case clientCharacteristicConfiguration(valueHandle: UInt16, allowedBits: UInt16)
    }

    public let handle: UInt16
    public let type: BluetoothUUID
    public let role: Role
    /// The value of declarations, fixed at build time; empty for the other roles.
    let declarationValue: [UInt8]

    /// The handle of the last attribute in the group this attribute opens, or its own handle.
    public var groupEndHandle: UInt16 {
        if case .serviceDeclaration(let end) = role { return end }
        return handle
    }
}

public enum GATTDatabaseError: Error, Sendable, Equatable {
    /// The services need more than the 0xFFFF handles ATT can address.
    case tooManyAttributes(count: Int)
}

/// An immutable attribute database: the GAP (0x1800) and GATT (0x1801) services, then the
/// given services, with handles assigned from 0x0001 in order (Core Spec Vol 3 Part G 3).
public struct GATTDatabase: Sendable {
    /// Sorted by handle, with `attributes[i].handle == i + 1`.
    public let attributes: [GATTAttribute]

    public init(
        services: [GATTServiceDefinition],
        deviceName: String = "",
        appearance: UInt16 = 0x0000
    ) throws(GATTDatabaseError) {
        let builtIn = [
            GATTServiceDefinition(uuid: .genericAccessService, characteristics: [
                GATTCharacteristicDefinition(uuid: .deviceName, properties: .read, value: .constant(Array(deviceName.utf8.prefix(248)))),
                GATTCharacteristicDefinition(uuid: .appearance, properties: .read,
                                             value: .constant([UInt8(truncatingIfNeeded: appearance), UInt8(truncatingIfNeeded: appearance >> 8)])),
            ]),
            GATTServiceDefinition(uuid: .genericAttributeService, characteristics: []),
        ]
        let all = builtIn + services
        let count = all.reduce(0) { total, service in
            total + 1 + service.characteristics.reduce(0) { $0 + 2 + (Self.needsConfiguration($1.properties) ? 1 : 0) }
        }
        guard count <= Int(UInt16.max) else { throw .tooManyAttributes(count: count) }

        var attributes: [GATTAttribute] = []
        attributes.reserveCapacity(count)
        var next: UInt16 = 1
        func add(_ type: BluetoothUUID, _ role: GATTAttribute.Role, _ value: [UInt8] = []) {
            attributes.append(GATTAttribute(handle: next, type: type, role: role, declarationValue: value))
            next &+= 1
        }
        for service in all {
            let size = 1 + service.characteristics.reduce(0) { $0 + 2 + (Self.needsConfiguration($1.properties) ? 1 : 0) }
            let endHandle = next &+ UInt16(size - 1)
            add(service.isPrimary ? .primaryService : .secondaryService,
                .serviceDeclaration(endGroupHandle: endHandle), service.uuid.littleEndianBytes)
            for characteristic in service.characteristics {
                let valueHandle = next &+ 1
                var declaration = ByteWriter(capacity: 19)
                declaration.write(characteristic.properties.rawValue)
                declaration.write(valueHandle)
                declaration.write(contentsOf: characteristic.uuid.littleEndianBytes)
                add(.characteristic, .characteristicDeclaration, declaration.bytes)
                add(characteristic.uuid, .characteristicValue(characteristic))
                if Self.needsConfiguration(characteristic.properties) {
                    var allowed: UInt16 = 0
                    if characteristic.properties.contains(.notify) { allowed |= 0x0001 }
                    if characteristic.properties.contains(.indicate) { allowed |= 0x0002 }
                    add(.clientCharacteristicConfiguration,
                        .clientCharacteristicConfiguration(valueHandle: valueHandle, allowedBits: allowed))
                }
            }
        }
        self.attributes = attributes
    }

    private static func needsConfiguration(_ properties: GATTCharacteristicProperties) -> Bool {
        !properties.isDisjoint(with: [.notify, .indicate])
    }

    public func attribute(at handle: UInt16) -> GATTAttribute? {
        let index = Int(handle) - 1
        return attributes.indices.contains(index) ? attributes[index] : nil
    }

    /// The attributes whose handles lie in `range`, in handle order.
    public func attributes(in range: ATTHandleRange) -> ArraySlice<GATTAttribute> {
        let lower = max(Int(range.start) - 1, 0)
        let upper = min(Int(range.end), attributes.count)
        return lower < upper ? attributes[lower..<upper] : []
    }

    /// The value handle of the first characteristic with `uuid`.
    public func valueHandle(ofCharacteristic uuid: BluetoothUUID) -> UInt16? {
        attributes.first { attribute in
            if case .characteristicValue = attribute.role { return attribute.type == uuid }
            return false
        }?.handle
    }
}
