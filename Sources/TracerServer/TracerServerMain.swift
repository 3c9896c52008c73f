import ArgumentParser
import CommandLineMain
import Foundation
import Logging
import ObjectStore
import PositiveListFormat
import PositiveListServer
import ServerHTTPAPI
import ServerStorage

/// Runs `tracer-server` with the project's exit codes: 0 success, 1 a failure the operator can
/// act on (one sentence on stderr), 2 a usage mistake.
@main
enum TracerServerMain {
    static func main() async {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = ProcessInfo.processInfo.environment["TRACER_SERVER_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
            return handler
        }
        // The setting flags (--retention-days 14 …) come from the settings table, not from each
        // subcommand's declarations; LocationOptions reads them back when it loads the configuration.
        let arguments: [String]
        do {
            arguments = try ServerSettingFlags.split(Array(CommandLine.arguments.dropFirst())).rest
        } catch {
            FileHandle.standardError.write(Data("error: \(error.description)\n".utf8))
            exit(2)
        }
        await CommandLineMain.run(TracerServerCommand.self, arguments: arguments, describe: OperatorMessage.describe)
    }
}

/// Turns any error into the one sentence the operator sees.
enum OperatorMessage {
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as any CustomStringConvertible & Error where carriesASentence(error):
            return error.description
        default:
            return "Something unexpected went wrong (\(error)); please report this with the command you ran."
        }
    }

    /// The errors whose description is already a sentence for the operator.
    private static func carriesASentence(_ error: any Error) -> Bool {
        error is CommandFailure || error is ConfigurationError || error is ServerStoreError || error is SigningKeyError
            || error is PublishError || error is FileWriteError || error is PositiveListFormatError || error is DatabasePasswordError
            || error is ObjectStoreError || error is PasswordProblem
    }
}

/// A command's own failures, each saying what to do next.
enum CommandFailure: Error, CustomStringConvertible {
    case unknownAuthority(String, known: [String])
    case unreadableHistory(path: String)
    case invalidHistoryFile(path: String, detail: String)
    case invalidKeyHistoryFile(path: String, detail: String)
    case rejectedHistory(path: String, detail: String)
    case invalidBind(String)
    case cannotCreateDirectory(path: String, reason: String)
    case serverFailed(String)
    case storeWithoutConsole
    case noSuchAccount(String)
    case accountExists(String)
    case invalidAccountName(String)
    case passwordNotSet(String)
    case witnessName(String)
    case metricsOnAPIAddress(String, api: String)
    case listenerInUse(ListenerInUse)

    var description: String {
        switch self {
        case .unknownAuthority(let name, let known):
            return "No authority named \"\(name)\" in the configuration (known: \(known.joined(separator: ", "))); use one of those names with --authority."
        case .unreadableHistory(let path):
            return "Cannot read the history file \(path); check the path."
        case .invalidHistoryFile(let path, let detail):
            return "The file \(path) is not a history (\(detail)); it must be JSON like {\"ids\": [{\"id\": \"0123456789abcdef\", \"validFrom\": 1700000000, \"validUntil\": 1700000900}]}."
        case .invalidKeyHistoryFile(let path, let detail):
            return "The file \(path) is not a key history (\(detail)); it must be JSON like {\"keys\": [{\"day\": 20410, \"intervalSeconds\": 900, \"key\": \"000102030405060708090a0b0c0d0e0f\"}]}."
        case .rejectedHistory(let path, let detail):
            return "The history in \(path) was refused and nothing was stored: \(detail)"
        case .invalidBind(let text):
            return "\"\(text)\" is not an address to listen on; use HOST:PORT, for example 127.0.0.1:8080."
        case .cannotCreateDirectory(let path, let reason):
            return "Cannot create the data directory \(path) (\(reason)); check permissions or choose another with --data-dir."
        case .noSuchAccount(let name):
            return "There is no console account named \"\(name)\"; check the name (tracer-server console add-account creates one)."
        case .storeWithoutConsole:
            return "The configured store does not keep console accounts; use the SQLite store or PostgreSQL (database), or set console.enabled to false."
        case .accountExists(let name):
            return "A console account named \"\(name)\" exists already (names are compared without case); choose another name."
        case .invalidAccountName(let name):
            return "\"\(name)\" cannot be an account name; use 1 to 64 letters, digits, dots, dashes, underscores or @."
        case .passwordNotSet(let detail):
            return "No account was created: \(detail)"
        case .witnessName(let detail):
            return "The witness cannot sign under its name (\(detail)); set witnessName to 1 to 255 bytes without spaces or +."
        case .metricsOnAPIAddress(let metrics, let api):
            return "metrics.listen (\(metrics)) is the address of \(api); give the metrics a port of their own, such as 127.0.0.1:9464, so that /metrics is never on the public API."
        case .listenerInUse(let error):
            return "\(error); stop what listens there or give \(error.setting) another port."
        case .serverFailed(let detail):
            return "The server stopped with an error (\(detail)); check that the address is free and try again."
        }
    }
}
