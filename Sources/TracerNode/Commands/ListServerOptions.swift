import ArgumentParser

/// The flags that say where the positive list comes from, shared by `check`, `report` and `status`.
/// Each is also a setting (server.url, server.public_key, server.pinned_key, check.cache_dir)
/// that the configuration file or the environment can give instead.
struct ListServerOptions: ParsableArguments {
    @Option(name: .customLong("server"), help: ArgumentHelp("The positive list server's URL (server.url).", valueName: "url"))
    var serverURL: String?
    @Option(name: .customLong("server-key"), help: ArgumentHelp(
        "The Ed25519 public key that signs the list, in base64, as `tracer-server keygen` printed it (server.public_key).",
        valueName: "base64"))
    var serverKey: String?
    @Option(name: .customLong("pinned-key"), help: ArgumentHelp(
        "Pin the server's TLS public key: sha256//BASE64[;sha256//…] (server.pinned_key).", valueName: "pins"))
    var pinnedKey: String?
    @Option(name: .customLong("cache-dir"), help: ArgumentHelp(
        "Where the downloaded list is kept (check.cache_dir).", valueName: "path"))
    var cacheDirectory: String?
    @Option(name: .customLong("server-timeout"), help: ArgumentHelp(
        "Seconds one request may take before it is retried, plus time for large files (server.timeout).", valueName: "seconds"))
    var serverTimeout: String?

    var settingFlags: [String: String] {
        var flags: [String: String] = [:]
        flags["server.url"] = serverURL
        flags["server.public_key"] = serverKey
        flags["server.pinned_key"] = pinnedKey
        flags["check.cache_dir"] = cacheDirectory
        flags["server.timeout"] = serverTimeout
        return flags
    }
}
