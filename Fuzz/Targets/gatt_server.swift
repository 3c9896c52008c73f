import Dispatch
@testable import BLEHost

/// The GATT server answering a peer's ATT PDUs the way `ATTBearer.serve` hands them over:
/// decode, then requests to `respond(to:context:)` and commands to `receive(command:context:)`.
/// The first byte picks the negotiated MTU; the rest is a sequence of length-prefixed PDUs on
/// one connection, so CCCD writes and later reads meet. The database has what the Tracer
/// profile uses (constant, computed and long values, write checks, a CCCD).
let database: GATTDatabase = {
    let service = GATTServiceDefinition(uuid: BluetoothUUID(string: "a09a0000-5aaa-47f2-9c7f-93bdb3a65376")!, characteristics: [
        GATTCharacteristicDefinition(uuid: 0x2A00, properties: [.read], value: .constant(Array(repeating: 0x41, count: 8))),
        GATTCharacteristicDefinition(
            uuid: BluetoothUUID(string: "a09a0001-5aaa-47f2-9c7f-93bdb3a65376")!, properties: [.read, .notify],
            value: .computed { Array(repeating: 0x5A, count: 300) }),
        GATTCharacteristicDefinition(
            uuid: BluetoothUUID(string: "a09a0002-5aaa-47f2-9c7f-93bdb3a65376")!, properties: [.write, .writeWithoutResponse],
            onWrite: { value, _ in if value.count != 8 && value.count != 10 { throw ATTErrorCode.invalidAttributeValueLength } }),
    ])
    return try! GATTDatabase(services: [service])
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let context = ATTRequestContext(mtu: 23 + Int(input.byte()))
    var payloads: [[UInt8]] = []
    while !input.isEmpty { payloads.append(input.message()) }
    let server = GATTServer(database: database)
    let done = DispatchSemaphore(value: 0)
    // The server is an actor; libFuzzer calls this synchronously, so wait for the exchange.
    Task {
        for payload in payloads {
            guard let first = payload.first, let pdu = try? ATTPDU(decoding: payload) else { continue }
            if ATTOpcode(first).role != .request {
                await server.receive(command: pdu, context: context)
                continue
            }
            let response = await server.respond(to: pdu, context: context).encode()
            // The bearer would turn this into Unlikely Error, but it means the server built an
            // answer it must not send.
            precondition(response.count <= context.mtu, "response of \(response.count) bytes over an MTU of \(context.mtu)")
        }
        done.signal()
    }
    done.wait()
    return 0
}
