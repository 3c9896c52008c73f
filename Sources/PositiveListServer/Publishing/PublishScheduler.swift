import Logging
import ServiceLifecycle

/// Publishes once at start (which also repairs whatever a crash interrupted) and then every
/// interval, until graceful shutdown; a publication in progress finishes first.
public struct PublishScheduler: Service {
    let publisher: Publisher
    let interval: Duration
    let logger: Logger

    public init(publisher: Publisher, interval: Duration, logger: Logger) {
        self.publisher = publisher
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                try await publisher.publish()
            } catch {
                // Logged by the publisher; the next tick retries, and the published directory
                // still holds the previous, valid index.
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
        }
    }
}
