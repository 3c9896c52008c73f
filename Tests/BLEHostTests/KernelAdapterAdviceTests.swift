import Testing
import TestTiers
@testable import BLEHost

/// `tracer doctor`'s adapter list: who holds each adapter, judged from the ioctl list (which sees
/// every adapter and whether it is up) and the management interface's list (which hides adapters a
/// user channel holds), and which adapter to run the node on.
@Suite(.tags(.unit)) struct KernelAdapterAdviceTests {
    let heldByBluetoothd = KernelAdapter(index: 0, address: "00:1B:DC:07:32:A1", isUp: true, isManaged: true)
    let free = KernelAdapter(index: 1, address: "00:1B:DC:07:32:A2", isUp: false, isManaged: true)
    let userChannel = KernelAdapter(index: 2, address: "00:1B:DC:07:32:A3", isUp: true, isManaged: false)

    @Test func holdersFollowTheTwoLists() {
        #expect(heldByBluetoothd.holder(bluetoothdRunning: true) == .managementInterface(bluetoothd: true))
        #expect(heldByBluetoothd.holder(bluetoothdRunning: false) == .managementInterface(bluetoothd: false))
        #expect(free.holder(bluetoothdRunning: true) == .free)
        #expect(userChannel.holder(bluetoothdRunning: true) == .userChannel)
        #expect(KernelAdapter(index: 3, address: "", isUp: false, isManaged: false).holder(bluetoothdRunning: true) == .settingUp)
        #expect(KernelAdapter(index: 3, address: "", isUp: true, isManaged: nil).holder(bluetoothdRunning: true) == .unknown)
    }

    @Test func eachAdapterSaysWhatToDo() {
        let held = heldByBluetoothd.describe(bluetoothdRunning: true)
        #expect(held.hasPrefix("00:1B:DC:07:32:A1, powered, held by bluetoothd"))
        #expect(held.contains("`sudo btmgmt --index 0 power off`") && held.contains("--take-adapter"))
        #expect(free.describe(bluetoothdRunning: true) == "00:1B:DC:07:32:A2, powered off, free: use --transport hci1")
        #expect(userChannel.describe(bluetoothdRunning: true).contains("in use by a user channel (another Tracer"))
        #expect(userChannel.describe(bluetoothdRunning: true, heldByThisNode: 42) == "00:1B:DC:07:32:A3, powered, in use by this node's user channel (pid 42)")
    }

    @Test func theRecommendationIsAFreeAdapterElseOneToFree() {
        #expect(KernelAdapter.recommendation([heldByBluetoothd, userChannel, free], bluetoothdRunning: true) == "use --transport hci1: it is free")
        let onlyHeld = KernelAdapter.recommendation([heldByBluetoothd, userChannel], bluetoothdRunning: true)
        #expect(onlyHeld?.hasPrefix("no adapter is free; hci0 can be freed with `sudo btmgmt --index 0 power off`") == true)
        #expect(KernelAdapter.recommendation([userChannel], bluetoothdRunning: true) == nil)
    }
}
