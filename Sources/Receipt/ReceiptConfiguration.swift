import Foundation
import ReceiptFormat
import StoreBus
import StoreBusHost
import StoreBusPostgres
import StoreBusStorage

/// What the receipt service knows of an app beyond the catalog.
public struct ReceiptApp: Sendable, Equatable, Decodable {
    /// The app's bundle identifier.
    public var bundleID: String
    /// The app's shared secret: verifyReceipt's `password` must equal it (21004 otherwise), and
    /// receipts holding auto-renewable subscriptions need it. Empty: no password is accepted.
    public var sharedSecret: String
    /// The first version of the app (the receipt's original_application_version). Default "1.0".
    public var originalApplicationVersion: String

    /// Settings of `bundleID`.
    public init(bundleID: String, sharedSecret: String = "", originalApplicationVersion: String = "1.0") {
        self.bundleID = bundleID
        self.sharedSecret = sharedSecret
        self.originalApplicationVersion = originalApplicationVersion
    }

    enum CodingKeys: String, CodingKey { case bundleID = "bundleId", sharedSecret, originalApplicationVersion }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        bundleID = try container.decode(String.self, forKey: .bundleID)
        sharedSecret = try container.value(.sharedSecret, default: "")
        originalApplicationVersion = try container.value(.originalApplicationVersion, default: "1.0")
    }
}

/// The receipt service's own settings: the config file's `service` section for `storebus-receipt`.
/// Every setting has its default here; a config file names only what it changes.
public struct ReceiptConfiguration: Sendable, Equatable, Decodable {
    /// The store this deployment is. Default sandbox.
    public var environment = ReceiptEnvironment.sandbox
    /// RPC endpoints of storebus-payment-queue, whose event log the receipts are built from.
    /// Default `tcp://127.0.0.1:7302`.
    public var paymentQueueEndpoints = [ServiceRegistry.paymentQueue.rpcEndpoint]
    /// Doorbell endpoints of storebus-payment-queue (none: poll). Default `tcp://127.0.0.1:7312`.
    public var paymentQueueEventEndpoints = ServiceRegistry.paymentQueue.eventEndpoint.map { [$0] } ?? []
    /// RPC endpoints of storebus-catalog, asked whether an app exists. Default `tcp://127.0.0.1:7301`.
    public var catalogEndpoints = [ServiceRegistry.catalog.rpcEndpoint]
    /// Shared secrets and original versions of apps; an app not listed has neither.
    public var apps: [ReceiptApp] = []
    /// Where `POST /verifyReceipt` is served over HTTP, `host:port`; empty serves none. Default
    /// `127.0.0.1:7383`.
    public var httpAddress = "127.0.0.1:7383"
    /// SQLite durability: `full` or `normal`. Default `full`.
    public var durability = Durability.full
    /// How long a signing certificate is issued for, in days (1 to 3650). Default 365.
    public var leafValidityDays = 365
    /// Where the receipts' state and the signing keys are kept: `sqlite` (a file and a key directory
    /// in the data directory, the default) or `postgres` (the database `postgres` names, a database
    /// of the receipt service's own, for several instances of the service).
    public var storage = SQLEngine.sqlite
    /// With `storage` `postgres`: the servers, role and database.
    public var postgres: PostgresSettings?
    /// How long the payment queue's events gather after a doorbell before the service reads them,
    /// in milliseconds (0 to 1000), while no call waits for them: a read and a commit then take
    /// several purchases. A call that waits for a purchase (a refresh with the position of the
    /// callback its device saw) ends the wait at once; a receipt asked for without a position, and
    /// the purchase's notification, come up to this much later. Default 5.
    public var batchMilliseconds = 5

    /// Where and how the process serves by default: RPC on `tcp://127.0.0.1:7303`, data in
    /// `data/receipt`.
    public static let defaultHost = ServiceRegistry.receipt.defaultHost

    /// The defaults.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case environment, paymentQueueEndpoints, paymentQueueEventEndpoints, catalogEndpoints, apps, httpAddress, durability, leafValidityDays, storage, postgres,
            batchMilliseconds
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self()
        environment = try container.value(.environment, default: defaults.environment)
        paymentQueueEndpoints = try container.value(.paymentQueueEndpoints, default: defaults.paymentQueueEndpoints)
        paymentQueueEventEndpoints = try container.value(.paymentQueueEventEndpoints, default: defaults.paymentQueueEventEndpoints)
        catalogEndpoints = try container.value(.catalogEndpoints, default: defaults.catalogEndpoints)
        apps = try container.value(.apps, default: defaults.apps)
        httpAddress = try container.value(.httpAddress, default: defaults.httpAddress)
        durability = try container.value(.durability, default: defaults.durability)
        leafValidityDays = try container.value(.leafValidityDays, default: defaults.leafValidityDays)
        storage = try container.value(.storage, default: defaults.storage)
        postgres = try container.decodeIfPresent(PostgresSettings.self, forKey: .postgres)
        batchMilliseconds = try container.value(.batchMilliseconds, default: defaults.batchMilliseconds)
    }

    /// The settings of `bundleID` (defaults when it is not listed).
    public func app(_ bundleID: String) -> ReceiptApp {
        apps.first { QueueNames.same($0.bundleID, bundleID) } ?? ReceiptApp(bundleID: bundleID)
    }

    /// Throws a ``StartupError`` naming the first setting that cannot work.
    public func validate() throws {
        guard !paymentQueueEndpoints.isEmpty else {
            throw StartupError("service.paymentQueueEndpoints is an empty list: name at least one endpoint, or leave the key out for the default")
        }
        guard !catalogEndpoints.isEmpty else {
            throw StartupError("service.catalogEndpoints is an empty list: name at least one endpoint, or leave the key out for the default")
        }
        guard (1...3650).contains(leafValidityDays) else { throw StartupError("service.leafValidityDays must be from 1 to 3650") }
        guard (0...1_000).contains(batchMilliseconds) else { throw StartupError("service.batchMilliseconds must be from 0 to 1000") }
        _ = try PostgresSettings.forStorage(storage, postgres)
        var seen = Set<String>()
        for (index, app) in apps.enumerated() {
            guard !app.bundleID.isEmpty else { throw StartupError("service.apps[\(index)].bundleId must not be empty") }
            guard seen.insert(app.bundleID.lowercased()).inserted else { throw StartupError("service.apps[\(index)]: \(app.bundleID) is listed twice") }
        }
        if !httpAddress.isEmpty { _ = try HTTPAddress(httpAddress, setting: "service.httpAddress") }
    }
}
