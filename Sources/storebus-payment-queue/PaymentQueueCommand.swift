import ArgumentParser
import Foundation
import PaymentQueue
import StoreBus
import StoreBusStorage
import StoreSchema

/// `storebus-payment-queue`: the durable payment queues, their state machine and the sandbox payment
/// authority (storebus.payment_queue.v1).
@main
struct PaymentQueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storebus-payment-queue",
        abstract: "Serve payment queues: transactions, the sandbox payment authority, the charge ledger."
    )

    @OptionGroup var host: HostOptions

    @Option(name: .customLong("catalog-endpoint"), help: "RPC endpoint of storebus-catalog (repeatable). Also STOREBUS_CATALOG_ENDPOINTS or service.catalogEndpoints.")
    var catalogEndpoints: [String] = []

    @Option(help: "SQLite durability: full (default) or normal.")
    var durability: Durability?

    @Option(name: .customLong("catalog-cache-ms"), help: "How long catalog answers are kept, in milliseconds (default 1000; 0: ask on every payment). Also service.catalogCacheMilliseconds.")
    var catalogCacheMilliseconds: Int?

    /// The config file's `service` section.
    struct Settings: Decodable {
        var catalogEndpoints: [String]?
        var durability: Durability?
        var catalogCacheMilliseconds: Int?
    }

    func run() async throws {
        let configuration = try host.resolve(defaults: HostConfiguration(
            rpcEndpoints: ["tcp://127.0.0.1:7302"], eventEndpoints: ["tcp://127.0.0.1:7312"], dataDirectory: "data/payment-queue"
        ))
        ServiceHost.bootstrapLogging(level: configuration.logLevel)
        let settings = try configuration.serviceSettings(Settings.self)
        let catalog = try HostOptions.endpoints(
            flags: catalogEndpoints, environmentVariable: "STOREBUS_CATALOG_ENDPOINTS",
            configured: settings?.catalogEndpoints, configKey: "catalogEndpoints", default: ["tcp://127.0.0.1:7301"]
        )
        let host = try ServiceHost(process: "storebus-payment-queue", configuration: configuration)
        // A thread of its own syncs the commits (see WALSyncer): the loop that commits goes on with
        // the next writes meanwhile.
        let database = try StoreDatabase(
            directory: try host.dataDirectory(), name: "payment-queue",
            durability: durability ?? settings?.durability ?? .full, syncThread: true, migrator: PaymentQueueSchema.migrator
        )
        let publisher = try host.makePublisher()
        // Writes commit on the server's loop, where requests arrive and answers and doorbells leave.
        let store = TransactionStore(writer: EventLogWriter(logName: TransactionStore.logName, database: database, publisher: publisher, failPoints: host.failPoints, reactor: host.reactor))
        let catalogClient = try RPCClient(configuration: ClientConfiguration(endpoints: catalog), reactor: host.reactor, logger: host.logger)
        try await applyConfiguredPolicies(configuration.serviceSection, store: store)
        let authority = PaymentAuthority(store: store, logger: host.logger)
        var router = try EventLogService.router(database: database)
        router.merge(PaymentQueueService(store: store, catalog: CatalogLookup(client: catalogClient, maxAge: .milliseconds(max(0, catalogCacheMilliseconds ?? settings?.catalogCacheMilliseconds ?? 1000))), authority: authority).router)
        try await host.serve(
            router: router,
            services: [Storebus_PaymentQueue_V1_PaymentQueue.serviceName, Storebus_PaymentQueue_V1_PaymentQueueAdmin.serviceName, Storebus_Eventlog_V1_EventLog.serviceName],
            background: [authority],
            publisher: publisher,
            onShutdown: {
                await catalogClient.shutdown()
                try? database.close()
            }
        )
    }
}

extension Durability: ExpressibleByArgument {}

/// Applies the config file's `service.policies`: a list of
/// `{"app": ..., "account": ... (omit for the app's default), "policy": <PaymentPolicy as proto3 JSON>}`,
/// such as `{"app": "com.example", "account": "kid", "policy": {"mode": "POLICY_MODE_APPROVE",
/// "purchasesRestricted": true}}` for an account with purchase restrictions.
func applyConfiguredPolicies(_ section: Data?, store: TransactionStore) async throws {
    guard let section, let object = try JSONSerialization.jsonObject(with: section) as? [String: Any],
          let entries = object["policies"] as? [[String: Any]]
    else { return }
    for (index, entry) in entries.enumerated() {
        guard let app = entry["app"] as? String, !app.isEmpty, let policyObject = entry["policy"] else {
            throw StartupError("service.policies[\(index)] needs \"app\" and \"policy\"")
        }
        let policy: Storebus_PaymentQueue_V1_PaymentPolicy
        do {
            policy = try Storebus_PaymentQueue_V1_PaymentPolicy(jsonUTF8Data: JSONSerialization.data(withJSONObject: policyObject))
        } catch {
            throw StartupError("service.policies[\(index)].policy is not a PaymentPolicy: \(error)")
        }
        do {
            try PaymentQueueService.checkDelay(policy)
        } catch {
            throw StartupError("service.policies[\(index)].policy: \(error.message)")
        }
        try await store.setPolicy(policy.mode == .unspecified ? { var p = policy; p.mode = .approve; return p }() : policy, app: app, account: entry["account"] as? String ?? "")
    }
}
