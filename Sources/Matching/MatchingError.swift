import IDRotation

/// Why matching could not run on the node's own data or cache.
public enum MatchingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A cached batch no longer reads as the batch that was verified into the cache.
    case damagedCache(path: String, reason: String)

    public var description: String {
        switch self {
        case .damagedCache(let path, let reason):
            return "The cached list file \(path) is damaged (\(reason)); run `tracer check` online to download it again."
        }
    }
}
