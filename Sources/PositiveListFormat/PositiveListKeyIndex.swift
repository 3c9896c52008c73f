import Crypto
import TracerCore

/// What a server accepts from a diagnosed person: the authority's choice (issue 13), which a
/// node reads from `log/uploads` (``UploadPolicyNote``; from a server from before it, the signed
/// key index) before it asks its user which to upload.
public struct AcceptedUploads: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// Id histories (`POST /v1/histories`): unlinkable, 1,536 bytes per day to every node.
    public static let ids = AcceptedUploads(rawValue: 1 << 0)
    /// Key histories (`POST /v1/key-histories`): about 16 bytes per day, but anyone who logged
    /// the person's ids can link that day's ids once the key is published.
    public static let keys = AcceptedUploads(rawValue: 1 << 1)
    public static let both: AcceptedUploads = [.ids, .keys]
}

/// The signed list of live key batches (`keys/index.tpki`), a sibling of `index.tpli`.
///
/// Same layout as ``PositiveListIndex`` (32-byte header, 64-byte listings, signature) with its
/// own magic "TPKI", format version 2, and header byte 5 holding the ``AcceptedUploads`` bits.
/// A separate file rather than new listings in `index.tpli`: nodes released before key batches
/// refuse an index of an unknown version outright, and would fail on every check; this way they
/// never see a key batch. Its generation counts independently of the id index's.
public struct PositiveListKeyIndex: Sendable, Equatable {
    public static let magic: [UInt8] = Array("TPKI".utf8)
    public static let version: UInt8 = 2
    public static let relativePath = "keys/index.tpki"

    public let generation: UInt64
    public let publishedAt: UnixSeconds
    public let accepts: AcceptedUploads
    public let batches: [PositiveListIndex.BatchListing]

    public init(generation: UInt64, publishedAt: UnixSeconds, accepts: AcceptedUploads, batches: [PositiveListIndex.BatchListing]) {
        self.generation = generation
        self.publishedAt = publishedAt
        self.accepts = accepts
        self.batches = batches
    }

    /// Parses `file` after checking its signature with `publicKey`. Unknown bits of the accepted
    /// uploads are ignored, so that a later upload kind does not lock older nodes out.
    public init(verifying file: [UInt8], publicKey: PositiveListPublicKey) throws(PositiveListFormatError) {
        try self.init(file, check: .verify(publicKey.key))
    }

    init(_ file: [UInt8], check: SignedFile.SignatureCheck) throws(PositiveListFormatError) {
        let decoded = try IndexCoding.decode(
            file, kind: .keyIndex, magic: Self.magic, version: Self.version, batchKind: .keys, check: check)
        generation = decoded.generation
        publishedAt = decoded.publishedAt
        accepts = AcceptedUploads(rawValue: decoded.flags).intersection(.both)
        batches = decoded.batches
    }
}
