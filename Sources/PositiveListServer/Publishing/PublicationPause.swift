import Dispatch
import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A test's hold on a running `serve`'s publication between two of its steps: the `occurrence`th
/// time a publication reaches `step` (the first unless the variable says `step:N`; the
/// publication at start reaches some steps too), it logs "publication paused for a test" and
/// waits for SIGUSR2,
/// so that a test with real processes can make an outage (PostgreSQL stopped, a disk filled)
/// fall exactly there instead of hoping its timing hits it (ServerOutageTests). Serving, uploads
/// and `status` go on meanwhile; only the publication waits.
///
/// Read from ``environmentVariable`` (a ``PublishStep`` name, optionally `:N`) by debug builds only: a release
/// build, the one packaged and deployed, compiles the reading out and logs that the variable is
/// ignored, so no environment can hold up a production server's publication.
public final class PublicationPause: Sendable {
    public static let environmentVariable = "TRACER_SERVER_TEST_PAUSE_PUBLICATION_AFTER"

    public let step: PublishStep
    public let occurrence: Int
    private let logger: Logger
    /// How often a publication reached `step`; only the `occurrence`th waits.
    private let reached = Atomic<Int>(0)
    /// One element per SIGUSR2; consumed by the one pause.
    private let signals: AsyncStream<Void>
    /// Kept so that the handler lives as long as the pause; never read again (a Mutex only
    /// because Dispatch's source types are not marked Sendable).
    private let source: Mutex<(any DispatchSourceSignal)?>

    private init(step: PublishStep, occurrence: Int, logger: Logger) {
        self.step = step
        self.occurrence = occurrence
        self.logger = logger
        let (signals, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.signals = signals
        // Ignored as a signal (its default ends the process), delivered to the source instead;
        // installed now, at start, so that no SIGUSR2 can arrive before it.
        signal(SIGUSR2, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGUSR2, queue: .global())
        source.setEventHandler { continuation.yield() }
        source.resume()
        self.source = Mutex(source)
    }

    /// The pause `environment` asks for; nil when none, when the step is not one, and always in
    /// a release build (which says so in the log if the variable is set).
    public static func fromEnvironment(_ environment: [String: String], logger: Logger) -> PublicationPause? {
        guard let name = environment[environmentVariable], !name.isEmpty else { return nil }
        #if DEBUG
        let parts = name.split(separator: ":", maxSplits: 1).map(String.init)
        guard let step = PublishStep(rawValue: parts[0]), let occurrence = parts.count == 2 ? Int(parts[1]) : 1, occurrence >= 1 else {
            logger.warning("not a publication step (STEP or STEP:N); no pause", metadata: [
                "variable": "\(environmentVariable)", "steps": "\(PublishStep.allCases.map(\.rawValue).joined(separator: ","))",
            ])
            return nil
        }
        logger.warning("a publication will pause after a step until SIGUSR2 (a test's seam, debug builds only)", metadata: [
            "step": "\(step.rawValue)", "occurrence": "\(occurrence)",
        ])
        return PublicationPause(step: step, occurrence: occurrence, logger: logger)
        #else
        logger.warning("ignored: a test's seam that only debug builds honour", metadata: ["variable": "\(environmentVariable)"])
        return nil
        #endif
    }

    /// Waits for SIGUSR2 the `occurrence`th time a publication reaches this pause's step.
    func hold(at reached: PublishStep) async {
        guard reached == step, self.reached.add(1, ordering: .relaxed).newValue == occurrence else { return }
        logger.notice("publication paused for a test; send SIGUSR2 to go on", metadata: ["after": "\(reached.rawValue)"])
        for await _ in signals { break }
        logger.notice("publication resumed", metadata: ["after": "\(reached.rawValue)"])
    }
}
