import Catalog
import CatalogFormat
import Foundation
import Logging
import StoreBus
import StoreBusTesting
import StoreSchema
import Synchronization
import ZeroMQ

/// The full purchase flow through the gateway, with the system running as separate processes
/// (storebus-catalog, storebus-payment-queue, storebus-gateway, built next to this benchmark):
/// fetch products, add a payment, receive the purchased callback, finish, receive the removed
/// callback, for `devices` simulated devices at once, each with its own session and observer chain.
struct FlowBench {
    let flows: Int
    let devices: Int
    let rounds: Int
    let catalogPath: String
    var verbose = false
    /// Offered load of the paced figures, flows per second over all devices (0: no paced figures).
    var pacedRate = 0
    /// Whether to run the closed-loop figures (always, without paced ones).
    var closedLoop = true
    /// Whether each device keeps an Observe call parked at the gateway (see ``Device``).
    var parkedObserver = false
    /// Whether to run the paced figures' floor (``FlowFloor``) after each paced run.
    var floor = true
    /// Whether to run the closed loop again on services with their fast paths off (the
    /// `_reference` figures, see docs/performance.md).
    var reference = true
    /// Renewals falling due at once before a second paced run of each round (0: no such run): the
    /// `purchase_flow_paced_*_during_renewals_ms` figures.
    var renewalBacklog = 25_000

    /// The simulated devices, one account each, on `client`.
    func openDevices(client: RPCClient, app: String, product: String) async throws -> [Device] {
        var opened: [Device] = []
        for index in 0..<devices {
            opened.append(try await Device.open(client: client, app: app, account: "bench-\(index)", product: product, parked: parkedObserver))
        }
        return opened
    }

    /// One closed-loop round: a warm-up of a tenth of the flows, `afterWarmUp`, then the measured run.
    /// With a `probe`, it runs beside the measured run (receipt_lag_*).
    func closedLoopRound(
        _ devices: [Device], on reactor: Reactor, meter: CPUMeter?, round: String, probe: ReceiptLagProbe? = nil,
        notificationProbe: NotificationLagProbe? = nil, afterWarmUp: () async throws -> Void = {}
    ) async throws -> Run {
        _ = try await Self.drive(devices, on: reactor, flows: max(devices.count, flows / 10))
        try await afterWarmUp()
        let probing = probe.map { probe in Task { await probe.run() } }
        let following = notificationProbe.map { probe in Task { await probe.run() } }
        defer {
            probing?.cancel()
            following?.cancel()
        }
        return try await Self.metered(meter, flows: flows, round: round, verbose: verbose) {
            try await Self.drive(devices, on: reactor, flows: flows)
        }
    }

    /// The CPU meter of the bench and a cluster's services.
    static func meter(_ cluster: StoreCluster) -> CPUMeter? {
        guard let gatewayPID = cluster.gateways[0].pid, let queuePID = cluster.queue.pid, let catalogPID = cluster.catalog.pid,
            let receiptPID = cluster.receipt.pid, let downloadPID = cluster.download.pid, let notificationsPID = cluster.notifications.pid
        else { return nil }
        return CPUMeter(processes: [
            ("bench", getpid()), ("gateway", gatewayPID), ("payment-queue", queuePID), ("catalog", catalogPID), ("receipt", receiptPID),
            ("download", downloadPID), ("notifications", notificationsPID)
        ])
    }

    /// The catalog, payment queue and gateway as processes (StoreBusTesting's cluster, one gateway on
    /// a free loopback port, as clients reach a deployment), started; with `fastPaths` false, with
    /// `STOREBUS_FAST_PATHS=off`.
    func startServices(fastPaths: Bool) async throws -> StoreCluster {
        let cluster = try StoreCluster(logLevel: "error", fastPaths: fastPaths, gatewayCount: 1, gatewaysOnTCP: true, catalogPath: catalogPath, appKeyApps: [])
        try await cluster.start()
        return cluster
    }

