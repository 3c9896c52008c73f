import Logging
import Synchronization

/// The running node's log level, shared by every logger so that SIGHUP can change it for all of
/// them at once.
final class LogLevelControl: Sendable {
    private let current: Mutex<Logger.Level>

    init(_ level: Logger.Level) {
        current = Mutex(level)
    }

    var level: Logger.Level {
        get { current.withLock { $0 } }
        set { current.withLock { $0 = newValue } }
    }
}

/// A text handler whose level follows a `LogLevelControl`.
struct TextLogHandler: LogHandler {
    var wrapped: StreamLogHandler
    let levelControl: LogLevelControl

    init(label: String, levelControl: LogLevelControl) {
        wrapped = StreamLogHandler.standardError(label: label)
        self.levelControl = levelControl
        wrapped.logLevel = .trace
    }

    var logLevel: Logger.Level {
        get { levelControl.level }
        set { levelControl.level = newValue }
    }

    var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        wrapped.log(event: event)
    }
}

enum NodeLogging {
    /// Installs the handlers once per process; the returned control changes the level later.
    static func bootstrap(format: NodeSettings.LogFormat, level: Logger.Level) -> LogLevelControl {
        let control = LogLevelControl(level)
        LoggingSystem.bootstrap { label in
            switch format {
            case .json: JSONLogHandler(label: label, levelControl: control)
            case .text: TextLogHandler(label: label, levelControl: control)
            }
        }
        return control
    }
}
