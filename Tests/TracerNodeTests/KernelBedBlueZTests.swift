import BLEHostTestSupport
import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport

extension KernelBedPlan {
    /// The BlueZ scenario (Tests/Support/kernel/scenario-bluez.sh): the node on hci0 and BlueZ on
    /// hci1 in the guest, no host node. KBED_BLUEZ_ID is the id the BlueZ peripheral serves.
    static let bluez = KernelBedPlan(
        name: "bluez", scenario: "scenario-bluez.sh", models: ["DEFAULT", "DEFAULT"], attachedLines: [1, 2],
        hostNodes: [], environment: ["KBED_BLUEZ_ID": KernelBedRun.randomID()], timeoutSeconds: 180)
}

extension TracerNodeTests {
    /// BlueZ, the stack of every Linux machine, as a foreign peer of a node on a real kernel: in the
    /// kernel bed's guest (scripts/kernel-bed) the node runs on hci0 over the user channel and
    /// bluetoothd holds hci1, both RootCanal controllers on one phy. BlueZ plays the peripheral
    /// (a GATT application and advertisement registered over D-Bus by
    /// Tests/Support/kernel/bluez_tracer_peripheral.py) and the central (bluetoothctl connecting,
    /// bluetoothd discovering the node's whole database). One guest boot serves the suite.
    /// Evidence of the latest run: .build/kernel-bed/bluez (bluetoothd.log with debug lines,
    /// btmon.btsnoop, console.log, the node's log and database, what bluetoothctl printed).
    @Suite(.tags(.endToEnd)) struct KernelBedBlueZ {
        static let bed = Task { try await KernelBedRun.perform(.bluez) }

        var bluezID: String { KernelBedPlan.bluez.environment["KBED_BLUEZ_ID"] ?? "" }

        @Test(.timeLimit(.minutes(5)))
        func theNodeReadsTheIDOfABlueZPeripheralAndWritesItsOwn() async throws {
            let run = try await KernelBedBlueZ.bed.value
            let app = run.text("bluez-peripheral.log")
            #expect(app.contains("application registered") && app.contains("advertisement registered"),
                    "BlueZ did not take the Tracer application and advertisement: \(app.suffix(800)) \(run.evidence("bluetoothd.log"))")
            let node = try run.store("node.db")
            #expect(try node.encounters().contains { $0.peer.hex == bluezID },
                    "the node did not log the id the BlueZ peripheral serves (\(bluezID)). \(run.evidence("node.log", "bluez-peripheral.log"))")
            let ownIDs = Set(try node.ownIDs().map(\.id.hex))
            let written = run.text("bluez-written.txt").split(separator: "\n").map { String($0.prefix(16)) }
            #expect(!written.isEmpty && written.allSatisfy { ownIDs.contains($0) },
                    "the BlueZ peripheral did not record one of the node's ids (recorded \(written), own ids \(ownIDs.count)). \(run.evidence("node.log", "bluez-peripheral.log"))")
        }

        @Test(.timeLimit(.minutes(5)))
        func bluetoothctlConnectsToTheNodeAndBluetoothdDiscoversItsDatabase() async throws {
            let run = try await KernelBedBlueZ.bed.value
            let session = run.text("bluetoothctl.txt")
            #expect(session.contains("Connection successful") && session.contains("ServicesResolved: yes"),
                    "bluetoothctl did not connect to the node and resolve its services. \(run.evidence("bluetoothctl.txt", "node-address", "bluetoothd.log"))")
            #expect(session.contains("(\(TracerServiceUUID.service))"),
                    "bluetoothctl's info does not list the Tracer service. \(run.evidence("bluetoothctl.txt"))")
            let log = try centralLog(run)
            let found = log.split(separator: "\n").filter { $0.contains("discovery_parse_services()") || $0.contains("discover_chrcs_cb()") }
            for uuid in [TracerServiceUUID.service, TracerServiceUUID.idCharacteristic, TracerServiceUUID.writeCharacteristic] {
                #expect(found.contains { $0.hasSuffix("uuid: \(uuid)") },
                        "bluetoothd did not discover \(uuid) in the node's database. \(run.evidence("bluetoothd.log"))")
            }
            #expect(log.contains("GAP Device Name: Tracer") && log.contains("GAP Appearance: 0x0000"),
                    "bluetoothd did not read the node's GAP name and appearance. \(run.evidence("bluetoothd.log"))")
        }

        /// What bluetoothd says, with debug logging, while it connects to the node as a central:
        /// MTU exchange, discovery of every service and characteristic, the GAP reads. Nothing may
        /// fail, and the node's server may answer no request with an ATT error but Attribute Not
        /// Found, which ends every discovery.
        @Test(.timeLimit(.minutes(5)))
        func bluetoothdMeetsNoErrorFromTheNodesDatabase() async throws {
            let run = try await KernelBedBlueZ.bed.value
            let log = try centralLog(run)
            #expect(log.contains("MTU exchange complete") && log.contains("device_svc_resolved") && log.contains("err 0"),
                    "bluetoothd did not exchange the MTU and resolve the node's services. \(run.evidence("bluetoothd.log"))")
            // Lines that read like complaints and say nothing about the node's database.
            let expected = [
                // The ATT error that ended the last discovery: Attribute Not Found (10).
                "gatt_client_ready_cb() status: success, error: 10",
                // No cached database for a device met for the first time (a private address is never cached).
                "btd_settings_gatt_db_load() Unable to load key file",
            ]
            let complaints = log.split(separator: "\n").filter { line in
                let lowered = line.lowercased()
                guard !expected.contains(where: { line.contains($0) }) else { return false }
                return ["failed to", "failed:", "error", "unable to", "invalid", "ecode", "timed out", "disappeared"]
                    .contains { lowered.contains($0) }
            }
            #expect(complaints.isEmpty, "bluetoothd complained while it discovered the node: \(complaints.prefix(20).joined(separator: "\n"))")

            let python = try #require(RequiredTool.executableInPath("python3"), "python3 reads the btmon trace")
            let start = run.text("central-start").split(separator: " ").first.map(String.init) ?? "0"
            let errors = try Products.run(python, [VirtualRadio.repositoryRoot.path + "/Tests/Support/kernel/btsnoop_att_errors.py",
                                                   "--after", start, run.results + "/btmon.btsnoop", "0"], home: run.results)
            #expect(errors.exitCode == 0, "the btmon trace could not be read: \(errors.stderr.suffix(600))")
            // Each line: seconds, request opcode, handle, error code; 0x0a is Attribute Not Found.
            let unexpected = errors.stdout.split(separator: "\n").filter { $0.split(separator: " ").last != "0x0a" }
            #expect(unexpected.isEmpty, "the node answered bluetoothd with ATT errors (seconds, request, handle, error): \(unexpected.joined(separator: "\n"))")
        }

        /// bluetoothd's log from the moment bluetoothctl began (phase 2 of the scenario).
        func centralLog(_ run: KernelBedRun) throws -> String {
            let fields = run.text("central-start").split(whereSeparator: \.isWhitespace)
            let skipped = try #require(fields.count == 2 ? Int(fields[1]) : nil,
                                       "the scenario did not reach phase 2. \(run.evidence())")
            return run.text("bluetoothd.log").split(separator: "\n", omittingEmptySubsequences: false)
                .dropFirst(skipped).joined(separator: "\n")
        }
    }
}
