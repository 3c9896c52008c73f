import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PositiveListServer
import ServerHTTPAPI

/// A refused console request, answered with a plain page saying what to do; or, for a request
/// without a session, a redirect to the sign-in page.
struct ConsoleRefusal: Error {
    var status: HTTPResponse.Status
    var title: String
    var message: String
    var retryAfterSeconds: Int?
    /// Set for `signInNeeded`: answered with 303 See Other to this path.
    var redirect: String?

    static let signInNeeded = ConsoleRefusal(
        status: .seeOther, title: "Sign in", message: "Sign in to continue.", redirect: "/sign-in")
    static let forgedForm = ConsoleRefusal(
        status: .forbidden, title: "Form refused",
        message: "This form is out of date or did not come from the console. Go back, reload the page and try again.")
    static let operatorsOnly = ConsoleRefusal(
        status: .forbidden, title: "Operators only",
        message: "This page is for the server's operators. Ask an operator if you need something from it.")
    static let notFound = ConsoleRefusal(status: .notFound, title: "Not found", message: "There is no page at this address. Go to the start page.")
    static let tooLarge = ConsoleRefusal(
        status: .contentTooLarge, title: "Form too large", message: "The form sent more than the console accepts. Go back and try again.")

    static let noSuchAccount = ConsoleRefusal(
        status: .notFound, title: "No such account", message: "There is no account by that name. Go back to Accounts and reload the page.")
    static let passwordLinkInvalid = ConsoleRefusal(
        status: .notFound, title: "Link not valid",
        message: "This set-password link is not valid: it was used already, has expired (links work for a day) or was replaced by a newer one. Ask an operator for a new link.")

    static func badForm(_ detail: String) -> ConsoleRefusal {
        ConsoleRefusal(status: .badRequest, title: "Form not understood", message: "The form could not be read (\(detail)). Go back, reload the page and try again.")
    }

    static func tooManyAttempts(retryAfterSeconds: Int) -> ConsoleRefusal {
        ConsoleRefusal(
            status: .tooManyRequests, title: "Too many failed sign-ins",
            message: "There were too many failed sign-ins for this account or from this computer. Wait \(retryAfterSeconds) seconds and try again; if you forgot your password, ask an operator.",
            retryAfterSeconds: retryAfterSeconds)
    }
}

/// A form the console's pages posted: `application/x-www-form-urlencoded`, small, each field
/// once, valid UTF-8 without control characters. Anything else is refused before a field is
/// looked at.
struct ConsoleForm {
    /// Every console form fits easily: a name, a password of at most 1 KiB, two tokens.
    static let maximumBytes = 4_096
    static let maximumFields = 8

    private let fields: [String: String]

    subscript(name: String) -> String? { fields[name] }

    static func read(_ request: Request) async throws -> ConsoleForm {
        guard let contentType = request.headers[.contentType],
              contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == "application/x-www-form-urlencoded"
        else {
            throw ConsoleRefusal(
                status: .unsupportedMediaType, title: "Form not understood",
                message: "The console accepts only its own forms (application/x-www-form-urlencoded). Go back and use the form.")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: maximumBytes)
        } catch {
            throw ConsoleRefusal.tooLarge
        }
        return try ConsoleForm(Array(body.readableBytesView))
    }

    init(_ bytes: [UInt8]) throws(ConsoleRefusal) {
        // The encoding is ASCII: any other byte is not a browser's form.
        guard bytes.allSatisfy({ (0x21...0x7e).contains($0) }) else { throw .badForm("characters outside the form encoding") }
        var fields: [String: String] = [:]
        let pairs = bytes.isEmpty ? [] : String(decoding: bytes, as: UTF8.self).split(separator: "&", omittingEmptySubsequences: false)
        guard pairs.count <= Self.maximumFields else { throw .badForm("too many fields") }
        for pair in pairs {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let name = Self.decode(parts[0]), let value = Self.decode(parts[1]), !name.isEmpty else {
                throw .badForm("a field is not name=value in the form encoding")
            }
            guard fields[name] == nil else { throw .badForm("the field \(name.prefix(32)) was sent twice") }
            fields[name] = value
        }
        self.fields = fields
    }

    /// Percent-decoding that fails on a bad escape or on bytes that are not UTF-8, and refuses
    /// control characters (no console field may hold one).
    private static func decode(_ text: Substring) -> String? {
        guard let decoded = text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding else { return nil }
        guard !decoded.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return nil }
        return decoded
    }
}

/// The request's cookies by name; a name sent twice keeps its first value.
struct ConsoleCookies {
    private var values: [String: String] = [:]

    init(_ request: Request) {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { continue }
                let name = parts[0].trimmingCharacters(in: .whitespaces)
                if values[name] == nil { values[name] = parts[1].trimmingCharacters(in: .whitespaces) }
            }
        }
    }

    subscript(name: String) -> String? { values[name] }
}

/// The rule for account names, one for the command line and the console.
public enum ConsoleAccountName {
    public static let rule = "An account name has 1 to 64 letters, digits and . _ - @ (no spaces)."
    private static let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@")

    public static func isValid(_ name: String) -> Bool {
        (1...64).contains(name.count) && name.unicodeScalars.allSatisfy(allowed.contains)
    }
}
