import Catalog
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
        afterWarmUp: () async throws -> Void = {}
    ) async throws -> Run {
        _ = try await Self.drive(devices, on: reactor, flows: max(devices.count, flows / 10))
        try await afterWarmUp()
        let probing = probe.map { probe in Task { await probe.run() } }
        defer { probing?.cancel() }
        return try await Self.metered(meter, flows: flows, round: round, verbose: verbose) {
            try await Self.drive(devices, on: reactor, flows: flows)
        }
    }

    /// The CPU meter of the bench and a cluster's services.
    static func meter(_ cluster: StoreCluster) -> CPUMeter? {
        guard let gatewayPID = cluster.gateways[0].pid, let queuePID = cluster.queue.pid, let catalogPID = cluster.catalog.pid,
              let receiptPID = cluster.receipt.pid
        else { return nil }
        return CPUMeter(processes: [("bench", getpid()), ("gateway", gatewayPID), ("payment-queue", queuePID), ("catalog", catalogPID), ("receipt", receiptPID)])
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
        let store = try CatalogStore(path: catalogPath, logger: Logger(label: "bench.flow"))
        let app = store.catalog.appOrder[0]
        let product = store.catalog.apps[app]!.products.values.first { $0.type == .consumable && $0.clearedForSale && $0.prices["USA"] != nil }!.identifier

        let simulated = try await openDevices(client: client, app: app, product: product)

        // The paced figures' floor: the same flow over plain libzmq, run after each paced run.
        let floor = pacedRate > 0 && self.floor ? try FlowFloor.start(in: directory) : nil
        var floorP50s: [Double] = [], floorP99s: [Double] = []

        var closed = RoundFigures(), paced = RoundFigures()
        var commitRates: [Double] = []
        let meter = Self.meter(services)
        // The paced figures alone only when asked for and there are paced figures.
        let runsClosedLoop = closedLoop || pacedRate <= 0
        // The receipt service's lag behind the closed loop's purchases.
        let probe = runsClosedLoop ? try ReceiptLagProbe(cluster: services) : nil
        for round in 0..<rounds {
            commitRates.append(try DurableBench.sqliteCommits(directory: directory.url, count: 500, round: round))
            if runsClosedLoop {
                var before: UInt64?
                closed.add(try await closedLoopRound(simulated, on: reactor, meter: meter, round: "\(round)", probe: probe) {
                    for device in simulated { _ = device.takeSteps() }
                    before = try await Self.requestsReceived(queueStats)
                })
                if let queueStats, let before { try await Self.printRequests(since: before, queueStats, flows: flows, round: "\(round)") }
                if verbose { Self.printSteps(simulated, round: "\(round)") }
            }
            if pacedRate > 0 {
                // A warm-up at the paced rate first: the closed loop just before leaves work behind
                // (the payment queue's WAL to copy, the last doorbells), which is not this load's.
                _ = try await Self.drive(simulated, on: reactor, flows: max(devices, flows / 10), pacedAt: Double(pacedRate))
                for device in simulated { _ = device.takeSteps() }
                let before = try await Self.requestsReceived(queueStats)
                paced.add(try await Self.metered(meter, flows: flows, round: "\(round) paced", verbose: verbose) {
                    try await Self.drive(simulated, on: reactor, flows: flows, pacedAt: Double(pacedRate))
                })
                if let queueStats, let before { try await Self.printRequests(since: before, queueStats, flows: flows, round: "\(round) paced") }
                if verbose { Self.printSteps(simulated, round: "\(round) paced") }
                if let floor {
                    let (devices, flows, rate) = (devices, flows, Double(pacedRate))
                    let sorted = try await onThread("bench-floor") {
                        _ = try floor.run(context: context, devices: devices, flows: max(devices, flows / 10), rate: rate)
                        return try floor.run(context: context, devices: devices, flows: flows, rate: rate).sorted()
                    }
                    floorP50s.append(Self.milliseconds(sorted, percentile: 50))
                    floorP99s.append(Self.milliseconds(sorted, percentile: 99))
                    if verbose {
                        FileHandle.standardError.write(
                            "round \(round) paced floor (plain libzmq): p50 \(String(format: "%.2f", floorP50s.last!)) ms, p99 \(String(format: "%.2f", floorP99s.last!)) ms\n".data(using: .utf8)!
                        )
                    }
                }
            }
        }
        let rtt = try Self.bareRoundTripMicroseconds(context: context)
        if runsClosedLoop {
            closed.printMedians(rate: "purchase_flows_per_s", p50: "purchase_flow_p50_ms", p99: "purchase_flow_p99_ms", cpu: "purchase_flow_cpu_us", steal: "purchase_flow_steal_pct")
        }
        if pacedRate > 0 {
            report("purchase_flow_paced_offered_per_s", Double(pacedRate), "flows/s")
            paced.printMedians(
                rate: "purchase_flow_paced_achieved_per_s", p50: "purchase_flow_paced_p50_ms", p99: "purchase_flow_paced_p99_ms", cpu: "purchase_flow_paced_cpu_us",
                steal: "purchase_flow_paced_steal_pct"
            )
            report("purchase_flow_paced_floor_p50_ms", median(floorP50s), "ms")
            report("purchase_flow_paced_floor_p99_ms", median(floorP99s), "ms")
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
    typealias Run = (rate: Double, latencies: [UInt64], cpu: Double?, steal: Double?)

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
        guard let meter, let before, let after else { return (rate, latencies, nil, steal) }
        let perFlow = zip(before, after).map { ($1 - $0) * 1e6 / Double(flows) }
        if verbose {
            let shares = zip(meter.processes, perFlow).map { "\($0.name) \(Int($1.rounded()))" }.joined(separator: ", ")
            FileHandle.standardError.write("round \(round) CPU per flow (µs): \(shares)\n".data(using: .utf8)!)
        }
        return (rate, latencies, perFlow.reduce(0, +), steal)
    }

    /// The rounds of one kind of run: each round's rate, latency percentiles and CPU per flow,
    /// reported as medians.
    struct RoundFigures {
        private var rates: [Double] = [], p50s: [Double] = [], p99s: [Double] = [], cpus: [Double] = [], steals: [Double] = []

        /// Adds a round.
        mutating func add(_ round: Run) {
            let sorted = round.latencies.sorted()
            rates.append(round.rate)
            p50s.append(FlowBench.milliseconds(sorted, percentile: 50))
            p99s.append(FlowBench.milliseconds(sorted, percentile: 99))
            if let cpu = round.cpu { cpus.append(cpu) }
            if let steal = round.steal { steals.append(steal) }
        }

        /// Prints the medians under the given metric names (the CPU figure only when every round
        /// measured it).
        func printMedians(rate: String, p50: String, p99: String, cpu: String, steal: String) {
            report(rate, median(rates), "flows/s")
            report(p50, median(p50s), "ms")
            report(p99, median(p99s), "ms")
            if !cpus.isEmpty && cpus.count == rates.count { report(cpu, median(cpus), "us") }
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

extension Reactor {
    /// Suspends the calling task for `duration`, woken by a timer of this reactor's loop.
    ///
    /// The paced runs start 2,000 flows a second. `Task.sleep` waits on a dispatch timer: a manager
    /// thread wakes a pool thread, which hands the task back to the client's loop. A loop timer wakes
    /// the loop itself, and the bench process (which shares the machine with the services it
    /// measures) used about 15% less CPU in the paced run: 184 to 185 µs a flow against 216 to 222.
    /// It fires up to a millisecond late (the loop's poll timeout is in whole milliseconds), and a
    /// flow's latency counts from its scheduled start, so the lateness is charged to the figures.
    func sleep(for duration: Duration) async {
        let deadline = ContinuousClock.now + duration
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let accepted = execute { [self] in
                _ = schedule(at: deadline) { continuation.resume() }
            }
            if !accepted { continuation.resume() }
        }
    }
}

/// One simulated device: a session, its observer, and the flow it repeats.
///
/// Its flow's calls send bodies encoded once, when they are the same every time, and it reads only
/// the members of the answers it checks (``FlowAnswers``), as a load generator does: decoding every
/// answer in full took about a quarter of the bench process's CPU in a profile, CPU taken from the
/// two cores that the services it measures share with it.
///
/// By default a device asks for the callback it waits for once the call that causes it has been
/// answered: Observe calls after its position until the callback is among those it brought. With
/// `parked`, it observes as the SDK's PaymentQueue does: one Observe call waits at the gateway at
/// all times (the long-poll chain, each call acknowledging what the last one brought), the flow's
/// own calls go out beside it, and the purchased and removed steps wait for their callback to have
/// arrived on the chain, before the call that caused it was answered or after.
final class Device: Sendable {
    let client: RPCClient
    let options: CallOptions
    let queue: Storebus_PaymentQueue_V1_QueueRef
    let product: String
    /// The flow's FetchProducts and AddPayment requests, the same for every flow of the device.
    let fetchBody: [UInt8]
    let addBody: [UInt8]
    /// The Observe and FinishTransaction requests, each swift-protobuf's encoding with one value put
    /// in (the position, the transaction): encoding the whole message each time took a tenth of the
    /// bench's instructions.
    let observeBody: BodyTemplate
    let finishBody: BodyTemplate
    /// Callbacks heard and not yet waited for, and the flow's wait, if it is waiting.
    private let inbox = Mutex(Inbox())
    private let observer = Mutex<Task<Void, Never>?>(nil)
    /// The position acknowledged so far, when the device observes without a parked call.
    private let position: Mutex<UInt64>
    /// Flows started, which numbers their payments' idempotency keys.
    private let flowsStarted = Atomic<UInt64>(0)
    /// Each step's latencies (ns) since the last `takeSteps`, in `stepNames` order.
    private let steps = Mutex(Array(repeating: [UInt64](), count: Device.stepNames.count))
    static let stepNames = ["fetch", "add", "purchased", "finish", "removed"]

    /// A callback a flow waits for: a transaction purchased, or removed from the queue.
    struct Arrival: Hashable {
        enum Kind { case purchased, removed }
        let kind: Kind
        let transaction: String
    }

    struct Inbox {
        var heard: Set<Arrival> = []
        var waiting: (arrival: Arrival, continuation: CheckedContinuation<Void, any Error>)?
        /// Why the chain ended (the bench is stopping, or a call failed); nil while it runs.
        var ended: (any Error)?
    }

    func takeSteps() -> [[UInt64]] {
        steps.withLock { steps in
            defer { steps = Array(repeating: [], count: Device.stepNames.count) }
            return steps
        }
    }

    private func timed<T>(_ step: Int, _ body: () async throws -> T) async rethrows -> T {
        let begin = DispatchTime.now().uptimeNanoseconds
        let result = try await body()
        let elapsed = DispatchTime.now().uptimeNanoseconds - begin
        steps.withLock { $0[step].append(elapsed) }
        return result
    }

    private init(client: RPCClient, options: CallOptions, queue: Storebus_PaymentQueue_V1_QueueRef, product: String, position: UInt64) throws {
        self.client = client
        self.options = options
        self.queue = queue
        self.product = product
        self.position = Mutex(position)
        fetchBody = try JSONCodec.encode(Storebus_Catalog_V1_FetchProductsRequest.with {
            $0.appBundleID = queue.appBundleID
            $0.productIdentifiers = [product]
        })
        addBody = try JSONCodec.encode(Storebus_PaymentQueue_V1_AddPaymentRequest.with {
            $0.queue = queue
            $0.payment = .with { $0.productIdentifier = product; $0.quantity = 1 }
        })
        let seqSentinel = UInt64(9_876_543_210_123)
        observeBody = try BodyTemplate(JSONCodec.encode(Storebus_Gateway_V1_ObserveRequest.with {
            $0.afterSeq = seqSentinel
            $0.waitMs = 5_000
        }), around: String(seqSentinel))
        let idSentinel = "flow-bench-transaction-sentinel"
        finishBody = try BodyTemplate(JSONCodec.encode(Storebus_PaymentQueue_V1_FinishTransactionRequest.with {
            $0.queue = queue
            $0.transactionIdentifier = idSentinel
        }), around: idSentinel)
    }

    /// Calls `method` with an encoded request; the answer's body on OK, its error otherwise.
    private func call<Request, Response>(_ method: MethodDescriptor<Request, Response>, body: [UInt8], options: CallOptions) async throws -> [UInt8] {
        let response = try await client.callRaw(path: method.path, idempotent: method.idempotent, body: body, options: options)
        if let error = response.error { throw error }
        return response.body
    }

    /// An Observe call after `position`: the events it brought, as ``FlowAnswers/observed(_:)`` reads them.
    private func observeCall(after position: UInt64) async throws -> [(seq: UInt64, arrivals: [Arrival])] {
        // A position of 0 reads "0" where proto3 JSON would leave the member out: the same request.
        let body = observeBody.with(String(position).utf8)
        return try FlowAnswers.observed(try await call(Storebus_Gateway_V1_Gateway.observe, body: body, options: options))
    }

    /// Authenticates and attaches (the launch replay) as an app would; with `parked`, starts the
    /// observer's long-poll chain.
    static func open(client: RPCClient, app: String, account: String, product: String, parked: Bool) async throws -> Device {
        let session = try await client.call(Storebus_Gateway_V1_Gateway.authenticate, .with {
            $0.apiKey = appKey
            $0.appBundleID = app
            $0.accountID = account
            $0.deviceID = "device"
        })
        let options = CallOptions(timeout: .seconds(30), metadata: ["session": session.sessionID])
        let replay = try await client.call(Storebus_Gateway_V1_Gateway.observe, .with { $0.replay = true }, options: options)
        let device = try Device(client: client, options: options, queue: session.queue, product: product, position: replay.headSeq)
        if parked {
            let position = replay.headSeq
            device.observer.withLock { observer in
                observer = Task(executorPreference: client.executor) { await device.observe(after: position) }
            }
        }
        return device
    }

    /// Ends the observer's chain (its waiting call is cancelled) and waits for it.
    func stopObserving() async {
        let task = observer.withLock { $0 }
        task?.cancel()
        await task?.value
    }

    /// The long-poll chain: each call acknowledges the position reached and waits for what follows.
    /// When it ends (cancelled, or a call failed), a flow waiting on it, or waiting later, gets why.
    private func observe(after start: UInt64) async {
        var acknowledged = start
        var failure: any Error = CancellationError()
        while !Task.isCancelled {
            let events: [(seq: UInt64, arrivals: [Arrival])]
            do {
                events = try await observeCall(after: acknowledged)
            } catch {
                failure = error
                break
            }
            var heard: [Arrival] = []
            for event in events {
                heard += event.arrivals
                acknowledged = event.seq
            }
            let resumed = inbox.withLock { inbox -> CheckedContinuation<Void, any Error>? in
                inbox.heard.formUnion(heard)
                guard let waiting = inbox.waiting, inbox.heard.remove(waiting.arrival) != nil else { return nil }
                inbox.waiting = nil
                return waiting.continuation
            }
            resumed?.resume()
        }
        let waiting = inbox.withLock { inbox in
            inbox.ended = failure
            defer { inbox.waiting = nil }
            return inbox.waiting
        }
        waiting?.continuation.resume(throwing: failure)
    }

    /// Returns once the observer has heard `arrival` (at once if it already has).
    private func wait(for arrival: Arrival) async throws {
        guard observer.withLock({ $0 != nil }) else { return try await observe(until: arrival) }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome = inbox.withLock { inbox -> Result<Bool, any Error> in
                if inbox.heard.remove(arrival) != nil { return .success(true) }
                if let ended = inbox.ended { return .failure(ended) }
                inbox.waiting = (arrival, continuation)
                return .success(false)
            }
            switch outcome {
            case .success(true): continuation.resume()
            case .success(false): break
            case .failure(let error): continuation.resume(throwing: error)
            }
        }
    }

    /// Fetch, add, purchased callback, finish, removed callback.
    func purchaseFlow() async throws {
        let products = try await timed(0) {
            try await call(Storebus_Catalog_V1_Catalog.fetchProducts, body: fetchBody, options: options)
        }
        try FlowAnswers.checkListed(product, in: products)
        var addOptions = options
        // Unique per payment of this device's account in this run's fresh database. (Foundation's
        // UUID() opens, reads and closes /dev/urandom each time: three system calls a flow in the
        // process that shares the two cores with the services it measures.)
        addOptions.idempotencyKey = "flow-\(flowsStarted.add(1, ordering: .relaxed).newValue)"
        let added = try await timed(1) {
            try await call(Storebus_PaymentQueue_V1_PaymentQueue.addPayment, body: addBody, options: addOptions)
        }
        let id = try FlowAnswers.transactionIdentifier(added)
        try await timed(2) { try await wait(for: Arrival(kind: .purchased, transaction: id)) }
        // The identifier was read as a plain string (no escapes, no quotes): it goes in as it is.
        let finish = finishBody.with(id.utf8)
        _ = try await timed(3) {
            try await call(Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction, body: finish, options: options)
        }
        try await timed(4) { try await wait(for: Arrival(kind: .removed, transaction: id)) }
    }

    /// Without a parked call: Observe calls after the position reached until one brings `arrival`.
    private func observe(until arrival: Arrival) async throws {
        while true {
            let after = position.withLock { $0 }
            var found = false
            for event in try await observeCall(after: after) {
                found = found || event.arrivals.contains(arrival)
                position.withLock { $0 = event.seq }
            }
            if found { return }
        }
    }
}

/// A request body encoded once, with one value's place in it left open: the bytes before and after
/// a sentinel value, which occurs in the encoding exactly once.
struct BodyTemplate: Sendable {
    let prefix: [UInt8]
    let suffix: [UInt8]

    init(_ encoded: [UInt8], around sentinel: String) throws {
        let needle = Array(sentinel.utf8)
        let starts = encoded.indices.filter { encoded[$0...].starts(with: needle) }
        guard starts.count == 1, let start = starts.first else {
            throw FlowAnswers.Unexpected(description: "the sentinel \(sentinel) is not in the encoded request once: \(String(decoding: encoded, as: UTF8.self))")
        }
        prefix = Array(encoded[..<start])
        suffix = Array(encoded[(start + needle.count)...])
    }

    /// The body with `value`'s bytes in the sentinel's place.
    func with(_ value: some Collection<UInt8>) -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(prefix.count + value.count + suffix.count)
        body += prefix
        body += value
        body += suffix
        return body
    }
}

