import Foundation
import StoreBus
import StoreBusPostgres
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The scale-out deployment on hosts of its own (network namespaces), under purchase load, through
/// rounds of faults: an instance SIGKILLed, a payment-queue instance SIGSTOPped past its lease and
/// continued, the PostgreSQL primary killed and its standby promoted. `STOREBUS_CHAOS_ROUNDS` rounds
/// (2 by default; `make chaos` runs 20).
@Suite("Scale-out under faults: three payment queues, two receipts, two downloads, two gateways on PostgreSQL with a standby", .serialized)
struct ScaleOutChaosTests {
    static let rounds = Int(ProcessInfo.processInfo.environment["STOREBUS_CHAOS_ROUNDS"] ?? "") ?? 2
    static let shards: UInt32 = 6
    static let lease = 2.0

    /// One StoreBus process on a host of its own (plain TCP: the test's network is its own; CURVE
    /// across hosts is MultiHostTests' subject).
    struct Instance {
        let kind: String
        let role: String
        let endpoint: String
        let process: ServiceProcess
    }

    /// What the load has had acknowledged, by idempotency key, and what went wrong that should not.
    final class Ledger: Sendable {
        let acknowledged = Mutex<[String: String]>([:])
        let stop = Atomic<Bool>(false)
    }

    @Test(
        "under purchase load, rounds of an instance SIGKILLed, a payment queue paused past its lease, and the primary killed: no acknowledged payment lost, one charge a key, receipts match the ledger, observer streams gapless, each shard taken over within its lease and 2 s",
        .enabled(if: NetworkHosts.available, "needs root, iproute2 and tcpdump to make network namespaces; skipped (saying why on standard error) where they cannot be made"),
        .timeLimit(.minutes(40))
    )
    func rounds() async throws {
        let directory = try TemporaryDirectory(prefix: "chaos")
        defer { directory.remove() }
        let roles = ["db", "catalog", "pq1", "pq2", "pq3", "receipt1", "receipt2", "download1", "download2", "gateway1", "gateway2"]
        let network = NetworkHosts(roles: roles, named: [], tag: "sc\(getpid() % 100_000)", subnet: "10.78.0")
        var instances: [Instance] = []
        var ha: PostgresHA?
        do {
            try await network.create()
            try await network.attachTestProcess()
            let started = try await PostgresHA.start(namespace: network["db"].namespace, address: network["db"].address)
            ha = started
            try await run(network, directory, started, &instances)
        } catch {
            Issue.record("\(error)\n\(Self.logs(instances))")
        }
        for instance in instances.reversed() { _ = await instance.process.stop(grace: .seconds(5)) }
        await ha?.stop()
        await network.remove()
    }

    static func logs(_ instances: [Instance]) -> String {
        instances.map { "== \($0.role)\n\(String($0.process.output.suffix(6_000)))" }.joined(separator: "\n")
    }

