import Catalog
import CatalogFormat
import Foundation
import GRDB
import Logging
import PaymentQueue
import StoreBus
import StoreBusServer
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import ZeroMQ

/// The payment queue's durable purchase flow against the bare SQLite commit floor, on the same disk.
struct DurableBench {
    let flows: Int
    let concurrency: Int
    let rounds: Int
    let catalogPath: String

    func run() async throws {
        // Under TMPDIR, unlike the flow benchmark's (ipc:// paths must be short): the commit figures
        // are those of the disk that TMPDIR names.
        let temporary = try TemporaryDirectory(prefix: "durable", in: URL(fileURLWithPath: NSTemporaryDirectory(), isDirectory: true))
        defer { temporary.remove() }
        let directory = temporary.url
        let context = try ZeroMQ.Context()
        let logger = Logger(label: "bench.durable")

        // The catalog and the payment queue in this process, each behind its own RPC server.
        let catalogStore = try CatalogStore(path: catalogPath, logger: logger)
        let catalogServer = try RPCServer(configuration: ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"]), router: CatalogHandlers(store: catalogStore).router, context: context, logger: logger)
        catalogServer.start()
        let database = try StoreDatabase(directory: directory, name: "payment-queue", durability: .full, migrator: PaymentQueueSchema.migrator)
        let store = TransactionStore(writer: EventLogWriter(logName: TransactionStore.logName, database: database, publisher: nil))
        let catalogClient = try RPCClient(configuration: ClientConfiguration(endpoints: catalogServer.boundEndpoints), context: context)
        let authority = PaymentAuthority(store: store, logger: logger)
        let deciding = Task { try await authority.run() }
        var queueRouter = RPCRouter()
        queueRouter.register(PaymentQueueHandlers(store: store, catalog: CatalogLookup(client: catalogClient), authority: authority))
        let queueServer = try RPCServer(configuration: ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"]), router: queueRouter, context: context, logger: logger)
        queueServer.start()
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: queueServer.boundEndpoints), context: context)

        let app = catalogStore.catalog.appOrder[0]
        let consumable = catalogStore.catalog.apps[app]!.products.values.first { $0.type == .consumable && $0.clearedForSale && $0.prices["USA"] != nil }!.identifier

        var purchaseRates: [Double] = [], commitRates: [Double] = []
        for round in 0..<rounds {
            commitRates.append(try Self.sqliteCommits(directory: directory, count: max(200, flows / 2), round: round))
            purchaseRates.append(
                try await RunBenchmarks.concurrentRate(total: flows, concurrency: concurrency) {
                    let queue = Storebus_PaymentQueue_V1_QueueRef.with {
                        $0.appBundleID = app
                        $0.accountID = "bench-\(Int.random(in: 0..<concurrency))"
                        $0.deviceID = "device"
                    }
                    let added = try await client.call(
                        Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
                        .with {
                            $0.queue = queue
                            $0.payment = .with {
                                $0.productIdentifier = consumable; $0.quantity = 1
                            }
                            $0.storefront = "USA"
                        })
                    // Finish as soon as the authority has decided (FAILED_PRECONDITION while purchasing).
                    while true {
                        do {
                            _ = try await client.call(
                                Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
                                .with {
                                    $0.queue = queue
                                    $0.transactionIdentifier = added.transaction.transactionIdentifier
                                })
                            return
                        } catch let error as RPCError where error.code == .failedPrecondition {
                            try await Task.sleep(for: .milliseconds(1))
                        }
                    }
                })
        }
        report("sqlite_commits_per_s", median(commitRates), "commits/s")
        report("durable_purchases_per_s", median(purchaseRates), "purchases/s")
        var renewalRates: [Double] = []
        for round in 0..<rounds {
            renewalRates.append(try await Self.renewals(store: store, database: database, app: app, round: round))
        }
        report("renewals_per_s", median(renewalRates), "renewals/s")

        await client.shutdown()
        await queueServer.shutdown()
        deciding.cancel()
        _ = await deciding.result
        await catalogClient.shutdown()
        await catalogServer.shutdown()
        try database.close()
        context.shutdown()
        context.terminate()
    }

    /// Subscriptions falling due together in the renewal benchmark.
    static let dueSubscriptions = 100_000

    /// Renewals per second: ``dueSubscriptions`` subscriptions of as many accounts, their periods all
    /// ending at the same store instant, renewed by the store's rounds (each one durable write of at
    /// most ``TransactionStore/renewalsPerRound``) until none is due: the time from the first round to
    /// the last durable commit. The subscriptions are written straight into the table, in one
    /// transaction, as purchases long past would have left them.
    static func renewals(store: TransactionStore, database: StoreDatabase, app: String, round: Int) async throws -> Double {
        let due = Date()
        let dueMS = Int64(due.timeIntervalSince1970 * 1000) - 1
        try await database.write { db in
            try RenewalBacklog.insertDue(db, app: app, group: "bench", accountPrefix: "renewals-\(round)", count: dueSubscriptions, dueMS: dueMS)
        }
        let start = DispatchTime.now().uptimeNanoseconds
        var renewed = 0
        while true {
            let round = try await store.renewDue(now: due)
            renewed += round.renewed
            if !round.moreDue { break }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        guard renewed == dueSubscriptions else {
            throw ClusterFailure(description: "renewed \(renewed) subscriptions of \(dueSubscriptions)")
        }
        return Double(renewed) / seconds
    }

    /// One-row commits per second with SQLite in WAL mode and synchronous=FULL: the durability floor.
    static func sqliteCommits(directory: URL, count: Int, round: Int) throws -> Double {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let queue = try DatabaseQueue(path: directory.appendingPathComponent("floor-\(round).sqlite").path, configuration: configuration)
        try queue.writeWithoutTransaction { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "CREATE TABLE floor (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        }
        let start = DispatchTime.now().uptimeNanoseconds
        for index in 0..<count {
            try queue.write { db in try db.execute(sql: "INSERT INTO floor (value) VALUES (?)", arguments: ["row \(index)"]) }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        try queue.close()
        return Double(count) / seconds
    }
}
