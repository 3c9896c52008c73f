import ObjectStore
import Settings

/// The configuration's `objectStore` section: where `tracer-server sync` (and, with
/// `syncAfterPublish`, the schedule in `serve`) mirrors the published directory. Credentials are
/// never part of it: they come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or from
/// `credentialsFile` (mode 0600), so the configuration file can stay world-readable.
public struct ObjectStoreSettings: Sendable, Equatable {
    public var location: ObjectStoreLocation
    public var credentialsFile: String?
    /// `serve` syncs after each scheduled publication.
    public var syncAfterPublish: Bool

    public init(location: ObjectStoreLocation, credentialsFile: String? = nil, syncAfterPublish: Bool = true) {
        self.location = location
        self.credentialsFile = credentialsFile
        self.syncAfterPublish = syncAfterPublish
    }

    static let knownKeys: Set<String> = ["endpoint", "bucket", "region", "keyPrefix", "pathStyle", "credentialsFile", "syncAfterPublish"]

    /// How the configuration file spells the section.
    struct File: Decodable {
        var endpoint: String
        var bucket: String
        var region: String?
        var keyPrefix: String?
        var pathStyle: Bool?
        var credentialsFile: String?
        var syncAfterPublish: Bool?
    }

    init(_ file: File) throws(SettingProblem) {
        let location = ObjectStoreLocation(
            endpoint: file.endpoint, bucket: file.bucket, region: file.region ?? "us-east-1", keyPrefix: file.keyPrefix ?? "",
            pathStyle: file.pathStyle ?? true)
        if let problem = location.problems().first { throw SettingProblem(namingItsSetting: "objectStore." + problem) }
        if let credentialsFile = file.credentialsFile, !credentialsFile.hasPrefix("/") {
            throw SettingProblem(namingItsSetting: "objectStore.credentialsFile must be an absolute path")
        }
        self.init(location: location, credentialsFile: file.credentialsFile, syncAfterPublish: file.syncAfterPublish ?? true)
    }
}
