import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads the catalog whenever the process receives SIGHUP, until graceful shutdown.
public struct CatalogReloadOnHangup: Service {
    let store: CatalogStore
    let logger: Logger

    /// A reloader for `store`.
    public init(store: CatalogStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    public func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        for await _ in hangups.cancelOnGracefulShutdown() {
            logger.info("SIGHUP: reloading the catalog", metadata: ["catalog.file": "\(store.path)"])
            // A rejected file is logged by the store; the old catalog keeps serving.
            _ = try? store.reload()
        }
    }
}
