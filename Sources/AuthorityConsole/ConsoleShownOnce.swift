import Crypto
import Foundation
import PositiveListServer
import ServerHTTPAPI
import ServerStorage
import TracerCore

/// What a page shows once after a POST, so that the POST can redirect (a reload then repeats the
/// GET, not the POST): the code just issued, a set-password link just made.
///
/// Kept in the store, so that the redirect may land on any instance, but sealed
/// (ChaCha20-Poly1305) with a key derived from the session's id, which only the browser's cookie
/// holds: the store knows the session by the id's SHA-256 alone, so the database by itself
/// cannot open what it keeps here. One of each kind per session; a new one replaces the old.
struct ConsoleShownOnce: Sendable {
    struct Link: Codable, Sendable {
        var account: String
        var token: String
        var expiresAt: UnixSeconds
    }

    private struct SealedCode: Codable {
        var number: Int64
        var code: String
        var authority: String
        var issuedAt: UnixSeconds
        var expiresAt: UnixSeconds
    }

    let store: any ConsoleStore

    func keep(code: IssuedUploadCode, number: Int64, sessionID: [UInt8]) async throws {
        let value = SealedCode(number: number, code: code.code.canonical, authority: code.authority, issuedAt: code.issuedAt, expiresAt: code.expiresAt)
        try await keep(value, kind: "code", sessionID: sessionID, expiresAt: code.expiresAt, now: code.issuedAt)
    }

    func code(sessionID: [UInt8], number: Int64, now: UnixSeconds) async throws -> IssuedUploadCode? {
        guard let kept: SealedCode = try await open(kind: "code", sessionID: sessionID, now: now), kept.number == number,
              let code = UploadCode(typed: kept.code)
        else { return nil }
        return IssuedUploadCode(code: code, authority: kept.authority, issuedAt: kept.issuedAt, expiresAt: kept.expiresAt)
    }

    func keep(link: Link, sessionID: [UInt8], now: UnixSeconds) async throws {
        try await keep(link, kind: "link", sessionID: sessionID, expiresAt: link.expiresAt, now: now)
    }

    func link(sessionID: [UInt8], now: UnixSeconds) async throws -> Link? {
        try await open(kind: "link", sessionID: sessionID, now: now)
    }

    private func keep(_ value: some Encodable, kind: String, sessionID: [UInt8], expiresAt: UnixSeconds, now: UnixSeconds) async throws {
        let sealed = try ChaChaPoly.seal(JSONEncoder().encode(value), using: Self.key(sessionID, kind: kind)).combined
        try await store.keepConsoleShownOnce(
            session: Array(SHA256.hash(data: sessionID)), kind: kind, sealed: Array(sealed), expiresAt: expiresAt, now: now)
    }

    /// Nil when nothing is kept, it expired, or it does not open with this session's key.
    private func open<Value: Decodable>(kind: String, sessionID: [UInt8], now: UnixSeconds) async throws -> Value? {
        guard let sealed = try await store.consoleShownOnce(session: Array(SHA256.hash(data: sessionID)), kind: kind, now: now),
              let box = try? ChaChaPoly.SealedBox(combined: sealed),
              let plain = try? ChaChaPoly.open(box, using: Self.key(sessionID, kind: kind))
        else { return nil }
        return try? JSONDecoder().decode(Value.self, from: plain)
    }

    private static func key(_ sessionID: [UInt8], kind: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: sessionID), info: Data("tracer console shown once: \(kind)".utf8), outputByteCount: 32)
    }
}
