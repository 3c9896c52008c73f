import BLEHostTestSupport
import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension KernelBedPlan {
    /// The checkout scenario (Tests/Support/kernel/scenario-checkout.sh): one node on hci0, run
    /// from `checkout`.
    static func checkout(at path: String) -> KernelBedPlan {
        KernelBedPlan(
            name: "checkout", scenario: "scenario-checkout.sh", models: ["DEFAULT"], attachedLines: [1],
            hostNodes: [], timeoutSeconds: 180, checkout: path)
    }
}

extension TracerNodeTests {
    /// The kernel bed from a checkout under /tmp, where a fresh clone often lands. The guest mounts
    /// a tmpfs of its own on /tmp, which hid such a checkout: the scenarios' helpers and the built
    /// `tracer` were gone and every kernel test failed with "scenario-lib.sh: No such file or
    /// directory". This repository is bind-mounted under /tmp for the run (unless it is there
    /// already), and the guest must source the helpers and run the node from that path.
    @Suite(.tags(.endToEnd)) struct KernelBedCheckout {
        @Test(.timeLimit(.minutes(5)))
        func theBedRunsFromACheckoutUnderTmp() async throws {
            try RequiredTool.kernelBed.require()
            let repository = VirtualRadio.repositoryRoot.path
            if repository.hasPrefix("/tmp/") { return try await runTheBed(from: repository) }
            guard getuid() == 0 else {
                try RequiredTool.missing("needs root to bind-mount this checkout under /tmp (mount --bind): run the tests as root, as CI does")
            }
            var template = Array("/tmp/tracer-checkout-XXXXXX".utf8CString)
            guard let folder = mkdtemp(&template).map({ String(cString: $0) }) else {
                throw HarnessFailure(description: "cannot make a folder under /tmp (errno \(errno))")
            }
            let checkout = folder + "/tracer"
            defer { Self.removeBind(at: checkout, in: folder) }
            try FileManager.default.createDirectory(atPath: checkout, withIntermediateDirectories: false)
            let bind = try Products.run("/bin/mount", ["--bind", repository, checkout], home: folder)
            guard bind.exitCode == 0 else {
                throw HarnessFailure(description: "mount --bind \(repository) \(checkout) failed: \(bind.stderr)")
            }
            try await runTheBed(from: checkout)
        }

        func runTheBed(from checkout: String) async throws {
            let run = try await KernelBedRun.perform(.checkout(at: checkout))
            #expect(run.text("scenario.log").contains("checkout: \(checkout)"), "the guest did not run from \(checkout). \(run.evidence())")
            #expect(run.text("version.txt").hasPrefix("tracer "),
                    "the guest could not run the checkout's tracer. \(run.evidence("version.txt", "node.log"))")
            let node = try run.store("node.db")
            #expect(!(try node.ownIDs()).isEmpty, "the node run from \(checkout) on hci0 logged no id. \(run.evidence("node.log"))")
        }

        /// Unmounts the bind and removes only the empty folders the test made (and the process
        /// runner's captures): a recursive removal through a mount that did not go would delete
        /// the repository itself.
        static func removeBind(at checkout: String, in folder: String) {
            for arguments in [[checkout], ["-l", checkout]] {
                guard rmdir(checkout) != 0, errno != ENOENT else { break }
                _ = try? Products.run("/bin/umount", arguments, home: folder)
            }
            guard rmdir(checkout) == 0 || errno == ENOENT else {
                Issue.record("could not unmount the bind of this checkout at \(checkout) (errno \(errno)): run umount \(checkout)")
                return
            }
            try? FileManager.default.removeItem(atPath: folder + "/.captures")
            rmdir(folder)
        }
    }
}
