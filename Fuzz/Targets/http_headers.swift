@testable import HTTPHeaders

/// The header lines of a positive list server's or a CDN's answer, one libcurl header callback
/// per line, as `CurlTransfer` hands them to `HTTPHeaderParser`. A hostile server chooses every
/// byte: status lines that reset the set, folded lines, repeated names, no colon, no UTF-8.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    var parser = HTTPHeaderParser()
    var lineStart = 0
    for index in 0..<size where bytes[index] == UInt8(ascii: "\n") || index == size - 1 {
        parser.consume(line: UnsafeBufferPointer(rebasing: bytes[lineStart...index]))
        lineStart = index + 1
    }
    // A name is what came before a colon, trimmed: never empty, never with a colon of its own.
    for name in parser.fields.keys where name.isEmpty || name.contains(":") {
        fatalError("header name \(name.debugDescription) stored")
    }
    return 0
}
