/// Cuts one fuzzer input into several messages, so that one input can drive a parser through a
/// sequence (a link's PDUs, a transport's reads) instead of a single call.
///
/// Each message is a length byte followed by up to that many bytes; the last one takes what is
/// left. A cut of the input is itself a valid input, which keeps libFuzzer's mutations useful.
struct FuzzInput {
    private var bytes: ArraySlice<UInt8>

    init(_ data: UnsafePointer<UInt8>, _ size: Int) {
        bytes = Array(UnsafeBufferPointer(start: data, count: size))[...]
    }

    var isEmpty: Bool { bytes.isEmpty }

    /// The next byte, or 0 once the input is used up.
    mutating func byte() -> UInt8 {
        bytes.popFirst() ?? 0
    }

    /// The next length-prefixed message.
    mutating func message() -> [UInt8] {
        let length = Int(byte())
        let message = bytes.prefix(length)
        bytes = bytes.dropFirst(length)
        return Array(message)
    }

    /// What is left of the input.
    mutating func rest() -> [UInt8] {
        defer { bytes = [] }
        return Array(bytes)
    }
}
