import StoreBusStorage
import StoreBusTesting

@testable import Notifications

/// A notification database of a test's own, in a new directory, and a store over it (no webhooks).
/// The test removes the directory when it ends (`defer { scratch.directory.remove() }`) and closes
/// the database.
struct ScratchNotifications {
    let directory: TemporaryDirectory
    let database: StoreDatabase
    let store: NotificationStore

    init(prefix: String) throws {
        directory = try TemporaryDirectory(prefix: prefix)
        database = try StoreDatabase(directory: directory.url, name: "notifications", durability: .normal, migrator: NotificationsSchema.migrator)
        store = NotificationStore(database: database)
    }
}
