import Crypto
import Foundation
import StoreBus
import StoreBusPostgres
import StoreBusSDK
import StoreSchema
import Synchronization

/// The app key a ``StoreCluster``'s gateways accept for the demo puzzle app.
public let appKey = "puzzle-test-key-0123456789"
/// The admin key a ``StoreCluster``'s gateways accept.
public let adminKey = "admin-test-key-0123456789"
/// The demo puzzle app's server key (its backend's) a ``StoreCluster``'s gateways accept.
public let serverKey = "puzzle-server-key-0123456789"
/// The key id of ``StoreCluster/serverAPIKeyFile``'s key.
public let serverAPIKeyID = "STOREBUSK1"
/// The issuer of ``StoreCluster/serverAPIKeyFile``'s key.
public let serverAPIIssuerID = "5d1b2c3e-0000-4a6b-9c8d-57a0b1c2d3e4"

/// A test failure of the helpers here, for the test to report.
public struct ClusterFailure: Error, CustomStringConvertible {
    /// What did not happen.
    public let description: String

    /// A failure saying what did not happen.
    public init(description: String) { self.description = description }
}

/// The shared secret a ``StoreCluster``'s receipt service knows for the demo puzzle app.
public let puzzleSharedSecret = "puzzle-shared-secret-0123456789"

/// A route the gateways of a ``StoreCluster`` add to the built-in ones: a service started by the test.
public struct ExtraRoute: Sendable {
    public var name: String
    public var process: String
    public var services: [String]
    public var endpoint: String

    public init(name: String, process: String, services: [String], endpoint: String) {
        self.name = name
        self.process = process
        self.services = services
        self.endpoint = endpoint
    }
}

/// The whole system as separate OS processes on ipc endpoints in a temporary directory:
/// storebus-catalog, storebus-payment-queue, storebus-receipt, storebus-download,
/// storebus-notifications and two storebus-gateway copies sharing a session secret.
/// Processes still running when a cluster is released are killed, so a test that fails before
/// ``stop()`` leaves none behind.
public final class StoreCluster: Sendable {
    /// The directory holding the endpoints, data and logs.
    public let directory: TemporaryDirectory
    /// The processes.
    public let catalog: ServiceProcess
    /// The payment queue (the first instance of ``queues``).
    public var queue: ServiceProcess { queues[0] }
    /// The payment queue's instances: one, or with `queuePostgres` as many as asked for, sharing the
    /// log's shards.
    public let queues: [ServiceProcess]
    /// The receipt service's instances (one unless several share a PostgreSQL database).
    public let receipts: [ServiceProcess]
    /// The first receipt instance.
    public var receipt: ServiceProcess { receipts[0] }
    /// The download service's instances (one unless several share a PostgreSQL database).
    public let downloads: [ServiceProcess]
    /// The first download instance.
    public var download: ServiceProcess { downloads[0] }
    /// Every download instance's RPC endpoint.
    public let downloadEndpoints: [String]
    /// Where each download instance serves its metrics (`GET /metrics`), with `downloadPostgres`.
    public let downloadMetricsAddresses: [String]
    /// The notification service's instances: one, or on PostgreSQL an active one and standbys.
    public let notificationInstances: [ServiceProcess]
    /// The first notification instance (the active one at start).
    public var notifications: ServiceProcess { notificationInstances[0] }
    /// Every notification instance's RPC endpoint.
    public let notificationEndpoints: [String]
    public let gateways: [ServiceProcess]
    /// The (first) receipt instance's `POST /verifyReceipt` address, `127.0.0.1:PORT`.
    public let receiptHTTPAddress: String
    /// Every receipt instance's RPC endpoint.
    public let receiptEndpoints: [String]
    /// The notification service's App Store Server API, `http://127.0.0.1:PORT`.
    public let serverAPIURL: String
    /// The App Store Server API key the cluster's notification service knows (for the puzzle app):
    /// its private key's PEM file (PKCS#8), as App Store Connect hands a `.p8` out.
    public let serverAPIKeyFile: String

    /// The gateways' endpoints, in the order of ``gateways``.
    public let gatewayEndpoints: [String]

