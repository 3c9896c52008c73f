import BLEHostTestSupport
import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension TracerNodeTests {
    /// The node on a real Linux kernel Bluetooth stack: Debian's 6.1 kernel in the kernel bed's QEMU
    /// guest (scripts/kernel-bed), its hci0 and hci1 H4 lines to RootCanal controllers on the same phy
    /// as two `tracer run` nodes on this machine. One guest boot serves every test here: the run
    /// (Tests/Support/kernel/scenario-node.sh) happens once, and each test judges its own part of
    /// the evidence it left. When the bed cannot run (no kernel image, no qemu) every test fails and
    /// says so. Evidence of the latest run: .build/kernel-bed/ (guest console, guest and scenario
    /// logs, btmon trace, RootCanal log, every node's log and database).
    @Suite(.tags(.endToEnd)) struct KernelBed {
        /// Started by the first test that needs it; every test of the suite awaits the same run.
        static let bed = Task { try await KernelBedRun.perform(.node) }

        @Test(.timeLimit(.minutes(10)))
        func aNodeOnHCI0ExchangesIDsWithHostNodesBothWays() async throws {
            let run = try await KernelBed.bed.value
            let guest = try run.store("hci0-node.db")
            for host in run.hostNodes {
                let hostStore = try run.store("\(host).db")
                #expect(try met(guest, hostStore), "the node on hci0 never logged \(host)'s id. \(run.evidence("hci0-node.log", "\(host).log"))")
                #expect(try met(hostStore, guest), "\(host) never logged the hci0 node's id. \(run.evidence("hci0-node.log", "\(host).log"))")
            }
        }

        @Test(.timeLimit(.minutes(10)))
        func theNodeOnHCI0ChangesItsAddressWithItsID() async throws {
            let run = try await KernelBed.bed.value
            // Each rotation at a 15 s boundary ("rotated id" after a node's first one, which is its
            // start) must put a new address on the air within seconds: a command setting an address
            // other than the one before it, in the btmon trace of hci0. Both clocks are the guest's.
            let boundaries = ["hci0-node.log", "hci0-restarted.log"].flatMap { name in
                run.text(name).split(separator: "\n").filter { $0.contains("rotated id") }.dropFirst()
                    .compactMap { line in line.split(separator: " ").first.flatMap { try? Date(String($0), strategy: .iso8601) } }
            }
            let python = try #require(RequiredTool.executableInPath("python3"), "python3 reads the btmon trace")
            let trace = try Products.run(python, [VirtualRadio.repositoryRoot.path + "/Tests/Support/kernel/btsnoop_addresses.py",
                                                  run.results + "/btmon.btsnoop", "0"], home: run.results)
            let settings = trace.stdout.split(separator: "\n").compactMap { line -> (time: Double, address: String)? in
                let fields = line.split(separator: " ")
                guard fields.count == 2, let time = Double(fields[0]) else { return nil }
                return (time, String(fields[1]))
            }
            #expect(!boundaries.isEmpty, "the node never rotated at a boundary in the run. \(run.evidence("hci0-node.log"))")
            for boundary in boundaries.map(\.timeIntervalSince1970) {
                // The log's timestamps have whole seconds.
                let before = settings.last { $0.time < boundary - 1 }?.address
                let changed = settings.contains { $0.time >= boundary - 1 && $0.time <= boundary + 2 && $0.address != before }
                #expect(changed, "no new address on hci0 around the rotation at \(boundary) (addresses set: \(trace.stdout))")
            }
        }

        @Test(.timeLimit(.minutes(10)))
        func theSerialTransportOnAGuestTTYExchangesIDsWithHostNodesBothWays() async throws {
            let run = try await KernelBed.bed.value
            let guest = try run.store("serial-node.db")
            for host in run.hostNodes {
                let hostStore = try run.store("\(host).db")
                #expect(try met(guest, hostStore), "the node on serial:/dev/ttyS3 never logged \(host)'s id. \(run.evidence("serial-node.log"))")
                #expect(try met(hostStore, guest), "\(host) never logged the serial node's id. \(run.evidence("serial-node.log", "\(host).log"))")
            }
        }

        @Test(.timeLimit(.minutes(10)))
        func aNodeKilledWithSIGKILLTakesTheChannelAgainAndExchanges() async throws {
            let run = try await KernelBed.bed.value
            let log = run.text("hci0-restarted.log")
            #expect(!log.contains("EBUSY") && !log.contains("openFailed"), "the restarted node could not take hci0: \(log.suffix(1500))")
            let restart = try #require(Int64(run.text("restart-time").trimmingCharacters(in: .whitespacesAndNewlines)),
                                       "the scenario did not reach the restart. \(run.evidence())")
            // Both times are the guest's clock: the scenario's `date` and the node's own timestamps.
            let afterRestart = try run.store("hci0-node.db").encounters(since: restart)
            let hostIDs = try run.hostNodes.reduce(into: Set<String>()) { ids, host in
                ids.formUnion(try run.store("\(host).db").ownIDs().map(\.id.hex))
            }
            #expect(afterRestart.contains { hostIDs.contains($0.peer.hex) },
                    "no encounter with a host node after the restart. \(run.evidence("hci0-restarted.log"))")
        }

        @Test(.timeLimit(.minutes(10)))
        func bluezAsCentralReadsTheNodesIDAndWritesOneThatTheNodeLogs() async throws {
            let run = try await KernelBed.bed.value
            let guest = try run.store("hci0-node.db")
            let read = run.text("gatttool-read.txt")
            let value = read.components(separatedBy: "value:").dropFirst().first?
                .split(whereSeparator: \.isWhitespace).prefix(8).joined() ?? ""
            let ownIDs = Set(try guest.ownIDs().map(\.id.hex))
            #expect(value.count == 16 && ownIDs.contains(value.lowercased()),
                    "gatttool did not read one of the node's ids (read \"\(read.prefix(300))\", own ids \(ownIDs.count)). \(run.evidence("node-address", "hci0-restarted.log"))")
            #expect(run.text("gatttool-write.txt").contains("successfully"), "gatttool's write failed: \(run.text("gatttool-write.txt").prefix(300))")
            #expect(try guest.encounters().contains { $0.peer.hex == run.writtenID },
                    "the node did not log the id BlueZ wrote (\(run.writtenID)). \(run.evidence("hci0-restarted.log"))")
            #expect(run.text("gatttool-primary.txt").contains(TracerServiceUUID.service),
                    "BlueZ did not discover the Tracer service: \(run.text("gatttool-primary.txt").prefix(500))")
        }

        @Test(.timeLimit(.minutes(10)))
        func aStoppedNodeLeavesTheAdapterToBluetoothdAndANodeStartedThenSaysWhatToDo() async throws {
            let run = try await KernelBed.bed.value
            #expect(run.text("hci0-restarted.exit").trimmingCharacters(in: .whitespacesAndNewlines) == "0",
                    "SIGTERM did not stop the node cleanly. \(run.evidence("hci0-restarted.log"))")
            let info = run.text("hci0-info-after-sigterm.txt")
            #expect(info.contains("current settings:") && info.components(separatedBy: "current settings:").last?.contains("powered") == true,
                    "bluetoothd did not get hci0 back after the node stopped: \(info.prefix(600))")
            let busy = run.text("hci0-busy.log")
            #expect(busy.contains("EBUSY") && busy.contains("btmgmt --index 0 power off"),
                    "the node on an adapter bluetoothd holds does not say what to do: \(busy.suffix(1200))")
            let doctor = run.text("doctor-busy.txt")
            #expect(run.text("doctor-busy.exit").trimmingCharacters(in: .whitespacesAndNewlines) != "0", "doctor passed an adapter it cannot open: \(doctor)")
            #expect(doctor.contains("btmgmt --index 0 power off"), "doctor does not say what to do: \(doctor)")
            // The alternative to stopping bluetoothd: the node's own message and doctor's fix name the setting.
            #expect(busy.contains("--take-adapter") && busy.contains("node.take_adapter = true"),
                    "the node's refusal does not name --take-adapter: \(busy.suffix(1200))")
            #expect(doctor.components(separatedBy: "fix:").dropFirst().contains { $0.contains("--take-adapter") },
                    "doctor's fix does not name --take-adapter: \(doctor)")
        }

        @Test(.timeLimit(.minutes(10)))
        func withTakeAdapterTheNodeTakesHCI0FromBluetoothdAndTakesItAgainAfterKill9() async throws {
            let run = try await KernelBed.bed.value
            let hostIDs = try run.hostNodes.reduce(into: Set<String>()) { ids, host in
                ids.formUnion(try run.store("\(host).db").ownIDs().map(\.id.hex))
            }
            // Each start: bluetoothd held hci0 powered (so a plain bind meets EBUSY), the node said it
            // powered the adapter off, and it exchanged with a host node after that start.
            for (log, powered, time) in [("hci0-take", "hci0-info-before-take.txt", "take-time"),
                                         ("hci0-take-restarted", "hci0-info-after-take-kill.txt", "take-restart-time")] {
                let info = run.text(powered)
                #expect(info.components(separatedBy: "current settings:").last?.contains("powered") == true,
                        "bluetoothd did not hold hci0 powered before \(log) started, so the case was not met: \(info.prefix(600))")
                let text = run.text("\(log).log")
                #expect(text.contains("the node powered it off to take it") && text.contains("Desktop Bluetooth on hci0"),
                        "\(log) did not say it took hci0 from bluetoothd: \(text.suffix(1500))")
                #expect(!text.contains("EBUSY") && !text.contains("openFailed"), "\(log) could not take hci0: \(text.suffix(1500))")
                let start = try #require(Int64(run.text(time).trimmingCharacters(in: .whitespacesAndNewlines)),
                                         "the scenario did not reach \(log). \(run.evidence())")
                let encounters = try run.store("hci0-take.db").encounters(since: start)
                #expect(encounters.contains { hostIDs.contains($0.peer.hex) },
                        "no encounter with a host node after \(log) started. \(run.evidence("\(log).log"))")
            }
            #expect(run.text("hci0-take-restarted.exit").trimmingCharacters(in: .whitespacesAndNewlines) == "0",
                    "SIGTERM did not stop the taking node cleanly. \(run.evidence("hci0-take-restarted.log"))")
        }

        /// True when `store` logged one of `peer`'s own ids.
        func met(_ store: NodeStore, _ peer: NodeStore) throws -> Bool {
            !Set(try store.encounters().map(\.peer)).isDisjoint(with: try peer.ownIDs().map(\.id))
        }
    }
}

/// The Tracer service's UUIDs as BlueZ's tools print them (Sources/GATTExchange/TracerProfile).
enum TracerServiceUUID {
    static let service = "a09a0000-5aaa-47f2-9c7f-93bdb3a65376"
    static let idCharacteristic = "a09a0001-5aaa-47f2-9c7f-93bdb3a65376"
    static let writeCharacteristic = "a09a0002-5aaa-47f2-9c7f-93bdb3a65376"
}
