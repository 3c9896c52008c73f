import Crypto
import Dispatch
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PositiveListServer
import ServerHTTPAPI
import ServerStorage
import TracerCore

/// The staff's web console on its own listener (`console.listen`): sign-in, issuing and
/// revoking upload codes, and for operators publication status, staff accounts and the audit log.
///
/// Sessions: a 256-bit id from the system's CSPRNG in a `Secure; HttpOnly; SameSite=Strict`
/// cookie, kept by the store only as its SHA-256, replaced at every sign-in, ended after
/// `sessionIdleSeconds` unused or `sessionLifetimeSeconds` in all. Every form carries a token
/// checked in constant time on every POST: the session's own, or before sign-in one tied to a
/// short-lived cookie (so that nobody can sign a browser in to their own account). The cookies'
/// `__Host-` prefix makes browsers refuse them unless `Secure`, for `/` and without a `Domain`,
/// so that neither a sibling subdomain nor a plain-HTTP page can plant or overwrite one.
public struct ConsoleServer: Sendable {
    static let sessionCookie = "__Host-console_session"
    static let signInCookie = "__Host-console_signin"
    /// How long a set-password link works: a working day and the night after it.
    static let passwordLinkSeconds: Int64 = 86_400

    let settings: ConsoleSettings
    let configuration: PositiveListServer.ServerConfiguration
    let codes: any SubmissionStore
    let store: any ConsoleStore
    let clock: any WallClock
    let pages: ConsolePages
    let addressLimiter: FailedAttemptLimiter
    let accountLimiter: FailedAttemptLimiter
    let forwardedFor: ForwardedFor
    let publication: ConsolePublication?
    let shownOnce: ConsoleShownOnce
    /// Counts sign-ins and issued codes (set by PositiveListHTTPServer with a metrics listener).
    package var metrics: ServerMetrics?

    public init(
        settings: ConsoleSettings, configuration: PositiveListServer.ServerConfiguration, codes: any SubmissionStore, store: any ConsoleStore, clock: any WallClock,
        publication: ConsolePublication? = nil
    ) {
        self.settings = settings
        self.publication = publication
        self.configuration = configuration
        self.codes = codes
        self.store = store
        shownOnce = ConsoleShownOnce(store: store)
        self.clock = clock
        pages = ConsolePages(timeZone: settings.timeZone, authority: settings.authority)
        // The upload codes' limit, per address and, so that one account cannot be guessed at
        // from many addresses, per account name.
        addressLimiter = FailedAttemptLimiter(limitPerMinute: configuration.failedAttemptsPerMinute, clock: clock)
        accountLimiter = FailedAttemptLimiter(limitPerMinute: configuration.failedAttemptsPerMinute, clock: clock)
        forwardedFor = ForwardedFor(trustedProxies: configuration.trustedProxies, trustedHops: configuration.trustedProxyHops)
    }

