/// The 16-bit UUIDs that GATT itself assigns (declarations, descriptors, GAP and GATT services).
extension BluetoothUUID {
    public static let primaryService: BluetoothUUID = 0x2800
    public static let secondaryService: BluetoothUUID = 0x2801
    public static let include: BluetoothUUID = 0x2802
    public static let characteristic: BluetoothUUID = 0x2803
    public static let clientCharacteristicConfiguration: BluetoothUUID = 0x2902
    public static let genericAccessService: BluetoothUUID = 0x1800
    public static let genericAttributeService: BluetoothUUID = 0x1801
    public static let deviceName: BluetoothUUID = 0x2A00
    public static let appearance: BluetoothUUID = 0x2A01
}
