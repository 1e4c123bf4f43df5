import ArgumentParser
import Catalog
import CatalogFormat
import Foundation
import Histogram
import Logging
import StoreBus
import StoreBusServer
import StoreBusTesting
import StoreSchema
import ZeroMQ

/// The default subcommand: every benchmark.
///
/// Each figure is measured in several rounds that alternate the floor and StoreBus (floor, JSON floor,
/// RPC, floor, ...), and the median of the rounds is printed. On a shared machine a burst of noise then
/// hits one round of each, not the whole of one figure, and the ratios stay meaningful.
struct RunBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "Run every benchmark (the default).")

    @Option(help: "Round trips per round for latency figures.")
    var roundTrips = 10_000

    @Option(help: "Messages per round for throughput figures.")
    var messages = 100_000

    @Option(help: "Requests in flight for throughput figures.")
    var window = 64

    @Option(help: "Rounds per figure (the median is printed).")
    var rounds = 5

    @Option(help: "The catalog file for the catalog benchmark.")
    var catalog = "deploy/catalog/catalog.json"

    @Flag(help: "Print each round's figures on standard error.")
    var verbose = false

    @Option(help: "Purchase flows per round for the durable purchase figure.")
    var purchases = 2_000

    @Option(help: "Purchase flows per round for the flow figures (through the gateway).")
    var flows = 4_000

    @Option(help: "Simulated devices for the flow figures.")
    var devices = 64

    @Option(help: "Offered load of the paced flow figures, flows per second (0: none). The devices then start flows on a fixed schedule and each latency counts from its scheduled start.")
    var pacedRate = 2_000

    @Flag(inversion: .prefixedNo, help: "Run the closed-loop flow figures (with --no-closed-loop and a paced rate, only the paced ones: a steady load, for the CPU per flow at a fixed rate).")
    var closedLoop = true

    @Flag(
        inversion: .prefixedNo,
        help: "After each paced flow run, and after each closed-loop round, run its floor: the same flows over plain libzmq (purchase_flow_paced_floor_*, purchase_flow_floor_*).")
    var flowFloor = true

    @Flag(
        help:
            "In the flow figures, each device keeps an Observe call parked at the gateway at all times, as the SDK's PaymentQueue does, instead of asking for the callbacks it waits for once the call that causes them is answered."
    )
    var parkedObserver = false

    @Option(help: "Renewals falling due at once before a second paced flow run of each round (purchase_flow_paced_*_during_renewals_ms); 0: no such run.")
    var renewalBacklog = 25_000

    @Flag(inversion: .prefixedNo, help: "After the closed-loop flow figures, run them again on services with their fast paths off (STOREBUS_FAST_PATHS=off): the _reference figures.")
    var reference = true

    @Option(help: "Notifications queued for a local webhook per round of the webhook figure.")
    var webhooks = 5_000

    @Option(help: "Purchase flows per round for the scale-out figures (1, 2 and 3 payment-queue instances on PostgreSQL).")
    var scaleOutFlows = 1_000

    @Option(help: "Each payment-queue instance's CPU quota in the scale-out figures, in cores.")
    var scaleOutQuota = 0.1

    @Option(help: "Run only the benchmarks of these groups (transport, durable, flows, receipts, downloads, webhooks, scaleout); all when omitted.")
    var only: [String] = []

    func wants(_ group: String) -> Bool { only.isEmpty || only.contains(group) }

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .error
            return handler
        }
        // Killed (by a CI time-out, say), the bench would otherwise leave the flow benchmark's three
        // services running, holding their ports and data.
        await Leftovers.endWithSignals()
        do {
            if wants("transport") { try await transportAndRPC() }
            if wants("durable") {
                try await DurableBench(flows: purchases, concurrency: window, rounds: max(1, rounds / 2 + 1), catalogPath: catalog).run()
            }
            if wants("receipts") {
                try SigningBench(rounds: max(1, rounds / 2 + 1), verbose: verbose).run()
                try await ReceiptBench(rounds: max(1, rounds / 2 + 1), catalogPath: catalog, verbose: verbose).run()
            }
            if wants("downloads") {
                try await DownloadBench(rounds: max(1, rounds / 2 + 1), verbose: verbose).run()
            }
            if wants("webhooks") {
                try await WebhookBench(count: webhooks, rounds: max(1, rounds / 2 + 1), verbose: verbose).run()
            }
            if wants("scaleout") {
                try await ScaleOutBench(flows: scaleOutFlows, devices: 32, rounds: max(1, rounds / 2 + 1), catalogPath: catalog, verbose: verbose, quota: scaleOutQuota)
                    .run()
            }
            if wants("flows") {
                try await FlowBench(
                    flows: flows, devices: devices, rounds: max(1, rounds / 2 + 1), catalogPath: catalog, verbose: verbose, pacedRate: pacedRate, closedLoop: closedLoop,
                    parkedObserver: parkedObserver, floor: flowFloor, reference: reference, renewalBacklog: renewalBacklog
                ).run()
            }
        } catch {
            // After a signal, the flows fail as their services stop: the signal's handler ends the
            // process once they have stopped, with the signal's status, not this error's.
            await Leftovers.holdIfEnding()
            throw error
        }
        await Leftovers.holdIfEnding()
    }

    /// Slices per round of the alternating JSON floor and RPC throughput runs.
    static let slices = 5

    /// The ~300-byte JSON body of every transport and RPC benchmark.
    static let echoRequest = Storebus_Diagnostics_V1_EchoRequest.with {
        $0.payload = String(repeating: "storebus-payload-", count: 16) + "end"
    }

    func transportAndRPC() async throws {
        let context = try ZeroMQ.Context(ioThreads: 1)
        let body = try JSONCodec.encode(RunBenchmarks.echoRequest)
        let bench = TransportBench(body: body, iterations: messages, window: window)
        let latencyBench = TransportBench(body: body, iterations: roundTrips, window: 1)

        // Floor 1: bare libzmq echo, bytes in, same bytes out.
        let bareEndpoint = try TransportBench.startEcho(context: context) { $0 }
        // Floor 2: the same loop, both sides decoding and encoding with the RPC layer's JSON codec.
        let jsonEndpoint = try TransportBench.startEcho(context: context) { bytes in
            let request = (try? JSONCodec.decode(Storebus_Diagnostics_V1_EchoRequest.self, from: bytes)) ?? .init()
            return (try? JSONCodec.encode(Storebus_Diagnostics_V1_EchoResponse.with { $0.payload = request.payload })) ?? []
        }
        // StoreBus RPC: RPCServer + RPCClient, Diagnostics/Echo.
        let statistics = ServerStatistics()
        let router = BuiltinServices.router(process: "storebus-bench", services: [], statistics: statistics)
        let server = try RPCServer(
            configuration: ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"]), router: router,
            context: context, statistics: statistics, logger: Logger(label: "bench.server")
        )
        server.start()
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: server.boundEndpoints), context: context)
        let request = RunBenchmarks.echoRequest

        // The same server and client over CURVE, as a deployment's services talk: each side in a
        // context with a key pair of its own, a ZAP handler admitting the client's key; beside them
        // the bare libzmq echo over CURVE, their floor.
        let serverKeys = try CurveKeyPair.generate()
        let clientKeys = try CurveKeyPair.generate()
        let curveServerContext = try ZeroMQ.Context(ioThreads: 1, tcpSecurity: .curve(CurveLinks(keyPair: serverKeys)))
        let authenticator = try CurveAuthenticator(context: curveServerContext, allowedPublicKeys: [clientKeys.publicKey])
        let curveServer = try RPCServer(
            configuration: ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"]), router: router,
            context: curveServerContext, statistics: ServerStatistics(), logger: Logger(label: "bench.curve-server")
        )
        curveServer.start()
        let bareCurveEndpoint = try TransportBench.startEcho(context: curveServerContext) { $0 }
        let curveClientContext = try ZeroMQ.Context(
            ioThreads: 1,
            tcpSecurity: .curve(
                CurveLinks(
                    keyPair: clientKeys, serverKeys: [curveServer.boundEndpoints[0]: serverKeys.publicKey, bareCurveEndpoint: serverKeys.publicKey]
                )))
        let curveClient = try RPCClient(configuration: ClientConfiguration(endpoints: curveServer.boundEndpoints), context: curveClientContext)

        // The catalog service on the sample catalog: FetchProducts with 20 identifiers in one storefront.
        let catalogStore = try CatalogStore(path: catalog, logger: Logger(label: "bench.catalog"))
        let catalogServer = try RPCServer(
            configuration: ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"]), router: CatalogHandlers(store: catalogStore).router,
            context: context, logger: Logger(label: "bench.catalog")
        )
        catalogServer.start()
        let catalogClient = try RPCClient(configuration: ClientConfiguration(endpoints: catalogServer.boundEndpoints), context: context)
        let fetch20 = RunBenchmarks.fetch20Request(catalogStore.catalog)

        var bareRTT: [Double] = [], bareRate: [Double] = [], jsonRate: [Double] = []
        var rpcP50: [Double] = [], rpcP99: [Double] = [], rpcRate: [Double] = [], rpcLoopRate: [Double] = [], catalogRate: [Double] = []
        var bareCurveRate: [Double] = [], curveP50: [Double] = [], curveRate: [Double] = []
        for _ in 0..<rounds {
            let rtt = try await onThread("bench") { try latencyBench.roundTrips(endpoint: bareEndpoint, context: context) }
            bareRTT.append(Double(rtt.valueAtPercentile(50)) / 1000)
            bareRate.append(
                try await onThread("bench") {
                    try bench.pipelined(endpoint: bareEndpoint, context: context, encode: { body }, decode: { _ in })
                })
            let histogram = try await RunBenchmarks.echoRoundTrips(client, request, count: roundTrips)
            rpcP50.append(Double(histogram.valueAtPercentile(50)) / 1000)
            rpcP99.append(Double(histogram.valueAtPercentile(99)) / 1000)
            bareCurveRate.append(
                try await onThread("bench") {
                    try bench.pipelined(endpoint: bareCurveEndpoint, context: curveClientContext, encode: { body }, decode: { _ in })
                })
            let curveHistogram = try await RunBenchmarks.echoRoundTrips(curveClient, request, count: roundTrips)
            curveP50.append(Double(curveHistogram.valueAtPercentile(50)) / 1000)
            // The JSON floor and the RPC throughput alternate in slices, so that a slow spell of a shared
            // machine (they last seconds) weighs on both sides of the ratio alike.
            var jsonSeconds = 0.0, rpcSeconds = 0.0, loopSeconds = 0.0, curveSeconds = 0.0
            let slice = messages / RunBenchmarks.slices
            for index in 0..<RunBenchmarks.slices {
                jsonSeconds += try await onThread("bench") {
                    try bench.pipelined(
                        endpoint: jsonEndpoint, context: context, count: slice, warmUp: index == 0,
                        encode: { (try? JSONCodec.encode(RunBenchmarks.echoRequest)) ?? [] },
                        decode: { _ = try? JSONCodec.decode(Storebus_Diagnostics_V1_EchoResponse.self, from: $0) }
                    )
                }
                rpcSeconds += try await RunBenchmarks.concurrentSeconds(total: slice, concurrency: window, warmUp: index == 0) {
                    _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, request)
                }
                curveSeconds += try await RunBenchmarks.concurrentSeconds(total: slice, concurrency: window, warmUp: index == 0) {
                    _ = try await curveClient.call(Storebus_Diagnostics_V1_Diagnostics.echo, request)
                }
                loopSeconds += try await RunBenchmarks.concurrentSeconds(
                    total: slice, concurrency: window, executor: client.executor, warmUp: index == 0
                ) {
                    _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, request)
                }
            }
            let sliced = Double(slice * RunBenchmarks.slices)
            jsonRate.append(sliced / jsonSeconds)
            rpcRate.append(sliced / rpcSeconds)
            rpcLoopRate.append(sliced / loopSeconds)
            curveRate.append(sliced / curveSeconds)
            catalogRate.append(
                try await RunBenchmarks.concurrentRate(total: messages / 4, concurrency: window) {
                    _ = try await catalogClient.call(Storebus_Catalog_V1_Catalog.fetchProducts, fetch20)
                })
            if verbose {
                FileHandle.standardError.write(
                    Data(
                        String(
                            format: "round: rtt %.0f json %.0f | rpc p50 %.0f p99 %.0f rate %.0f on loop %.0f\n",
                            bareRTT.last!, jsonRate.last!, rpcP50.last!, rpcP99.last!, rpcRate.last!, rpcLoopRate.last!
                        ).utf8))
            }
        }
        report("bare_zmq_rtt_p50_us", median(bareRTT), "us")
        report("bare_zmq_pipelined_msgs_per_s", median(bareRate), "msgs/s")
        report("bare_zmq_json_pipelined_msgs_per_s", median(jsonRate), "msgs/s")
        report("rpc_rtt_p50_us", median(rpcP50), "us")
        report("rpc_rtt_p99_us", median(rpcP99), "us")
        report("rpc_pipelined_msgs_per_s", median(rpcRate), "msgs/s")
        report("rpc_pipelined_client_loop_msgs_per_s", median(rpcLoopRate), "msgs/s")
        // The targets as ratios of the floors, per round and then the median.
        report("rpc_pipelined_over_json_floor", median(zip(rpcRate, jsonRate).map { $0 / $1 }), "ratio")
        report("rpc_pipelined_client_loop_over_json_floor", median(zip(rpcLoopRate, jsonRate).map { $0 / $1 }), "ratio")
        report("rpc_rtt_p50_over_floor", median(zip(rpcP50, bareRTT).map { $0 / $1 }), "ratio")
        report("catalog_fetch20_per_s", median(catalogRate), "req/s")
        // CURVE: the bare libzmq echo over CURVE is its floor; the ratios say what encryption costs.
        report("bare_zmq_curve_pipelined_msgs_per_s", median(bareCurveRate), "msgs/s")
        report("rpc_curve_rtt_p50_us", median(curveP50), "us")
        report("rpc_curve_pipelined_msgs_per_s", median(curveRate), "msgs/s")
        report("rpc_curve_pipelined_over_plain", median(zip(curveRate, rpcRate).map { $0 / $1 }), "ratio")
        report("rpc_curve_pipelined_over_curve_floor", median(zip(curveRate, bareCurveRate).map { $0 / $1 }), "ratio")
        report("rpc_curve_rtt_p50_over_plain", median(zip(curveP50, rpcP50).map { $0 / $1 }), "ratio")

        await catalogClient.shutdown()
        await catalogServer.shutdown()

        await client.shutdown()
        await server.shutdown()
        await curveClient.shutdown()
        await curveServer.shutdown()
        curveClientContext.shutdown()
        curveServerContext.shutdown()
        authenticator.stop()
        curveClientContext.terminate()
        curveServerContext.terminate()
        context.shutdown()
        context.terminate()
    }

    /// FetchProducts for 20 identifiers of the catalog's first app (valid ones first, then made-up
    /// ones to reach 20), in the app's default storefront.
    /// Round-trip times of `count` Echo calls one at a time (nanoseconds), after a tenth as many
    /// not counted.
    static func echoRoundTrips(_ client: RPCClient, _ request: Storebus_Diagnostics_V1_EchoRequest, count: Int) async throws -> Histogram<UInt64> {
        for _ in 0..<(count / 10) {
            _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, request)
        }
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
        for _ in 0..<count {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, request)
            _ = histogram.record(DispatchTime.now().uptimeNanoseconds - start)
        }
        return histogram
    }

    static func fetch20Request(_ catalog: Catalog) -> Storebus_Catalog_V1_FetchProductsRequest {
        let app = catalog.apps[catalog.appOrder[0]]!
        var identifiers = app.products.keys.sorted()
        var filler = 0
        while identifiers.count < 20 {
            identifiers.append("\(app.bundleID).unknown\(filler)")
            filler += 1
        }
        return .with {
            $0.appBundleID = app.bundleID
            $0.productIdentifiers = Array(identifiers.prefix(20))
            $0.storefront = "FRA"
        }
    }

    /// Operations per second with `concurrency` tasks each running `operation` in a loop, after a
    /// warm-up of a tenth of `total`.
    static func concurrentRate(
        total: Int, concurrency: Int, _ operation: @escaping @Sendable () async throws -> Void
    ) async throws -> Double {
        Double(total) / (try await concurrentSeconds(total: total, concurrency: concurrency, warmUp: true, operation))
    }

    /// Seconds taken by `concurrency` tasks running `operation` `total` times between them, after a
    /// warm-up of a tenth of `total` if asked. The tasks prefer `executor` when one is given.
    static func concurrentSeconds(
        total: Int, concurrency: Int, executor: (any TaskExecutor)? = nil, warmUp: Bool,
        _ operation: @escaping @Sendable () async throws -> Void
    ) async throws -> Double {
        func run(_ count: Int) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<concurrency {
                    let share = count / concurrency + (worker < count % concurrency ? 1 : 0)
                    group.addTask(executorPreference: executor) {
                        for _ in 0..<share { try await operation() }
                    }
                }
                try await group.waitForAll()
            }
        }
        if warmUp { try await run(total / 10) }
        let start = DispatchTime.now().uptimeNanoseconds
        try await run(total)
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
}

/// The median of some figures.
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}
