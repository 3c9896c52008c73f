import Foundation
import PositiveListServer
import ServerHTTPAPI
import ServerStorage
import TracerCore

/// The console's HTML: plain server-rendered pages with one stylesheet and no scripts, so they
/// work with any browser's keyboard and screen reader and are allowed by a strict
/// Content-Security-Policy.
struct ConsolePages {
    let timeZone: TimeZone
    let authority: String

    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    func time(_ seconds: UnixSeconds) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_GB_POSIX")
        formatter.timeZone = timeZone
        // Foundation calls UTC "GMT"; the console's readers know it as UTC.
        formatter.dateFormat = timeZone.secondsFromGMT() == 0 && ["UTC", "GMT", "Etc/UTC"].contains(timeZone.identifier)
            ? "d MMM yyyy, HH:mm 'UTC'" : "d MMM yyyy, HH:mm zzz"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    /// The frame of every page: a header naming who is signed in, with sign-out, and `main`.
    func page(title: String, session: ConsoleSession?, body: String) -> String {
        var navigation = ""
        if let session {
            let operatorLink = session.account.role == .operator
                ? #"<li><a href="/operator/status">Publication</a></li><li><a href="/operator/accounts">Accounts</a></li><li><a href="/operator">Audit log</a></li>"#
                : ""
            navigation = """
                <nav aria-label="Console"><ul>
                <li><a href="/codes">Upload codes</a></li>\(operatorLink)
                <li><form method="post" action="/sign-out"><input type="hidden" name="csrf" value="\(Self.escape(session.csrfToken))">\
                <button type="submit">Sign out \(Self.escape(session.account.name))</button></form></li>
                </ul></nav>
                """
        }
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(Self.escape(title)) · \(Self.escape(authority)) console</title>
            <link rel="stylesheet" href="/console.css">
            </head>
            <body>
            <header><p class="brand">\(Self.escape(authority)) · Tracer console</p>\(navigation)</header>
            <main>
            <h1>\(Self.escape(title))</h1>
            \(body)
            </main>
            </body>
            </html>

            """
    }

    func signIn(csrfToken: String, name: String = "", error: String? = nil) -> String {
        let alert = error.map { #"<p class="error" role="alert">\#(Self.escape($0))</p>"# } ?? ""
        return page(title: "Sign in", session: nil, body: """
            \(alert)
            <form method="post" action="/sign-in" class="stacked">
            <input type="hidden" name="csrf" value="\(Self.escape(csrfToken))">
            <label for="name">Account name</label>
            <input id="name" name="name" autocomplete="username" required maxlength="64" value="\(Self.escape(name))">
            <label for="password">Password</label>
            <input id="password" name="password" type="password" autocomplete="current-password" required>
            <button type="submit">Sign in</button>
            </form>
            """)
    }

    func codes(session: ConsoleSession, codes: [ConsoleCodeRecord], lifetimeSeconds: Int64) -> String {
        var rows = ""
        for code in codes {
            let action = code.state == .open
                ? """
                <form method="post" action="/codes/revoke"><input type="hidden" name="csrf" value="\(Self.escape(session.csrfToken))">\
                <input type="hidden" name="id" value="\(code.id)"><button type="submit" aria-label="Revoke code \(code.id)">Revoke</button></form>
                """
                : ""
            rows += """
                <tr><td>\(code.id)</td><td>\(time(code.issuedAt))</td><td>\(time(code.expiresAt))</td>\
                <td class="state-\(code.state.rawValue)">\(code.state.rawValue)</td><td>\(action)</td></tr>

                """
        }
        let table = codes.isEmpty
            ? "<p>You have not issued any codes yet.</p>"
            : """
            <table><caption>Codes you issued, newest first</caption>
            <thead><tr><th scope="col">No.</th><th scope="col">Issued</th><th scope="col">Expires</th><th scope="col">State</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
            <tbody>
            \(rows)</tbody></table>
            """
        let hours = lifetimeSeconds / 3_600
        let lifetime = hours >= 1 && lifetimeSeconds % 3_600 == 0 ? "\(hours) hours" : "\(lifetimeSeconds / 60) minutes"
        return page(title: "Upload codes", session: session, body: """
            <section aria-labelledby="issue-heading">
            <h2 id="issue-heading">Issue a code</h2>
            <p>Give the code to a person with a confirmed diagnosis, by phone or on paper. It can be used once, within \(lifetime).</p>
            <form method="post" action="/codes"><input type="hidden" name="csrf" value="\(Self.escape(session.csrfToken))">
            <button type="submit" id="issue">Issue a code</button></form>
            </section>
            <section aria-labelledby="mine-heading">
            <h2 id="mine-heading">My codes</h2>
            \(table)
            </section>
            """)
    }

    func issued(session: ConsoleSession, code: IssuedUploadCode) -> String {
        let groups = code.code.display.split(separator: "-").map { #"<span class="group">\#($0)</span>"# }.joined(separator: #"<span class="dash">-</span>"#)
        return page(title: "Upload code", session: session, body: """
            <section class="issued" aria-labelledby="code-label">
            <p id="code-label">Upload code for \(Self.escape(code.authority))</p>
            <p class="code" id="issued-code" data-code="\(code.code.display)">\(groups)</p>
            <p>Valid once, until <strong id="issued-expiry">\(time(code.expiresAt))</strong>.</p>
            <p class="hint">Read it out in groups of four. Letters and digits that look alike (0 and O, 1 and I) are never used. The code is shown only now: print this page (Ctrl+P) if the person needs it on paper.</p>
            </section>
            <p class="no-print"><a href="/codes">Back to upload codes</a></p>
            """)
    }

    func audit(session: ConsoleSession, entries: [ConsoleAuditEntry]) -> String {
        let rows = entries.map { entry in
            "<tr><td>\(time(entry.at))</td><td>\(Self.escape(entry.account))</td><td>\(Self.escape(entry.event.rawValue))</td><td>\(Self.escape(entry.detail))</td><td>\(Self.escape(entry.client))</td></tr>"
        }.joined(separator: "\n")
        return page(title: "Audit log", session: session, body: """
            <table><caption>The latest \(entries.count) events, newest first</caption>
            <thead><tr><th scope="col">When</th><th scope="col">Account</th><th scope="col">Event</th><th scope="col">Detail</th><th scope="col">From</th></tr></thead>
            <tbody>
            \(rows)
            </tbody></table>
            """)
    }

    func status(session: ConsoleSession, status: PublicationStatus, now: UnixSeconds) -> String {
        let log = status.log.map { log in
            "\(log.treeSize) entries" + (log.signedAt.map { ", checkpoint signed \(time($0))" } ?? "")
        } ?? "not published yet"
        let summary = status.summary
        let waiting = status.waitingKeys.isEmpty
            ? "<p>No keys are waiting for their publication delay.</p>"
            : """
            <table id="waiting-keys"><caption>Keys waiting for their publication delay</caption>
            <thead><tr><th scope="col">Due</th><th scope="col">Keys</th></tr></thead>
            <tbody>
            \(status.waitingKeys.map { waiting -> String in "<tr><td>\(time(waiting.dueAt))</td><td>\(waiting.count)</td></tr>" }.joined(separator: "\n"))
            </tbody></table>
            """
        let objectStore: String
        switch status.objectStore {
        case .notConfigured: objectStore = "not configured"
        case .neverSynced: objectStore = "configured, not synced yet"
        case .synced(let record):
            objectStore = (record.succeeded ? "last synced \(time(record.at)): " : "last sync failed \(time(record.at)): ") + Self.escape(record.detail)
        }
        let lastPublication = status.lastPublication.map { record in
            record.succeeded
                ? "succeeded \(time(record.at)): " + Self.escape(record.detail)
                : "<strong>failed \(time(record.at))</strong>: " + Self.escape(record.detail)
                    + ". The server tries again by itself; if this stays, run <code>tracer-server doctor</code> on the server."
        } ?? "none recorded yet"
        return page(title: "Publication", session: session, body: """
            <p>As of \(time(now)).</p>
            <table id="publication"><caption>Published lists</caption>
            <tbody>
            <tr><th scope="row">List log</th><td id="list-log">\(log)</td></tr>
            <tr><th scope="row">Live batches</th><td>\(summary.liveBatches) of ids, \(summary.liveKeyBatches) of keys</td></tr>
            <tr><th scope="row">Last batch</th><td>\(summary.lastPublishedAt.map(time) ?? "none yet")</td></tr>
            <tr><th scope="row">Pending</th><td>\(summary.unpublishedIDs) ids, \(summary.unpublishedKeys) keys (\(status.dueKeys) keys due at the next publication)</td></tr>
            <tr><th scope="row">Open upload codes</th><td>\(summary.openUploadCodes)</td></tr>
            <tr><th scope="row">Last publication</th><td id="last-publication">\(lastPublication)</td></tr>
            <tr><th scope="row">Object store</th><td id="object-store">\(objectStore)</td></tr>
            </tbody></table>
            \(waiting)
            """)
    }

    func accounts(session: ConsoleSession, accounts: [ConsoleAccount]) -> String {
        let csrf = #"<input type="hidden" name="csrf" value="\#(Self.escape(session.csrfToken))">"#
        let rows = accounts.map { account -> String in
            let name = Self.escape(account.name)
            let field = #"<input type="hidden" name="name" value="\#(name)">"#
            let toggle = account.disabledAt == nil
                ? #"<form method="post" action="/operator/accounts/disable">\#(csrf)\#(field)<button type="submit" aria-label="Disable \#(name)">Disable</button></form>"#
                : #"<form method="post" action="/operator/accounts/enable">\#(csrf)\#(field)<button type="submit" aria-label="Enable \#(name)">Enable</button></form>"#
            let reset = #"<form method="post" action="/operator/accounts/reset">\#(csrf)\#(field)<button type="submit" aria-label="Reset password of \#(name)">Reset password</button></form>"#
            let state = account.disabledAt.map { "disabled \(time($0))" } ?? "active"
            return "<tr><td>\(name)</td><td>\(account.role.rawValue)</td><td>\(account.lastSignInAt.map(time) ?? "never")</td><td>\(state)</td><td class=\"actions\">\(toggle)\(reset)</td></tr>"
        }.joined(separator: "\n")
        return page(title: "Accounts", session: session, body: """
            <table id="accounts"><caption>Console accounts</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">Role</th><th scope="col">Last sign-in</th><th scope="col">State</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>
            \(rows)
            </tbody></table>
            <section aria-labelledby="add-heading">
            <h2 id="add-heading">Add an account</h2>
            <p>The person gets a link to choose their own password; you never see it. The link works once, for a day.</p>
            <form method="post" action="/operator/accounts" class="stacked">\(csrf)
            <label for="new-name">Account name</label>
            <input id="new-name" name="name" required maxlength="64" pattern="[A-Za-z0-9._@\\-]{1,64}" autocomplete="off" aria-describedby="name-rule">
            <p id="name-rule" class="hint">\(Self.escape(ConsoleAccountName.rule))</p>
            <label for="new-role">Role</label>
            <select id="new-role" name="role"><option value="staff">staff: issues codes</option><option value="operator">operator: also these pages</option></select>
            <button type="submit">Add the account</button>
            </form>
            </section>
            """)
    }

    func passwordLink(session: ConsoleSession, link: ConsoleShownOnce.Link, host: String) -> String {
        let loopback = host.hasPrefix("127.") || host.hasPrefix("localhost") || host.hasPrefix("[::1]")
        let url = (loopback ? "http://" : "https://") + host + "/set-password/" + link.token
        return page(title: "Set-password link", session: session, body: """
            <p>Give this link to <strong>\(Self.escape(link.account))</strong> in person or over a channel only they read. \
            It works once, until \(time(link.expiresAt)); they choose their password with it.</p>
            <p class="link"><a id="password-link" href="/set-password/\(link.token)">\(Self.escape(url))</a></p>
            <p><a href="/operator/accounts">Back to accounts</a></p>
            """)
    }

    func setPassword(token: String, account: String, error: String? = nil) -> String {
        let alert = error.map { #"<p class="error" role="alert">\#(Self.escape($0))</p>"# } ?? ""
        return page(title: "Choose your password", session: nil, body: """
            \(alert)
            <p>For the account <strong>\(Self.escape(account))</strong>. At least \(PasswordHash.minimumPasswordLength) characters; a few unrelated words work well.</p>
            <form method="post" action="/set-password/\(token)" class="stacked">
            <input type="hidden" name="account" value="\(Self.escape(account))" autocomplete="username">
            <label for="password">New password</label>
            <input id="password" name="password" type="password" autocomplete="new-password" required minlength="\(PasswordHash.minimumPasswordLength)">
            <label for="confirm">The same password again</label>
            <input id="confirm" name="confirm" type="password" autocomplete="new-password" required>
            <button type="submit">Set the password</button>
            </form>
            """)
    }

    func passwordSet(account: String) -> String {
        page(title: "Password set", session: nil, body: """
            <p role="status">The password of <strong>\(Self.escape(account))</strong> is set. <a href="/sign-in">Sign in</a> with it.</p>
            """)
    }

    func refusal(_ refusal: ConsoleRefusal) -> String {
        page(title: refusal.title, session: nil, body: """
            <p role="alert">\(Self.escape(refusal.message))</p>
            <p><a href="/">Go to the start page</a></p>
            """)
    }

    static let stylesheet = """
        :root { font-family: system-ui, sans-serif; line-height: 1.5; color: #1a1a1a; background: #fff; }
        body { margin: 0 auto; max-width: 48rem; padding: 0 1rem 2rem; }
        header { border-bottom: 2px solid #1d4f91; margin-bottom: 1rem; }
        .brand { font-weight: bold; color: #1d4f91; margin: .5rem 0; }
        nav ul { list-style: none; padding: 0; margin: 0 0 .5rem; display: flex; flex-wrap: wrap; gap: .75rem; align-items: center; }
        nav form { display: inline; }
        a { color: #1d4f91; }
        a:focus, button:focus, input:focus { outline: 3px solid #f5a623; outline-offset: 2px; }
        .stacked { display: flex; flex-direction: column; gap: .4rem; max-width: 22rem; }
        input { font-size: 1rem; padding: .5rem; border: 1px solid #555; border-radius: 4px; }
        button { font-size: 1rem; padding: .5rem 1rem; background: #1d4f91; color: #fff; border: 0; border-radius: 4px; cursor: pointer; }
        nav button { background: none; color: #1d4f91; text-decoration: underline; padding: 0; }
        .error { color: #a00000; font-weight: bold; }
        table { border-collapse: collapse; width: 100%; font-size: .95rem; }
        caption { text-align: left; font-weight: bold; padding: .25rem 0; }
        th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid #ccc; }
        td form { margin: 0; }
        td.actions { display: flex; flex-wrap: wrap; gap: .4rem; }
        select { font-size: 1rem; padding: .5rem; border: 1px solid #555; border-radius: 4px; background: #fff; }
        .link { overflow-wrap: anywhere; font-family: ui-monospace, monospace; }
        td button { padding: .2rem .6rem; font-size: .9rem; }
        .state-open { color: #0b6b2e; font-weight: bold; }
        .state-used, .state-expired, .state-revoked { color: #555; }
        .code { font-family: ui-monospace, monospace; font-size: clamp(2rem, 9vw, 4rem); font-weight: bold; letter-spacing: .08em; margin: .5rem 0; white-space: nowrap; }
        .code .dash { color: #888; padding: 0 .15em; }
        .hint { color: #444; }
        .visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
        @media (max-width: 30rem) { th:nth-child(1), td:nth-child(1) { display: none; } }
        @media print {
          header, nav, .no-print, .hint, form { display: none; }
          body { max-width: none; }
          .code { font-size: 36pt; }
        }

        """
}