/// The members of the gateway's answers that a flow checks, read with ``JSONScanner`` from their
/// proto3 JSON. An answer without them, or not well-formed, ends the run with an error naming it.
enum FlowAnswers {
    struct Unexpected: Error, CustomStringConvertible {
        let description: String
    }

    /// Throws unless the FetchProductsResponse `json` lists `product` first.
    static func checkListed(_ product: String, in json: [UInt8]) throws {
        guard let products = JSONScanner.member("products", of: json, in: json.indices),
              let first = JSONScanner.elements(of: json, in: products)?.first,
              let identifier = JSONScanner.member("productIdentifier", of: json, in: first),
              JSONScanner.plainString(json, identifier) == Array(product.utf8)
        else { throw unexpected("FetchProducts", json) }
    }

    /// The identifier of the transaction in the AddPaymentResponse `json`.
    static func transactionIdentifier(_ json: [UInt8]) throws -> String {
        // The answer's members and the transaction's in one pass.
        guard let fields = JSONScanner.members(of: json, in: json.indices, andOf: "transaction")?.nested,
              let id = identifier(json, fields)
        else { throw unexpected("AddPayment", json) }
        return id
    }

    /// The events of the ObserveResponse `json`: each one's seq and the callbacks flows wait for in
    /// it (transactions updated to PURCHASED, transactions removed).
    static func observed(_ json: [UInt8]) throws -> [(seq: UInt64, arrivals: [Device.Arrival])] {
        // Only the members read are picked out of each object, the whole text checked all the same
        // (no String is made of any other member's name: a fifth of the bench's instructions did).
        // An answer without events leaves the member out (proto3 JSON omits empty repeated fields).
        guard let response = JSONScanner.values(of: json, in: json.indices, named: Names.response) else { throw unexpected("Observe", json) }
        guard let events = response[0] else { return [] }
        guard let elements = JSONScanner.objectValues(of: json, in: events, named: Names.event) else { throw unexpected("Observe", json) }
        return try elements.map { members in
            guard let seq = members[0].flatMap({ JSONScanner.unsigned(json, $0) }) else { throw unexpected("Observe", json) }
            var arrivals: [Device.Arrival] = []
            for (slot, removed) in [(1, false), (2, true)] {
                guard let callback = members[slot] else { continue }
                // A callback with no transactions (none here) omits the member, as above.
                guard let list = JSONScanner.values(of: json, in: callback, named: Names.callback) else { throw unexpected("Observe", json) }
                guard let transactions = list[0] else { continue }
                guard let items = JSONScanner.objectValues(of: json, in: transactions, named: Names.transaction) else { throw unexpected("Observe", json) }
                for fields in items {
                    guard let id = fields[0].flatMap({ JSONScanner.plainString(json, $0) }) else { throw unexpected("Observe", json) }
                    if removed {
                        arrivals.append(.init(kind: .removed, transaction: String(decoding: id, as: UTF8.self)))
                    } else if let state = fields[1], JSONScanner.plainString(json, state) == Names.purchased {
                        arrivals.append(.init(kind: .purchased, transaction: String(decoding: id, as: UTF8.self)))
                    }
                }
            }
            return (seq, arrivals)
        }
    }

    /// The member names `observed` picks, and the state it looks for.
    private enum Names {
        static let response = [Array("events".utf8)]
        static let event = ["seq", "updatedTransactions", "removedTransactions"].map { Array($0.utf8) }
        static let callback = [Array("transactions".utf8)]
        static let transaction = ["transactionIdentifier", "transactionState"].map { Array($0.utf8) }
        static let purchased = Array("TRANSACTION_STATE_PURCHASED".utf8)
    }

    /// The transactionIdentifier among the members of a PaymentTransaction object.
    private static func identifier(_ json: [UInt8], _ fields: [(name: String, value: Range<Int>)]) -> String? {
        guard let value = fields.first(where: { $0.name == "transactionIdentifier" }),
              let bytes = JSONScanner.plainString(json, value.value)
        else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func unexpected(_ call: String, _ json: [UInt8]) -> Unexpected {
        Unexpected(description: "the gateway's \(call) answer lacks what the flow checks: \(String(decoding: json.prefix(300), as: UTF8.self))")
    }
}
