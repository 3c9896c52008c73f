import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// Commands encode to exactly the bytes a working host sent to Bumble (h4-reference.txt).
@Suite(.tags(.unit)) struct HCICommandEncodingTests {
    @Test func initSequenceCommands() {
        #expect(Reset().packet.h4Encoded == Reference.resetCommand)
        #expect(ReadLocalVersionInformation().packet.h4Encoded == Reference.readLocalVersionCommand)
        #expect(ReadLocalSupportedCommands().packet.h4Encoded == Reference.readLocalCommandsCommand)
        #expect(ReadLocalSupportedFeatures().packet.h4Encoded == Reference.readLocalFeaturesCommand)
        #expect(ReadBDADDR().packet.h4Encoded == Reference.readBDADDRCommand)
        #expect(SetEventMask(mask: 0x3DBF_F807_BFFF_9FFF).packet.h4Encoded == Reference.setEventMaskBumble)
        #expect(LESetEventMask(mask: 0x1FFF).packet.h4Encoded == Reference.leSetEventMaskBumble)
        #expect(LEReadBufferSize().packet.h4Encoded == Reference.leReadBufferSizeCommand)
        #expect(ReadBufferSize().packet.h4Encoded == Reference.readBufferSizeCommand)
        #expect(LEReadLocalSupportedFeatures().packet.h4Encoded == Reference.leReadFeaturesCommand)
        #expect(LESetRandomAddress(address: BluetoothAddress(string: "C0:00:00:00:00:DD")!).packet.h4Encoded
            == Reference.leSetRandomAddressCommand)
    }

    @Test func hostDefaultEventMasksEnableWhatTheHostHandles() {
        // LE Meta (61), Disconnection Complete (4), Hardware Error (15).
        #expect(SetEventMask.hostDefault & (1 << 61) != 0)
        #expect(SetEventMask.hostDefault & (1 << 4) != 0)
        #expect(SetEventMask.hostDefault & (1 << 15) != 0)
        // Subevents 0x01, 0x02, 0x03, 0x04, 0x0A, 0x0D are bits 0, 1, 2, 3, 9, 12.
        for subevent in [0x01, 0x02, 0x03, 0x04, 0x0A, 0x0D] {
            #expect(LESetEventMask.hostDefault & (1 << UInt64(subevent - 1)) != 0)
        }
        #expect(LESetEventMask.hostDefault & (1 << 5) == 0, "Remote Connection Parameter Request needs a host reply")
    }

    @Test func advertisingCommands() throws {
        #expect(LESetAdvertisingParameters().packet.h4Encoded == Reference.leSetAdvertisingParametersCommand)
        let uuid = try #require(BluetoothUUID(string: Reference.advertisedUUID))
        let data = AdvertisingData([.flags(0x06), .completeList128BitServiceUUIDs([uuid])])
        #expect(try LESetAdvertisingData(LegacyAdvertisingPayload(data)).packet.h4Encoded == Reference.leSetAdvertisingDataCommand)
        let scanResponse = AdvertisingData([.completeLocalName("RawNode")])
        #expect(try LESetScanResponseData(LegacyAdvertisingPayload(scanResponse)).packet.h4Encoded
            == Reference.leSetScanResponseDataCommand)
        #expect(LESetAdvertisingEnable(true).packet.h4Encoded == Reference.leSetAdvertisingEnableCommand)
        #expect(LESetAdvertisingEnable(false).encode() == hex("0a 20 01 00"))
    }

    @Test func advertisingPayloadOverThirtyOneBytesIsRejected() {
        let long = AdvertisingData([.flags(0x06), .completeList128BitServiceUUIDs([tracerServiceUUID]), .completeLocalName("0123456789")])
        #expect(throws: AdvertisingDataError.tooLong(length: 33, limit: 31)) { try LegacyAdvertisingPayload(long) }
    }

    @Test func scanningCommands() {
        #expect(LESetScanParameters().packet.h4Encoded == Reference.leSetScanParametersCommand)
        #expect(LESetScanEnable(true).packet.h4Encoded == Reference.leSetScanEnableCommand)
        #expect(LESetScanEnable(false).packet.h4Encoded == Reference.leSetScanDisableCommand)
    }

    @Test func connectionCommands() {
        let create = LECreateConnection(peerAddressType: .random, peerAddress: BluetoothAddress(string: "C0:00:00:00:00:DD")!)
        #expect(create.packet.h4Encoded == Reference.leCreateConnectionCommand)
        #expect(LECreateConnectionCancel().packet.h4Encoded == hex("01 0e 20 00"))
        #expect(Disconnect(connectionHandle: 1).packet.h4Encoded == Reference.disconnectCommand)
        #expect(ReadRSSI(connectionHandle: 1).packet.h4Encoded == Reference.readRSSICommand)
        #expect(LEReadRemoteFeatures(connectionHandle: 0x0040).packet.h4Encoded == hex("01 16 20 02 40 00"))
    }

    @Test func opcodeFields() {
        #expect(LECreateConnection.opcode == HCIOpcode(rawValue: 0x200D))
        #expect(LECreateConnection.opcode.ogf == 0x08)
        #expect(LECreateConnection.opcode.ocf == 0x000D)
        #expect(Disconnect.opcode.description == "0x0406")
    }
}
