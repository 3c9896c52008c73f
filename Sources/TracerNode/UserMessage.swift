import CurlHTTP
import Foundation
import IDRotation
import Matching
import PositiveListFormat
import TracerCore

/// Turns any error into the one plain sentence the user sees.
enum UserMessage {
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as CommandFailure: return error.description
        case let error as NodeMetricsEndpointError: return error.description
        case let error as CalibrationFailure: return error.description
        case let error as CalibrationError: return error.description
        case let error as ConfigurationError: return error.description
        case let error as ExposureCheckError: return error.description
        case let error as ListUpdateError: return error.description
        case let error as ReportError: return error.description
        case let error as HTTPClientError: return error.description
        case let error as PositiveListFormatError: return error.description.capitalizingFirst + "."
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
    case missingSetting(RequiredSetting)
    case noDatabaseToCheck
    case noHistoryToReport
    case cannotForgetOnReadOnlyFileSystem(path: String)

    /// Settings without a default that some commands cannot do without.
    enum RequiredSetting {
        case transport, serverURL, serverPublicKey
    }

    var description: String {
        switch self {
        case .needsConfirmation(let what):
            return "\(what) needs confirmation, and there is no terminal to ask on; add --yes to go ahead."
        case .cannotWriteOutput(let path, let reason):
            return "Cannot write \(path) (\(reason)); choose another file or check the directory's permissions."
        case .badTransport(let detail):
            return "\(detail.capitalizingFirst)."
        case .missingSetting(.transport):
            return "No Bluetooth controller is configured; give --transport (for example hci0), or set node.transport in tracer.toml or TRACER_TRANSPORT."
        case .missingSetting(.serverURL):
            return "No positive list server is configured; give --server URL, or set server.url in tracer.toml or TRACER_SERVER_URL."
        case .missingSetting(.serverPublicKey):
            return "The list server's public key is not configured; give --server-key with the key your health authority publishes, or set server.public_key in tracer.toml or TRACER_SERVER_PUBLIC_KEY."
        case .noDatabaseToCheck:
            return "This node has no data yet, so there are no encounters to check; run `tracer run` first."
        case .noHistoryToReport:
            return "This node has no data yet, so there are no ids to report; nothing was uploaded."
        case .cannotForgetOnReadOnlyFileSystem(let path):
            return "Nothing was deleted: the file system holding \(path) is read-only, so Tracer can neither erase nor remove its data. \(StoreError.readOnlyFileSystemCauses) Then run `tracer forget` again. If the disk cannot be mended, destroy it: its data stays readable."
        }
    }
}

extension String {
    var capitalizingFirst: String { prefix(1).uppercased() + dropFirst() }
}
