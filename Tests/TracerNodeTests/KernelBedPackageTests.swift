import BLEHostTestSupport
import Foundation
import Testing
import TracerTestSupport

extension KernelBedPlan {
    /// The package scenario (Tests/Support/kernel/scenario-package.sh): the Debian package installed
    /// in the guest, its node on hci0 beside one host node.
    static func package(deb: String) -> KernelBedPlan {
        KernelBedPlan(
            name: "package", scenario: "scenario-package.sh", models: ["DEFAULT", "DEFAULT"],
            attachedLines: [1], hostNodes: ["host-a"],
            environment: ["KBED_PACKAGE": deb], timeoutSeconds: 240)
    }

    /// The systemd scenario (Tests/Support/kernel/scenario-systemd.sh): systemd as the guest's PID 1,
    /// the package's unit started with systemctl, with all its sandboxing, on hci0 beside one host
    /// node; hci0's controller (line 1) can be made to stop answering. With `packagedWatchdog`
    /// (KBED_WATCHDOG=packaged in the test's environment) the unit keeps its packaged watchdog
    /// timings, which take minutes to fire: BENCHMARKS.md measures them so.
    static func systemd(deb: String, packagedWatchdog: Bool = TracerNodeTests.KernelBedSystemd.packagedWatchdog) -> KernelBedPlan {
        var plan = KernelBedPlan(
            name: "systemd", scenario: "scenario-systemd.sh", models: ["DEFAULT", "DEFAULT"],
            attachedLines: [1], hostNodes: ["host-a"],
            environment: ["KBED_PACKAGE": deb, "KBED_WATCHDOG": packagedWatchdog ? "packaged" : "short"],
            timeoutSeconds: packagedWatchdog ? 900 : 300)
        plan.guestInit = "systemd"
        plan.stallLine = 1
        return plan
    }
}

