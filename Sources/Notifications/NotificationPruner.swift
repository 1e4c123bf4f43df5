import Foundation
import Logging
import ServiceLifecycle
import StoreBus
import StoreSchema

/// Prunes each app's notification log of what is older than the retention, a prefix at a time
/// (``NotificationStore/prune(before:batch:)``): at start, then every quarter of the retention
/// (at most hourly), in batches that leave the writer to others between them.
struct NotificationPruner: Service {
    let store: NotificationStore
    let retention: Duration
    let logger: Logger

    /// How often it looks.
    var interval: Duration { min(.seconds(3600), max(retention / 4, .milliseconds(100))) }

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let cutoff = EpochMilliseconds.now - Int64(retention.components.seconds * 1000 + retention.components.attoseconds / 1_000_000_000_000_000)
                    var total = 0
                    while true {
                        let deleted = try await store.prune(before: cutoff)
                        total += deleted
                        if deleted == 0 { break }
                        await Task.yield()
                    }
                    if total > 0 { logger.info("Pruned old notifications", metadata: ["count": "\(total)"]) }
                } catch {
                    logger.warning("Pruning notifications failed; trying again later", metadata: ["error": "\(error)"])
                }
                try await Task.sleep(for: interval)
            }
        }
    }
}
