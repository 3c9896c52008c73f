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

/// Polls until `condition` holds or `timeout` passes; returns whether it held. Every caller waits for
/// something that should happen, so the limit only bounds how long a failure takes: 2 s failed
/// passing tests on 2 cores shared with builds, and a generous limit costs a passing test nothing.
package func eventually(timeout: Duration = .seconds(10), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return await condition()
}

package let tracerServiceUUID = BluetoothUUID(string: "a09a0000-5aaa-47f2-9c7f-93bdb3a65376")!
