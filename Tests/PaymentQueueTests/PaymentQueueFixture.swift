import Foundation
import Logging
import StoreBus
import StoreBusServer
import StoreBusTesting
import StoreSchema
import Synchronization
import ZeroMQ

/// Real `storebus-catalog` and `storebus-payment-queue` processes on ipc endpoints in a temporary
/// directory, the payment queue's data kept across restarts.
final class PaymentQueueFixture: Sendable {
    let directory: TemporaryDirectory
    let catalog: ServiceProcess
    let queue: ServiceProcess
    let catalogEndpoint: String
    let rpcEndpoint: String
    let eventEndpoint: String
    static let context: ZeroMQ.Context = try! ZeroMQ.Context()

    init(
        configFile: (TemporaryDirectory) throws -> String? = { _ in nil },
        catalogFile: (TemporaryDirectory) throws -> String = { _ in deployDirectory.appendingPathComponent("catalog/catalog.json").path },
        queueArguments: [String] = []
    ) throws {
        directory = try TemporaryDirectory(prefix: "pq")
        catalogEndpoint = directory.ipcEndpoint("catalog")
        rpcEndpoint = directory.ipcEndpoint("pq")
        eventEndpoint = directory.ipcEndpoint("pq-events")
        catalog = ServiceProcess(
            name: "storebus-catalog",
            arguments: ["--rpc-endpoint", catalogEndpoint, "--catalog", try catalogFile(directory), "--log-level", "warning"],
            logFile: directory.url.appendingPathComponent("catalog.log")
        )
        let config = try configFile(directory)
        queue = ServiceProcess(
            name: "storebus-payment-queue",
            arguments: [
                "--rpc-endpoint", rpcEndpoint, "--event-endpoint", eventEndpoint, "--data-dir", directory.path("data"),
                "--catalog-endpoint", catalogEndpoint, "--log-level", "warning"
            ] + (config.map { ["--config", $0] } ?? []) + queueArguments,
            logFile: directory.url.appendingPathComponent("payment-queue.log")
        )
    }

    func start() async throws {
        try catalog.start()
        try await catalog.waitUntilServing(endpoint: catalogEndpoint)
        try await startQueue()
    }

    func startQueue() async throws {
        try queue.start()
        try await queue.waitUntilServing(endpoint: rpcEndpoint)
    }

    /// A fixture with both processes started, and a client of its payment queue.
    static func started() async throws -> (PaymentQueueFixture, RPCClient) {
        let fixture = try PaymentQueueFixture()
        try await fixture.start()
        return (fixture, try fixture.client())
    }

    func client() throws -> RPCClient {
        try RPCClient(configuration: ClientConfiguration(endpoints: [rpcEndpoint]), context: Self.context)
    }

    /// A follower of one queue's events.
    func follower(_ queueRef: Storebus_PaymentQueue_V1_QueueRef, client: RPCClient) throws -> EventFollower {
        var configuration = EventFollower.Configuration(log: "payment-queue", key: queueRef.key, doorbellEndpoints: [eventEndpoint])
        configuration.idlePoll = .milliseconds(200)
        return try EventFollower(configuration: configuration, client: client, context: Self.context, logger: Logger(label: "test"))
    }

    func stop() async {
        await queue.stop()
        await catalog.stop()
        directory.remove()
    }
}

/// The callbacks an observer of one queue receives, collected in order.
final class Observed: Sendable {
    private let events = Mutex<[Storebus_PaymentQueue_V1_QueueEvent]>([])

    func append(_ event: Storebus_Eventlog_V1_Event) throws {
        let decoded = try Storebus_PaymentQueue_V1_QueueEvent(jsonString: try event.payload.jsonString())
        events.withLock { $0.append(decoded) }
    }

    /// Every (transaction id, state) of updatedTransactions, and "removed" for removedTransactions.
    var timeline: [(String, String)] {
        events.withLock { events in
            events.flatMap { event -> [(String, String)] in
                switch event.event {
                case .updatedTransactions(let updated): updated.transactions.map { ($0.transactionIdentifier, "\($0.transactionState)") }
                case .removedTransactions(let removed): removed.transactions.map { ($0.transactionIdentifier, "removed") }
                default: []
                }
            }
        }
    }

    /// The restore counts of every restoreCompletedTransactionsFinished, in order.
    var restoresFinished: [UInt32] {
        events.withLock { events in
            events.compactMap { event in
                if case .restoreCompletedTransactionsFinished(let finished) = event.event { return finished.restoredCount }
                return nil
            }
        }
    }

    func states(of id: String) -> [String] {
        timeline.filter { $0.0 == id }.map(\.1)
    }
}

func queueRef(account: String = "alice", device: String = "phone") -> Storebus_PaymentQueue_V1_QueueRef {
    .with {
        $0.appBundleID = puzzle
        $0.accountID = account
        $0.deviceID = device
    }
}

extension RPCClient {
    /// Sets the sandbox policy of an account of the puzzle app (admin call).
    func setPolicy(account: String, _ policy: Storebus_PaymentQueue_V1_PaymentPolicy) async throws {
        _ = try await call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy,
            .with {
                $0.appBundleID = puzzle
                $0.accountID = account
                $0.policy = policy
            })
    }

    /// Adds a payment for one unit of `product` to `queue`, in the app's default storefront.
    func addPayment(_ queue: Storebus_PaymentQueue_V1_QueueRef, _ product: String) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        try await call(
            Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
            .with {
                $0.queue = queue
                $0.payment = .with {
                    $0.productIdentifier = product; $0.quantity = 1
                }
            }
        ).transaction
    }
}

/// A flag one task raises and others read.
final class Flag: Sendable {
    private let raised = Atomic<Bool>(false)
    var isSet: Bool { raised.load(ordering: .acquiring) }
    func set() { raised.store(true, ordering: .releasing) }
}
