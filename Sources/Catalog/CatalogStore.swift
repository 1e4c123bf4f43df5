import CatalogFormat
import Foundation
import Logging
import Synchronization

/// The catalog in force, swapped whole on reload: a request sees the old catalog or the new one,
/// never a mixture, and a file that does not validate leaves the old one serving.
public final class CatalogStore: Sendable {
    /// The catalog file.
    public let path: String
    private let current: Mutex<Catalog>
    /// Held across load and swap, so overlapping reloads (SIGHUP and an admin call) apply in order.
    private let reloading = Mutex(())
    private let logger: Logger

    /// Loads the file; throws its problems when it does not validate.
    public init(path: String, logger: Logger) throws(CatalogLoadError) {
        self.path = path
        self.logger = logger
        current = Mutex(try CatalogValidator.load(path: path))
    }

    /// The catalog in force.
    public var catalog: Catalog { current.withLock { $0 } }

    /// Reads the file again. On success (and unless `dryRun`) the new catalog replaces the old one
    /// from the next request on; on failure the old one keeps serving and the problems are logged and
    /// thrown.
    ///
    /// Returns the catalog read and the version in force just before, as this reload found it (two
    /// reloads never overlap): the reload changed the catalog when the two versions differ.
    @discardableResult
    public func reload(dryRun: Bool = false) throws(CatalogLoadError) -> (catalog: Catalog, previousVersion: UInt64) {
        try reloading.withLock { _ throws(CatalogLoadError) in try reloadLocked(dryRun: dryRun) }
    }

    private func reloadLocked(dryRun: Bool) throws(CatalogLoadError) -> (catalog: Catalog, previousVersion: UInt64) {
        let loaded: Catalog
        do {
            loaded = try CatalogValidator.load(path: path)
        } catch {
            logger.error(
                "Catalog reload rejected; the previous catalog keeps serving",
                metadata: [
                    "catalog.file": "\(path)", "problems": "\(error.problems.count)", "first": "\(error.summary)"
                ])
            throw error
        }
        let previous = current.withLock { catalog -> UInt64 in
            let old = catalog.version
            if !dryRun { catalog = loaded }
            return old
        }
        if !dryRun {
            logger.notice(
                "Catalog reloaded",
                metadata: [
                    "catalog.file": "\(path)", "catalog.version": "\(loaded.version)", "catalog.previous_version": "\(previous)"
                ])
        }
        return (loaded, previous)
    }
}
