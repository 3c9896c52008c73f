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

    /// The section's fields; `endpoint` and `bucket` are required (``finish()``).
    static let section = SettingSection<ObjectStoreSettings>([
        .text("endpoint", \.location.endpoint, .textOrEmpty(describe: "an http or https address", problem: { _ in nil }), env: nil, flag: nil, help: "", convert: { $0 }),
        .text("bucket", \.location.bucket, .textOrEmpty(describe: "a bucket name", problem: { _ in nil }), env: nil, flag: nil, help: "", convert: { $0 }),
        .text("region", \.location.region, .text(describe: "a region name", problem: { _ in nil }), env: nil, flag: nil, help: "", convert: { $0 }),
        .text("keyPrefix", \.location.keyPrefix, .textOrEmpty(describe: "empty, or a folder ending in /", problem: { _ in nil }), env: nil, flag: nil, help: "", convert: { $0 }),
        .boolean("pathStyle", \.location.pathStyle, env: nil, flag: nil, help: ""),
        .text(
            "credentialsFile", \.credentialsFile, .text(describe: "an absolute path", problem: { $0.hasPrefix("/") ? nil : "must be an absolute path" }),
            env: nil, flag: nil, help: "", convert: { $0 }),
        .boolean("syncAfterPublish", \.syncAfterPublish, env: nil, flag: nil, help: ""),
    ])

    /// Before the fields are read: nothing chosen but the defaults (us-east-1, no prefix, path style).
    static let unread = ObjectStoreSettings(location: ObjectStoreLocation(endpoint: "", bucket: "", region: "us-east-1", keyPrefix: "", pathStyle: true))

    /// Refuses a section without its endpoint or bucket, or with a location no store takes.
    mutating func finish() throws(SettingProblem) {
        if location.endpoint.isEmpty {
            throw SettingProblem("is missing; give the store's http or https address, such as https://s3.eu-central-1.amazonaws.com", field: "endpoint")
        }
        if location.bucket.isEmpty { throw SettingProblem("is missing; give the bucket's name", field: "bucket") }
        // Through the initializer, which brings the endpoint to one spelling (no trailing slash).
        location = ObjectStoreLocation(
            endpoint: location.endpoint, bucket: location.bucket, region: location.region, keyPrefix: location.keyPrefix, pathStyle: location.pathStyle)
        if let problem = location.problems().first { throw SettingProblem(namingItsSetting: "objectStore." + problem) }
    }
}
