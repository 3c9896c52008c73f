/// H4 packets copied from /work/shared/bumble/h4-reference.txt (Bumble 0.0.236 virtual controller),
/// with their H4 indicator byte.
package enum Reference {
    // Init sequence (section 2).
    package static let resetCommand = hex("01 03 0c 00")
    package static let resetComplete = hex("04 0e 04 01 03 0c 00")
    package static let readLocalVersionCommand = hex("01 01 10 00")
    package static let readLocalVersionComplete = hex("04 0e 0c 01 01 10 00 09 00 00 09 ff ff 00 00")
    package static let readLocalCommandsCommand = hex("01 02 10 00")
    package static let readLocalCommandsComplete = hex("""
        04 0e 44 01 02 10 00 20 00 80 03 00 c0 00 00 00 00 e4 00 00 00 a8 22 00 00 00 00 00 00 04 00 00 f7 ff ff 7f \
        00 00 00 30 f0 f9 ff 01 00 80 04 00 20 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
        """)
    package static let readLocalFeaturesCommand = hex("01 03 10 00")
    package static let readLocalFeaturesComplete = hex("04 0e 0c 01 03 10 00 00 00 00 00 60 00 00 80")
    package static let readBDADDRCommand = hex("01 09 10 00")
    package static let readBDADDRComplete = hex("04 0e 0a 01 09 10 00 01 00 00 00 00 f0")
    package static let setEventMaskBumble = hex("01 01 0c 08 ff 9f ff bf 07 f8 bf 3d")
    package static let setEventMaskComplete = hex("04 0e 04 01 01 0c 00")
    package static let leSetEventMaskBumble = hex("01 01 20 08 ff 1f 00 00 00 00 00 00")
    package static let leSetEventMaskComplete = hex("04 0e 04 01 01 20 00")
    package static let leReadBufferSizeCommand = hex("01 02 20 00")
    package static let leReadBufferSizeComplete = hex("04 0e 07 01 02 20 00 1b 00 40")
    package static let leReadFeaturesCommand = hex("01 03 20 00")
    package static let leReadFeaturesComplete = hex("04 0e 0c 01 03 20 00 ff 49 01 00 00 00 00 00")
    package static let readBufferSizeCommand = hex("01 05 10 00")
    package static let readBufferSizeComplete = hex("04 0e 0b 01 05 10 00 1b 00 00 40 00 00 00")
    package static let leSetRandomAddressCommand = hex("01 05 20 06 dd 00 00 00 00 c0")
    package static let leSetRandomAddressComplete = hex("04 0e 04 01 05 20 00")

    // Advertising (section 3).
    package static let leSetAdvertisingParametersCommand = hex("01 06 20 0f a0 00 a0 00 00 01 00 00 00 00 00 00 00 07 00")
    package static let leSetAdvertisingDataCommand = hex("""
        01 08 20 20 15 02 01 06 11 07 9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e 00 00 00 00 00 00 00 00 00 00
        """)
    package static let advertisedAD = hex("02 01 06 11 07 9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e")
    package static let advertisedUUID = "6e400001-b5a3-f393-e0a9-e50e24dcca9e"
    package static let leSetScanResponseDataCommand = hex("""
        01 09 20 20 09 08 09 52 61 77 4e 6f 64 65 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
        """)
    package static let leSetAdvertisingEnableCommand = hex("01 0a 20 01 01")
    package static let peripheralConnectionComplete = hex("04 3e 13 01 00 01 00 01 01 ee 00 00 00 00 c0 0a 00 00 00 0a 00 07")

    // Scanning and central role (section 4).
    package static let leSetScanParametersCommand = hex("01 0b 20 07 01 60 00 30 00 01 00")
    package static let leSetScanEnableCommand = hex("01 0c 20 02 01 00")
    package static let leSetScanDisableCommand = hex("01 0c 20 02 00 00")
    package static let legacyAdvertisingReport = hex("""
        04 3e 21 02 01 00 01 dd 00 00 00 00 c0 15 02 01 06 11 07 9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e ce
        """)
    package static let legacyScanResponseReport = hex("""
        04 3e 21 02 01 04 01 dd 00 00 00 00 c0 15 02 01 06 11 07 9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e ce
        """)
    package static let extendedAdvertisingReport = hex("""
        04 3e 2f 0d 01 01 00 01 dd 00 00 00 00 c0 01 01 00 00 ce 00 00 00 00 00 00 00 00 00 15 02 01 06 11 07 9e ca \
        dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e
        """)
    package static let extendedScanResponseReport = hex("""
        04 3e 2f 0d 01 08 00 01 dd 00 00 00 00 c0 01 01 00 00 ce 00 00 00 00 00 00 00 00 00 15 02 01 06 11 07 9e ca \
        dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e
        """)
    package static let leCreateConnectionCommand = hex("""
        01 0d 20 19 60 00 30 00 00 01 dd 00 00 00 00 c0 01 18 00 28 00 00 00 90 01 00 00 00 00
        """)
    package static let leCreateConnectionStatus = hex("04 0f 04 00 01 0d 20")
    package static let centralConnectionComplete = hex("04 3e 13 01 00 01 00 00 01 dd 00 00 00 00 c0 18 00 00 00 90 01 00")
    package static let readRSSICommand = hex("01 05 14 02 01 00")
    package static let readRSSIUnsupported = hex("04 0e 04 01 05 14 01")
    package static let disconnectCommand = hex("01 06 04 03 01 00 13")
    package static let disconnectStatus = hex("04 0f 04 00 01 06 04")
    package static let disconnectionComplete = hex("04 05 04 00 01 00 13")
    package static let numberOfCompletedPackets = hex("04 13 05 01 01 00 01 00")

    // ACL carrying ATT.
    package static let attMTURequestFromController = hex("02 01 20 07 00 03 00 04 00 02 17 00")
    package static let attMTUResponseFromHost = hex("02 01 00 07 00 03 00 04 00 03 17 00")
    package static let attFindByTypeValueRequest = hex("""
        02 01 20 1b 00 17 00 04 00 06 01 00 ff ff 00 28 9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 01 00 40 6e
        """)
    package static let attReadByTypeResponseFromHost = hex("""
        02 01 00 1b 00 17 00 04 00 09 15 05 00 02 06 00 9e ca dc 24 0e e5 a9 e0 93 f3 a3 b5 02 00 40 6e
        """)
    package static let attReadResponseFromController = hex("02 01 20 0d 00 09 00 04 00 0b c1 c2 c3 c4 c5 c6 c7 c8")
    package static let attWriteRequestFromHost = hex("02 01 00 0f 00 0b 00 04 00 12 08 00 d1 d2 d3 d4 d5 d6 d7 d8")

    /// Every controller-to-host packet above, for framing and fuzz tests.
    package static let controllerToHost: [[UInt8]] = [
        resetComplete, readLocalVersionComplete, readLocalCommandsComplete, readLocalFeaturesComplete,
        readBDADDRComplete, setEventMaskComplete, leSetEventMaskComplete, leReadBufferSizeComplete,
        leReadFeaturesComplete, readBufferSizeComplete, leSetRandomAddressComplete, peripheralConnectionComplete,
        legacyAdvertisingReport, legacyScanResponseReport, extendedAdvertisingReport, extendedScanResponseReport,
        leCreateConnectionStatus, centralConnectionComplete, readRSSIUnsupported, disconnectStatus,
        disconnectionComplete, numberOfCompletedPackets, attMTURequestFromController, attFindByTypeValueRequest,
        attReadResponseFromController,
    ]
}
