@testable import BLEHost

/// Advertising and scan-response data as any device in range broadcasts it, and the
/// service-UUID lookup the scanner runs on every report.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let advertisingData = AdvertisingData(parsing: Array(UnsafeBufferPointer(start: data, count: size)))
    _ = advertisingData.serviceUUIDs128
    _ = try? advertisingData.encode()
    return 0
}