    /// The gateways' CURVE public key and its file, with `gatewayKeys` (gateways on TCP, their
    /// client endpoint CURVE as a deployment's); nil otherwise.
    public let gatewayPublicKey: String?
    /// See ``gatewayPublicKey``.
    public let gatewayPublicKeyFile: String?

    /// The environment the processes start with (`STOREBUS_FAST_PATHS=off` when asked for).
    let environment: [String: String]

    /// The processes, each logging at `logLevel` into its file in the directory; with `fastPaths`
    /// false, each runs the plain implementations of StoreBus's shortcuts (`STOREBUS_FAST_PATHS=off`).
    /// `gatewayCount` gateways share a session secret, on ipc endpoints, or on free loopback TCP
    /// ports with `gatewaysOnTCP` (as clients of a deployment reach them); the catalog serves
    /// `catalogPath` (the demo catalog by default); ``appKey`` acts for `appKeyApps` (empty: any app);
    /// the receipt service signs for `storeEnvironment` (`sandbox` or `production`) and knows
    /// ``puzzleSharedSecret``; the download service serves the content under `contentRoot` (the
    /// demo content by default). With `gatewayKeys` (and `gatewaysOnTCP`), the gateways share a CURVE
    /// key pair and encrypt their client endpoints with it, as in a deployment. `extraRoutes` are
    /// added to the gateways' routes. Webhook retries run on Apple's schedule times
    /// `webhookRetryScale` (nil: on each app's store clock). With `queuePostgres`, the payment queue
    /// keeps its state on that PostgreSQL database instead of its SQLite file, in `queueInstances`
    /// instances that split its shards (every other process is told of them all); with
    /// `receiptPostgres`, the receipt service keeps its state and keys on that database (one of its
    /// own), in `receiptInstances` instances that split the queue's shards among them; and so with
    /// `downloadPostgres` and `downloadInstances` for the download service.
    public init(
        logLevel: String = "warning", fastPaths: Bool = true, gatewayCount: Int = 2, gatewaysOnTCP: Bool = false, gatewayKeys: Bool = false,
        catalogPath: String = deployDirectory.appendingPathComponent("catalog/catalog.json").path, appKeyApps: [String] = [puzzle],
        storeEnvironment: String = "sandbox", contentRoot: String = deployDirectory.appendingPathComponent("content").path,
        extraRoutes: [ExtraRoute] = [], webhookRetryScale: Double? = 0.00001, queuePostgres: PostgresSettings? = nil,
        queueInstances: Int = 1, receiptPostgres: PostgresSettings? = nil, receiptInstances: Int = 1,
        downloadPostgres: PostgresSettings? = nil, downloadInstances: Int = 1, notificationsPostgres: PostgresSettings? = nil, notificationInstances: Int = 1
    ) throws {
        precondition(notificationInstances == 1 || notificationsPostgres != nil, "several notification instances share a PostgreSQL database")
        precondition(downloadInstances == 1 || downloadPostgres != nil, "several download instances share a PostgreSQL database")
        precondition(queueInstances == 1 || queuePostgres != nil, "several payment-queue instances share a PostgreSQL database")
        precondition(receiptInstances == 1 || receiptPostgres != nil, "several receipt instances share a PostgreSQL database")
        environment = fastPaths ? [:] : ["STOREBUS_FAST_PATHS": "off"]
        directory = try TemporaryDirectory(prefix: "gw")
        let catalogEndpoint = directory.ipcEndpoint("catalog")
        let queueEndpoints = directory.instanceEndpoints("pq", count: queueInstances)
        let queueEventEndpoints = directory.instanceEndpoints("pq", suffix: "-events", count: queueInstances)
        // Every process that calls the payment queue or follows its log is told of every instance.
        let queueArguments = queueEndpoints.flatMap { ["--payment-queue-endpoint", $0] } + queueEventEndpoints.flatMap { ["--payment-queue-events", $0] }
        catalog = ServiceProcess(
            name: "storebus-catalog",
            arguments: ["--rpc-endpoint", catalogEndpoint, "--catalog", catalogPath, "--log-level", logLevel],
            logFile: directory.url.appendingPathComponent("catalog.log")
        )
        var queueConfig: [String] = []
        if let queuePostgres {
            let file = directory.url.appendingPathComponent("payment-queue.json")
            try JSONSerialization.data(withJSONObject: ["service": try Self.storage(queuePostgres)]).write(to: file)
            queueConfig = ["--config", file.path]
        }
        let home = directory
        queues = zip(queueEndpoints, queueEventEndpoints).enumerated().map { index, endpoints in
            let name = index == 0 ? "" : "\(index + 1)"
            return ServiceProcess(
                name: "storebus-payment-queue",
                arguments: queueConfig + [
                    "--rpc-endpoint", endpoints.0, "--event-endpoint", endpoints.1, "--data-dir", home.path("data\(name)"),
                    "--catalog-endpoint", catalogEndpoint, "--log-level", logLevel
                ],
                logFile: home.url.appendingPathComponent("payment-queue\(name).log")
            )
        }
        let receiptEndpoints = directory.instanceEndpoints("receipt", count: receiptInstances)
        self.receiptEndpoints = receiptEndpoints
        let receiptHTTPAddresses = try receiptEndpoints.map { _ in "127.0.0.1:\(try unusedLoopbackPort())" }
        receiptHTTPAddress = receiptHTTPAddresses[0]
        receipts = try receiptEndpoints.indices.map { [directory] index in
            let name = index == 0 ? "" : "\(index + 1)"
            let receiptConfig = directory.url.appendingPathComponent("receipt\(name).json")
            var receiptService: [String: Any] = [
                "environment": storeEnvironment,
                "apps": [["bundleId": puzzle, "sharedSecret": puzzleSharedSecret]],
                "httpAddress": receiptHTTPAddresses[index]
            ]
            if let receiptPostgres { receiptService.merge(try Self.storage(receiptPostgres)) { _, new in new } }
            try JSONSerialization.data(withJSONObject: ["service": receiptService]).write(to: receiptConfig)
            return ServiceProcess(
                name: "storebus-receipt",
                arguments: [
                    "--config", receiptConfig.path, "--rpc-endpoint", receiptEndpoints[index], "--data-dir", directory.path("receipt-data\(name)"),
                    "--catalog-endpoint", catalogEndpoint, "--log-level", logLevel
                ] + queueArguments,
                logFile: directory.url.appendingPathComponent("receipt\(name).log")
            )
        }
        let receiptArguments = receiptEndpoints.flatMap { ["--receipt-endpoint", $0] }
        let downloadEndpoints = directory.instanceEndpoints("download", count: downloadInstances)
        self.downloadEndpoints = downloadEndpoints
        let downloadMetricsAddresses = try downloadEndpoints.map { _ in downloadPostgres == nil ? "" : "127.0.0.1:\(try unusedLoopbackPort())" }
        self.downloadMetricsAddresses = downloadMetricsAddresses.filter { !$0.isEmpty }
        downloads = try downloadEndpoints.indices.map { [directory] index in
            let name = index == 0 ? "" : "\(index + 1)"
            var config: [String] = []
            if let downloadPostgres {
                let file = directory.url.appendingPathComponent("download\(name).json")
                try JSONSerialization.data(withJSONObject: ["service": try Self.storage(downloadPostgres)]).write(to: file)
                config = ["--config", file.path, "--metrics-address", downloadMetricsAddresses[index]]
            }
            return ServiceProcess(
                name: "storebus-download",
                arguments: config + [
                    "--rpc-endpoint", downloadEndpoints[index], "--data-dir", directory.path("download-data\(name)"),
                    "--content-root", contentRoot, "--catalog-endpoint", catalogEndpoint,
                    "--log-level", logLevel
                ] + receiptArguments + queueArguments,
                logFile: directory.url.appendingPathComponent("download\(name).log")
            )
        }
        // Webhook retries on Apple's schedule shortened a hundred thousand times (1 h: 36 ms, 12 h:
        // 0.4 s, 72 h: 2.6 s), and attempts cut at 2 s.
        // The App Store Server API on a free port, with one key made for the cluster.
        let notificationsConfig = directory.url.appendingPathComponent("notifications.json")
        let serverAPIAddress = "127.0.0.1:\(try unusedLoopbackPort())"
        serverAPIURL = "http://\(serverAPIAddress)"
        let apiKey = P256.Signing.PrivateKey()
        serverAPIKeyFile = directory.path("server-api-key.p8")
        try Data(apiKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: serverAPIKeyFile))
        var notificationService: [String: Any] = [
            "webhookTimeoutMilliseconds": 2000, "httpAddress": serverAPIAddress,
            "serverAPIKeys": [
                ["keyId": serverAPIKeyID, "issuerId": serverAPIIssuerID, "bundleIds": [puzzle], "publicKey": apiKey.publicKey.pemRepresentation]
            ]
        ]
        if let webhookRetryScale { notificationService["webhookRetryScale"] = webhookRetryScale }
        if let notificationsPostgres { notificationService.merge(try Self.storage(notificationsPostgres)) { _, new in new } }
        let notificationEndpoints = directory.instanceEndpoints("notifications", count: notificationInstances)
        self.notificationEndpoints = notificationEndpoints
        self.notificationInstances = try notificationEndpoints.indices.map { [directory] index in
            let name = index == 0 ? "" : "\(index + 1)"
            // Each instance's App Store Server API on a port of its own (the first's: serverAPIURL).
            var service = notificationService
            if index > 0 { service["httpAddress"] = "127.0.0.1:\(try unusedLoopbackPort())" }
            let file = directory.url.appendingPathComponent("notifications\(name).json")
            try JSONSerialization.data(withJSONObject: ["service": service]).write(to: file)
            return ServiceProcess(
                name: "storebus-notifications",
                arguments: [
                    "--config", file.path, "--rpc-endpoint", notificationEndpoints[index], "--data-dir", directory.path("notifications-data\(name)"),
                    "--log-level", logLevel
                ] + receiptArguments + queueArguments,
                logFile: directory.url.appendingPathComponent("notifications\(name).log")
            )
        }
        let config = directory.url.appendingPathComponent("gateway.json")
        var settings: [String: Any] = [
            "service": [
                ServiceRegistry.catalog.endpointsKey: [catalogEndpoint],
                ServiceRegistry.paymentQueue.endpointsKey: queueEndpoints,
                ServiceRegistry.receipt.endpointsKey: receiptEndpoints,
                ServiceRegistry.download.endpointsKey: downloadEndpoints,
                ServiceRegistry.notifications.endpointsKey: notificationEndpoints,
                ServiceRegistry.paymentQueue.eventEndpointsKey: queueEventEndpoints,
                "sessionSecret": "test-secret-shared-by-both-gateways",
                "routes": extraRoutes.map { ["name": $0.name, "process": $0.process, "services": $0.services, "endpoints": [$0.endpoint]] },
                "apiKeys": [
                    ["name": "puzzle", "key": appKey, "apps": appKeyApps],
                    ["name": "operator", "key": adminKey, "admin": true],
                    ["name": "puzzle-server", "key": serverKey, "apps": [puzzle], "server": true]
                ]
            ]
        ]
        let endpoints = try (1...max(1, gatewayCount)).map { index in
            gatewaysOnTCP ? "tcp://127.0.0.1:\(try unusedLoopbackPort())" : home.ipcEndpoint("gw\(index)")
        }
        if gatewayKeys {
            let keys = directory.url.appendingPathComponent("keys")
            let pair = try CurveKeyFile.make(name: "gateway", in: keys)
            settings["curve"] = ["keyFile": keys.appendingPathComponent("gateway.key").path, "openEndpoints": endpoints]
            gatewayPublicKey = pair.publicKey
            gatewayPublicKeyFile = keys.appendingPathComponent("gateway.pub").path
        } else {
            gatewayPublicKey = nil
            gatewayPublicKeyFile = nil
        }
        try JSONSerialization.data(withJSONObject: settings).write(to: config)
        let logs = directory.url
        gatewayEndpoints = endpoints
        gateways = endpoints.enumerated().map { index, endpoint in
            ServiceProcess(
                name: "storebus-gateway",
                arguments: ["--config", config.path, "--rpc-endpoint", endpoint, "--log-level", logLevel],
                logFile: logs.appendingPathComponent("gateway\(index + 1).log")
            )
        }
    }

    /// Starts the catalog, the payment queue, the receipt and download services and the gateways,
    /// each once the one before serves.
    public func start() async throws {
        try catalog.start(environment: environment)
        try await catalog.waitUntilServing(endpoint: directory.ipcEndpoint("catalog"))
        try await startPaymentQueue()
        try await startReceipt()
        try await startDownload()
        try await startNotifications()
        for index in gateways.indices { try await startGateway(index) }
    }

    /// Starts the payment queue's instances (again; only instance `index` when given) and waits
    /// until each serves.
    public func startPaymentQueue(_ index: Int? = nil) async throws {
        for instance in index.map({ [$0] }) ?? Array(queues.indices) {
            try queues[instance].start(environment: environment)
            try await queues[instance].waitUntilServing(endpoint: queueEndpoint(instance))
        }
    }

    /// The RPC endpoint of payment-queue instance `index`.
    public func queueEndpoint(_ index: Int = 0) -> String {
        directory.ipcEndpoint(index == 0 ? "pq" : "pq\(index + 1)")
    }

    /// Starts the download service's instances (again; only instance `index` when given) and waits
    /// until each serves.
    public func startDownload(_ index: Int? = nil) async throws {
        for instance in index.map({ [$0] }) ?? Array(downloads.indices) {
            try downloads[instance].start(environment: environment)
            try await downloads[instance].waitUntilServing(endpoint: downloadEndpoints[instance])
        }
    }

    /// Starts the notification service (again) and waits until it serves; then its standbys (on
    /// PostgreSQL), which serve nothing until the active instance's lease lapses.
    public func startNotifications() async throws {
        try notifications.start(environment: environment)
        try await notifications.waitUntilServing(endpoint: notificationEndpoints[0])
        for standby in notificationInstances.dropFirst() { try standby.start(environment: environment) }
    }

    /// Starts the receipt service's instances (again; only instance `index` when given) and waits
    /// until each serves.
    public func startReceipt(_ index: Int? = nil) async throws {
        for instance in index.map({ [$0] }) ?? Array(receipts.indices) {
            try receipts[instance].start(environment: environment)
            try await receipts[instance].waitUntilServing(endpoint: receiptEndpoints[instance])
        }
    }

    /// The (first) receipt instance's RPC endpoint.
    public var receiptEndpoint: String { receiptEndpoints[0] }

    /// A service's `storage` and `postgres` settings for `settings`, as a config file's `service`
    /// section holds them.
    public static func storage(_ settings: PostgresSettings) throws -> [String: Any] {
        ["storage": "postgres", "postgres": try JSONSerialization.jsonObject(with: JSONEncoder().encode(settings))]
    }

    /// Starts gateway `index` (again) and waits until it serves.
    public func startGateway(_ index: Int) async throws {
        try gateways[index].start(environment: environment)
        try await gateways[index].waitUntilServing(endpoint: gatewayEndpoints[index], serverPublicKey: gatewayPublicKey)
    }

    /// A configuration for a device of `account`, through the gateways at `indices` (nil: every one).
    public func configuration(account: String, device: String = "phone", app: String = puzzle, key: String = appKey, gateways indices: [Int]? = nil) -> StoreConfiguration {
        var configuration = StoreConfiguration(
            gatewayEndpoints: (indices ?? Array(gatewayEndpoints.indices)).map { gatewayEndpoints[$0] }, apiKey: key,
            appBundleID: app, accountID: account, deviceID: device
        )
        configuration.observerHold = .seconds(5)
        configuration.callTimeout = .seconds(5)
        configuration.gatewayPublicKey = gatewayPublicKey
        // The cluster's own: another cluster running beside it numbers its transactions the same
        // way and names the same accounts, so the SDK's defaults (shared folders of the temporary
        // directory) would let one's downloads and receipts overwrite or remove the other's.
        configuration.downloadDirectory = directory.url.appendingPathComponent("device-downloads")
        configuration.receiptDirectory = directory.url.appendingPathComponent("device-receipts")
        return configuration
    }

    /// A server connection of the puzzle app's backend (its server key; a session of the app alone).
    public func server(app: String = puzzle, key: String = serverKey) throws -> StoreConnection {
        try StoreConnection(configuration: configuration(account: "", device: "", app: app, key: key))
    }

    /// An admin connection (an admin key; acts across accounts).
    public func admin() throws -> StoreConnection {
        try StoreConnection(configuration: configuration(account: "operator", device: "console", key: adminKey))
    }

    /// What every process has logged so far, each under its name (empty logs left out): for the
    /// message of an expectation that failed on a cluster's answer.
    public var logs: String {
        ([catalog] + queues + receipts + downloads + notificationInstances + gateways).compactMap { process in
            let output = process.output
            return output.isEmpty ? nil : "== \(process.logFile.lastPathComponent)\n\(output)"
        }.joined(separator: "\n")
    }

    /// Stops every process and removes the directory.
    public func stop() async {
        for gateway in gateways { await gateway.stop() }
        for instance in notificationInstances { await instance.stop() }
        for download in downloads { await download.stop() }
        for receipt in receipts { await receipt.stop() }
        for queue in queues { await queue.stop() }
        await catalog.stop()
        directory.remove()
    }
}