extension TracerNodeTests {
    /// The node installed as a user installs it: `scripts/package --debug` makes the Debian package
    /// from this build (the release build is too slow for CI; README, "Install as a package"), the
    /// kernel bed's guest installs it with dpkg, runs the installed node as its systemd unit would
    /// (the unit's user and capabilities, read from the installed unit) on hci0 beside a host node,
    /// then removes and purges it. One guest boot serves every test here; evidence of the latest
    /// run: .build/kernel-bed/package/.
    @Suite(.tags(.endToEnd)) struct KernelBedPackage {
        static let bed = Task { try await KernelBedRun.perform(.package(deb: try await debugPackage.value)) }

        /// Built once for both package suites (this one and KernelBedSystemd), which may run side by side.
        static let debugPackage = Task { try buildPackage() }

        /// Runs scripts/package on the debug build the tests run, into .build/kernel-bed/package-deb/;
        /// KBED_PACKAGE_DEB names another package to test instead (a release one, from scripts/package).
        static func buildPackage() throws -> String {
            if let given = ProcessInfo.processInfo.environment["KBED_PACKAGE_DEB"], !given.isEmpty { return given }
            let repository = VirtualRadio.repositoryRoot.path
            let output = repository + "/.build/kernel-bed/package-deb"
            try? FileManager.default.removeItem(atPath: output)
            let build = try Products.run(repository + "/scripts/package", [
                "--debug", "--binary", try Products.path(of: "tracer"), "--output", output,
            ], home: repository + "/.build", timeout: .seconds(180))
            let debs = (try? FileManager.default.contentsOfDirectory(atPath: output))?.filter { $0.hasSuffix(".deb") } ?? []
            guard build.exitCode == 0, let deb = debs.first else {
                throw HarnessFailure(description: "scripts/package --debug failed (\(build.exitCode)): \(build.stderr.suffix(1500))")
            }
            return output + "/" + deb
        }

        @Test(.timeLimit(.minutes(6)))
        func dpkgInstallsTheBinaryTheUnitTheConfigurationAndTheUserAndEnablesTheUnitWithoutStartingIt() async throws {
            let run = try await KernelBedPackage.bed.value
            let install = run.text("dpkg-install.txt")
            #expect(run.text("dpkg-install.exit").trimmed == "0", "dpkg -i failed: \(install.suffix(1500))")
            let files = Set(run.text("installed-files.txt").split(separator: "\n").map(String.init))
            for path in ["/usr/bin/tracer", "/lib/systemd/system/tracer.service", "/etc/tracer/tracer.toml", "/usr/share/doc/tracer/README.md"] {
                #expect(files.contains(path), "the package did not install \(path): \(files.sorted())")
            }
            #expect(run.text("conffiles.txt").contains("/etc/tracer/tracer.toml"), "tracer.toml is not a conffile: \(run.text("conffiles.txt"))")
            // A system user (uid below 1000) that cannot log in.
            let user = run.text("user.txt").trimmed.split(separator: ":", omittingEmptySubsequences: false)
            #expect(user.count == 7 && user[0] == "tracer" && (Int(user[2]) ?? 1000) < 1000 && user[6].hasSuffix("nologin"),
                    "no system user tracer: \(run.text("user.txt"))")
            #expect(run.text("enabled.txt").contains("tracer.service -> /lib/systemd/system/tracer.service"),
                    "the unit is not enabled: \(run.text("enabled.txt"))")
            #expect(install.contains("enabled, not started") && install.contains("node.transport"),
                    "dpkg -i did not say what to set before the service starts: \(install.suffix(800))")
        }

        @Test(.timeLimit(.minutes(6)))
        func theInstalledNodeRunsAsTheUnitsUserWithOnlyItsCapabilityAndExchangesWithAHostNode() async throws {
            let run = try await KernelBedPackage.bed.value
            let process = run.text("package-node-process.txt")
            let uid = run.text("user.txt").split(separator: ":", omittingEmptySubsequences: false).dropFirst(2).first.map(String.init) ?? "?"
            // The kernel's view of the running node: the tracer user (real and effective), and
            // CAP_NET_ADMIN (bit 12) as its only effective, permitted, ambient and bounding capability.
            #expect(field("Uid", in: process).first == uid && field("Uid", in: process).dropFirst().first == uid,
                    "the node did not run as the user tracer (uid \(uid)): \(process)")
            for set in ["CapEff", "CapPrm", "CapAmb", "CapBnd"] {
                #expect(field(set, in: process).first == "0000000000001000", "\(set) is not exactly CAP_NET_ADMIN: \(process)")
            }
            #expect(run.text("package-node-process.txt").contains("NoNewPrivs:\t1"), "NoNewPrivileges=yes was not applied: \(process)")
            let installed = try run.store("tracer.db")
            let host = try run.store("host-a.db")
            #expect(!Set(try installed.encounters().map(\.peer)).isDisjoint(with: try host.ownIDs().map(\.id)),
                    "the installed node never logged the host node's id. \(run.evidence("package-node.log", "unit-reading.txt", "package-node.command"))")
            #expect(!Set(try host.encounters().map(\.peer)).isDisjoint(with: try installed.ownIDs().map(\.id)),
                    "the host node never logged the installed node's id. \(run.evidence("package-node.log", "host-a.log"))")
            #expect(run.text("package-node.exit").trimmed == "0", "SIGTERM did not stop the installed node cleanly. \(run.evidence("package-node.log"))")
        }

        @Test(.timeLimit(.minutes(6)))
        func withoutTheCapabilityTheInstalledNodeSaysItNeedsCAPNETADMINAndWhereToGetIt() async throws {
            let run = try await KernelBedPackage.bed.value
            let log = run.text("nocap-node.log")
            #expect(log.contains("EPERM") && log.contains("needs CAP_NET_ADMIN: run as root or through the systemd unit"),
                    "the node without CAP_NET_ADMIN does not say what it needs: \(log.suffix(1500))")
        }

        @Test(.timeLimit(.minutes(6)))
        func removeKeepsTheConfigurationAndDataAndPurgeLeavesNothingBehind() async throws {
            let run = try await KernelBedPackage.bed.value
            #expect(run.text("dpkg-remove.exit").trimmed == "0", "dpkg -r failed: \(run.text("dpkg-remove.txt"))")
            let removed = run.text("after-remove.txt")
            for line in ["absent /usr/bin/tracer", "absent /lib/systemd/system/tracer.service",
                         "present /etc/tracer/tracer.toml", "present /var/lib/tracer/tracer.db", "user tracer"] {
                #expect(removed.contains(line + "\n"), "after dpkg -r, expected \"\(line)\": \(removed)")
            }
            #expect(run.text("dpkg-purge.exit").trimmed == "0", "dpkg --purge failed: \(run.text("dpkg-purge.txt"))")
            let purged = run.text("after-purge.txt")
            for line in ["absent /etc/tracer", "absent /var/lib/tracer", "absent /var/cache/tracer", "no user tracer",
                         "no group tracer", "passwd unchanged", "group unchanged"] {
                #expect(purged.contains(line + "\n"), "after dpkg --purge, expected \"\(line)\": \(purged)")
            }
            // Every file or link the guest wrote since before the install, except dpkg's and the
            // user database's own bookkeeping, which any package's life leaves.
            let bookkeeping = ["/var/lib/dpkg/", "/var/log/dpkg.log", "/var/cache/debconf/", "/etc/passwd", "/etc/group",
                               "/etc/shadow", "/etc/gshadow", "/etc/subuid", "/etc/subgid", "/etc/.pwd.lock"]
            let left = run.text("left-after-purge.txt").split(separator: "\n").map(String.init)
                .filter { path in !bookkeeping.contains { path.hasPrefix($0) } }
            #expect(!run.text("upper-before.txt").isEmpty || !run.text("upper-after.txt").isEmpty, "the scenario could not see the overlay's upper layer")
            #expect(left.isEmpty, "dpkg --purge left these behind: \(left)")
        }

        /// The tab-separated values of a /proc/PID/status field.
        func field(_ name: String, in status: String) -> [String] {
            status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
                .map { $0.dropFirst(name.count + 1).split(whereSeparator: \.isWhitespace).map(String.init) } ?? []
        }
    }
}

