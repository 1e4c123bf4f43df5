import Foundation
import Logging
import StoreBus
import StoreBusPostgres
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import ZeroMQ

/// Purchase flows per second with 1, 2 and 3 payment-queue instances on one PostgreSQL database
/// (`scaleout_flows_per_s_N`), each instance held to the same CPU quota, a cgroup of its own, so that
/// the instances' CPU and not the machine's two shared cores bounds the flows: how the work scales
/// when instances are added. Beside them, the CPU a flow costs PostgreSQL (its server and every
/// backend) and all the processes together, and the floor: plain commits per second on the same
/// server through the same driver.
struct ScaleOutBench {
    let flows: Int
    let devices: Int
    let rounds: Int
    let catalogPath: String
    var verbose = false
    /// Each payment-queue instance's CPU quota, in cores.
    var quota = 0.1
    /// The log's shards: enough to share out evenly among 1, 2 and 3 instances.
    static let shards: UInt32 = 12

    func run() async throws {
        let (app, product) = try FlowBench.flowProduct(catalogPath: catalogPath)
        var rates: [Int: Double] = [:]
        var quotaNote: String?
        for instances in 1...3 {
            try await PostgresServer.running { server in
                var settings = server.settings()
                settings.shards = Self.shards
                settings.leaseSeconds = 3
                let cluster = try StoreCluster(
                    logLevel: "error", gatewayCount: 1, gatewaysOnTCP: true, catalogPath: catalogPath, appKeyApps: [], queuePostgres: settings,
                    queueInstances: instances)
                var quotas: [CPUQuota] = []
                // Removed once their processes have ended, after the cluster stops.
                defer { for quota in quotas { quota.remove() } }
                try await cluster.running { cluster in
                    try await Self.waitForSplit(cluster, instances: instances)
                    do {
                        for (index, queue) in cluster.queues.enumerated() {
                            let quota = try CPUQuota(name: "storebus-bench-pq\(index + 1)", cores: quota)
                            quotas.append(quota)
                            try quota.add(queue.pid ?? 0)
                        }
                    } catch {
                        quotaNote = "\(error)"
                    }
                    do {
                        rates[instances] = try await measure(cluster, server: server, instances: instances, app: app, product: product)
                    } catch {
                        FileHandle.standardError.write("scaleout with \(instances) instances failed: \(error)\n\(cluster.logs)\n".data(using: .utf8)!)
                        throw error
                    }
                }
            }
        }
        if let quotaNote {
            FileHandle.standardError.write("scaleout: no CPU quota could be set (\(quotaNote)): the instances shared the machine freely\n".data(using: .utf8)!)
        }
        report("scaleout_instance_cpu_quota_cores", quotaNote == nil ? quota : 0, "cores")
        if let one = rates[1], let three = rates[3], one > 0 {
            report("scaleout_speedup_3_over_1", three / one, "x")
        }
    }