extension StoreCluster {
    /// Starts the processes, runs `body`, and stops them whether `body` returns or throws.
    public func running<T>(_ body: (StoreCluster) async throws -> T) async throws -> T {
        do {
            try await start()
            let value = try await body(self)
            await stop()
            return value
        } catch {
            await stop()
            throw error
        }
    }

    /// An app launch for `account` on an empty queue: a client, a recorder of its callbacks, and the
    /// end of its launch replay awaited, since an app registers its observer before it buys.
    public func launch(account: String) async throws -> (PaymentQueue, Recorder) {
        let queue = try PaymentQueue(configuration: configuration(account: account))
        let recorder = Recorder(queue)
        guard await recorder.attached() else { throw ClusterFailure(description: "\(account)'s launch replay did not end") }
        return (queue, recorder)
    }
}

extension StoreCluster {
    /// Replaces the payment queue's database with an empty one, as an operator would: stop the
    /// process, delete its data, start it again.
    public func replacePaymentQueueDatabase() async throws {
        await queue.stop()
        try FileManager.default.removeItem(atPath: directory.path("data"))
        try await startPaymentQueue()
    }
}

/// AddPayment of one pack of coins for `account`'s `device` in the puzzle app, under idempotency key
/// `key` when one is given: for calls made with the contract's messages, past the SDK.
public func coinsPayment(account: String, device: String = "phone", key: String = "") -> Storebus_PaymentQueue_V1_AddPaymentRequest {
    .with {
        $0.queue = .with {
            $0.appBundleID = puzzle
            $0.accountID = account
            $0.deviceID = device
        }
        $0.payment.productIdentifier = coins
        $0.idempotencyKey = key
    }
}

