import IDRotation

public enum ExposureCheckError: Error, Sendable, CustomStringConvertible {
    /// No verified list is held, so no statement about exposure can be made.
    case noVerifiedList(updateFailure: ListUpdateError?, offline: Bool)
    /// Offline, with a downloaded list log whose checkpoint does not open with the configured key
    /// and origin (the key changed).
    case cachedListNotTrusted
    case store(StoreError)
    /// The check was interrupted (the node is stopping).
    case cancelled

    public var description: String {
        switch self {
        case .noVerifiedList(let failure?, _):
            return "Could not get a verified positive list, and there is no earlier one to check against: \(failure) No exposure check was done."
        case .cachedListNotTrusted:
            return "The downloaded positive list does not verify with the configured public key (server.public_key); run `tracer check` without --offline to download the list signed with that key."
        case .noVerifiedList(nil, true):
            return "There is no downloaded positive list yet; run `tracer check` without --offline once."
        case .noVerifiedList(nil, false):
            return "There is no verified positive list; run `tracer check` again."
        case .store(let error):
            return error.description
        case .cancelled:
            return "The check was interrupted before it finished; nothing was recorded."
        }
    }
}
