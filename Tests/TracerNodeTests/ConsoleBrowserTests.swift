import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport

extension TracerNodeTests {
    /// The staff console in a real headless Chromium (chromedriver's WebDriver API), and the code
    /// it shows handed to a real `tracer report` against the same `tracer-server`.
    @Suite(.tags(.endToEnd)) struct ConsoleBrowserTests {
        static let password = "correct horse battery staple"

        /// Where screenshots go when a step fails (and always, with TRACER_CONSOLE_SCREENSHOTS=DIR).
        static var shotsDirectory: String {
            if let directory = ProcessInfo.processInfo.environment["TRACER_CONSOLE_SCREENSHOTS"], !directory.isEmpty { return directory }
            let products = Products.directory
            let root = products.range(of: "/.build/").map { String(products[..<$0.lowerBound]) } ?? products
            return root + "/.build/console-shots"
        }

        static func addAccount(_ name: String, role: String, server: ListServerProcess) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try Products.path(of: "tracer-server"))
            process.arguments = ["console", "add-account", "--data-dir", server.dataDirectory, "--role", role, "--password-stdin", name]
            let input = Pipe()
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            input.fileHandleForWriting.write(Data((password + "\n").utf8))
            try input.fileHandleForWriting.close()
            process.waitUntilExit()
            try #require(process.terminationStatus == 0, "console add-account \(name) failed")
        }

        @Test(.enabled(if: WebDriverBrowser.isInstalled, "needs Debian's chromium and chromium-driver (scripts/setup)"))
        func staffSignInIssueACodeAndANodeReportsWithIt() async throws {
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
                let now = UnixSeconds(Date().timeIntervalSince1970)
                let ownIDs = NodeFixture.hourlyIDs(from: now - now % 86_400 - 86_400, until: now)
                try NodeFixture.makeStore(scratch.file("node.db"), ownIDs: ownIDs)
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
}
