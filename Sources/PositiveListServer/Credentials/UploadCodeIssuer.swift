import ServerStorage
import TracerCore

/// An upload code just made: the only moment the code itself exists outside the person's hands.
public struct IssuedUploadCode: Sendable {
    public let code: UploadCode
    public let authority: String
    public let issuedAt: UnixSeconds
    public let expiresAt: UnixSeconds

    public init(code: UploadCode, authority: String, issuedAt: UnixSeconds, expiresAt: UnixSeconds) {
        self.code = code
        self.authority = authority
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

extension SubmissionStore {
    /// Makes and records a code: the one way codes are issued, by `POST /v1/codes`,
    /// `tracer-server issue-code` and the console alike.
    public func issueUploadCode(authority: String, lifetimeSeconds: Int64, now: UnixSeconds) async throws(ServerStoreError) -> IssuedUploadCode {
        let code = UploadCode.generate()
        try await recordIssuedCode(code, authority: authority, issuedAt: now, expiresAt: now + lifetimeSeconds)
        return IssuedUploadCode(code: code, authority: authority, issuedAt: now, expiresAt: now + lifetimeSeconds)
    }
}
