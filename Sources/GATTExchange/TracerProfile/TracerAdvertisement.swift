import BLEHost

extension TracerService {
    /// What a Tracer node advertises, and nothing else: Flags (LE General Discoverable, BR/EDR not
    /// supported), the service UUID, and the TX power level so that peers can estimate attenuation.
    /// No name and no other data: the advertisement must not identify anyone.
    public static func advertisingData(txPower: Int8) -> AdvertisingData {
        AdvertisingData([
            .flags(AdvertisingDataStructure.generalDiscoverableLEOnlyFlags),
            .completeList128BitServiceUUIDs([serviceUUID]),
            .txPowerLevel(txPower),
        ])
    }

    /// True when an advertisement carries the Tracer service UUID.
    public static func isAdvertised(in data: AdvertisingData) -> Bool {
        data.serviceUUIDs128.contains(serviceUUID)
    }
}
