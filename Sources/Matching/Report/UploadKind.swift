import PositiveListFormat

/// What a diagnosed person uploads (issue 13): the ids their node broadcast, or the daily keys
/// those ids derive from (docs/daily-keys.md).
///
/// - ids: each published on its own, nobody can link one to another; about 1.5 kB per day for
///   every node to download.
/// - keys: 16 bytes per day, but once a day's key is published anyone who logged some of that
///   day's ids can recompute them all and link those sightings to each other.
///
/// The choice is the user's; a node never uploads keys without it.
public enum UploadKind: String, Sendable, Codable, CaseIterable {
    case ids
    case keys

    /// The server's bit for this kind in the upload policy (`log/uploads`).
    public var acceptedUploads: AcceptedUploads { self == .ids ? .ids : .keys }

    /// The API path that takes this kind (docs/openapi.yaml).
    var apiPath: String { self == .ids ? "/v1/histories" : "/v1/key-histories" }
}

/// What the server accepts from a diagnosed person, as this node learned it before uploading.
public struct UploadAcceptance: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        /// The verified `log/uploads`, signed by the log's key (the authority's `acceptUploads`).
        case signedUploadPolicy
        /// No server public key is configured, so the signed setting could not be read; the
        /// server decides when the upload arrives (it refuses a kind it does not take with 403).
        case unknown
    }

    public var kinds: AcceptedUploads
    public var source: Source

    public init(kinds: AcceptedUploads, source: Source) {
        self.kinds = kinds
        self.source = source
    }

    public func accepts(_ kind: UploadKind) -> Bool { kinds.contains(kind.acceptedUploads) }

    /// The one kind the server takes, when it takes exactly one.
    public var onlyKind: UploadKind? {
        switch (accepts(.ids), accepts(.keys)) {
        case (true, false): return .ids
        case (false, true): return .keys
        default: return nil
        }
    }

    /// Which kind to upload, given the user's flag (`requested`) and whether the user can be
    /// asked (a terminal, no `--yes`).
    ///
    /// Keys go out only by the user's explicit choice: their flag, their answer to the question,
    /// or, when the server takes keys only, their typed confirmation of an upload that names the
    /// keys. `--yes` alone never chooses keys; without a flag it means ids, today's behaviour and
    /// the unlinkable choice.
    public func decide(requested: UploadKind?, canAsk: Bool) throws(ReportError) -> UploadKindDecision {
        if let requested {
            guard accepts(requested) else { throw .kindNotAccepted(requested) }
            return .upload(requested)
        }
        switch onlyKind {
        case .ids?:
            return .upload(.ids)
        case .keys?:
            guard canAsk else { throw .keysNeedExplicitChoice }
            return .upload(.keys)
        case nil:
            return canAsk ? .ask : .upload(.ids)
        }
    }
}

/// What `tracer report` does about the kind to upload.
public enum UploadKindDecision: Sendable, Equatable {
    case upload(UploadKind)
    /// Both kinds are possible and the user has not chosen: ask.
    case ask
}