extension TracerNodeTests {
    /// The package's unit run by systemd itself: the guest boots systemd (scripts/kernel-bed --init
    /// systemd), installs the package, sets node.transport = "hci0" and runs `systemctl start tracer`,
    /// so the unit's sandboxing (ProtectSystem=strict, PrivateDevices=, RestrictAddressFamilies=,
    /// SystemCallFilter=, ...) meets the real kernel's HCI user channel. Evidence of the latest run:
    /// .build/kernel-bed/systemd/.
    @Suite(.tags(.endToEnd)) struct KernelBedSystemd {
        static let bed = Task { try await KernelBedRun.perform(.systemd(deb: try await TracerNodeTests.KernelBedPackage.debugPackage.value)) }
        /// KBED_WATCHDOG=packaged: the unit's own watchdog timings, not the run's shortened ones.
        static let packagedWatchdog = ProcessInfo.processInfo.environment["KBED_WATCHDOG"] == "packaged"
        /// The bed's run and then some: the packaged timings take minutes to fire.
        static let timeLimit = TimeLimitTrait.Duration.minutes(packagedWatchdog ? 16 : 5)

        @Test(.timeLimit(KernelBedSystemd.timeLimit))
        func systemctlStartsTheInstalledUnitUnderSystemdAsItsUserWithOnlyItsCapability() async throws {
            let run = try await KernelBedSystemd.bed.value
            #expect(run.text("pid1.txt").trimmed == "systemd", "the guest's PID 1 is not systemd: \(run.text("pid1.txt"))")
            #expect(run.text("dpkg-install.exit").trimmed == "0", "dpkg -i failed: \(run.text("dpkg-install.txt").suffix(1500))")
            #expect(run.text("systemctl-start.exit").trimmed == "0", "systemctl start tracer failed. \(run.evidence("systemctl-start.txt", "tracer-journal.txt"))")
            let process = run.text("unit-process.txt")
            #expect(process.contains("Name:\ttracer"), "no running tracer process under the unit: \(process)")
            for set in ["CapEff", "CapAmb", "CapBnd"] {
                #expect(process.contains("\(set):\t0000000000001000"), "\(set) is not exactly CAP_NET_ADMIN: \(process)")
            }
            // SystemCallFilter= is applied: the kernel reports a seccomp filter (mode 2).
            #expect(process.contains("Seccomp:\t2"), "the unit's system call filter is not applied: \(process)")
        }

        @Test(.timeLimit(KernelBedSystemd.timeLimit))
        func theSandboxedUnitsNodeExchangesIdsWithAHostNodeOnHci0() async throws {
            let run = try await KernelBedSystemd.bed.value
            let unit = try run.store("tracer.db")
            let host = try run.store("host-a.db")
            #expect(!Set(try unit.encounters().map(\.peer)).isDisjoint(with: try host.ownIDs().map(\.id)),
                    "the unit's node never logged the host node's id. \(run.evidence("tracer-journal.txt", "systemctl-status.txt"))")
            #expect(!Set(try host.encounters().map(\.peer)).isDisjoint(with: try unit.ownIDs().map(\.id)),
                    "the host node never logged the unit's node's id. \(run.evidence("tracer-journal.txt", "host-a.log"))")
            #expect(run.text("unit-before-stall.txt").contains("NRestarts=0"), "the unit restarted: \(run.evidence("unit-before-stall.txt", "tracer-journal.txt"))")
        }

        /// Issue 38: the packaged unit is `Type=notify` with a watchdog, and the node answers it only
        /// while it has a working controller. The scenario shortens the unit's own watchdog (5 s,
        /// node.watchdog_dark_limit = 10 s; KBED_WATCHDOG=packaged keeps the packaged timings, for
        /// BENCHMARKS.md) and makes hci0's controller stop answering with its line
        /// still open (the bed's stall relay); systemd must restart the unit, and once the
        /// controller answers again the restarted node must meet the host node.
        @Test(.timeLimit(KernelBedSystemd.timeLimit))
        func aNodeWhoseControllerStopsAnsweringIsRestartedBySystemdsWatchdogAndMeetsItsPeerAgain() async throws {
            let run = try await KernelBedSystemd.bed.value
            let unit = run.text("unit-watchdog.txt")
            for setting in ["Type=notify", "NotifyAccess=main", "WatchdogSec=60", "WatchdogSignal=15"] {
                #expect(unit.contains(setting + "\n"), "the packaged unit lacks \(setting): \(unit)")
            }
            // A unit of Type=notify is active only once the node said READY=1; its status text is the node's.
            let before = run.text("unit-before-stall.txt")
            let period = KernelBedSystemd.packagedWatchdog ? "1min" : "5s"
            #expect(before.contains("WatchdogUSec=\(period)\n"), "the unit's watchdog is not the run's \(period): \(before)")
            #expect(before.contains("ActiveState=active\n") && before.contains("StatusText=running on hci0\n"),
                    "the node did not tell systemd it was ready and running: \(run.evidence("unit-before-stall.txt", "tracer-journal.txt"))")
            let journal = run.text("tracer-journal.txt")
            #expect(journal.contains("not answering systemd's watchdog") && journal.contains("no working controller since"),
                    "the node did not say why it stopped answering the watchdog. \(run.evidence("tracer-journal.txt", "relay.log"))")
            #expect(journal.contains("Watchdog timeout") && journal.contains("Failed with result 'watchdog'"),
                    "systemd's watchdog did not fire. \(run.evidence("tracer-journal.txt", "relay.log"))")
            let after = run.text("unit-before-stop.txt")
            let restarts = after.split(separator: "\n").first { $0.hasPrefix("NRestarts=") }.flatMap { Int($0.dropFirst("NRestarts=".count)) } ?? 0
            #expect(restarts >= 1, "systemd did not restart the unit. \(run.evidence("unit-before-stop.txt", "tracer-journal.txt"))")
            #expect(after.contains("ActiveState=active\n") && after.contains("StatusText=running on hci0\n"),
                    "the restarted node is not up and running: \(run.evidence("unit-before-stop.txt", "tracer-journal.txt"))")
            #expect(!after.contains("MainPID=\(run.text("stalled-pid.txt").trimmed)\n"), "the stalled node still runs: \(after)")
            // Met again after the controller answered again, so by the restarted node.
            let resumed = Double(run.text("resumed-at.txt").trimmed).map { Int64($0) } ?? .max
            let unitStore = try run.store("tracer.db")
            let host = try run.store("host-a.db")
            let metAgain = try unitStore.encounters().filter { $0.firstSeen >= resumed }
            #expect(!Set(metAgain.map(\.peer)).isDisjoint(with: try host.ownIDs().map(\.id)),
                    "the restarted node did not meet the host node after the controller answered again (at \(resumed)). \(run.evidence("tracer-journal.txt", "relay.log", "host-a.log"))")
        }

        @Test(.timeLimit(KernelBedSystemd.timeLimit))
        func systemctlStopEndsTheUnitCleanly() async throws {
            let run = try await KernelBedSystemd.bed.value
            let after = run.text("unit-after-stop.txt")
            #expect(run.text("systemctl-stop.exit").trimmed == "0", "systemctl stop failed: \(run.text("systemctl-stop.txt"))")
            #expect(after.contains("Result=success") && after.contains("ExecMainStatus=0") && after.contains("ActiveState=inactive"),
                    "the unit did not stop cleanly: \(run.evidence("unit-after-stop.txt", "tracer-journal.txt"))")
        }
    }
}