    private func run(_ network: NetworkHosts, _ directory: TemporaryDirectory, _ ha: PostgresHA, _ instances: inout [Instance]) async throws {
        for database in ["receipts", "downloads"] {
            let made = await ha.query(node: 0, "CREATE DATABASE \(database)")
            #expect(made != nil, "CREATE DATABASE \(database)")
        }
        func endpoint(_ role: String, _ port: Int) -> String { "tcp://\(network[role].address):\(port)" }
        let queues = ["pq1", "pq2", "pq3"].map { endpoint($0, 7302) }
        let queueEvents = ["pq1", "pq2", "pq3"].map { endpoint($0, 7312) }
        let receipts = ["receipt1", "receipt2"].map { endpoint($0, 7303) }
        let downloads = ["download1", "download2"].map { endpoint($0, 7304) }
        let gateways = ["gateway1", "gateway2"].map { endpoint($0, 7300) }
        let catalog = endpoint("catalog", 7301)
        var settings = ha.settings()
        settings.shards = Self.shards
        settings.leaseSeconds = Self.lease
        func config(_ name: String, _ service: [String: Any]) throws -> String {
            let file = directory.path("\(name).json")
            try JSONSerialization.data(withJSONObject: ["service": service]).write(to: URL(fileURLWithPath: file))
            return file
        }
        var receiptSettings = settings
        receiptSettings.database = "receipts"
        var downloadSettings = settings
        downloadSettings.database = "downloads"
        let queueConfig = try config("payment-queue", try StoreCluster.storage(settings))
        let receiptConfig = try config(
            "receipt",
            try StoreCluster.storage(receiptSettings).merging(["apps": [["bundleId": puzzle, "sharedSecret": puzzleSharedSecret]], "httpAddress": ""]) { $1 })
        let downloadConfig = try config("download", try StoreCluster.storage(downloadSettings))
        let gatewayConfig = try config(
            "gateway",
            [
                ServiceRegistry.catalog.endpointsKey: [catalog], ServiceRegistry.paymentQueue.endpointsKey: queues, ServiceRegistry.receipt.endpointsKey: receipts,
                ServiceRegistry.download.endpointsKey: downloads, ServiceRegistry.paymentQueue.eventEndpointsKey: queueEvents,
                "sessionSecret": "chaos-session-secret-\(UUID().uuidString)",
                "apiKeys": [["name": "puzzle", "key": appKey, "apps": [puzzle]], ["name": "operator", "key": adminKey, "admin": true]]
            ])
        let queueArguments = queues.flatMap { ["--payment-queue-endpoint", $0] } + queueEvents.flatMap { ["--payment-queue-events", $0] }
        func start(_ kind: String, _ role: String, _ endpoint: String, _ arguments: [String]) async throws {
            let executable = try Executables.url("storebus-\(kind)").path
            let process = ServiceProcess(
                name: NetworkHosts.ip!, arguments: ["netns", "exec", network[role].namespace, executable] + arguments + ["--log-level", "info", "--plain-tcp"],
                logFile: directory.url.appendingPathComponent("\(role).log"))
            try process.start()
            instances.append(Instance(kind: kind, role: role, endpoint: endpoint, process: process))
            try await process.waitUntilServing(endpoint: endpoint, timeout: .seconds(60))
        }
        try await start("catalog", "catalog", catalog, ["--rpc-endpoint", catalog, "--catalog", deployDirectory.appendingPathComponent("catalog/catalog.json").path])
        for (index, role) in ["pq1", "pq2", "pq3"].enumerated() {
            try await start(
                "payment-queue", role, queues[index],
                ["--config", queueConfig, "--rpc-endpoint", queues[index], "--event-endpoint", queueEvents[index], "--data-dir", directory.path("data-\(role)"), "--catalog-endpoint", catalog])
        }
        for (index, role) in ["receipt1", "receipt2"].enumerated() {
            try await start(
                "receipt", role, receipts[index],
                ["--config", receiptConfig, "--rpc-endpoint", receipts[index], "--data-dir", directory.path("data-\(role)"), "--catalog-endpoint", catalog] + queueArguments)
        }
        for (index, role) in ["download1", "download2"].enumerated() {
            try await start(
                "download", role, downloads[index],
                [
                    "--config", downloadConfig, "--rpc-endpoint", downloads[index], "--data-dir", directory.path("data-\(role)"), "--catalog-endpoint", catalog,
                    "--content-root", deployDirectory.appendingPathComponent("content").path
                ] + receipts.flatMap { ["--receipt-endpoint", $0] } + queueArguments)
        }
        for (index, role) in ["gateway1", "gateway2"].enumerated() {
            try await start("gateway", role, gateways[index], ["--config", gatewayConfig, "--rpc-endpoint", gateways[index]])
        }
        // Every kind's instances have split their shards.
        for kind in ["payment-queue", "receipt", "download"] {
            let live = instances.filter { $0.kind == kind }.map(\.endpoint)
            #expect(try await Self.balanced(ha, kind: kind, live: live), "\(kind) never split its shards: \(Self.logs(instances))")
        }

        // The load: an account in every shard buys coins one after another, each under a key of its
        // own, retried with that key until answered; an observer of each account's device follows.
        let accounts = accountsByShard(prefix: "chaos", count: Self.shards).sorted { $0.key < $1.key }.map(\.value)
        let configuration: @Sendable (String) -> StoreConfiguration = { account in
            var configuration = StoreConfiguration(gatewayEndpoints: gateways, apiKey: appKey, appBundleID: puzzle, accountID: account, deviceID: "phone")
            configuration.observerHold = .seconds(5)
            configuration.callTimeout = .seconds(5)
            return configuration
        }
        var observers: [(String, PaymentQueue, Recorder)] = []
        for account in accounts {
            let queue = try PaymentQueue(configuration: configuration(account))
            let recorder = Recorder(queue)
            #expect(await recorder.attached(), "\(account)'s observer")
            observers.append((account, queue, recorder))
        }
        let ledger = Ledger()
        let observerQueues = Dictionary(uniqueKeysWithValues: observers.map { ($0.0, $0.1) })
        let load = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for account in accounts {
                    let observer = observerQueues[account]!
                    group.addTask {
                        let connection = try StoreConnection(configuration: configuration(account))
                        var number = 0
                        while !ledger.stop.load(ordering: .relaxed) {
                            let key = "\(account)-\(number)"
                            let id = try await Self.purchase(connection, account: account, key: key, timeout: .seconds(120))
                            ledger.acknowledged.withLock { $0[key] = id }
                            number += 1
                            // As an app does, the device finishes what it was delivered (a queue
                            // holds at most 1,000 unfinished transactions); one refused now is
                            // finished the next time.
                            if number % 50 == 0 {
                                for transaction in observer.transactions where transaction.transactionState == .purchased {
                                    try? await observer.finish(transaction)
                                }
                            }
                            try await Task.sleep(for: .milliseconds(100))
                        }
                        await connection.close()
                    }
                }
                try await group.waitForAll()
            }
        }

        // The rounds.
        let maximum = Duration.seconds(Self.lease) + .seconds(2)
        var takeovers: [(String, Duration)] = []
        for round in 0..<Self.rounds {
            // An instance of one kind after another, SIGKILLed: its shards go to the others within
            // its lease and 2 s; it starts again and takes its share back.
            let kind = ["payment-queue", "receipt", "download"][round % 3]
            let candidates = instances.filter { $0.kind == kind }
            let victim = candidates[round % candidates.count]
            await victim.process.kill()
            let killed = try await Self.takeover(ha, kind: kind, from: victim.endpoint, stopped: Date())
            takeovers.append(("round \(round): \(victim.role) SIGKILLed", killed))
            try victim.process.start()
            try await victim.process.waitUntilServing(endpoint: victim.endpoint, timeout: .seconds(60))
            #expect(try await Self.balanced(ha, kind: kind, live: candidates.map(\.endpoint)), "round \(round): \(kind) never split its shards again")

            // A payment queue paused past its lease: the others take its shards; continued, it
            // writes nothing more to them (its writes are refused) and takes its share back.
            let queueInstances = instances.filter { $0.kind == "payment-queue" }
            let paused = queueInstances[(round + 1) % queueInstances.count]
            paused.process.signal(SIGSTOP)
            let stopped = try await Self.takeover(ha, kind: "payment-queue", from: paused.endpoint, stopped: Date())
            takeovers.append(("round \(round): \(paused.role) SIGSTOPped", stopped))
            try await Task.sleep(for: .seconds(1))
            paused.process.signal(SIGCONT)
            #expect(try await Self.balanced(ha, kind: "payment-queue", live: queues), "round \(round): the payment queues never split their shards again")

            // The primary killed: the standby is promoted; the old primary comes back as its standby.
            guard let primary = await ha.primary() else {
                Issue.record("round \(round): no primary")
                break
            }
            await ha.kill(node: primary)
            try await ha.waitForPrimary(1 - primary)
            try ha.restart(node: primary)
            try await ha.waitForStandby(primary)
            let purchases = ledger.acknowledged.withLock { $0.count }
            #expect(
                await waitUntil(timeout: .seconds(60), interval: .milliseconds(100)) { ledger.acknowledged.withLock { $0.count } > purchases + accounts.count },
                "round \(round): purchases do not go on after the failover")
        }

        ledger.stop.store(true, ordering: .relaxed)
        do {
            try await load.value
        } catch {
            Issue.record("the load failed: \(error)\n\(Self.logs(instances))")
        }
        for (what, took) in takeovers {
            #expect(took <= maximum, "\(what): its shards were taken over in \(took), more than its lease and 2 s")
        }
        let slowest = takeovers.map(\.1).max() ?? .zero
        print("chaos: \(Self.rounds) rounds, \(ledger.acknowledged.withLock { $0.count }) purchases acknowledged, \(takeovers.count) takeovers, the slowest in \(slowest)")

        // Every acknowledged purchase is in the ledger under its key, charged once; one transaction
        // a key.
        let keys = ledger.acknowledged.withLock { $0 }
        #expect(keys.count >= accounts.count * Self.rounds, "purchases made: \(keys.count)")
        let rows = await ha.queryPrimary(
            "SELECT i.key || '=' || i.transaction_id || ':' || (SELECT count(*) FROM pq_charge c WHERE c.transaction_id = i.transaction_id) FROM pq_idempotency i")
        var stored: [String: String] = [:]
        for row in (rows ?? "").split(separator: "\n") {
            let parts = row.split(separator: "=")
            if parts.count == 2 { stored[String(parts[0])] = String(parts[1]) }
        }
        for (key, id) in keys.sorted(by: { $0.key < $1.key }) {
            #expect(stored[key] == "\(id):1", "\(key): acknowledged \(id), stored \(stored[key] ?? "nothing")")
        }
        let charged = await ha.queryPrimary("SELECT count(*) FROM pq_charge WHERE transaction_id IN (SELECT transaction_id FROM pq_idempotency)")
        #expect(charged == "\(stored.count)", "one charge a key: \(charged ?? "no answer") for \(stored.count) keys")
        let transactions = await ha.queryPrimary("SELECT count(*) FROM pq_transaction")
        #expect(transactions == "\(stored.count)", "one transaction a key")

        // The receipts hold every purchase the ledger holds, and nothing else.
        let purchased = Storebus_PaymentQueue_V1_TransactionState.purchased.rawValue
        let ledgerIDs = await ha.queryPrimary("SELECT id FROM pq_transaction WHERE state = \(purchased) ORDER BY id")
        var receiptIDs: String?
        _ = await waitUntil(timeout: .seconds(60), interval: .milliseconds(250)) {
            receiptIDs = await ha.queryPrimary(database: "receipts", "SELECT id FROM rc_transaction ORDER BY id")
            return receiptIDs == ledgerIDs
        }
        #expect(receiptIDs != nil && receiptIDs == ledgerIDs, "receipts \(receiptIDs?.split(separator: "\n").count ?? -1), ledger \(ledgerIDs?.split(separator: "\n").count ?? -1)")

        // Every observer heard its device's queue without a gap, through to its last event.
        for (account, queue, recorder) in observers {
            let last = UInt64(await ha.queryPrimary("SELECT COALESCE(MAX(key_seq), 0) FROM storebus_event WHERE stream_key = '\(puzzle)|\(account)|phone'") ?? "") ?? 0
            #expect(await recorder.wait(timeout: .seconds(60)) { ($0.live.last?.seq ?? 0) >= last }, "\(account): heard up to \(recorder.live.last?.seq ?? 0) of \(last)")
            let seqs = recorder.live.map(\.seq).filter { $0 > 0 }
            let gaps = zip(seqs, seqs.dropFirst()).filter { $1 != $0 + 1 }
            #expect(gaps.isEmpty, "\(account): the stream went \(gaps.prefix(5).map { "\($0) → \($1)" })")
            await queue.close()
        }

        // And after it all, a device of every shard downloads through the gateways.
        for account in accounts.prefix(2) {
            let queue = try PaymentQueue(configuration: configuration(account).with { $0.deviceID = "tablet" })
            let recorder = Recorder(queue)
            #expect(await recorder.attached())
            let bought = try await queue.addPayment(Payment(productIdentifier: levelPack))
            #expect(await recorder.purchased(bought.id))
            let download = try #require(queue.transactions.first { $0.id == bought.id }?.downloads.first)
            try await queue.startDownloads([download])
            #expect(await recorder.download(bought.id, reaches: .finished), "\(account)'s download")
            if let folder = recorder.lastDownload(of: bought.id)?.contentURL { try? FileManager.default.removeItem(at: folder.deletingLastPathComponent()) }
            await queue.close()
        }
    }

    /// Buys coins under `key`, calling again with the same key after any failure, until answered
    /// (at most `timeout`).
    static func purchase(_ connection: StoreConnection, account: String, key: String, timeout: Duration) async throws -> String {
        let end = ContinuousClock.now + timeout
        var lastError: (any Error)?
        while ContinuousClock.now < end {
            do {
                return try await connection.call(Storebus_PaymentQueue_V1_PaymentQueue.addPayment, coinsPayment(account: account, key: key), timeout: .seconds(5))
                    .transaction.transactionIdentifier
            } catch {
                lastError = error
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        throw ClusterFailure(description: "\(key) was never answered: \(String(describing: lastError))")
    }

    /// The database each kind keeps its leases in.
    static func database(_ kind: String) -> String {
        switch kind {
        case "receipt": "receipts"
        case "download": "downloads"
        default: PostgresHA.database
        }
    }

    /// Each shard of `kind`'s leases: whether it is leased now, its owner's RPC endpoint, and when
    /// its owner last took or renewed it (the database's clock, in seconds since 1970: every take
    /// and renewal sets the lease to run out a lease time after that statement).
    static func shardOwners(_ ha: PostgresHA, kind: String) async -> [(leased: Bool, endpoint: String, since: Double)]? {
        let rows = await ha.queryPrimary(
            database: database(kind),
            """
            SELECT (s.expires_at > clock_timestamp())::int || '|' || COALESCE(i.rpc_endpoints, '') || '|' ||
                CASE WHEN isfinite(s.expires_at) THEN extract(epoch FROM s.expires_at)::text ELSE '' END
            FROM storebus_shard s LEFT JOIN storebus_instance i ON i.log = s.log AND i.instance = s.owner ORDER BY s.shard
            """)
        guard let rows, !rows.isEmpty else { return nil }
        return rows.split(separator: "\n").map { row in
            let parts = row.split(separator: "|", omittingEmptySubsequences: false)
            let expires = parts.count > 2 ? Double(parts[2]) : nil
            return (parts.first == "1", parts.count > 1 ? String(parts[1]) : "", expires.map { $0 - lease } ?? 0)
        }
    }

    /// How long after `stopped` (a time on the host's clock, just after the instance at `endpoint`
    /// was stopped) every shard of `kind` was leased by another instance; throws when that has not
    /// happened 30 s on.
    ///
    /// Timed through the lease rows, not by when a poll saw them: a poll is two psql processes and
    /// can take a second on a busy machine. Once every shard is seen taken over, the latest of their
    /// owners' last takes or renewals is when the last of them was taken over or later (a renewal
    /// comes a third of the lease after a take), so this is never less than the takeover took. The
    /// database runs on this host, so its clock is the test's.
    static func takeover(_ ha: PostgresHA, kind: String, from endpoint: String, stopped: Date) async throws -> Duration {
        var taken: [(leased: Bool, endpoint: String, since: Double)] = []
        let done = await waitUntil(timeout: .seconds(30), interval: .milliseconds(50)) {
            guard let owners = await shardOwners(ha, kind: kind) else { return false }
            taken = owners
            return owners.count == Int(shards) && owners.allSatisfy { $0.leased && $0.endpoint != endpoint && !$0.endpoint.isEmpty }
        }
        guard done else { throw TestingError("\(kind): the shards of \(endpoint) were not taken over in 30 s: \(taken)") }
        let last = taken.map(\.since).max() ?? 0
        return .milliseconds(Int64(((last - stopped.timeIntervalSince1970) * 1000).rounded(.up)))
    }

    /// Whether, within 60 s, every shard of `kind` is leased and every instance at `live` holds some.
    static func balanced(_ ha: PostgresHA, kind: String, live: [String]) async throws -> Bool {
        await waitUntil(timeout: .seconds(60), interval: .milliseconds(100)) {
            guard let owners = await shardOwners(ha, kind: kind) else { return false }
            return owners.count == Int(shards) && owners.allSatisfy(\.leased) && Set(owners.map(\.endpoint)) == Set(live)
        }
    }
}

extension StoreConfiguration {
    /// This configuration, changed by `change`.
    func with(_ change: (inout StoreConfiguration) -> Void) -> StoreConfiguration {
        var copy = self
        change(&copy)
        return copy
    }
}
