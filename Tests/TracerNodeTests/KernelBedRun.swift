import BLEHostTestSupport
import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// One guest boot of the kernel bed (scripts/kernel-bed): which scenario it runs, on which
/// RootCanal controllers, beside which host nodes. Each suite of the kernel tier has its own plan
/// and its own results folder, so that suites can be added without touching each other's runs.
struct KernelBedPlan: Sendable {
    /// The results folder under .build/kernel-bed/.
    var name: String
    /// A script under Tests/Support/kernel/, run as the guest's scenario.
    var scenario: String
    /// RootCanal models: first the guest's lines (ttyS1, ttyS2, ...), then one per host node.
    var models: [String]
    /// The guest lines (1-based) that get btattach, becoming hci0, hci1, ... in that order.
    var attachedLines: [Int]
    /// The host's nodes, each on its own controller after the guest's lines; their databases and
    /// logs are `NAME.db`, `NAME.log`.
    var hostNodes: [String]
    /// Extra `tracer run` arguments of the host nodes.
    var hostNodeArguments: [String] = ["--continuous-scan", "--rotation-interval", "15"]
    /// Extra environment for the scenario (beyond KBED_TRACER, the built `tracer`).
    var environment: [String: String] = [:]
    var timeoutSeconds = 540
    /// The guest's PID 1: "script" (the bed's own init) or "systemd" (scripts/kernel-bed --init).
    var guestInit = "script"
    /// A guest line (1-based) whose controller the scenario can make stop answering
    /// (scripts/kernel-bed --stall-line); nil for none.
    var stallLine: Int?
    /// Another path of this checkout to run the bed from (its scripts, scenario and built `tracer`);
    /// nil for the repository's own path.
    var checkout: String?

    var guestLines: Int { models.count - hostNodes.count }

    /// The node scenario (Tests/Support/kernel/scenario-node.sh): hci0 (node), hci1 (BlueZ) and
    /// ttyS3 (serial node) in the guest, two host nodes. Host ids rotate every 15 s, so that a
    /// restarted guest node meets ids it had not met before.
    static let node = KernelBedPlan(
        name: "latest", scenario: "scenario-node.sh",
        models: ["DEFAULT", "DEFAULT", "LAIRD_BL654", "CSR_RCK_PTS_DONGLE+strict", "DEFAULT+strict"],
        attachedLines: [1, 2], hostNodes: ["host-a", "host-b"],
        environment: ["KBED_WRITTEN_ID": KernelBedRun.randomID()])
}

/// A kernel bed run and the evidence it left in `results`.
struct KernelBedRun: Sendable {
    let plan: KernelBedPlan
    var hostNodes: [String] { plan.hostNodes }
    let results: String
    /// The id the node scenario writes to the node through gatttool (16 hex digits).
    var writtenID: String { plan.environment["KBED_WRITTEN_ID"] ?? "" }

    static func randomID() -> String {
        (0..<8).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    static func perform(_ plan: KernelBedPlan) async throws -> KernelBedRun {
        try RequiredTool.kernelBed.require()
        let repository = VirtualRadio.repositoryRoot.path
        let checkout = plan.checkout ?? repository
        let built = try Products.path(of: "tracer")
        guard plan.checkout == nil || built.hasPrefix(repository + "/") else {
            throw HarnessFailure(description: "the built tracer (\(built)) is not inside this repository, so the bed cannot run it from \(checkout)")
        }
        let tracer = built.hasPrefix(repository + "/") ? checkout + built.dropFirst(repository.count) : built
        let results = repository + "/.build/kernel-bed/" + plan.name
        try? FileManager.default.removeItem(atPath: results)
        try FileManager.default.createDirectory(atPath: results, withIntermediateDirectories: true)
        let run = KernelBedRun(plan: plan, results: results)

        let radio = try await VirtualRadio.launch(rootCanalModels: plan.models)
        defer {
            copyRootCanalLog(from: radio.logDirectory, to: results)
            radio.stop()
        }
        let hostPorts = radio.ports.suffix(plan.hostNodes.count)
        let nodes = try zip(plan.hostNodes, hostPorts).map { name, port in
            try StreamingProcess(tracer, [
                "run", "--db", "\(results)/\(name).db", "--transport", "tcp:127.0.0.1:\(port)",
            ] + plan.hostNodeArguments, home: results, standardErrorPath: "\(results)/\(name).log")
        }
        defer {
            for node in nodes { kill(node.pid, SIGTERM) }
            for node in nodes where node.waitForExit(timeout: .seconds(10)) == nil { node.killHard() }
        }
        let environment = (["KBED_TRACER": tracer].merging(plan.environment) { first, _ in first })
            .sorted { $0.key < $1.key }.flatMap { ["--env", "\($0.key)=\($0.value)"] }
        let bed = try Products.run(checkout + "/scripts/kernel-bed", [
            "--init", plan.guestInit,
            "--attach", plan.attachedLines.map(String.init).joined(separator: " "), "--timeout", "\(plan.timeoutSeconds)",
        ] + (plan.stallLine.map { ["--stall-line", "\($0)"] } ?? []) + environment + [
            results, checkout + "/Tests/Support/kernel/" + plan.scenario,
        ] + radio.ports.prefix(plan.guestLines).map(String.init), home: results, timeout: .seconds(plan.timeoutSeconds + 30))
        try? (bed.stdout + bed.stderr).write(toFile: results + "/bed.out", atomically: true, encoding: .utf8)
        guard bed.exitCode == 0, !bed.signaled else {
            throw HarnessFailure(description: """
                The kernel bed did not run its scenario (scripts/kernel-bed \(bed.signaled ? "killed by signal" : "exited") \(bed.exitCode)): \
                \(bed.stderr.suffix(1500))
                \(run.evidence("guest.log"))
                If the kernel or qemu is missing, run ./scripts/setup.
                """)
        }
        return run
    }

    static func copyRootCanalLog(from directory: String, to results: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where name.hasPrefix("rootcanal") {
            try? FileManager.default.copyItem(atPath: directory + "/" + name, toPath: results + "/" + name)
        }
    }

    func text(_ name: String) -> String {
        (try? String(contentsOfFile: results + "/" + name, encoding: .utf8)) ?? ""
    }

    func store(_ name: String) throws -> NodeStore {
        let path = results + "/" + name
        guard Check.exists(path) else {
            throw HarnessFailure(description: "The kernel bed's run left no \(name). \(evidence())")
        }
        return try Check.openStore(path)
    }

    /// Where the evidence is, and the tails of the scenario's log and of the named files.
    func evidence(_ names: String...) -> String {
        let tails = (["scenario.log"] + names.filter { $0 != "scenario.log" }).map { name in
            "--- \(name) (end) ---\n" + String(text(name).suffix(1200))
        }
        return "Evidence in \(results) (console.log, guest.log, btmon.btsnoop, rootcanal-*.log, every node's log and database).\n"
            + tails.joined(separator: "\n")
    }
}

extension String {
    /// A scenario's one-value file (an exit status, a count) without its newline.
    var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}
