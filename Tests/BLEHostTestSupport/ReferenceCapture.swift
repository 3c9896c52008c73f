import BLEHost

/// ATT PDUs captured from a Bumble virtual controller (shared/bumble/h4-reference.txt, sections 3 and 4).
/// Each line is a whole H4 ACL packet; the ATT PDU follows the H4 type, the ACL header and the L2CAP header.
package enum ReferenceCapture {
    package static let exchangeMTURequest = "02 01 20 07 00 03 00 04 00 02 17 00"
    package static let exchangeMTUResponse = "02 01 00 07 00 03 00 04 00 03 17 00"
    package static let findByTypeValueRequest = "02 01 20 1b 00 17 00 04 00 06 01 00 ff ff 00 28 9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e"
    package static let findByTypeValueResponse = "02 01 00 09 00 05 00 04 00 07 04 00 08 00"
    package static let readByTypeRequest4to8 = "02 01 20 0b 00 07 00 04 00 08 04 00 08 00 03 28"
    package static let readByTypeResponseAt5 = "02 01 00 1b 00 17 00 04 00 09 15 05 00 02 06 00 9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 02 00 40 6e"
    package static let readByTypeRequest6to8 = "02 01 20 0b 00 07 00 04 00 08 06 00 08 00 03 28"
    package static let readByTypeResponseAt7 = "02 01 00 1b 00 17 00 04 00 09 15 07 00 08 08 00 9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 03 00 40 6e"
    package static let readByTypeRequest8to8 = "02 01 20 0b 00 07 00 04 00 08 08 00 08 00 03 28"
    package static let errorResponseNotFound = "02 01 00 09 00 05 00 04 00 01 08 08 00 0a"
    package static let readRequest = "02 01 20 07 00 03 00 04 00 0a 06 00"
    package static let readResponse = "02 01 00 0d 00 09 00 04 00 0b c1 c2 c3 c4 c5 c6 c7 c8"
    package static let writeRequest = "02 01 20 0f 00 0b 00 04 00 12 08 00 d1 d2 d3 d4 d5 d6 d7 d8"
    package static let writeResponse = "02 01 00 05 00 01 00 04 00 13"

    package static let all = [
        exchangeMTURequest, exchangeMTUResponse, findByTypeValueRequest, findByTypeValueResponse,
        readByTypeRequest4to8, readByTypeResponseAt5, readByTypeRequest6to8, readByTypeResponseAt7,
        readByTypeRequest8to8, errorResponseNotFound, readRequest, readResponse, writeRequest, writeResponse,
    ]

    /// The ATT PDU inside one captured H4 ACL packet, after checking the headers that frame it.
    package static func attPDU(_ packet: String) -> [UInt8] {
        let bytes = bytesFromHex(packet)
        precondition(bytes[0] == 0x02, "not an H4 ACL packet")
        let aclLength = Int(bytes[3]) | Int(bytes[4]) << 8
        let l2capLength = Int(bytes[5]) | Int(bytes[6]) << 8
        let channel = Int(bytes[7]) | Int(bytes[8]) << 8
        precondition(aclLength == bytes.count - 5 && l2capLength == bytes.count - 9 && channel == 0x0004)
        return Array(bytes[9...])
    }

    /// 6E400001-B5A3-F393-E0A9-E50E24DCCA9E, the service the captured peripheral offers.
    package static let serviceUUID = BluetoothUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!
}
