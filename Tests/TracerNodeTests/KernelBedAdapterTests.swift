import BLEHostTestSupport
import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport

extension KernelBedPlan {
    /// The RootCanal models the adapters suite runs a guest node on besides DEFAULT (hci0): one
    /// guest line each, hci2, hci3, ... in this order. The other presets cannot carry a kernel
    /// adapter on this RootCanal: their supported-commands masks name commands the kernel sends while
    /// initialising an adapter and RootCanal does not implement, and it aborts on them, taking every
    /// controller of the phy down ("F dual_mode_controller.cc:238 Unimplemented command ..."):
    /// LE Read Transmit Power (0x204B) for LAIRD_BL654, Read Stored Link Key (0x0C0D) for
    /// CSR_RCK_PTS_DONGLE. Host nodes (no kernel) run on LAIRD_BL654 and CSR_RCK_PTS_DONGLE+strict.
    static let otherModels = ["DEFAULT+strict"]

    /// The adapters scenario (Tests/Support/kernel/scenario-adapters.sh): hci0 and hci1 on DEFAULT,
    /// then one adapter per other model, two host nodes (ids rotating every 15 s, so that a node
    /// that comes back meets ids it had not met before).
    static let adapters = KernelBedPlan(
        name: "adapters", scenario: "scenario-adapters.sh",
        models: ["DEFAULT", "DEFAULT"] + otherModels + ["LAIRD_BL654", "CSR_RCK_PTS_DONGLE+strict"],
        attachedLines: Array(1...(2 + otherModels.count)), hostNodes: ["host-a", "host-b"],
        environment: ["KBED_MODELS": otherModels.joined(separator: " ")], timeoutSeconds: 240)
}