/// Buys coins and finishes the purchase, waiting for its callbacks; throws when one does not come.
public func completedPurchase(_ queue: PaymentQueue, _ recorder: Recorder) async throws {
    let bought = try await queue.addPayment(Payment(productIdentifier: coins))
    guard await recorder.purchased(bought.id) else { throw ClusterFailure(description: "\(bought.id) was not reported purchased") }
    try await queue.finish(bought)
    guard await recorder.wait({ $0.removed(bought.id) }) else { throw ClusterFailure(description: "\(bought.id) was not reported removed") }
}

/// Collects a queue's callbacks in arrival order.
public final class Recorder: Sendable {
    private final class Log: Sendable {
        let callbacks = Mutex<[PaymentQueueCallback]>([])
    }

    private let log = Log()
    private let task: Task<Void, Never>

    /// Records the callbacks of `queue` from now on.
    public init(_ queue: PaymentQueue) {
        let stream = queue.callbacks
        let log = self.log
        task = Task {
            for await callback in stream { log.callbacks.withLock { $0.append(callback) } }
        }
    }

    /// The callbacks so far.
    public var callbacks: [PaymentQueueCallback] { log.callbacks.withLock { $0 } }

    /// The live (non-replay) callbacks.
    public var live: [PaymentQueueCallback] {
        callbacks.filter {
            switch $0.event {
            case .replayCompleted: false
            case .updatedTransactions(_, let replayed): !replayed
            default: true
            }
        }
    }

