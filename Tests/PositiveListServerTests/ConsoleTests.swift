import Foundation
import IDRotation
import PositiveListServer
import ServerStorage
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport

/// The staff console against a real `tracer-server serve`: what staff do, and each way a hostile
/// browser, page or guesser is refused.
@Suite(.tags(.endToEnd)) struct ConsoleTests {
    /// An API request with an upload code: 400 invalid_json means the code was accepted (the
    /// body is not a history, so nothing is stored and the code stays unused).
    func uploadCodeAnswer(_ server: ConsoleServerProcess, code: String) async throws -> RawConnection.Response {
        try await RawHTTP.exchange(port: server.apiPort, sending: """
            POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nUpload-Code: \(code)\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}
            """).asResponse
    }

    /// Over both stores: on PostgreSQL the accounts, sessions and codes are in the database.
    @Test(arguments: StoreBackend.allCases)
    func staffSignInIssueACodeTheAPIAcceptsAndRevokeIt(backEnd: StoreBackend) async throws {
        let server = try await ConsoleServerProcess(backEnd: backEnd)
        defer { server.stop() }
        var browser = server.browser()
        let signIn = try await browser.signIn("sam")
        #expect(signIn.status == 303 && signIn.header("location") == "/codes", "\(signIn.head)")
        let cookie = try #require(ConsoleClient.setCookies(signIn).first { $0.hasPrefix("__Host-console_session=") })
        for attribute in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/"] {
            #expect(cookie.contains(attribute), "\(cookie)")
        }
        let code = try await browser.issueCode()
        #expect(code.count == 14 && code.split(separator: "-").count == 3, "\(code)")
        let page = try await browser.get("/codes")
        expectConsoleHeaders(page)
        #expect(page.body.contains(#"class="state-open">open"#), "\(page.body)")
        #expect(!page.body.contains(code), "my codes must never show a code")

        #expect(try await uploadCodeAnswer(server, code: code).apiError == "invalid_json")
        let revoke = try await browser.post("/codes/revoke", [("csrf", try await browser.sessionToken()), ("id", "1")])
        #expect(revoke.status == 303, "\(revoke.text.prefix(1000))")
        #expect(try await browser.get("/codes").body.contains(#"class="state-revoked">revoked"#))
        let revoked = try await uploadCodeAnswer(server, code: code)
        #expect(revoked.apiError == "revoked_code" && revoked.body.contains("ask them for a new one"), "\(revoked.text)")
        // Revoked once; a second time is refused, as is another account's code.
        #expect(try await browser.post("/codes/revoke", [("csrf", try await browser.sessionToken()), ("id", "1")]).status == 409)
        var operatorBrowser = server.browser()
        _ = try await operatorBrowser.signIn("olga")
        _ = try await browser.issueCode()
        let foreign = try await operatorBrowser.post("/codes/revoke", [("csrf", try await operatorBrowser.sessionToken()), ("id", "2")])
        #expect(foreign.status == 409)

        // The audit log has the events, never a code.
        let audit = try await operatorBrowser.get("/operator")
        #expect(audit.status == 200)
        for event in ["sign-in", "issue", "revoke"] { #expect(audit.body.contains("<td>\(event)</td>"), "\(event): \(audit.body)") }
        #expect(!audit.body.contains(code) && !audit.body.contains(code.replacingOccurrences(of: "-", with: "")))
    }

    @Test func formsWithoutTheSessionsTokenAreRefused() async throws {
        let server = try await ConsoleServerProcess()
        defer { server.stop() }
        var browser = server.browser()
        _ = try await browser.signIn("sam")
        var other = server.browser()
        _ = try await other.signIn("olga")
        let othersToken = try await other.sessionToken()
        for fields in [[], [("csrf", "")], [("csrf", "0123")], [("csrf", othersToken)]] {
            let response = try await browser.post("/codes", fields)
            #expect(response.status == 403, "\(fields): \(response.head)")
            expectConsoleHeaders(response)
        }
        #expect(try await browser.post("/sign-out", []).status == 403)
        #expect(try await browser.get("/codes").body.contains("You have not issued any codes yet."))
        // Sign-in's own form: without the sign-in cookie's token, refused before any password check.
        var stranger = server.browser()
        let forged = try await stranger.post("/sign-in", [("csrf", "a"), ("name", "sam"), ("password", ConsoleServerProcess.password)])
        #expect(forged.status == 403 && ConsoleClient.setCookies(forged).isEmpty, "\(forged.head)")
    }

    @Test func signInGivesANewSessionIDAndSignOutEndsIt() async throws {
        let server = try await ConsoleServerProcess()
        defer { server.stop() }
        var browser = server.browser()
        let planted = String(repeating: "ab", count: 32)
        browser.cookies["__Host-console_session"] = planted
        _ = try await browser.signIn("sam")
        let session = try #require(browser.cookies["__Host-console_session"])
        #expect(session != planted)
        #expect(try await browser.get("/codes").status == 200)
        var attacker = server.browser()
        attacker.cookies["__Host-console_session"] = planted
        let refused = try await attacker.get("/codes")
        #expect(refused.status == 303 && refused.header("location") == "/sign-in")
        // Signing in again with the session still in the browser replaces it; the old id no
        // longer works. (A signed-in browser asking for the sign-in page is sent to /codes, so
        // the page is fetched as if signed out.)
        browser.cookies["__Host-console_session"] = nil
        let again = try #require(ConsoleClient.formToken(try await browser.get("/sign-in").body))
        browser.cookies["__Host-console_session"] = session
        #expect(try await browser.post("/sign-in", [("csrf", again), ("name", "sam"), ("password", ConsoleServerProcess.password)]).status == 303)
        #expect(browser.cookies["__Host-console_session"] != session)
        var old = server.browser()
        old.cookies["__Host-console_session"] = session
        #expect(try await old.get("/codes").status == 303)
        let signOut = try await browser.post("/sign-out", [("csrf", try await browser.sessionToken())])
        #expect(signOut.status == 303 && browser.cookies["__Host-console_session"] == nil)
    }

    @Test func sessionsExpireWhenIdleAndWhenOld() async throws {
        // Real time, the thing under test (a `serve` process takes no manual clock). The store
        // counts whole seconds: every limit is met or missed by a second or more.
        let server = try await ConsoleServerProcess(console: #""sessionIdleSeconds": 4, "sessionLifetimeSeconds": 9"#)
        defer { server.stop() }
        var idle = server.browser()
        var busy = server.browser()
        _ = try await idle.signIn("sam")
        _ = try await busy.signIn("olga")
        let start = ContinuousClock.now
        for step in 1...4 {
            try await Task.sleep(until: start + .milliseconds(1_500 * step))
            #expect(try await busy.get("/codes").status == 200, "used every 1.5 s, still valid at step \(step)")
        }
        let expiredIdle = try await idle.get("/codes")
        #expect(expiredIdle.status == 303 && expiredIdle.header("location") == "/sign-in", "unused for 6 s, idle limit 4 s")
        try await Task.sleep(until: start + .milliseconds(10_000))
        let expiredOld = try await busy.get("/codes")
        #expect(expiredOld.status == 303, "used every 1.5 s but 10 s old, lifetime 9 s")
    }

    @Test func signInAttemptsAreLimitedPerAddressAndPerAccount() async throws {
        let server = try await ConsoleServerProcess(settings: #""failedAttemptsPerMinute": 3"#)
        defer { server.stop() }
        // One address guessing at one account.
        var guesser = server.browser(from: "127.0.0.2")
        for _ in 1...3 { #expect(try await guesser.signIn("sam", password: "wrong password 123").status == 401) }
        let limited = try await guesser.signIn("sam")
        #expect(limited.status == 429 && limited.header("retry-after") != nil, "\(limited.head)")
        expectConsoleHeaders(limited)
        // The account stays locked from any other address for the minute...
        var elsewhere = server.browser(from: "127.0.0.3")
        #expect(try await elsewhere.signIn("sam").status == 429)
        // ...while other accounts sign in from there.
        #expect(try await elsewhere.signIn("olga").status == 303)
        // One address guessing at many accounts, named or not.
        var sprayer = server.browser(from: "127.0.0.4")
        for name in ["nobody1", "nobody2", "nobody3"] { #expect(try await sprayer.signIn(name).status == 401) }
        #expect(try await sprayer.signIn("olga").status == 429)
    }

    /// Two instances on one PostgreSQL share one budget: a guesser spreading their tries over
    /// both gets the limit, not twice the limit.
    @Test func signInAttemptsAreLimitedAcrossInstancesSharingADatabase() async throws {
        let server = try await ConsoleServerProcess(settings: #""failedAttemptsPerMinute": 3"#, backEnd: .postgres)
        defer { server.stop() }
        let otherPort = try await server.startAnotherInstance()
        var first = server.browser(from: "127.0.0.2")
        var second = ConsoleClient(port: otherPort, source: "127.0.0.2")
        #expect(try await first.signIn("sam", password: "wrong password 123").status == 401)
        #expect(try await second.signIn("sam", password: "wrong password 123").status == 401)
        #expect(try await first.signIn("sam", password: "wrong password 123").status == 401)
        let limited = try await second.signIn("sam")
        #expect(limited.status == 429 && limited.header("retry-after") != nil, "\(limited.head)")
        #expect(try await first.signIn("sam").status == 429)
        // The account is locked on both, from any address; other accounts are not.
        var elsewhere = ConsoleClient(port: otherPort, source: "127.0.0.3")
        #expect(try await elsewhere.signIn("sam").status == 429)
        #expect(try await elsewhere.signIn("olga").status == 303)
    }

    /// A set-password link is kept by the store (its hash and expiry), not by the process: it
    /// works after a restart, once.
    @Test(arguments: StoreBackend.allCases)
    func aSetPasswordLinkWorksOnceAfterARestart(backEnd: StoreBackend) async throws {
        let server = try await ConsoleServerProcess(backEnd: backEnd)
        defer { server.stop() }
        var olga = server.browser()
        _ = try await olga.signIn("olga")
        #expect(try await olga.postForm("/operator/accounts", [("name", "pat"), ("role", "staff")]).status == 303)
        let linkPage = try await olga.get("/operator/accounts/link").body
        let token = try #require(linkPage.range(of: #"href="/set-password/"#).map { String(linkPage[$0.upperBound...].prefix(64)) })
        try await server.restart()
        var pat = server.browser()
        #expect(try await pat.get("/set-password/\(token)").status == 200)
        #expect(try await pat.post("/set-password/\(token)", [("password", "pat's new password"), ("confirm", "pat's new password")]).status == 200)
        #expect(try await pat.post("/set-password/\(token)", [("password", "someone else's pw"), ("confirm", "someone else's pw")]).status == 404)
        #expect(try await pat.signIn("pat", password: "pat's new password").status == 303)
        #expect(try await olga.get("/codes").status == 200, "sessions outlive a restart too")
    }

    /// The page a POST redirects to may come from another instance: it is kept in the store,
    /// sealed with a key from the session's id, so only that session opens it.
    @Test func theIssuedCodeAndANewLinkShowOnAnotherInstance() async throws {
        let server = try await ConsoleServerProcess(backEnd: .postgres)
        defer { server.stop() }
        let otherPort = try await server.startAnotherInstance()
        var sam = server.browser()
        _ = try await sam.signIn("sam")
        let issue = try await sam.post("/codes", [("csrf", try await sam.sessionToken())])
        let location = try #require(issue.header("location"), "\(issue.head)")
        var samElsewhere = ConsoleClient(port: otherPort, source: "127.0.0.1")
        samElsewhere.cookies = sam.cookies
        let page = try await samElsewhere.get(location)
        let code = try #require(ConsoleClient.issuedCode(page.body), "\(page.text.prefix(2000))")
        #expect(try await uploadCodeAnswer(server, code: code).apiError == "invalid_json")
        var olga = ConsoleClient(port: otherPort, source: "127.0.0.1")
        _ = try await olga.signIn("olga")
        #expect(try await olga.get(location).status == 404, "another session's page")

        #expect(try await olga.postForm("/operator/accounts", [("name", "pat"), ("role", "staff")]).status == 303)
        var olgaElsewhere = server.browser()
        olgaElsewhere.cookies = olga.cookies
        let linkPage = try await olgaElsewhere.get("/operator/accounts/link")
        #expect(linkPage.status == 200 && linkPage.body.contains(#"href="/set-password/"#), "\(linkPage.text.prefix(2000))")
    }

    @Test func staffCannotReachOperatorPages() async throws {
        let server = try await ConsoleServerProcess()
        defer { server.stop() }
        var staff = server.browser()
        _ = try await staff.signIn("sam")
        let refused = try await staff.get("/operator")
        #expect(refused.status == 403 && refused.body.contains("Operators only"), "\(refused.text.prefix(1000))")
        expectConsoleHeaders(refused)
        #expect(!(try await staff.get("/codes").body.contains("/operator")), "staff get no link to it either")
        var anonymous = server.browser()
        #expect(try await anonymous.get("/operator").status == 303)
    }

    @Test func hostileFormsAreRefusedAndIssueNothing() async throws {
        let server = try await ConsoleServerProcess()
        defer { server.stop() }
        var browser = server.browser()
        _ = try await browser.signIn("sam")
        let token = try await browser.sessionToken()
        let cases: [(String, String, String, Int)] = [
            ("oversize", "csrf=\(token)&pad=" + String(repeating: "a", count: 5_000), "application/x-www-form-urlencoded", 413),
            ("bad escape", "csrf=\(token)&x=%ZZ", "application/x-www-form-urlencoded", 400),
            ("not UTF-8", "csrf=\(token)&x=%FF%FE", "application/x-www-form-urlencoded", 400),
            ("control character", "csrf=\(token)&x=a%00b", "application/x-www-form-urlencoded", 400),
            ("raw non-ASCII", "csrf=\(token)&x=é", "application/x-www-form-urlencoded", 400),
            ("field twice", "csrf=\(token)&csrf=\(token)", "application/x-www-form-urlencoded", 400),
            ("too many fields", "csrf=\(token)" + String(repeating: "&a=1", count: 20), "application/x-www-form-urlencoded", 400),
            ("JSON", #"{"csrf": "\#(token)"}"#, "application/json", 415),
            ("multipart", "csrf=\(token)", "multipart/form-data; boundary=x", 415),
        ]
        for (name, body, contentType, status) in cases {
            let response = try await browser.post("/codes", body: body, contentType: contentType)
            #expect(response.status == status, "\(name): \(response.head)")
            expectConsoleHeaders(response)
        }
        let hostileName = try await browser.post("/sign-in", body: "csrf=x&name=%3Cscript%3E&password=x")
        #expect(hostileName.status == 403)
        #expect(try await browser.get("/codes").body.contains("You have not issued any codes yet."))
        // Names echoed back into the sign-in page are escaped.
        var stranger = server.browser()
        let page = try await stranger.get("/sign-in")
        let signInToken = try #require(ConsoleClient.formToken(page.body))
        let echoed = try await stranger.post("/sign-in", [("csrf", signInToken), ("name", "<script>alert(1)</script>"), ("password", "x")])
        #expect(echoed.status == 401 && !echoed.body.contains("<script>") && echoed.body.contains("&lt;script&gt;"))
        expectConsoleHeaders(try await stranger.get("/no-such-page"))
    }

    @Test func accountCommandsRefuseWeakPasswordsAndDisableAndSetPasswords() async throws {
        let server = try await ConsoleServerProcess()
        defer { server.stop() }
        let weak = try server.addAccount("pat", role: "staff", password: "short")
        #expect(weak.exitCode == 1 && weak.stderr.contains("shorter than 12"), "\(weak)")
        let taken = try server.addAccount("SAM", role: "staff")
        #expect(taken.exitCode == 1 && taken.stderr.contains("exists already"), "\(taken)")
        let badRole = try server.addAccount("pat", role: "admin")
        #expect(badRole.exitCode == 2, "\(badRole)")

        var sam = server.browser()
        #expect(try await sam.signIn("sam").status == 303)
        #expect(try server.console(["disable-account", "sam"]).exitCode == 0)
        #expect(try await sam.get("/codes").status == 303, "a disabled account's session ends at once")
        #expect(try await server.signInFromANewBrowser("sam").status == 401)
        #expect(try server.console(["enable-account", "sam"]).exitCode == 0)
        #expect(try await sam.signIn("sam").status == 303)
        let newPassword = "a new password for sam"
        let set = try server.console(["set-password", "--password-stdin", "sam"], input: newPassword + "\n")
        #expect(set.exitCode == 0, "\(set)")
        #expect(try await sam.get("/codes").status == 303, "a new password ends the sessions")
        #expect(try await server.signInFromANewBrowser("sam").status == 401)
        #expect(try await server.signInFromANewBrowser("sam", password: newPassword).status == 303)
        let nobody = try server.console(["disable-account", "nobody"])
        #expect(nobody.exitCode == 1 && nobody.stderr.contains("no console account named"), "\(nobody)")
        let audit = try await { var olga = server.browser(); _ = try await olga.signIn("olga"); return try await olga.get("/operator") }()
        for event in ["account disabled", "account enabled", "password set"] {
            #expect(audit.body.contains("<td>command line</td><td>\(event)</td><td>account sam</td>"), "\(event)")
        }
    }

    @Test func reloadingTheIssuedCodeShowsItAgainAndIssuesNoOther() async throws {
        let server = try await ConsoleServerProcess()
        defer { server.stop() }
        var browser = server.browser()
        _ = try await browser.signIn("sam")
        let issued = try await browser.post("/codes", [("csrf", try await browser.sessionToken())])
        let location = try #require(issued.header("location"), "\(issued.head)")
        #expect(issued.status == 303 && ConsoleClient.issuedCode(issued.body) == nil)
        let first = try #require(ConsoleClient.issuedCode(try await browser.get(location).body))
        #expect(ConsoleClient.issuedCode(try await browser.get(location).body) == first, "a reload shows the same code")
        #expect(try await browser.get("/codes").body.components(separatedBy: #"class="state-open""#).count == 2, "one code issued")
        var elsewhere = server.browser()
        _ = try await elsewhere.signIn("sam")
        #expect(try await elsewhere.get(location).status == 404, "another session is not shown the code")
    }

    @Test func theAuditLogNamesOnlyAccountsAndForgetsOldEntries() async throws {
        let server = try await ConsoleServerProcess(console: #""auditRetentionDays": 1"#)
        defer { server.stop() }
        let now = UnixSeconds(Date().timeIntervalSince1970)
        try await server.fixture.store.appendConsoleAudit(ConsoleAuditEntry(
            at: now - 2 * 86_400, account: "olga", event: .signIn, detail: "entry-older-than-the-retention", client: "127.0.0.9"))
        var stranger = server.browser()
        // A password typed into the name field.
        #expect(try await stranger.signIn(ConsoleServerProcess.password, password: "x").status == 401)
        #expect(try await stranger.signIn("sam", password: "a wrong password").status == 401)
        var olga = server.browser()
        _ = try await olga.signIn("olga")
        let audit = try await olga.get("/operator").body
        #expect(!audit.contains(ConsoleServerProcess.password))
        #expect(audit.contains("<td>unknown account</td><td>failed sign-in</td>") && audit.contains("<td>sam</td><td>failed sign-in</td>"), "\(audit)")
        #expect(!audit.contains("entry-older-than-the-retention"), "pruned at sign-in")
    }

    @Test func operatorsSeePublicationInTheirTimeZoneAndManageAccounts() async throws {
        let server = try await ConsoleServerProcess(console: #""timeZone": "Europe/Berlin""#)
        defer { server.stop() }
        let now = UnixSeconds(Date().timeIntervalSince1970)
        let key = DailyKeyRecord(day: UTCDay(containing: now), intervalSeconds: 900, key: .random())
        _ = try await server.fixture.store.appendKeyHistory([key], credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: now)
        let berlin = DateFormatter()
        berlin.locale = Locale(identifier: "en_GB_POSIX")
        berlin.timeZone = TimeZone(identifier: "Europe/Berlin")
        berlin.dateFormat = "d MMM yyyy, HH:mm"
        func inBerlin(_ time: UnixSeconds) -> String { berlin.string(from: Date(timeIntervalSince1970: TimeInterval(time))) }

        var olga = server.browser()
        _ = try await olga.signIn("olga")
        var status = try await olga.get("/operator/status")
        _ = try await eventually(timeout: .seconds(5), every: .milliseconds(100)) {
            status = try await olga.get("/operator/status")
            return status.body.contains(#"<td id="list-log">"#) && !status.body.contains("not published yet")
        }
        let log = try server.fixture.verifiedLog()
        #expect(status.body.contains(#"<td id="list-log">\#(log.checkpoint.treeSize) entries, checkpoint signed \#(inBerlin(UnixSeconds(log.signedAt)))"#), "\(status.body)")
        #expect(status.body.contains("<td>\(inBerlin(KeyPublicationSettings().dueTime(of: key)))"), "the waiting key's due time")
        #expect(status.body.contains(#"<td id="object-store">not configured</td>"#))
        #expect(status.body.contains(#"<td id="last-publication">succeeded "#), "\(status.body)")

        // A publication that fails leaves the checkpoint as it was: the page says so, in words, with
        // the next step. (The record is the one `serve` keeps; ServerOutageTests makes it fail for real.)
        let failedAt = now + 60
        try #"{"at": \#(failedAt), "succeeded": false, "detail": "the disk holding <data> is full"}"#
            .write(toFile: server.fixture.paths.publicationRecord, atomically: true, encoding: .utf8)
        status = try await olga.get("/operator/status")
        #expect(status.body.contains(#"<td id="last-publication"><strong>failed \#(inBerlin(failedAt))"#), "\(status.body)")
        #expect(status.body.contains("</strong>: the disk holding &lt;data&gt; is full. "
            + "The server tries again by itself; if this stays, run <code>tracer-server doctor</code> on the server.</td>"), "\(status.body)")

        // Staff: 403 on every operator page and form, and nothing changes.
        var sam = server.browser()
        _ = try await sam.signIn("sam")
        for path in ["/operator/status", "/operator/accounts", "/operator/accounts/link"] {
            #expect(try await sam.get(path).status == 403, "\(path)")
        }
        for (path, fields) in [("/operator/accounts", [("name", "mallory"), ("role", "operator")]), ("/operator/accounts/disable", [("name", "olga")]),
                               ("/operator/accounts/reset", [("name", "olga")]), ("/operator/accounts/enable", [("name", "sam")])] {
            #expect(try await sam.postForm(path, fields).status == 403, "\(path)")
        }
        var accounts = try await olga.get("/operator/accounts").body
        #expect(accounts.contains("<td>olga</td><td>operator</td>") && !accounts.contains("mallory"), "\(accounts)")
        #expect(try await server.signInFromANewBrowser("olga").status == 303)

        // A new account sets its own password through a link, once.
        let added = try await olga.postForm("/operator/accounts", [("name", "pat"), ("role", "staff")])
        #expect(added.status == 303 && added.header("location") == "/operator/accounts/link", "\(added.text)")
        let linkPage = try await olga.get("/operator/accounts/link").body
        let token = try #require(linkPage.range(of: #"href="/set-password/"#).map { String(linkPage[$0.upperBound...].prefix(64)) })
        var pat = server.browser()
        #expect(try await pat.get("/set-password/\(token)").status == 200)
        #expect(try await pat.post("/set-password/\(token)", [("password", "pat's new password"), ("confirm", "pat's other password")]).status == 400)
        #expect(try await pat.post("/set-password/\(token)", [("password", "pat's new password"), ("confirm", "pat's new password")]).status == 200)
        #expect(try await pat.post("/set-password/\(token)", [("password", "someone else's pw"), ("confirm", "someone else's pw")]).status == 404)
        #expect(try await pat.signIn("pat", password: "pat's new password").status == 303)

        // Disabling ends the account's sessions at once; enabling lets it sign in again.
        #expect(try await olga.postForm("/operator/accounts/disable", [("name", "sam")]).status == 303)
        #expect(try await sam.get("/codes").status == 303)
        #expect(try await server.signInFromANewBrowser("sam").status == 401)
        #expect(try await olga.postForm("/operator/accounts/disable", [("name", "olga")]).status == 409, "not oneself")
        accounts = try await olga.get("/operator/accounts").body
        #expect(accounts.contains("<td>sam</td><td>staff</td><td>\(inBerlin(now).split(separator: ",")[0])") && accounts.contains("<td>disabled "), "\(accounts)")
        #expect(try await olga.postForm("/operator/accounts/enable", [("name", "sam")]).status == 303)
        #expect(try await server.signInFromANewBrowser("sam").status == 303)

        // A reset ends the old password and the sessions.
        #expect(try await olga.postForm("/operator/accounts/reset", [("name", "pat")]).status == 303)
        #expect(try await pat.get("/codes").status == 303)
        // Not one's own: it would end this session before the link is shown.
        #expect(try await olga.postForm("/operator/accounts/reset", [("name", "Olga")]).status == 409, "not oneself")
        #expect(try await olga.get("/operator/accounts").status == 200)
        #expect(try await server.signInFromANewBrowser("pat", password: "pat's new password").status == 401)
        let audit = try await olga.get("/operator").body
        for event in ["account created", "account disabled", "account enabled", "password reset", "password set"] {
            #expect(audit.contains("<td>\(event)</td>"), "\(event)")
        }
    }

    @Test func consoleSettingsAreCheckedAndOffByDefault() throws {
        func parse(_ console: String) throws(ConfigurationError) -> ServerConfiguration {
            try ServerConfiguration.parse(Data("""
                {"authorities": [{"name": "A", "token": "authority-token-0123456789abcdef"}, {"name": "B", "token": "authority-token-0123456789abcdeg"}]\(console)}
                """.utf8), path: "config.json")
        }
        #expect(try parse("").console == nil)
        #expect(try parse(#", "console": {"authority": "B"}"#).console?.enabled == false)
        let settings = try #require(try parse(#", "console": {"enabled": true, "authority": "B", "listen": "[::1]:9000", "timeZone": "Europe/Zurich"}"#).console)
        #expect(settings.host == "::1" && settings.port == 9000 && settings.timeZone.identifier == "Europe/Zurich")
        #expect(throws: ConfigurationError.self) { try parse(#", "console": {"enabled": true}"#) }
        #expect(throws: ConfigurationError.self) { try parse(#", "console": {"authority": "C"}"#) }
        #expect(throws: ConfigurationError.self) { try parse(#", "console": {"authority": "A", "listen": "9000"}"#) }
        #expect(throws: ConfigurationError.self) { try parse(#", "console": {"authority": "A", "timeZone": "Mars/Olympus"}"#) }
        #expect(throws: ConfigurationError.self) { try parse(#", "console": {"authority": "A", "sessionIdleSecond": 5}"#) }
    }

    @Test func passwordHashesVerifyOnlyTheirPasswordAndCarryTheirCost() throws {
        let hash = try PasswordHash.make(password: "correct horse battery staple")
        #expect(hash.verify("correct horse battery staple"))
        #expect(!hash.verify("correct horse battery stapl"))
        #expect(!hash.verify(""))
        #expect(hash.encoded.hasPrefix("scrypt$15$8$1$"))
        #expect(try PasswordHash.make(password: "correct horse battery staple") != hash, "each hash has its own salt")
        #expect(PasswordHash(encoded: hash.encoded) == hash)
        #expect(PasswordHash(encoded: "scrypt$30$8$1$00112233445566778899aabbccddeeff$" + String(repeating: "00", count: 32)) == nil, "a damaged row asking for 2^30 rounds is refused")
        #expect(!PasswordHash.decoy.verify("correct horse battery staple"))
    }
}

extension String {
    /// A raw exchange's text as a response.
    var asResponse: RawConnection.Response { RawConnection.Response(text: self) }
}
