import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import Notifications
import ReceiptFormat
import ServiceLifecycle
import StoreBus
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Synchronization

/// How long a notification takes to reach an app's backend under the flow benchmark's load: a
/// backend follows the app's notification log with long polls, as `NotificationStream` does, and
/// for each ONE_TIME_CHARGE measures from the purchase's commit (the transaction's purchaseDate, in
/// milliseconds of the same clock) to the moment the notification is in its hands.
final class NotificationLagProbe: Sendable {
    let client: RPCClient
    let app: String
    private let lags = Mutex<[Double]>([])

    init(cluster: StoreCluster, app: String) throws {
        client = try RPCClient(configuration: ClientConfiguration(endpoints: [cluster.directory.ipcEndpoint("notifications")]))
        self.app = app
    }

    /// Follows the log from its head until the task is cancelled.
    ///
    /// The pages are read as the bytes they come in, each notification's type, position and
    /// payload found with JSONScanner (a load generator's shortcut: decoding every page with
    /// swift-protobuf, and each JWS payload with JSONSerialization, was most of the benchmark's own
    /// CPU, which `purchase_flow_cpu_us` counts).
    func run() async {
        var position: UInt64?
        while !Task.isCancelled {
            do {
                let request = try JSONCodec.encode(
                    Storebus_Notifications_V1_ReadNotificationsRequest.with {
                        $0.appBundleID = app
                        $0.afterPosition = position ?? 0
                        $0.limit = position == nil ? 1 : 500
                        $0.waitMs = position == nil ? 0 : 1_000
                    })
                let response = try await client.callRaw(
                    path: Storebus_Notifications_V1_Notifications.readNotifications.path, idempotent: true, body: request,
                    options: CallOptions(timeout: .seconds(5)))
                guard response.code == .ok else { throw response.error ?? RPCError(response.code, "ReadNotifications failed") }
                let received = Double(EpochMilliseconds.now)
                guard let page = Self.page(response.body) else { throw RPCError(.internalError, "a ReadNotifications answer the probe cannot read") }
                guard let start = position else {
                    // From the head: what came before the probe is not its to measure.
                    position = page.head
                    continue
                }
                let measured = page.purchaseDates.map { received - Double($0) }
                lags.withLock { $0 += measured }
                position = page.last ?? start
            } catch {
                if Task.isCancelled { return }
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// The members the probe reads, and the one notification type it measures.
    enum Names {
        static let page = [Array("notifications".utf8), Array("headPosition".utf8)]
        static let notification = [Array("position".utf8), Array("notificationType".utf8), Array("signedPayload".utf8)]
        static let data = [Array("data".utf8)]
        static let signedTransactionInfo = [Array("signedTransactionInfo".utf8)]
        static let purchaseDate = [Array("purchaseDate".utf8)]
        static let oneTimeCharge = Array("ONE_TIME_CHARGE".utf8)
    }

    /// What the probe takes from a ReadNotificationsResponse's JSON: the head, the last
    /// notification's position, and the purchase dates of its ONE_TIME_CHARGEs.
    static func page(_ body: [UInt8]) -> (head: UInt64, last: UInt64?, purchaseDates: [Int64])? {
        guard let members = JSONScanner.values(of: body, in: 0..<body.count, named: Names.page) else { return nil }
        let head = members[1].flatMap { JSONScanner.unsigned(body, $0) } ?? 0
        guard let list = members[0] else { return (head, nil, []) }
        guard let notifications = JSONScanner.objectValues(of: body, in: list, named: Names.notification) else { return nil }
        var dates: [Int64] = []
        for notification in notifications {
            guard let type = notification[1], JSONScanner.plainString(body, type) == Names.oneTimeCharge, let payload = notification[2],
                let jws = JSONScanner.plainString(body, payload), let date = purchaseDate(jws)
            else { continue }
            dates.append(date)
        }
        return (head, notifications.last?[0].flatMap { JSONScanner.unsigned(body, $0) }, dates)
    }

    /// The purchaseDate of the transaction a signed notification carries (its payload's
    /// data.signedTransactionInfo, itself a JWS), read without checking signatures.
    static func purchaseDate(_ jws: [UInt8]) -> Int64? {
        guard let payload = jws.withUnsafeBufferPointer(JWS.unverifiedPayloadBytes),
            let data = JSONScanner.values(of: payload, in: 0..<payload.count, named: Names.data)?[0],
            let info = JSONScanner.values(of: payload, in: data, named: Names.signedTransactionInfo)?[0],
            let transactionJWS = JSONScanner.plainString(payload, info),
            let transaction = transactionJWS.withUnsafeBufferPointer(JWS.unverifiedPayloadBytes),
            let date = JSONScanner.values(of: transaction, in: 0..<transaction.count, named: Names.purchaseDate)?[0],
            let value = JSONScanner.unsigned(transaction, date)
        else { return nil }
        return Int64(exactly: value)
    }

    /// The lags measured so far, in milliseconds, sorted.
    var sortedLags: [Double] { lags.withLock { $0.sorted() } }

    func shutdown() async {
        await client.shutdown()
    }
}

/// Webhook deliveries per second: `count` notifications queued for one local endpoint, then the
/// notification service started on them, timed from the endpoint's first POST to its last; beside
/// it, its floor in the same round, a plain loop of AsyncHTTPClient POSTs of the same body to the
/// same endpoint with as many in flight as the service allows per URL.
struct WebhookBench {
    let count: Int
    let rounds: Int
    var verbose = false

    /// About the size of a real signedPayload (its x5c chain is most of it).
    static let payload = String(repeating: "x", count: 4_000)

    /// A local endpoint counting the POSTs it answers 200, and when the first and the last of a
    /// run came.
    final class Endpoint: Sendable {
        struct Tally {
            /// Every POST since the endpoint started (the waiter's position).
            var total = 0
            /// The total when the run began.
            var base = 0
            var first: ContinuousClock.Instant?
            var last: ContinuousClock.Instant?
        }
        let tally = Mutex(Tally())
        let reached = PositionWaiter<String>()

        /// A new run begins.
        func reset() {
            tally.withLock { tally in
                tally.base = tally.total
                tally.first = nil
                tally.last = nil
            }
        }

        /// POSTs of the run so far.
        var count: Int { tally.withLock { $0.total - $0.base } }

        func hit() {
            let now = ContinuousClock.now
            let total = tally.withLock { tally in
                tally.total += 1
                if tally.first == nil { tally.first = now }
                tally.last = now
                return tally.total
            }
            reached.advance("", to: UInt64(total))
        }

        /// Posts per second between the run's first and last of `count`, once `count` have come.
        func rate(count: Int, timeout: Duration) async -> Double? {
            let base = tally.withLock { $0.base }
            guard await reached.wait("", reaching: UInt64(base + count), timeout: timeout) else { return nil }
            let (first, last) = tally.withLock { ($0.first, $0.last) }
            guard let first, let last, last > first else { return nil }
            let span = last - first
            return Double(count - 1) / (Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18)
        }
    }

    func run() async throws {
        let endpoint = Endpoint()
        let port = try unusedLoopbackPort()
        let router = Router()
        router.post("/hook") { request, _ -> HTTPResponse.Status in
            _ = try await request.body.collect(upTo: 1 << 20)
            endpoint.hit()
            return .ok
        }
        let logger = Logger(label: "bench.webhook")
        let server = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
        let group = ServiceGroup(configuration: .init(services: [server], gracefulShutdownSignals: [], logger: logger))
        let serving = Task { try await group.run() }
        defer { serving.cancel() }
        let url = "http://127.0.0.1:\(port)/hook"
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        // Up before the first round.
        for _ in 0..<50 {
            if (try? await client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/"), timeout: .seconds(1))) != nil { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        var floors: [Double] = [], rates: [Double] = []
        do {
            for round in 0..<rounds {
                endpoint.reset()
                floors.append(try await floor(client: client, url: url, endpoint: endpoint))
                endpoint.reset()
                rates.append(try await service(url: url, endpoint: endpoint, round: round))
                if verbose {
                    FileHandle.standardError.write(
                        "round \(round) webhooks: service \(Int(rates.last!)) deliveries/s, floor \(Int(floors.last!)) posts/s\n".data(using: .utf8)!)
                }
            }
        } catch {
            try? await client.shutdown()
            await group.triggerGracefulShutdown()
            throw error
        }
        try await client.shutdown()
        await group.triggerGracefulShutdown()
        report("webhook_deliveries_per_s", median(rates), "deliveries/s")
        report("webhook_floor_http_posts_per_s", median(floors), "posts/s")
    }

    /// The floor: `count` POSTs of the same body, `NotificationsConfiguration().webhookConcurrencyPerURL`
    /// in flight.
    func floor(client: HTTPClient, url: String, endpoint: Endpoint) async throws -> Double {
        let inFlight = NotificationsConfiguration().webhookConcurrencyPerURL
        let body = "{\"signedPayload\":\"\(Self.payload)\"}"
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<inFlight {
                group.addTask {
                    for _ in stride(from: worker, to: count, by: inFlight) {
                        var request = HTTPClientRequest(url: url)
                        request.method = .POST
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.body = .bytes(ByteBuffer(string: body))
                        let response = try await client.execute(request, timeout: .seconds(5))
                        _ = try await response.body.collect(upTo: 64 * 1024)
                    }
                }
            }
            try await group.waitForAll()
        }
        guard let rate = await endpoint.rate(count: count, timeout: .seconds(5)) else { throw ClusterFailure(description: "the floor's posts did not all arrive") }
        return rate
    }

    /// The service: `count` notifications queued for `url` in a new database, then
    /// storebus-notifications started on it (its upstreams absent: it only delivers).
    func service(url: String, endpoint: Endpoint, round: Int) async throws -> Double {
        let directory = try TemporaryDirectory(prefix: "webhook")
        defer { directory.remove() }
        let app = puzzle
        do {
            try FileManager.default.createDirectory(at: directory.url.appendingPathComponent("data"), withIntermediateDirectories: true)
            let database = try StoreDatabase(
                directory: directory.url.appendingPathComponent("data"), name: "notifications", durability: .normal, migrator: NotificationsSchema.migrator)
            let store = NotificationStore(database: database, webhooks: [app: url])
            for index in 0..<count {
                _ = try await store.append(
                    .with {
                        $0.notificationUuid = "bench-\(round)-\(index)"
                        $0.notificationType = "ONE_TIME_CHARGE"
                        $0.signedPayload = Self.payload
                        $0.appBundleID = app
                    })
            }
            try database.close()
        }
        let config = directory.url.appendingPathComponent("notifications.json")
        try JSONSerialization.data(withJSONObject: ["service": ["httpAddress": ""]]).write(to: config)
        let process = ServiceProcess(
            name: "storebus-notifications",
            arguments: [
                "--config", config.path, "--rpc-endpoint", directory.ipcEndpoint("notifications"), "--data-dir", directory.path("data"),
                "--payment-queue-endpoint", directory.ipcEndpoint("absent-pq"), "--payment-queue-events", directory.ipcEndpoint("absent-pq-events"),
                "--receipt-endpoint", directory.ipcEndpoint("absent-receipt"), "--log-level", "error"
            ],
            logFile: directory.url.appendingPathComponent("notifications.log"))
        try process.start()
        guard let rate = await endpoint.rate(count: count, timeout: .seconds(30)) else {
            await process.stop()
            let log =
                (try? String(contentsOf: directory.url.appendingPathComponent("notifications.log"), encoding: .utf8))
                ?? "(no log at \(directory.path("notifications.log")), pid \(String(describing: process.pid)))"
            throw ClusterFailure(description: "the notification service delivered \(endpoint.count) of \(count) webhooks in 30 s; its log:\n\(log.suffix(3000))")
        }
        await process.stop()
        return rate
    }
}
