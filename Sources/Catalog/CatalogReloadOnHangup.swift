import CatalogFormat
import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads the catalog whenever the process receives SIGHUP, until graceful shutdown.
public struct CatalogReloadOnHangup: Service {
    let store: CatalogStore
    let logger: Logger
    let hangups: UnixSignalsSequence

    /// A reloader for `store`. SIGHUP is trapped from here on, not from ``run()``: the process says
    /// it is ready before its services start, and SIGHUP's default action ends the process. A SIGHUP
    /// that comes before run() waits in the sequence and reloads then.
    public init(store: CatalogStore, logger: Logger) async {
        self.store = store
        self.logger = logger
        hangups = await UnixSignalsSequence(trapping: .sighup)
    }

    public func run() async throws {
        for await _ in hangups.cancelOnGracefulShutdown() {
            logger.info("SIGHUP: reloading the catalog", metadata: ["catalog.file": "\(store.path)"])
            // A rejected file is logged by the store; the old catalog keeps serving.
            _ = try? store.reload()
        }
    }
}