    /// The console's own Hummingbird application, run as a service of the API's (see
    /// PositiveListHTTPServer.makeApplication).
    public func makeApplication(logger: Logger) -> some ApplicationProtocol {
        let router = Router(context: PositiveListRequestContext.self)
        router.add(middleware: ConsoleResponseMiddleware(pages: pages))
        addRoutes(to: router)
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [
                MalformedRequestResponder(),
                RequestReadDeadline(limit: .seconds(Int64(configuration.requestReadTimeoutSeconds))),
            ],
            idleTimeout: .seconds(Int64(configuration.idleTimeoutSeconds)))
        return Application(
            router: router, server: .http1(configuration: http1),
            configuration: ApplicationConfiguration(address: .hostname(settings.host, port: settings.port), serverName: nil),
            logger: logger)
    }

    func addRoutes(to router: Router<PositiveListRequestContext>) {
        router.get("console.css") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/css; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: ConsolePages.stylesheet)))
        }
        router.get("/") { _, _ in Self.redirect("/codes") }
        router.get("sign-in") { request, _ in try await showSignIn(request) }
        router.post("sign-in") { request, context in try await countedSignIn(request, context) }
        router.post("sign-out") { request, context in try await signOut(request, context) }
        router.get("codes") { request, _ in try await showCodes(request) }
        router.post("codes") { request, context in try await issueCode(request, context) }
        router.get("codes/issued/:number") { request, context in try await showIssuedCode(request, context) }
        router.post("codes/revoke") { request, context in try await revokeCode(request, context) }
        router.get("operator") { request, _ in try await showAuditLog(request) }
        router.get("operator/status") { request, _ in try await showStatus(request) }
        router.get("operator/accounts") { request, _ in try await showAccounts(request) }
        router.post("operator/accounts") { request, context in try await addAccount(request, context) }
        router.post("operator/accounts/disable") { request, context in try await setDisabled(true, request, context) }
        router.post("operator/accounts/enable") { request, context in try await setDisabled(false, request, context) }
        router.post("operator/accounts/reset") { request, context in try await resetPassword(request, context) }
        router.get("operator/accounts/link") { request, _ in try await showPasswordLink(request) }
        router.get("set-password/:token") { request, context in try await showSetPassword(request, context) }
        router.post("set-password/:token") { request, context in try await setPassword(request, context) }
    }

    // MARK: Sign-in and sign-out

    private func showSignIn(_ request: Request) async throws -> Response {
        if try await session(request) != nil { return Self.redirect("/codes") }
        let (token, cookie) = signInToken(request)
        return Self.html(.ok, pages.signIn(csrfToken: token), cookies: cookie.map { [$0] } ?? [])
    }

    /// `signIn`, counted by its outcome: a redirect is a session, a 401 a wrong name or password.
    private func countedSignIn(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        guard let metrics else { return try await signIn(request, context) }
        do {
            let response = try await signIn(request, context)
            metrics.consoleSignIn(response.status == .unauthorized ? .refused : .accepted)
            return response
        } catch let refusal as ConsoleRefusal {
            metrics.consoleSignIn(refusal.status == .tooManyRequests ? .limited : .refused)
            throw refusal
        } catch {
            metrics.consoleSignIn(.failed)
            throw error
        }
    }

    private func signIn(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let form = try await ConsoleForm.read(request)
        guard let cookieToken = ConsoleCookies(request)[Self.signInCookie], let formToken = form["csrf"],
              ConstantTime.equal(Array(cookieToken.utf8), Array(formToken.utf8))
        else { throw ConsoleRefusal.forgedForm }
        let name = (form["name"] ?? "").trimmingCharacters(in: .whitespaces)
        let password = form["password"] ?? ""
        let address = clientAddress(request, context)
        let addressTicket: FailedAttemptLimiter.Ticket
        switch await addressLimiter.admit(address) {
        case .refused(let seconds): throw ConsoleRefusal.tooManyAttempts(retryAfterSeconds: seconds)
        case .admitted(let ticket): addressTicket = ticket
        }
        let accountKey = String(name.lowercased().prefix(64))
        let accountTicket: FailedAttemptLimiter.Ticket
        switch await accountLimiter.admit(accountKey) {
        case .refused(let seconds):
            await addressLimiter.settle(addressTicket, failed: false)
            throw ConsoleRefusal.tooManyAttempts(retryAfterSeconds: seconds)
        case .admitted(let ticket): accountTicket = ticket
        }
        // This instance's limiters make concurrent checks here wait for each other; the store's
        // budget is the one every instance on the database shares (ConsoleSignInBudget).
        let account: ConsoleAccount?
        let sharedClaim: Int64
        do {
            switch try await store.claimConsoleSignIn(
                keys: ["address " + address, "account " + accountKey], limit: configuration.failedAttemptsPerMinute, now: clock.now())
            {
            case .refused(let seconds): throw ConsoleRefusal.tooManyAttempts(retryAfterSeconds: seconds)
            case .claimed(let claim): sharedClaim = claim
            }
            do {
                account = name.isEmpty || name.count > 64 ? nil : try await store.consoleAccount(named: name)
            } catch {
                try? await store.settleConsoleSignIn(sharedClaim, failed: false, now: clock.now())
                throw error
            }
        } catch {
            await addressLimiter.settle(addressTicket, failed: false)
            await accountLimiter.settle(accountTicket, failed: false)
            throw error
        }
        // A missing account costs the same hashing as a wrong password.
        let passwordMatches = await Self.verify(password, against: account?.passwordHash ?? .decoy)
        let accepted = passwordMatches && account != nil && account?.disabledAt == nil
        await addressLimiter.settle(addressTicket, failed: !accepted)
        await accountLimiter.settle(accountTicket, failed: !accepted)
        let now = clock.now()
        try await store.settleConsoleSignIn(sharedClaim, failed: !accepted, now: now)
        guard accepted, let account else {
            context.logger.warning("console sign-in refused", metadata: ["client": "\(address)"])
            // The name only when it is an account's: text typed into the name field may be a
            // password typed into the wrong one.
            try await store.appendConsoleAudit(ConsoleAuditEntry(
                at: now, account: account?.name ?? ConsoleAuditEntry.unknownAccount, event: .failedSignIn,
                detail: account?.disabledAt != nil ? "account disabled" : "", client: address))
            return Self.html(.unauthorized, pages.signIn(csrfToken: formToken, name: name, error: "The account name or the password is wrong. Check both and try again."))
        }
        // A session id the browser brought along (planted or old) is never kept: the signed-in
        // session always gets a new one.
        if let old = Self.sessionDigest(request) { try await store.deleteConsoleSession(digest: old) }
        let sessionID = Self.randomToken()
        try await store.createConsoleSession(digest: Self.digest(sessionID), account: account.id, csrfToken: Self.randomToken(), now: now)
        try await store.appendConsoleAudit(ConsoleAuditEntry(at: now, account: account.name, event: .signIn, detail: account.role.rawValue, client: address))
        // Pruned here: a console in use sees sign-ins daily, and the DELETE uses the index on `at`.
        try await store.pruneConsoleAudit(before: now - settings.auditRetentionDays * 86_400)
        context.logger.info("console sign-in", metadata: ["account": "\(account.name)", "client": "\(address)"])
        return Self.redirect("/codes", cookies: [
            Self.cookie(Self.sessionCookie, sessionID), Self.cookie(Self.signInCookie, "", maxAge: 0),
        ])
    }

    private func signOut(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let session = try await requireSession(request)
        try await checkForm(try await ConsoleForm.read(request), session: session)
        if let digest = Self.sessionDigest(request) { try await store.deleteConsoleSession(digest: digest) }
        try await store.appendConsoleAudit(ConsoleAuditEntry(
            at: clock.now(), account: session.account.name, event: .signOut, detail: "", client: clientAddress(request, context)))
        return Self.redirect("/sign-in", cookies: [Self.cookie(Self.sessionCookie, "", maxAge: 0)])
    }

    // MARK: Codes

    private func showCodes(_ request: Request) async throws -> Response {
        let session = try await requireSession(request)
        let codes = try await store.consoleCodes(account: session.account.id, now: clock.now(), limit: 50)
        return Self.html(.ok, pages.codes(session: session, codes: codes, lifetimeSeconds: configuration.uploadCodeLifetimeSeconds))
    }

    private func issueCode(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let session = try await requireSession(request)
        try await checkForm(try await ConsoleForm.read(request), session: session)
        // The same path as POST /v1/codes and `tracer-server issue-code`. Should recording who
        // issued it fail, the code is shown to nobody and simply expires.
        let issued = try await codes.issueUploadCode(
            authority: settings.authority, lifetimeSeconds: configuration.uploadCodeLifetimeSeconds, now: clock.now())
        let number = try await store.recordConsoleCode(
            codeDigest: issued.code.digest, account: session.account.id, issuedAt: issued.issuedAt, expiresAt: issued.expiresAt)
        try await store.appendConsoleAudit(ConsoleAuditEntry(
            at: issued.issuedAt, account: session.account.name, event: .issue,
            detail: "code no. \(number) (\(issued.code)), expires \(issued.expiresAt.consoleUTC)", client: clientAddress(request, context)))
        metrics?.uploadCode(.issued)
        context.logger.info("upload code issued", metadata: ["authority": "\(issued.authority)", "console": "\(session.account.name)"])
        // POST-redirect-GET: reloading the page that shows the code shows it again rather than
        // issuing another.
        if let sessionID = Self.sessionID(request) { try await shownOnce.keep(code: issued, number: number, sessionID: sessionID) }
        return Self.redirect("/codes/issued/\(number)")
    }

    private func showIssuedCode(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let session = try await requireSession(request)
        guard let number = context.parameters.get("number", as: Int64.self), let sessionID = Self.sessionID(request),
              let issued = try await shownOnce.code(sessionID: sessionID, number: number, now: clock.now())
        else {
            throw ConsoleRefusal(
                status: .notFound, title: "Code no longer shown",
                message: "A code is shown only in the session that issued it, until it expires or another is issued. If the person did not get it, revoke it under upload codes and issue a new one.")
        }
        return Self.html(.ok, pages.issued(session: session, code: issued))
    }

    private func revokeCode(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let session = try await requireSession(request)
        let form = try await ConsoleForm.read(request)
        try await checkForm(form, session: session)
        guard let text = form["id"], let number = Int64(text) else { throw ConsoleRefusal.badForm("no code number") }
        let now = clock.now()
        guard try await store.revokeConsoleCode(id: number, account: session.account.id, now: now) else {
            throw ConsoleRefusal(
                status: .conflict, title: "Not revoked",
                message: "Code no. \(number) cannot be revoked: it is not one of yours, or it was used, has expired or was revoked already. Go back to upload codes to see its state.")
        }
        try await store.appendConsoleAudit(ConsoleAuditEntry(
            at: now, account: session.account.name, event: .revoke, detail: "code no. \(number)", client: clientAddress(request, context)))
        return Self.redirect("/codes")
    }

    // MARK: Operator

    private func requireOperator(_ request: Request) async throws -> ConsoleSession {
        let session = try await requireSession(request)
        guard session.account.role == .operator else { throw ConsoleRefusal.operatorsOnly }
        return session
    }

    private func showAuditLog(_ request: Request) async throws -> Response {
        let session = try await requireOperator(request)
        return Self.html(.ok, pages.audit(session: session, entries: try await store.consoleAudit(limit: 200)))
    }

    private func showStatus(_ request: Request) async throws -> Response {
        let session = try await requireOperator(request)
        let status = try await PublicationStatus.read(
            publication: publication, store: codes, keySettings: KeyPublicationSettings(configuration), now: clock.now())
        return Self.html(.ok, pages.status(session: session, status: status, now: clock.now()))
    }

    private func showAccounts(_ request: Request) async throws -> Response {
        let session = try await requireOperator(request)
        return Self.html(.ok, pages.accounts(session: session, accounts: try await store.consoleAccounts()))
    }

    /// The account is created with no usable password and a set-password link the operator
    /// hands over: the person chooses their own password, which the operator never learns (so
    /// the audit log's "issued by" stays that person's), and the link works once, for a day.
    private func addAccount(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let session = try await requireOperator(request)
        let form = try await ConsoleForm.read(request)
        try await checkForm(form, session: session)
        let name = (form["name"] ?? "").trimmingCharacters(in: .whitespaces)
        guard ConsoleAccountName.isValid(name) else {
            throw ConsoleRefusal(status: .badRequest, title: "Account not added", message: ConsoleAccountName.rule + " Go back and choose another name.")
        }
        guard let role = form["role"].flatMap(ConsoleAccount.Role.init(rawValue:)) else { throw ConsoleRefusal.badForm("no role") }
        let now = clock.now()
        let (token, link) = Self.newPasswordLink(now: now)
        guard try await store.createConsoleAccount(
            name: name, role: role, passwordHash: .unusable(), link: link, by: actor(session, request, context), now: now)
        else {
            throw ConsoleRefusal(
                status: .conflict, title: "Account not added",
                message: "An account named \(name) exists already (names are compared without case). Go back and choose another name.")
        }
        return try await showLinkAfterPost(request, account: name, token: token, link: link)
    }

    private func setDisabled(_ disabled: Bool, _ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let session = try await requireOperator(request)
        let form = try await ConsoleForm.read(request)
        try await checkForm(form, session: session)
        let name = form["name"] ?? ""
        if disabled && name.lowercased() == session.account.name.lowercased() {
            throw ConsoleRefusal(
                status: .conflict, title: "Not disabled",
                message: "You cannot disable your own account from the console (nobody might be left to enable it). Ask another operator, or use tracer-server console disable-account on the server.")
        }
        guard try await store.setConsoleAccountDisabled(name: name, disabled, by: actor(session, request, context), now: clock.now()) else {
            throw ConsoleRefusal.noSuchAccount
        }
        return Self.redirect("/operator/accounts")
    }

    private func resetPassword(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let session = try await requireOperator(request)
        let form = try await ConsoleForm.read(request)
        try await checkForm(form, session: session)
        let name = form["name"] ?? ""
        if name.lowercased() == session.account.name.lowercased() {
            // A reset ends the account's sessions, this one too, and the link is shown only in
            // the session that asked for it: a self-reset would lock the operator out.
            throw ConsoleRefusal(
                status: .conflict, title: "Not reset",
                message: "You cannot reset your own password from the console (it would sign you out before you saw the link). Ask another operator, or use tracer-server console set-password on the server.")
        }
        let now = clock.now()
        let (token, link) = Self.newPasswordLink(now: now)
        guard try await store.resetConsolePassword(name: name, passwordHash: .unusable(), link: link, by: actor(session, request, context), now: now) else {
            throw ConsoleRefusal.noSuchAccount
        }
        return try await showLinkAfterPost(request, account: name, token: token, link: link)
    }

    private func showLinkAfterPost(_ request: Request, account: String, token: String, link: ConsolePasswordLink) async throws -> Response {
        if let sessionID = Self.sessionID(request) {
            try await shownOnce.keep(link: ConsoleShownOnce.Link(account: account, token: token, expiresAt: link.expiresAt), sessionID: sessionID, now: clock.now())
        }
        return Self.redirect("/operator/accounts/link")
    }

    /// A path fit for the log: a set-password link's path is its secret.
    static func loggablePath(_ path: String) -> String {
        path.hasPrefix("/set-password/") ? "/set-password/…" : path
    }

    private func showPasswordLink(_ request: Request) async throws -> Response {
        let session = try await requireOperator(request)
        guard let sessionID = Self.sessionID(request), let link = try await shownOnce.link(sessionID: sessionID, now: clock.now()) else {
            throw ConsoleRefusal(
                status: .notFound, title: "Link no longer shown",
                message: "A set-password link is shown only in the session that made it. If it was lost, reset the account's password again under Accounts.")
        }
        let host = request.head.authority ?? "\(settings.host):\(settings.port)"
        return Self.html(.ok, pages.passwordLink(session: session, link: link, host: host))
    }

    // MARK: Setting a password through a link

    private func showSetPassword(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let (token, account) = try await passwordLinkAccount(context)
        return Self.html(.ok, pages.setPassword(token: token, account: account.name))
    }

    /// No session and no CSRF token of its own: the link's secret is in the form's address, so a
    /// forged form needs the secret, and the most it could do is set the password of the
    /// forger's own link.
    private func setPassword(_ request: Request, _ context: PositiveListRequestContext) async throws -> Response {
        let (token, account) = try await passwordLinkAccount(context)
        let form = try await ConsoleForm.read(request)
        let password = form["password"] ?? ""
        guard password == (form["confirm"] ?? "") else {
            return Self.html(.badRequest, pages.setPassword(token: token, account: account.name, error: "The two passwords differ. Type the same password twice."))
        }
        if let problem = PasswordProblem.check(password) {
            return Self.html(.badRequest, pages.setPassword(token: token, account: account.name, error: problem.description))
        }
        let hash = try await Self.hash(password)
        guard try await store.setConsolePassword(
            linkDigest: Self.digest(token), passwordHash: hash, client: clientAddress(request, context), now: clock.now()) != nil
        else { throw ConsoleRefusal.passwordLinkInvalid }
        return Self.html(.ok, pages.passwordSet(account: account.name))
    }

    private func passwordLinkAccount(_ context: PositiveListRequestContext) async throws -> (String, ConsoleAccount) {
        guard let token = context.parameters.get("token"), token.utf8.count == 64, let bytes = Hex.decode(token), bytes.count == 32,
              let account = try await store.consolePasswordLinkAccount(digest: Self.digest(token), now: clock.now())
        else { throw ConsoleRefusal.passwordLinkInvalid }
        return (token, account)
    }

    private static func newPasswordLink(now: UnixSeconds) -> (String, ConsolePasswordLink) {
        let token = randomToken()
        return (token, ConsolePasswordLink(digest: digest(token), expiresAt: now + passwordLinkSeconds))
    }

    private func actor(_ session: ConsoleSession, _ request: Request, _ context: PositiveListRequestContext) -> ConsoleActor {
        ConsoleActor(name: session.account.name, client: clientAddress(request, context))
    }

    // MARK: Sessions and forms

    private func session(_ request: Request) async throws -> ConsoleSession? {
        guard let digest = Self.sessionDigest(request) else { return nil }
        return try await store.consoleSession(
            digest: digest, now: clock.now(), idleSeconds: settings.sessionIdleSeconds, lifetimeSeconds: settings.sessionLifetimeSeconds)
    }

    private func requireSession(_ request: Request) async throws -> ConsoleSession {
        guard let session = try await session(request) else { throw ConsoleRefusal.signInNeeded }
        return session
    }

    /// Every POST of a signed-in page: its token must be the session's.
    private func checkForm(_ form: ConsoleForm, session: ConsoleSession) async throws {
        guard let token = form["csrf"], ConstantTime.equal(Array(token.utf8), Array(session.csrfToken.utf8)) else {
            throw ConsoleRefusal.forgedForm
        }
    }

    /// The sign-in form's token: the browser's sign-in cookie if it has a well-formed one, else a
    /// new one with the cookie to set.
    private func signInToken(_ request: Request) -> (String, String?) {
        if let existing = ConsoleCookies(request)[Self.signInCookie], existing.utf8.count == 64, Hex.decode(existing) != nil {
            return (existing, nil)
        }
        let token = Self.randomToken()
        return (token, Self.cookie(Self.signInCookie, token, maxAge: 3_600))
    }

    /// The session's id from its cookie: only the browser holds it (the store, its SHA-256).
    private static func sessionID(_ request: Request) -> [UInt8]? {
        guard let text = ConsoleCookies(request)[sessionCookie], let bytes = Hex.decode(text), bytes.count == 32 else { return nil }
        return bytes
    }

    private static func sessionDigest(_ request: Request) -> [UInt8]? {
        sessionID(request).map { Array(SHA256.hash(data: $0)) }
    }

    private static func digest(_ hexToken: String) -> [UInt8] {
        Array(SHA256.hash(data: Hex.decode(hexToken) ?? []))
    }

    /// 256 bits from the system's CSPRNG (getrandom), as hex.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return Hex.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Scrypt takes tens of milliseconds: off the server's event loops and Swift's few threads.
    private static func verify(_ password: String, against hash: PasswordHash) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: hash.verify(password)) }
        }
    }

    private static func hash(_ password: String) async throws -> PasswordHash {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try PasswordHash.make(password: password) }) }
        }
    }

    private func clientAddress(_ request: Request, _ context: PositiveListRequestContext) -> String {
        let peer = context.peerAddress ?? "unknown"
        guard configuration.trustForwardedFor else { return peer }
        return forwardedFor.clientAddress(peer: peer, headerValues: request.headers[values: SubmissionAPI.forwardedForHeader]) ?? peer
    }

    // MARK: Responses

    static func cookie(_ name: String, _ value: String, maxAge: Int? = nil) -> String {
        "\(name)=\(value); Secure; HttpOnly; SameSite=Strict; Path=/" + (maxAge.map { "; Max-Age=\($0)" } ?? "")
    }

    static func html(_ status: HTTPResponse.Status, _ text: String, cookies: [String] = []) -> Response {
        var headers: HTTPFields = [.contentType: "text/html; charset=utf-8"]
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func redirect(_ location: String, cookies: [String] = []) -> Response {
        var headers: HTTPFields = [.location: location]
        for cookie in cookies { headers.append(HTTPField(name: .setCookie, value: cookie)) }
        return Response(status: .seeOther, headers: headers)
    }
}

