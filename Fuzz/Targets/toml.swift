@testable import NodeTOML

/// A node's configuration file. It is the user's own, but it may come from a package, a
/// provisioning tool or a copy-paste, and a bad one must be refused with its line, not trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = try? TOMLReader.parse(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
