import Foundation
import IDRotation

/// Turns any error into the one plain sentence the user sees.
enum UserMessage {
    static func isKnown(_ error: any Error) -> Bool {
        error is CommandFailure || error is StoreError || error is RotationScheduleError || error is UserIDError
            || error is CocoaError || error is ConfigurationError
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as CommandFailure: return error.description
        case let error as ConfigurationError: return error.description
        case let error as StoreError: return error.description
        case let error as RotationScheduleError: return error.description.capitalizingFirst + "."
        case let error as UserIDError: return error.description.capitalizingFirst + "."
        case let error as CocoaError where error.code == .fileWriteNoPermission:
            return "Permission denied writing a file; choose a place you can write to."
        default:
            return "Something unexpected went wrong (\(error)); please report this with the command you ran."
        }
    }
}

/// A command's own failures, each saying what to do next.
enum CommandFailure: Error, CustomStringConvertible {
    case needsConfirmation(String)
    case cannotWriteOutput(path: String, reason: String)
    case badTransport(String)

    var description: String {
        switch self {
        case .needsConfirmation(let what):
            return "\(what) needs confirmation, and there is no terminal to ask on; add --yes to go ahead."
        case .cannotWriteOutput(let path, let reason):
            return "Cannot write \(path) (\(reason)); choose another file or check the directory's permissions."
        case .badTransport(let detail):
            return "\(detail.capitalizingFirst)."
        }
    }
}

extension String {
    var capitalizingFirst: String { prefix(1).uppercased() + dropFirst() }
}
