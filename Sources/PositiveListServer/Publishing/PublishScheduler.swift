import Logging
import ServiceLifecycle

/// Publishes once at start (which also repairs whatever a crash interrupted) and then every
/// interval, until graceful shutdown; a publication in progress finishes first. With `sync`,
/// mirrors the directory to the object store after each publication.
public struct PublishScheduler: Service {
    let publisher: Publisher
    let interval: Duration
    let logger: Logger
    let sync: ObjectStoreSync?

    public init(publisher: Publisher, interval: Duration, logger: Logger, sync: ObjectStoreSync? = nil) {
        self.publisher = publisher
        self.interval = interval
        self.logger = logger
        self.sync = sync
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            do {
                try await publisher.publish()
            } catch {
                // Logged by the publisher; the next tick retries, and the published directory
                // still holds the previous, valid index.
            }
            if let sync {
                // Also after a failed publication: the directory is valid either way, and this
                // retries a sync that failed on the previous tick. Its failures are logged by it.
                _ = try? await sync.sync()
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
        }
    }
}
