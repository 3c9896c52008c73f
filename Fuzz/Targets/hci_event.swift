@testable import BLEHost

/// HCI event packets as a controller (or whatever sits on the transport) sends them, without
/// the H4 type byte: the generic decoder, then the LE meta subevents the host acts on.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? HCIEvent(decoding: body)
    // The subevent decoders also run on their own parameters, so that the fuzzer does not have
    // to find the event header before it can reach them.
    _ = try? LEMetaEvent(decoding: body)
    _ = try? LEAdvertisingReportEvent(decoding: body)
    _ = try? LEExtendedAdvertisingReportEvent(decoding: body)
    _ = try? LEConnectionCompleteEvent(decoding: body, enhanced: false)
    _ = try? LEConnectionCompleteEvent(decoding: body, enhanced: true)
    _ = try? NumberOfCompletedPacketsEvent(decoding: body)
    _ = try? CommandCompleteEvent(decoding: body)
    _ = try? CommandStatusEvent(decoding: body)
    _ = try? DisconnectionCompleteEvent(decoding: body)
    _ = try? ReadLocalVersionInformation.ReturnParameters(decoding: body)
    _ = try? ReadLocalSupportedCommands.ReturnParameters(decoding: body)
    _ = try? ReadBufferSize.ReturnParameters(decoding: body)
    _ = try? LEReadBufferSize.ReturnParameters(decoding: body)
    _ = try? ReadBDADDR.ReturnParameters(decoding: body)
    _ = try? ReadRSSI.ReturnParameters(decoding: body)
    return 0
}