    /// Every state a transaction was reported in by live callbacks, in order. (A purchase made before
    /// the observer attached arrives in the launch replay instead, marked replayed: tests wait for
    /// the replay before buying, as an app registers its observer at launch.)
    public func states(of id: String) -> [PaymentTransactionState] {
        callbacks.flatMap { callback -> [PaymentTransactionState] in
            if case .updatedTransactions(let transactions, false) = callback.event {
                return transactions.filter { $0.transactionIdentifier == id }.map(\.transactionState)
            }
            return []
        }
    }

    /// Whether `id` was reported removed.
    public func removed(_ id: String) -> Bool {
        callbacks.contains {
            if case .removedTransactions(let transactions) = $0.event { return transactions.contains { $0.transactionIdentifier == id } }
            return false
        }
    }

    /// Waits until `condition` holds of the callbacks so far.
    public func wait(timeout: Duration = .seconds(10), _ condition: @escaping @Sendable (Recorder) -> Bool) async -> Bool {
        await waitUntil(timeout: timeout) { condition(self) }
    }

    /// Waits for the end of an empty launch replay: the observer is attached, live callbacks follow.
    public func attached(timeout: Duration = .seconds(10)) async -> Bool {
        await wait(timeout: timeout) { $0.callbacks.contains { $0.event == .replayCompleted(count: 0) } }
    }

