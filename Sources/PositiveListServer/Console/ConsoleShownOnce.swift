import IDRotation

/// What a page shows once after a POST, kept in memory for the session that made it so that
/// the POST can redirect (a reload then repeats the GET, not the POST): the code just issued, a
/// set-password link just made. Neither is stored anywhere else in a usable form. Lost at a
/// restart, which only means the page says so and the operator makes another.
actor ConsoleShownOnce {
    struct Link {
        var account: String
        var token: String
        var expiresAt: UnixSeconds
    }

    private var codes: [[UInt8]: (number: Int64, code: IssuedUploadCode)] = [:]
    private var links: [[UInt8]: Link] = [:]

    /// One of each per session: a new one replaces the old. Entries past their expiry go.
    func keep(code: IssuedUploadCode, number: Int64, session: [UInt8], now: UnixSeconds) {
        codes = codes.filter { $0.value.code.expiresAt > now }
        codes[session] = (number, code)
    }

    func code(session: [UInt8], number: Int64, now: UnixSeconds) -> IssuedUploadCode? {
        guard let kept = codes[session], kept.number == number, kept.code.expiresAt > now else { return nil }
        return kept.code
    }

    func keep(link: Link, session: [UInt8], now: UnixSeconds) {
        links = links.filter { $0.value.expiresAt > now }
        links[session] = link
    }

    func link(session: [UInt8], now: UnixSeconds) -> Link? {
        guard let link = links[session], link.expiresAt > now else { return nil }
        return link
    }
}
