import ServerStorage
/// The configured health authorities, looked up by bearer token.
public struct AuthorityRegistry: Sendable {
    private let authorities: [AuthorityConfiguration]

    public init(_ authorities: [AuthorityConfiguration]) {
        self.authorities = authorities
    }

    /// The authority whose token is `token`, or nil. Every configured digest is compared, with
    /// no early exit, so the time taken does not tell which authority (if any) came close.
    public func authenticate(token: String) -> AuthorityConfiguration? {
        let digest = TokenDigest.of(token)
        var match: AuthorityConfiguration?
        for authority in authorities where ConstantTime.equal(authority.tokenDigest, digest) {
            match = authority
        }
        return match
    }

    public func authority(named name: String) -> AuthorityConfiguration? {
        authorities.first { $0.name == name }
    }

    public var names: [String] { authorities.map(\.name) }
}