    /// Waits (up to a minute) until every instance owns its share of the shards.
    static func waitForSplit(_ cluster: StoreCluster, instances: Int) async throws {
        try await withRPCClient(endpoints: [cluster.queueEndpoint(0)]) { client in
            let split = await waitUntil(timeout: .seconds(60), interval: .milliseconds(200)) {
                guard let map = try? await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.getShardMap, .init()) else { return false }
                return map.shards.allSatisfy(\.leased) && Set(map.shards.map(\.owner)).count == instances
            }
            guard split else { throw TestingError("the \(instances) payment-queue instances did not share the shards out within a minute") }
        }
    }

    /// The closed loop's rounds on `cluster`, their medians reported; returns the median rate.
    func measure(_ cluster: StoreCluster, server: PostgresServer, instances: Int, app: String, product: String) async throws -> Double {
        let context = try ZeroMQ.Context()
        let reactor = Reactor(name: "sb-rpc-client", context: context)
        reactor.start()
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [cluster.gatewayEndpoints[0]]), reactor: reactor)
        let bench = FlowBench(flows: flows, devices: devices, rounds: rounds, catalogPath: catalogPath)
        let simulated = try await bench.openDevices(client: client, app: app, product: product)
        var processes: [(name: String, pid: pid_t)] = [("bench", getpid())]
        for (index, process) in ([cluster.gateways[0], cluster.catalog, cluster.receipt, cluster.download, cluster.notifications] + cluster.queues).enumerated() {
            processes.append((index < 5 ? process.name : "payment-queue-\(index - 4)", process.pid ?? 0))
        }
        let meter = CPUMeter(processes: processes, families: [("postgres", server.pid ?? 0)])
        let floor = try await Self.commitFloor(server)
        var figures = FlowBench.RoundFigures()
        var postgres: [Double] = []
        for round in 0..<rounds {
            _ = try await FlowBench.drive(simulated, on: reactor, flows: max(devices, flows / 10))
            let run = try await FlowBench.metered(meter, flows: flows, round: "scaleout \(instances) round \(round)", verbose: verbose) {
                try await FlowBench.drive(simulated, on: reactor, flows: flows)
            }
            figures.add(run)
            if let share = run.split.first(where: { $0.name == "postgres" }) { postgres.append(share.cpu) }
        }
        for device in simulated { await device.stopObserving() }
        await client.shutdown()
        reactor.stop()
        await reactor.join()
        context.shutdown()
        context.terminate()
        figures.printMedians(
            rate: "scaleout_flows_per_s_\(instances)", p50: "scaleout_flow_p50_ms_\(instances)", p99: "scaleout_flow_p99_ms_\(instances)",
            cpu: "scaleout_flow_cpu_us_\(instances)", steal: "scaleout_flow_steal_pct_\(instances)")
        if !postgres.isEmpty { report("postgres_cpu_us_per_flow_\(instances)", median(postgres), "us") }
        report("scaleout_floor_postgres_commits_per_s_\(instances)", floor, "commits/s")
        return figures.medianRate
    }

    /// The floor: one connection committing one-row transactions, one after another, on the same
    /// server (synchronous_commit on, as StoreBus's), through postgres-nio as StoreBus's engine
    /// drives it.
    static func commitFloor(_ server: PostgresServer, count: Int = 2000) async throws -> Double {
        let database = try PostgresDatabase(
            settings: server.settings(), schema: PostgresSchema(steps: [("bench_floor_v1", ["CREATE TABLE bench_floor (id BIGINT PRIMARY KEY)"])]),
            logger: Logger(label: "bench.floor"))
        defer { try? database.close() }
        let start = ContinuousClock.now
        for id in 0..<count {
            try await database.write { db in try db.execute(cached: "INSERT INTO bench_floor (id) VALUES (?)", arguments: [Int64(id)]) }
        }
        return Double(count) / ((ContinuousClock.now - start) / .seconds(1))
    }
}

/// A CPU quota: a cgroup holding the processes put in it to `cores` of CPU time, with the `cpu`
/// controller of cgroup v1 (`cpu.cfs_quota_us`) or of v2 (`cpu.max`). Needs root.
struct CPUQuota {
    let path: String
    let version: Int

    static let period = 100_000

    init(name: String, cores: Double) throws {
        let quota = Int(cores * Double(Self.period))
        let manager = FileManager.default
        if manager.fileExists(atPath: "/sys/fs/cgroup/cpu/cpu.cfs_quota_us") {
            path = "/sys/fs/cgroup/cpu/\(name)"
            version = 1
            try? manager.createDirectory(atPath: path, withIntermediateDirectories: false)
            try Self.write("\(Self.period)", to: "\(path)/cpu.cfs_period_us")
            try Self.write("\(quota)", to: "\(path)/cpu.cfs_quota_us")
        } else if manager.fileExists(atPath: "/sys/fs/cgroup/cgroup.controllers") {
            path = "/sys/fs/cgroup/\(name)"
            version = 2
            try? Self.write("+cpu", to: "/sys/fs/cgroup/cgroup.subtree_control")
            try? manager.createDirectory(atPath: path, withIntermediateDirectories: false)
            try Self.write("\(quota) \(Self.period)", to: "\(path)/cpu.max")
        } else {
            throw TestingError("no cgroup cpu controller at /sys/fs/cgroup")
        }
    }

    /// Moves process `pid` (every thread of it) into the group.
    func add(_ pid: pid_t) throws {
        try Self.write("\(pid)", to: "\(path)/cgroup.procs")
    }

    /// Removes the group (its processes have ended).
    func remove() {
        rmdir(path)
    }

    static func write(_ text: String, to file: String) throws {
        guard let handle = FileHandle(forWritingAtPath: file) else { throw TestingError("cannot open \(file) for writing") }
        defer { try? handle.close() }
        try handle.write(contentsOf: Data(text.utf8))
    }
}