    func run() async throws {
        let directory = try TemporaryDirectory(prefix: "flow")
        defer { directory.remove() }
        let services = try await startServices(fastPaths: true)
        let (gatewayEndpoint, queueRPC) = (services.gatewayEndpoints[0], services.directory.ipcEndpoint("pq"))

        let context = try ZeroMQ.Context()
        // The client's reactor is the bench's own: the paced runs wait for each flow's start on its
        // timers (see `drive`).
        let reactor = Reactor(name: "sb-rpc-client", context: context)
        reactor.start()
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [gatewayEndpoint]), reactor: reactor)
        // The payment queue's own counters (--verbose): its requests per flow show whether the
        // gateway answered the observers from doorbells or had to read the log.
        let queueStats = verbose ? try RPCClient(configuration: ClientConfiguration(endpoints: [queueRPC]), reactor: reactor) : nil
        let (app, product) = try Self.flowProduct(catalogPath: catalogPath)

        let simulated = try await openDevices(client: client, app: app, product: product)

        // The paced figures' floor: the same flow over plain libzmq, run after each paced run.
        // The closed loop's too: as many devices, each starting its next flow when one ends.
        let runsClosedLoop = closedLoop || pacedRate <= 0
        let floor = self.floor && (pacedRate > 0 || runsClosedLoop) ? try FlowFloor.start(in: directory) : nil
        var closedFloor = RoundFigures(), pacedFloor = RoundFigures()

        var closed = RoundFigures(), paced = RoundFigures(), duringRenewals = RoundFigures()
        var backlogLeft: [Double] = [], backlogRates: [Double] = []
        let backlog = pacedRate > 0 && renewalBacklog > 0 ? RenewalBacklog(cluster: services, app: app, count: renewalBacklog) : nil
        var commitRates: [Double] = []
        var meter = Self.meter(services)
        // The receipt service's lag behind the closed loop's purchases.
        let probe = runsClosedLoop ? try ReceiptLagProbe(cluster: services) : nil
        // A backend following the app's notifications beside it, and beside the paced runs.
        let notificationProbe = runsClosedLoop ? try NotificationLagProbe(cluster: services, app: app) : nil
        let pacedNotificationProbe = pacedRate > 0 ? try NotificationLagProbe(cluster: services, app: app) : nil
        for round in 0..<rounds {
            commitRates.append(try DurableBench.sqliteCommits(directory: directory.url, count: 500, round: round))
            if runsClosedLoop {
                var before: UInt64?
                closed.add(
                    try await closedLoopRound(simulated, on: reactor, meter: meter, round: "\(round)", probe: probe, notificationProbe: notificationProbe) {
                        for device in simulated { _ = device.takeSteps() }
                        before = try await Self.requestsReceived(queueStats)
                    })
                if let queueStats, let before { try await Self.printRequests(since: before, queueStats, flows: flows, round: "\(round)") }
                if verbose { Self.printSteps(simulated, round: "\(round)") }
                if let floor {
                    closedFloor.add(try await Self.floorRound(floor, context: context, devices: devices, flows: flows, rate: .infinity, round: "\(round) floor", verbose: verbose))
                }
            }
            if pacedRate > 0 {
                // A warm-up at the paced rate first: the closed loop just before leaves work behind
                // (the payment queue's WAL to copy, the last doorbells), which is not this load's.
                _ = try await Self.drive(simulated, on: reactor, flows: max(devices, flows / 10), pacedAt: Double(pacedRate))
                for device in simulated { _ = device.takeSteps() }
                let before = try await Self.requestsReceived(queueStats)
                let following = pacedNotificationProbe.map { probe in Task { await probe.run() } }
                paced.add(
                    try await Self.metered(meter, flows: flows, round: "\(round) paced", verbose: verbose) {
                        try await Self.drive(simulated, on: reactor, flows: flows, pacedAt: Double(pacedRate))
                    })
                following?.cancel()
                _ = await following?.value
                if let queueStats, let before { try await Self.printRequests(since: before, queueStats, flows: flows, round: "\(round) paced") }
                if verbose { Self.printSteps(simulated, round: "\(round) paced") }
                if let floor {
                    pacedFloor.add(try await Self.floorRound(floor, context: context, devices: devices, flows: flows, rate: Double(pacedRate), round: "\(round) paced floor", verbose: verbose))
                }
                if let backlog {
                    // The same paced load while the payment queue works through a backlog of renewals.
                    try await backlog.make(round: round, in: services)
                    // The payment queue is a new process: the meter follows it.
                    meter = Self.meter(services)
                    let start = ContinuousClock.now
                    duringRenewals.add(
                        try await Self.metered(meter, flows: flows, round: "\(round) paced during renewals", verbose: verbose) {
                            try await Self.drive(simulated, on: reactor, flows: flows, pacedAt: Double(pacedRate))
                        })
                    let queueClient = try RPCClient(configuration: ClientConfiguration(endpoints: [queueRPC]), reactor: reactor)
                    backlogLeft.append(Double(try await backlog.left(round: round, client: queueClient)))
                    backlogRates.append(Double(backlog.count) / (try await backlog.drained(round: round, client: queueClient, since: start)))
                    await queueClient.shutdown()
                }
            }
        }
        let rtt = try Self.bareRoundTripMicroseconds(context: context)
        if runsClosedLoop {
            closed.printMedians(rate: "purchase_flows_per_s", p50: "purchase_flow_p50_ms", p99: "purchase_flow_p99_ms", cpu: "purchase_flow_cpu_us", steal: "purchase_flow_steal_pct")
            if floor != nil {
                closedFloor.printMedians(
                    rate: "purchase_flow_floor_per_s", p50: "purchase_flow_floor_p50_ms", p99: "purchase_flow_floor_p99_ms", cpu: "purchase_flow_floor_cpu_us",
                    steal: "purchase_flow_floor_steal_pct")
            }
        }
        if pacedRate > 0 {
            report("purchase_flow_paced_offered_per_s", Double(pacedRate), "flows/s")
            paced.printMedians(
                rate: "purchase_flow_paced_achieved_per_s", p50: "purchase_flow_paced_p50_ms", p99: "purchase_flow_paced_p99_ms", cpu: "purchase_flow_paced_cpu_us",
                steal: "purchase_flow_paced_steal_pct"
            )
            if floor != nil {
                pacedFloor.printMedians(
                    rate: "purchase_flow_paced_floor_achieved_per_s", p50: "purchase_flow_paced_floor_p50_ms", p99: "purchase_flow_paced_floor_p99_ms",
                    cpu: "purchase_flow_paced_floor_cpu_us", steal: "purchase_flow_paced_floor_steal_pct")
            }
        }
        if let backlog {
            report("renewal_backlog", Double(backlog.count), "subscriptions")
            duringRenewals.printMedians(
                rate: "purchase_flow_paced_achieved_per_s_during_renewals", p50: "purchase_flow_paced_p50_during_renewals_ms",
                p99: "purchase_flow_paced_p99_during_renewals_ms", cpu: "purchase_flow_paced_cpu_us_during_renewals",
                steal: "purchase_flow_paced_steal_pct_during_renewals")
            // Left when the paced run ended: above 0, the whole run was measured beside the backlog.
            report("renewal_backlog_left_after_paced_run", median(backlogLeft), "subscriptions")
            report("renewals_per_s_during_paced_flows", median(backlogRates), "renewals/s")
        }
        if let probe {
            let lags = probe.sortedLags
            if !lags.isEmpty {
                report("receipt_lag_p50_ms", lags[lags.count / 2], "ms")
                report("receipt_lag_p99_ms", lags[min(lags.count - 1, lags.count * 99 / 100)], "ms")
                report("receipt_lag_samples", Double(lags.count), "purchases")
            }
            await probe.shutdown()
        }
        // From commit to the backend's hands: at the paced rate (a load the machine may carry), and
        // at saturation (the closed loop: every queue behind the purchases grows while it runs).
        for (probe, suffix) in [(pacedNotificationProbe, ""), (notificationProbe, "_closed_loop")] {
            guard let probe else { continue }
            let lags = probe.sortedLags
            if !lags.isEmpty {
                report("notification_lag_p50_ms\(suffix)", lags[lags.count / 2], "ms")
                report("notification_lag_p99_ms\(suffix)", lags[min(lags.count - 1, lags.count * 99 / 100)], "ms")
                report("notification_lag_samples\(suffix)", Double(lags.count), "notifications")
            }
            await probe.shutdown()
        }
        report("purchase_flow_floor_sqlite_commits_per_s", median(commitRates), "commits/s")
        report("purchase_flow_floor_zmq_rtt_p50_us", rtt, "us")
        for device in simulated { await device.stopObserving() }
        await services.stop()

        // The same closed loop on services with their fast paths off: what the shortcuts save.
        if reference && runsClosedLoop {
            let plain = try await startServices(fastPaths: false)
            let plainClient = try RPCClient(configuration: ClientConfiguration(endpoints: [plain.gatewayEndpoints[0]]), reactor: reactor)
            let plainDevices = try await openDevices(client: plainClient, app: app, product: product)
            var figures = RoundFigures()
            for round in 0..<rounds {
                figures.add(try await closedLoopRound(plainDevices, on: reactor, meter: Self.meter(plain), round: "\(round) reference"))
            }
            figures.printMedians(
                rate: "purchase_flows_per_s_reference", p50: "purchase_flow_p50_ms_reference", p99: "purchase_flow_p99_ms_reference",
                cpu: "purchase_flow_cpu_us_reference", steal: "purchase_flow_steal_pct_reference"
            )
            for device in plainDevices { await device.stopObserving() }
            await plainClient.shutdown()
            await plain.stop()
        }

        await client.shutdown()
        await queueStats?.shutdown()
        reactor.stop()
        await reactor.join()
        context.shutdown()
        context.terminate()
        await floor?.stop()
    }

    /// The app and product every flow buys: the catalog's first app, and a consumable of it on sale
    /// in the USA.
    static func flowProduct(catalogPath: String) throws -> (app: String, product: String) {
        let store = try CatalogStore(path: catalogPath, logger: Logger(label: "bench.flow"))
        let app = store.catalog.appOrder[0]
        return (app, store.catalog.apps[app]!.products.values.first { $0.type == .consumable && $0.clearedForSale && $0.prices["USA"] != nil }!.identifier)
    }

    /// Runs `flows` flows over the devices, each device one flow at a time; flows per second.
    /// Also returns each flow's latency in nanoseconds.
    ///
    /// Without `rate`, each device starts its next flow as soon as the last one ends (a closed loop:
    /// the figures are the system's saturation throughput and the latency it has there). With `rate`,
    /// the devices together start flows on a fixed schedule of `rate` per second, each device every
    /// `devices / rate` seconds, staggered; a flow's latency counts from its scheduled start, so a
    /// flow that starts late because the one before ran long is charged the wait (no coordinated
    /// omission: a system that cannot keep up shows it in the percentiles).
    static func drive(_ devices: [Device], on reactor: Reactor, flows: Int, pacedAt rate: Double? = nil) async throws -> (Double, [UInt64]) {
        let start = DispatchTime.now().uptimeNanoseconds
        let interval = rate.map { UInt64(Double(devices.count) / $0 * 1e9) }
        let latencies = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for (index, device) in devices.enumerated() {
                let share = flows / devices.count + (index < flows % devices.count ? 1 : 0)
                // On the client's loop, as an app's single-threaded client would be: its calls leave
                // and its answers arrive without a hop through the pool (about 10% less of the bench
                // process's CPU, which shares the machine with the services it measures).
                group.addTask(executorPreference: device.client.executor) {
                    var mine: [UInt64] = []
                    mine.reserveCapacity(share)
                    for flow in 0..<share {
                        var begin = DispatchTime.now().uptimeNanoseconds
                        if let interval {
                            let scheduled = start + interval * UInt64(index) / UInt64(devices.count) + interval * UInt64(flow)
                            if scheduled > begin { await reactor.sleep(for: .nanoseconds(scheduled - begin)) }
                            begin = scheduled
                        }
                        try await device.purchaseFlow()
                        mine.append(DispatchTime.now().uptimeNanoseconds - begin)
                    }
                    return mine
                }
            }
            var all: [UInt64] = []
            for try await mine in group { all += mine }
            return all
        }
        return (Double(flows) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9), latencies)
    }

    /// One run's figures: flows per second, each flow's latency in nanoseconds, the CPU time the
    /// processes used per flow in microseconds, and the share of the machine's CPU time that its
    /// hypervisor stole meanwhile, in percent (each nil when it could not be read).
    typealias Run = (rate: Double, latencies: [UInt64], cpu: Double?, steal: Double?, split: [(name: String, cpu: Double)])

    /// Runs `drive` (a run of `flows` flows) and measures the CPU all the processes of `meter` used
    /// meanwhile; with `verbose`, prints each process's share on standard error.
    ///
    /// A virtual machine's CPUs may be taken by its hypervisor for other guests (steal time): then the
    /// same work takes longer and uses more CPU per flow, and the figures say less about StoreBus than
    /// about the host. The share stolen is printed beside them (`*_steal_pct`).
    static func metered(_ meter: CPUMeter?, flows: Int, round: String, verbose: Bool, _ drive: () async throws -> (Double, [UInt64])) async throws -> Run {
        let machineBefore = MachineCPUTime.read()
        let before = meter?.read()
        let (rate, latencies) = try await drive()
        let after = meter?.read()
        let steal = machineBefore.flatMap { before in MachineCPUTime.read().flatMap { before.stealPercent(until: $0) } }
        if verbose, let steal {
            FileHandle.standardError.write("round \(round) CPU time stolen by the hypervisor: \(String(format: "%.1f", steal))%\n".data(using: .utf8)!)
        }
        guard let meter, let before, let after else { return (rate, latencies, nil, steal, []) }
        let perFlow = zip(before, after).map { ($1 - $0) * 1e6 / Double(flows) }
        if verbose {
            let shares = zip(meter.processes, perFlow).map { "\($0.name) \(Int($1.rounded()))" }.joined(separator: ", ")
            FileHandle.standardError.write("round \(round) CPU per flow (µs): \(shares)\n".data(using: .utf8)!)
        }
        return (rate, latencies, perFlow.reduce(0, +), steal, zip(meter.processes, perFlow).map { ($0.name, $1) })
    }

    /// One round of the plain-libzmq floor (``FlowFloor``) beside a round of the flow: a warm-up of
    /// a tenth of the flows, then `flows` flows over as many devices at `rate` (`.infinity`: each
    /// device starts its next flow when one ends, as the closed loop does), its CPU metered over the
    /// floor's three processes.
    static func floorRound(_ floor: FlowFloor, context: ZeroMQ.Context, devices: Int, flows: Int, rate: Double, round: String, verbose: Bool) async throws -> Run {
        try await onThread("bench-floor") {
            _ = try floor.run(context: context, devices: devices, flows: max(devices, flows / 10), rate: rate)
        }
        let measured = try await metered(floor.meter(), flows: flows, round: round, verbose: verbose) {
            let start = DispatchTime.now().uptimeNanoseconds
            let latencies = try await onThread("bench-floor") { try floor.run(context: context, devices: devices, flows: flows, rate: rate) }
            return (Double(flows) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9), latencies)
        }
        if verbose {
            let sorted = measured.latencies.sorted()
            let (p50, p99) = (milliseconds(sorted, percentile: 50), milliseconds(sorted, percentile: 99))
            FileHandle.standardError.write(
                "round \(round) (plain libzmq): \(Int(measured.rate)) flows/s, p50 \(String(format: "%.2f", p50)) ms, p99 \(String(format: "%.2f", p99)) ms\n".data(using: .utf8)!)
        }
        return measured
    }

    /// The rounds of one kind of run: each round's rate, latency percentiles and CPU per flow,
    /// reported as medians.
    struct RoundFigures {
        private var rates: [Double] = [], p50s: [Double] = [], p99s: [Double] = [], cpus: [Double] = [], steals: [Double] = []
        /// Each process's CPU per flow, by round, in the meter's order.
        private var split: [(name: String, cpus: [Double])] = []

        /// Adds a round.
        mutating func add(_ round: Run) {
            let sorted = round.latencies.sorted()
            rates.append(round.rate)
            p50s.append(FlowBench.milliseconds(sorted, percentile: 50))
            p99s.append(FlowBench.milliseconds(sorted, percentile: 99))
            if let cpu = round.cpu { cpus.append(cpu) }
            if let steal = round.steal { steals.append(steal) }
            for (index, process) in round.split.enumerated() {
                if index == split.count { split.append((process.name, [])) }
                split[index].cpus.append(process.cpu)
            }
        }

        /// The median rate of the rounds.
        var medianRate: Double { median(rates) }

        /// Prints the medians under the given metric names (the CPU figure only when every round
        /// measured it).
        func printMedians(rate: String, p50: String, p99: String, cpu: String, steal: String) {
            report(rate, median(rates), "flows/s")
            report(p50, median(p50s), "ms")
            report(p99, median(p99s), "ms")
            if !cpus.isEmpty && cpus.count == rates.count {
                report(cpu, median(cpus), "us")
                // Where it goes: `<cpu>_<process>` (the bench is the load generator, the rest the
                // services), each the median of its own rounds.
                for process in split where process.cpus.count == rates.count {
                    report("\(cpu)_\(process.name.replacingOccurrences(of: "-", with: "_"))", median(process.cpus), "us")
                }
            }
            if !steals.isEmpty && steals.count == rates.count { report(steal, median(steals), "%") }
        }
    }

    /// A percentile of sorted nanosecond latencies, in milliseconds.
    static func milliseconds(_ sorted: [UInt64], percentile: Int) -> Double {
        Double(sorted[min(sorted.count - 1, sorted.count * percentile / 100)]) / 1e6
    }

    /// Each step's median and 99th percentile over the devices' last run, on standard error.
    static func printSteps(_ devices: [Device], round: String) {
        var steps = Array(repeating: [UInt64](), count: Device.stepNames.count)
        for device in devices {
            let mine = device.takeSteps()
            for index in steps.indices { steps[index] += mine[index] }
        }
        for (index, name) in Device.stepNames.enumerated() {
            let sorted = steps[index].sorted()
            guard !sorted.isEmpty else { continue }
            let p50 = milliseconds(sorted, percentile: 50)
            let p99 = milliseconds(sorted, percentile: 99)
            FileHandle.standardError.write("round \(round) step \(name): p50 \(String(format: "%.2f", p50)) ms, p99 \(String(format: "%.2f", p99)) ms\n".data(using: .utf8)!)
        }
    }

    /// Requests the server at `client` has received so far (nil without a client).
    static func requestsReceived(_ client: RPCClient?) async throws -> UInt64? {
        guard let client else { return nil }
        return try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init()).requestsReceived
    }

    /// Prints the requests per flow the server at `client` received since it had received `before`
    /// (the counter's own reading excluded).
    static func printRequests(since before: UInt64, _ client: RPCClient, flows: Int, round: String) async throws {
        guard let after = try await requestsReceived(client), after > before else { return }
        let received = after - before - 1
        let perFlow = String(format: "%.2f", Double(received) / Double(flows))
        FileHandle.standardError.write("round \(round) payment-queue requests per flow: \(perFlow)\n".data(using: .utf8)!)
    }

    /// The transport floor of the same run: a plain libzmq DEALER/ROUTER echo, p50 in microseconds.
    static func bareRoundTripMicroseconds(context: ZeroMQ.Context) throws -> Double {
        let endpoint = try TransportBench.startEcho(context: context) { $0 }
        let histogram = try TransportBench(body: Array(repeating: 0x61, count: 300), iterations: 2_000, window: 1).roundTrips(endpoint: endpoint, context: context)
        return Double(histogram.valueAtPercentile(50)) / 1000
    }
}
