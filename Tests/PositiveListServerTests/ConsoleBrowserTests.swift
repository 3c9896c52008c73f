import Foundation
import IDRotation
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport

/// The staff console in a real headless Chromium (chromedriver's WebDriver API), and the code
/// it shows handed to a real `tracer report` against the same `tracer-server`. Serialized, as
/// in the node tests it came from: two browsers at once on a small machine time each other out.
@Suite(.tags(.endToEnd), .serialized) struct ConsoleBrowserTests {
    static let password = "correct horse battery staple"

    /// Where screenshots go when a step fails (and always, with TRACER_CONSOLE_SCREENSHOTS=DIR).
    static var shotsDirectory: String {
        if let directory = ProcessInfo.processInfo.environment["TRACER_CONSOLE_SCREENSHOTS"], !directory.isEmpty { return directory }
        return repositoryRoot + "/.build/console-shots"
    }

    static func addAccount(_ name: String, role: String, server: ListServerProcess) throws {
        let added = try server.runServer(["console", "add-account", "--role", role, "--password-stdin", name], input: password + "\n")
        try #require(added.exitCode == 0 && !added.signaled, "console add-account \(name) failed: \(added)")
    }

    /// A node's store holding back-to-back one-hour ids since yesterday began, each ended more
    /// than the server's default clock-skew allowance (300 s) ago, so none waits (issue 25);
    /// returns them.
    static func makeReportingNodeStore(_ path: String) throws -> [OwnID] {
        let now = UnixSeconds(Date().timeIntervalSince1970)
        let ownIDs = ReportedHistory.hourlyIDs(from: now - now % 86_400 - 86_400, until: now)
        let store = try NodeStore.open(StoreLocation(path: path, source: .flag, ownsDirectory: false))
        for ownID in ownIDs { try store.recordOwnID(ownID) }
        return ownIDs
    }

    /// The repository's root, found from the build products' path.
    static var repositoryRoot: String {
        let products = Products.directory
        return products.range(of: "/.build/").map { String(products[..<$0.lowerBound]) } ?? products
    }

    /// axe-core's script, which scripts/setup fetches into .axe-core (TRACER_AXE_JS overrides).
    static var axeScriptPath: String {
        ProcessInfo.processInfo.environment["TRACER_AXE_JS"].flatMap { $0.isEmpty ? nil : $0 } ?? repositoryRoot + "/.axe-core/axe.min.js"
    }

    /// axe-core's serious and critical violations on the page the browser shows, one line each
    /// (rule, what it asks, the elements).
    static func accessibilityViolations(in browser: WebDriverBrowser, axe: String) async throws -> [String] {
        _ = try await browser.execute(axe + "\n;return typeof axe;")
        let found = try await browser.executeAsync("""
            const done = arguments[arguments.length - 1];
            axe.run(document, {resultTypes: ['violations']}).then(result => done(result.violations
                .filter(v => v.impact === 'serious' || v.impact === 'critical')
                .map(v => v.impact + ' ' + v.id + ': ' + v.help + ' [' + v.nodes.map(n => n.target.join(' ')).join(', ') + ']')))
              .catch(error => done(['axe failed: ' + error]));
            """)
        return found as? [String] ?? ["axe returned \(found)"]
    }

    /// Every console page, as each role meets it, checked by axe-core in Chromium at a clinic
    /// phone's 360 px width, where the issued code must fit without scrolling sideways.
    @Test func everyPagePassesTheAccessibilityCheckerAndTheCodeFitsASmallScreen() async throws {
        try RequiredTool.chromium.require()
        let axe = try #require(
            FileManager.default.contents(atPath: Self.axeScriptPath).map { String(decoding: $0, as: UTF8.self) },
            "axe-core is missing at \(Self.axeScriptPath): run scripts/setup")
        let scratch = try Scratch()
        defer { scratch.remove() }
        let consolePort = try LoopbackPort.free()
        let server = try ListServerProcess(
            scratch: scratch, serving: false,
            settings: #""console": {"enabled": true, "listen": "127.0.0.1:\#(consolePort)", "timeZone": "Europe/Berlin"}"#)
        defer { server.stop() }
        try Self.addAccount("olga", role: "operator", server: server)
        try server.start()
        try await LoopbackPort.waitUntilListening(consolePort)
        let console = "http://127.0.0.1:\(consolePort)"

        let browser = try await WebDriverBrowser.start(windowWidth: 360, windowHeight: 740, log: scratch.file("chromedriver.log"))
        var violations: [String] = []
        var step = "start"
        func check(_ page: String) async throws {
            step = page
            for violation in try await Self.accessibilityViolations(in: browser, axe: axe) { violations.append("\(page): \(violation)") }
        }
        do {
            try await browser.open(console + "/sign-in")
            try await check("sign-in")
            try await browser.type("olga", into: try await browser.find("#name"))
            try await browser.type("not the password", into: try await browser.find("#password"))
            try await browser.click(try await browser.find("form.stacked button[type=submit]"))
            _ = try await browser.find("p.error")
            try await check("sign-in refused")
            try await browser.type(Self.password, into: try await browser.find("#password"))
            try await browser.click(try await browser.find("form.stacked button[type=submit]"))
            _ = try await browser.waitForURL(console + "/codes")
            try await check("upload codes, none yet")

            step = "issued code at 360 px"
            try await browser.click(try await browser.find("#issue"))
            _ = try await browser.find("#issued-code")
            try await check("issued code")
            let widths = try #require(
                try await browser.execute("return [document.documentElement.scrollWidth, document.documentElement.clientWidth];") as? [Int])
            try #require(widths.count == 2 && widths[0] <= widths[1], "the issued code's page scrolls sideways at 360 px: \(widths)")
            try await browser.open(console + "/codes")
            try await check("upload codes, one issued")
            try await browser.open(console + "/operator/status")
            try await check("publication status")
            try await browser.open(console + "/operator/accounts")
            try await check("accounts")
            try await browser.type("pat", into: try await browser.find("#new-name"))
            try await browser.click(try await browser.find("form.stacked button[type=submit]"))
            let link = try await browser.find("#password-link")
            try await check("set-password link")
            try await browser.click(link)
            _ = try await browser.find("#confirm")
            try await check("choose a password")
            try await browser.type("pat's own password", into: try await browser.find("#password"))
            try await browser.type("another password", into: try await browser.find("#confirm"))
            try await browser.click(try await browser.find("form.stacked button[type=submit]"))
            _ = try await browser.find("p.error")
            try await check("choose a password, refused")
            try await browser.type("pat's own password", into: try await browser.find("#password"))
            try await browser.type("pat's own password", into: try await browser.find("#confirm"))
            try await browser.click(try await browser.find("form.stacked button[type=submit]"))
            _ = try await browser.find("p[role=status]")
            try await check("password set")
            try await browser.open(console + "/operator")
            try await check("audit log")
            try await browser.open(console + "/no-such-page")
            try await check("not found")
            if !violations.isEmpty { await browser.saveScreenshot(to: Self.shotsDirectory + "/accessibility.png") }
        } catch {
            await browser.saveScreenshot(to: Self.shotsDirectory + "/failed-\(step.replacingOccurrences(of: " ", with: "-")).png")
            await browser.quit()
            throw error
        }
        await browser.quit()
        #expect(violations.isEmpty, "axe-core found serious or critical violations:\n\(violations.joined(separator: "\n"))")
    }

    @Test func staffSignInIssueACodeAndANodeReportsWithIt() async throws {
        try RequiredTool.chromium.require()
        let scratch = try Scratch()
        defer { scratch.remove() }
        let consolePort = try LoopbackPort.free()
        let server = try ListServerProcess(
            scratch: scratch, serving: false, settings: #""console": {"enabled": true, "listen": "127.0.0.1:\#(consolePort)"}"#)
        defer { server.stop() }
        try Self.addAccount("sam", role: "staff", server: server)
        try server.start()
        try await LoopbackPort.waitUntilListening(consolePort)
        let console = "http://127.0.0.1:\(consolePort)"

        let browser = try await WebDriverBrowser.start(log: scratch.file("chromedriver.log"))
        var step = "start"
        let alwaysShoot = ProcessInfo.processInfo.environment["TRACER_CONSOLE_SCREENSHOTS"] != nil
        do {
            step = "sign-in"
            try await browser.open(console + "/sign-in")
            try await browser.type("sam", into: try await browser.find("#name"))
            try await browser.type(Self.password, into: try await browser.find("#password"))
            if alwaysShoot { await browser.saveScreenshot(to: Self.shotsDirectory + "/sign-in.png") }
            try await browser.click(try await browser.find("form.stacked button[type=submit]"))
            let afterSignIn = try await browser.waitForURL(console + "/codes")
            try #require(afterSignIn == console + "/codes", "sign-in ended at \(afterSignIn)")

            step = "issue"
            try await browser.click(try await browser.find("#issue"))
            let shown = try await browser.text(of: try await browser.find("#issued-code"))
            let expiry = try await browser.text(of: try await browser.find("#issued-expiry"))
            if alwaysShoot { await browser.saveScreenshot(to: Self.shotsDirectory + "/issued-code.png") }
            try #require(shown.range(of: #"^[2-9A-Z]{4}-[2-9A-Z]{4}-[2-9A-Z]{4}$"#, options: .regularExpression) != nil, "the page shows \(shown)")
            try #require(expiry.hasSuffix("UTC"), "expiry \(expiry)")

            step = "report"
            let ownIDs = try Self.makeReportingNodeStore(scratch.file("node.db"))
            let report = try Products.tracer(
                ["report", "--db", scratch.file("node.db"), "--server", server.url, "--code", shown, "--yes"],
                home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")])
            try #require(report.exitCode == 0, "tracer report with the console's code failed: \(report)")
            try #require(report.stdout.contains("Uploaded \(ownIDs.count) ids"), "\(report)")

            step = "my codes"
            try await browser.open(console + "/codes")
            let codes = try await browser.pageSource()
            try #require(codes.contains(#"class="state-used">used"#), "my codes does not show the code used")

            step = "operator pages"
            for page in ["/operator", "/operator/status", "/operator/accounts"] {
                try await browser.open(console + page)
                let refused = try await browser.pageSource()
                try #require(refused.contains("Operators only") && refused.contains("<h1>Operators only</h1>"), "staff reached \(page)")
            }
        } catch {
            await browser.saveScreenshot(to: Self.shotsDirectory + "/failed-\(step).png")
            await browser.quit()
            throw error
        }
        await browser.quit()
    }
}