    /// Waits until `id` was last reported PURCHASED.
    public func purchased(_ id: String) async -> Bool {
        await wait { $0.states(of: id).last == .purchased }
    }

    /// Every state the store announced for a download of transaction `id` (updatedDownloads at a
    /// queue position; the queue's own progress ticks left out), in order.
    public func downloadStates(of id: String) -> [DownloadState] {
        callbacks.flatMap { callback -> [DownloadState] in
            guard callback.seq != 0, case .updatedDownloads(let downloads) = callback.event else { return [] }
            return downloads.filter { $0.transactionIdentifier == id }.map(\.state)
        }
    }

    /// The last download of transaction `id` any updatedDownloads callback carried.
    public func lastDownload(of id: String) -> Download? {
        callbacks.reversed().lazy.compactMap { callback -> Download? in
            guard case .updatedDownloads(let downloads) = callback.event else { return nil }
            return downloads.last { $0.transactionIdentifier == id }
        }.first
    }

    /// Waits until the store announced the download of `id` in `state`.
    public func download(_ id: String, reaches state: DownloadState, timeout: Duration = .seconds(60)) async -> Bool {
        await wait(timeout: timeout) { $0.downloadStates(of: id).contains(state) }
    }

    /// Stops recording.
    public func cancel() { task.cancel() }
}

/// An account of `app` in each of `count` shards (``ShardHash``), by shard: `<prefix>-<n>`, the
/// first n whose account falls in each.
public func accountsByShard(prefix: String, count: UInt32, app: String = puzzle) -> [UInt32: String] {
    var accounts: [UInt32: String] = [:]
    var index = 0
    while accounts.count < Int(count) {
        let account = "\(prefix)-\(index)"
        let shard = ShardHash.shard(app: app, account: account, count: count)
        if accounts[shard] == nil { accounts[shard] = account }
        index += 1
    }
    return accounts
}

extension TemporaryDirectory {
    /// The ipc endpoints of `count` instances (at least one) of a process named `name`: `name`,
    /// then `name2`, `name3`..., each followed by `suffix`.
    func instanceEndpoints(_ name: String, suffix: String = "", count: Int) -> [String] {
        (0..<max(1, count)).map { ipcEndpoint($0 == 0 ? "\(name)\(suffix)" : "\(name)\($0 + 1)\(suffix)") }
    }
}