/// Turns refusals and errors into plain pages and gives every response, pages, redirects and
/// errors alike, the headers that keep the console out of frames, caches and referrers.
struct ConsoleResponseMiddleware: RouterMiddleware {
    typealias Context = PositiveListRequestContext
    let pages: ConsolePages

    static let securityHeaders: [(HTTPField.Name, String)] = [
        (HTTPField.Name("Content-Security-Policy")!, "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
        (HTTPField.Name("X-Frame-Options")!, "DENY"),
        (HTTPField.Name("Referrer-Policy")!, "no-referrer"),
        (HTTPField.Name("X-Content-Type-Options")!, "nosniff"),
        (.cacheControl, "no-store"),
    ]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let refusal as ConsoleRefusal {
            response = answer(refusal)
        } catch let error as any HTTPResponseError {
            switch error.status {
            case .notFound, .methodNotAllowed: response = answer(.notFound)
            case .contentTooLarge: response = answer(.tooLarge)
            default: response = answer(ConsoleRefusal(status: error.status, title: "Request refused", message: "The console could not handle this request. Go back and try again."))
            }
        } catch {
            context.logger.error("console request failed", metadata: ["path": "\(ConsoleServer.loggablePath(request.uri.path))", "error": "\(error)"])
            response = answer(ConsoleRefusal(
                status: .serviceUnavailable, title: "Console unavailable",
                message: "The console cannot reach its database just now. Nothing was changed; try again in a minute, and tell an operator if it persists."))
        }
        for (name, value) in Self.securityHeaders { response.headers[name] = value }
        return response
    }

    private func answer(_ refusal: ConsoleRefusal) -> Response {
        if let location = refusal.redirect { return ConsoleServer.redirect(location) }
        var response = ConsoleServer.html(refusal.status, pages.refusal(refusal))
        if let seconds = refusal.retryAfterSeconds { response.headers[.retryAfter] = String(seconds) }
        return response
    }
}

extension UnixSeconds {
    /// For the audit log's detail column, which does not depend on the console's time zone.
    var consoleUTC: String { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(self))) }
}