extension TracerNodeTests {
    /// The kernel's adapters as a node on a Linux machine meets them (one guest boot of the kernel
    /// bed, Tests/Support/kernel/scenario-adapters.sh): every RootCanal controller model as hciN, the
    /// adapter vanishing and returning under the running node, and a dedicated adapter beside
    /// bluetoothd with `tracer doctor` listing who holds which. Evidence of the latest run:
    /// .build/kernel-bed/adapters/.
    @Suite(.tags(.endToEnd)) struct KernelBedAdapters {
        static let bed = Task { try await KernelBedRun.perform(.adapters) }

        @Test(.timeLimit(.minutes(6)), arguments: ["hci0-node"] + KernelBedPlan.otherModels.map { "model-\($0)" })
        func aNodeOnEachControllerModelExchangesWithHostNodes(node: String) async throws {
            let run = try await KernelBedAdapters.bed.value
            let guest = try run.store("\(node).db")
            let hosts = try run.hostNodes.map { try run.store("\($0).db") }
            #expect(try hosts.contains { try met(guest, $0) }, "\(node) never logged a host node's id. \(run.evidence("\(node).log"))")
            #expect(try hosts.contains { try met($0, guest) }, "no host node logged \(node)'s id. \(run.evidence("\(node).log", "host-a.log"))")
            #expect(!run.text("\(node).log").contains("openFailed"), "\(node) could not open its adapter: \(run.text("\(node).log").suffix(1500))")
        }

        @Test(.timeLimit(.minutes(6)))
        func whenTheAdapterVanishesStatusSaysSoAndTheNodeTakesItAgainWhenItReturns() async throws {
            let run = try await KernelBedAdapters.bed.value
            #expect(!run.text("adapters-gone.txt").contains("hci0:"), "hci0 did not go away when btattach stopped: \(run.text("adapters-gone.txt").prefix(600))")
            let gone = run.text("status-gone.txt")
            #expect(gone.contains("reconnecting to hci0") && gone.contains("there is no adapter hci0") && gone.contains("restart btattach"),
                    "tracer status does not say the adapter is gone and what to do: \(gone). \(run.evidence("hci0-node.log"))")
            #expect(run.text("adapters-returned.txt").contains("hci0:"), "hci0 did not come back after btattach restarted. \(run.evidence("console.log"))")
            let returned = try #require(Int64(run.text("return-time").trimmingCharacters(in: .whitespacesAndNewlines)),
                                        "the scenario did not reach the return. \(run.evidence())")
            let hostIDs = try run.hostNodes.reduce(into: Set<String>()) { ids, host in
                ids.formUnion(try run.store("\(host).db").ownIDs().map(\.id.hex))
            }
            // Both times are the guest's clock.
            let afterReturn = try run.store("hci0-node.db").encounters(since: returned)
            #expect(afterReturn.contains { hostIDs.contains($0.peer.hex) },
                    "no encounter with a host node after hci0 returned. \(run.evidence("hci0-node.log", "status-returned.txt"))")
            #expect(run.text("status-returned.txt").contains("Node:           running"), "status after the return: \(run.text("status-returned.txt"))")
            #expect(run.text("hci0-node.exit").trimmingCharacters(in: .whitespacesAndNewlines) == "0", "SIGTERM did not stop the node cleanly")
        }

        @Test(.timeLimit(.minutes(6)))
        func aDedicatedAdapterWorksWhileBluetoothdKeepsHCI0Powered() async throws {
            let run = try await KernelBedAdapters.bed.value
            for name in ["hci0-info-before.txt", "hci0-info-after.txt"] {
                #expect(run.text(name).components(separatedBy: "current settings:").last?.contains("powered") == true,
                        "bluetoothd did not hold hci0 powered (\(name)): \(run.text(name).prefix(600))")
            }
            let samples = run.text("hci0-powered-samples.txt").split(separator: "\n")
            #expect(!samples.isEmpty && samples.allSatisfy { $0.hasSuffix(" powered") }, "hci0 was not powered throughout: \(samples)")
            let log = run.text("hci1-node.log")
            #expect(!log.contains("EBUSY") && !log.contains("openFailed") && !log.contains("powered it off"), "the node on hci1: \(log.suffix(1500))")
            let start = try #require(Int64(run.text("dedicated-time").trimmingCharacters(in: .whitespacesAndNewlines)),
                                     "the scenario did not reach the dedicated adapter. \(run.evidence())")
            let guest = try run.store("hci1-node.db")
            let hosts = try run.hostNodes.map { try run.store("\($0).db") }
            let hostIDs = Set(try hosts.flatMap { try $0.ownIDs().map(\.id.hex) })
            #expect(try guest.encounters(since: start).contains { hostIDs.contains($0.peer.hex) },
                    "the node on hci1 met no host node. \(run.evidence("hci1-node.log"))")
            #expect(try hosts.contains { try met($0, guest) }, "no host node logged the hci1 node's id. \(run.evidence("hci1-node.log"))")
        }

        @Test(.timeLimit(.minutes(6)))
        func doctorInTheGuestListsBluetoothdsAdapterAndTheNodesOwn() async throws {
            let run = try await KernelBedAdapters.bed.value
            let doctor = run.text("doctor-dedicated.txt")
            let lines = doctor.split(separator: "\n").map(String.init)
            let hci0 = lines.first { $0.hasPrefix("[info] hci0: ") } ?? ""
            let hci1 = lines.first { $0.hasPrefix("[info] hci1: ") } ?? ""
            // The address btmgmt reports for hci0 ("addr 00:11:22:33:44:55 version ...").
            let address = run.text("hci0-info-before.txt").components(separatedBy: "addr ").dropFirst().first?.prefix(17) ?? "?"
            #expect(hci0.contains("\(address), powered, held by bluetoothd") && hci0.contains("btmgmt --index 0 power off"),
                    "doctor's hci0 line (btmgmt says \(address)): \(doctor)")
            #expect(hci1.contains(", powered, in use by this node's user channel (pid"), "doctor's hci1 line: \(doctor)")
            // The model adapters, released by their nodes, are bluetoothd's too: hci0 is not the only one listed.
            #expect(lines.filter { $0.hasPrefix("[info] hci") }.count == 2 + KernelBedPlan.otherModels.count, "doctor lists every adapter: \(doctor)")
        }

        /// True when `store` logged one of `peer`'s own ids.
        func met(_ store: NodeStore, _ peer: NodeStore) throws -> Bool {
            !Set(try store.encounters().map(\.peer)).isDisjoint(with: try peer.ownIDs().map(\.id))
        }
    }
}
