/// One device's advertisement, from either a legacy or an extended report, for code that handles both.
public struct AdvertisementSighting: Sendable, Equatable {
    public var address: BluetoothAddress
    public var addressType: LEAddressType
    /// dBm; 127 means not available.
    public var rssi: Int8
    public var isConnectable: Bool
    public var isScanResponse: Bool
    public var data: AdvertisingData
}

/// LE Advertising Report (subevent 0x02): one or more legacy reports.
public struct LEAdvertisingReportEvent: Sendable, Equatable {
    public struct Report: Sendable, Equatable {
        /// 0 ADV_IND, 1 ADV_DIRECT_IND, 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND, 4 SCAN_RSP.
        public var eventType: UInt8
        public var addressType: LEAddressType
        public var address: BluetoothAddress
        public var data: [UInt8]
        public var rssi: Int8

        public var sighting: AdvertisementSighting {
            AdvertisementSighting(
                address: address, addressType: addressType, rssi: rssi,
                isConnectable: eventType == 0 || eventType == 1, isScanResponse: eventType == 4,
                data: AdvertisingData(parsing: data))
        }
    }

    public var reports: [Report]

    /// Reports are read one after another (type, address type, address, length, data, RSSI), as controllers and
    /// the Linux kernel lay them out.
    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        reports = try reader.readCountedList("Num_Reports") { (reader: inout ByteReader) throws(PacketDecodingError) in
            let eventType = try reader.readUInt8("Event_Type")
            let addressType = LEAddressType(rawValue: try reader.readUInt8("Address_Type"))
            let address = try BluetoothAddress(reading: &reader, field: "Address")
            let length = Int(try reader.readUInt8("Data_Length"))
            guard length <= 31 else { throw .invalidValue(field: "Data_Length", value: length) }
            let data = try reader.readBytes(length, "Data")
            let rssi = try reader.readInt8("RSSI")
            return Report(eventType: eventType, addressType: addressType, address: address, data: data, rssi: rssi)
        }
    }
}

/// LE Extended Advertising Report (subevent 0x0D).
public struct LEExtendedAdvertisingReportEvent: Sendable, Equatable {
    public struct Report: Sendable, Equatable {
        /// Bit 0 connectable, 1 scannable, 2 directed, 3 scan response, 4 legacy PDU, bits 5-6 data status.
        public var eventType: UInt16
        public var addressType: LEAddressType
        public var address: BluetoothAddress
        public var primaryPHY: UInt8
        public var secondaryPHY: UInt8
        public var advertisingSID: UInt8
        public var txPower: Int8
        public var rssi: Int8
        public var periodicAdvertisingInterval: UInt16
        public var directAddressType: LEAddressType
        public var directAddress: BluetoothAddress
        public var data: [UInt8]

        public var isConnectable: Bool { eventType & 0x0001 != 0 }
        public var isScanResponse: Bool { eventType & 0x0008 != 0 }
        /// 0 complete, 1 incomplete with more to come, 2 incomplete and truncated.
        public var dataStatus: UInt8 { UInt8((eventType >> 5) & 0x3) }

        public var sighting: AdvertisementSighting {
            AdvertisementSighting(
                address: address, addressType: addressType, rssi: rssi,
                isConnectable: isConnectable, isScanResponse: isScanResponse, data: AdvertisingData(parsing: data))
        }
    }

    public var reports: [Report]

    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        reports = try reader.readCountedList("Num_Reports") { (reader: inout ByteReader) throws(PacketDecodingError) in
            let eventType = try reader.readUInt16("Event_Type")
            let addressType = LEAddressType(rawValue: try reader.readUInt8("Address_Type"))
            let address = try BluetoothAddress(reading: &reader, field: "Address")
            let primaryPHY = try reader.readUInt8("Primary_PHY")
            let secondaryPHY = try reader.readUInt8("Secondary_PHY")
            let sid = try reader.readUInt8("Advertising_SID")
            let txPower = try reader.readInt8("TX_Power")
            let rssi = try reader.readInt8("RSSI")
            let interval = try reader.readUInt16("Periodic_Advertising_Interval")
            let directAddressType = LEAddressType(rawValue: try reader.readUInt8("Direct_Address_Type"))
            let directAddress = try BluetoothAddress(reading: &reader, field: "Direct_Address")
            let length = Int(try reader.readUInt8("Data_Length"))
            let data = try reader.readBytes(length, "Data")
            return Report(
                eventType: eventType, addressType: addressType, address: address, primaryPHY: primaryPHY,
                secondaryPHY: secondaryPHY, advertisingSID: sid, txPower: txPower, rssi: rssi,
                periodicAdvertisingInterval: interval, directAddressType: directAddressType,
                directAddress: directAddress, data: data)
        }
    }
}

extension LEMetaEvent {
    /// Every advertisement in this event, whether legacy or extended; empty for other subevents.
    public var sightings: [AdvertisementSighting] {
        switch self {
        case .advertisingReport(let event): event.reports.map(\.sighting)
        case .extendedAdvertisingReport(let event): event.reports.map(\.sighting)
        default: []
        }
    }
}
