import BLEHost

/// Bytes from a hex string such as "04 0e 04 01 03 0c 00" (spaces optional).
package func hex(_ text: String) -> [UInt8] {
    let digits = text.filter { !$0.isWhitespace }
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        bytes.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

package let tracerServiceUUID = BluetoothUUID(string: "a09a0000-5aaa-47f2-9c7f-93bdb3a65376")!
