import ArgumentParser
import Foundation
import Histogram
import Logging
import StoreBus
import StoreSchema
import ZeroMQ

/// The default subcommand: every benchmark.
struct RunBenchmarks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "Run every benchmark (the default).")

    @Option(help: "Round trips for latency figures.")
    var roundTrips = 20_000

    @Option(help: "Messages for throughput figures.")
    var messages = 200_000

    @Option(help: "Requests in flight for throughput figures.")
    var window = 64

    @Option(help: "Run only the benchmarks of these groups (transport, rpc); all when omitted.")
    var only: [String] = []

    func wants(_ group: String) -> Bool { only.isEmpty || only.contains(group) }

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .error
            return handler
        }
        try await transportAndRPC()
    }

    /// The ~300-byte JSON body of every transport and RPC benchmark.
    static let echoRequest = Storebus_Diagnostics_V1_EchoRequest.with {
        $0.payload = String(repeating: "storebus-payload-", count: 16) + "end"
    }

    func transportAndRPC() async throws {
        let context = try ZeroMQ.Context(ioThreads: 1)
        let body = try RunBenchmarks.echoRequest.jsonUTF8Bytes() as [UInt8]
        let bench = TransportBench(body: body, iterations: messages, window: window)
        let latencyBench = TransportBench(body: body, iterations: roundTrips, window: 1)

        if wants("transport") { try await transport(context: context, bench: bench, latencyBench: latencyBench, body: body) }
        if wants("rpc") { try await rpc(context: context) }
        context.shutdown()
        context.terminate()
    }

    func transport(context: ZeroMQ.Context, bench: TransportBench, latencyBench: TransportBench, body: [UInt8]) async throws {
        // Floor 1: bare libzmq echo, bytes in, same bytes out.
        let bareEndpoint = try TransportBench.startEcho(context: context) { $0 }
        let bareRTT = try await onThread("bench") { try latencyBench.roundTrips(endpoint: bareEndpoint, context: context) }
        report("bare_zmq_rtt_p50_us", Double(bareRTT.valueAtPercentile(50)) / 1000, "us")
        let bareRate = try await onThread("bench") {
            try bench.pipelined(endpoint: bareEndpoint, context: context, encode: { body }, decode: { _ in })
        }
        report("bare_zmq_pipelined_msgs_per_s", bareRate, "msgs/s")

        // Floor 2: the same loop, both sides decoding and encoding with the RPC layer's JSON codec.
        let jsonEndpoint = try TransportBench.startEcho(context: context) { bytes in
            let request = (try? JSONCodec.decode(Storebus_Diagnostics_V1_EchoRequest.self, from: bytes)) ?? .init()
            return (try? JSONCodec.encode(Storebus_Diagnostics_V1_EchoResponse.with { $0.payload = request.payload })) ?? []
        }
        let jsonRate = try await onThread("bench") {
            try bench.pipelined(
                endpoint: jsonEndpoint, context: context,
                encode: { (try? JSONCodec.encode(RunBenchmarks.echoRequest)) ?? [] },
                decode: { _ = try? JSONCodec.decode(Storebus_Diagnostics_V1_EchoResponse.self, from: $0) }
            )
        }
        report("bare_zmq_json_pipelined_msgs_per_s", jsonRate, "msgs/s")
    }

    func rpc(context: ZeroMQ.Context) async throws {
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
        for _ in 0..<(roundTrips / 10) {
            _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, request)
        }
        var rpcRTT = Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
        for _ in 0..<roundTrips {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, request)
            _ = rpcRTT.record(DispatchTime.now().uptimeNanoseconds - start)
        }
        report("rpc_rtt_p50_us", Double(rpcRTT.valueAtPercentile(50)) / 1000, "us")
        report("rpc_rtt_p99_us", Double(rpcRTT.valueAtPercentile(99)) / 1000, "us")

        let rpcRate = try await RunBenchmarks.concurrentRate(total: messages, concurrency: window) {
            _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, request)
        }
        report("rpc_pipelined_msgs_per_s", rpcRate, "msgs/s")

        await client.shutdown()
        await server.shutdown()
    }

    /// Operations per second with `concurrency` tasks each running `operation` in a loop, after a
    /// warm-up of a tenth of `total`.
    static func concurrentRate(total: Int, concurrency: Int, _ operation: @escaping @Sendable () async throws -> Void) async throws -> Double {
        func run(_ count: Int) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<concurrency {
                    let share = count / concurrency + (worker < count % concurrency ? 1 : 0)
                    group.addTask {
                        for _ in 0..<share { try await operation() }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await run(total / 10)
        let start = DispatchTime.now().uptimeNanoseconds
        try await run(total)
        return Double(total) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
}
