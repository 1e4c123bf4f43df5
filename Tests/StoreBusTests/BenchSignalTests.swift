import Foundation
import StoreBusTesting
import Testing

@Suite("storebus-bench as a process: its flow figures, and a signal")
struct BenchSignalTests {
    /// The children of `parent` (process id and command line), read from /proc.
    static func children(of parent: pid_t) -> [(pid: pid_t, arguments: [String])] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> (pid_t, [String])? in
            // fields[1]: the parent's id.
            guard let pid = pid_t(entry), let fields = ProcessStat.fields(of: pid), fields.count > 1,
                pid_t(fields[1]) == parent, let arguments = commandLine(of: pid)
            else { return nil }
            return (pid, arguments)
        }
    }

    /// A process's command line (empty for a zombie), nil once it is gone.
    static func commandLine(of pid: pid_t) -> [String]? {
        FileManager.default.contents(atPath: "/proc/\(pid)/cmdline").map { raw in
            raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// Whether the process is still the one found (not reaped, its number not reused).
    static func isRunning(_ process: (pid: pid_t, arguments: [String])) -> Bool {
        commandLine(of: process.pid)?.first == process.arguments.first
    }

    @Test("SIGTERM to the bench in the middle of the flow benchmark stops its six services and removes their directory")
    func sigtermStopsServices() async throws {
        let directory = try TemporaryDirectory(prefix: "bsig")
        defer { directory.remove() }
        let bench = ServiceProcess(
            name: "storebus-bench",
            arguments: [
                "run", "--only", "flows", "--rounds", "1", "--flows", "100000000", "--paced-rate", "0",
                "--catalog", deployDirectory.appendingPathComponent("catalog/catalog.json").path
            ], logFile: directory.url.appendingPathComponent("bench.log"))
        try bench.start()
        var services: [(pid: pid_t, arguments: [String])] = []
        defer {
            // Whatever happened, nothing of this test's is left running.
            bench.signal(SIGKILL)
            for service in services where Self.isRunning(service) { kill(service.pid, SIGKILL) }
        }
        let pid = try #require(bench.pid)

        // The flow benchmark starts the catalog, the payment queue, the receipt, download and
        // notification services and the gateway, in that order, each once the one before answers.
        // (Waiting for the count to reach six, not to equal five: a slow poll sees only the end.)
        let deadline = ContinuousClock.now + .seconds(90)
        while ContinuousClock.now < deadline {
            // The floor's processes (the bench's own `flow-floor-part`) come after them.
            services = Self.children(of: pid).filter { ($0.arguments.first?.contains("storebus-") ?? false) && !$0.arguments.contains("flow-floor-part") }
            if services.count >= 6 || !bench.isRunning { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        try #require(services.count == 6, "services started: \(services.map(\.arguments)); bench output:\n\(bench.output)")
        let queue = try #require(services.first { $0.arguments[0].hasSuffix("storebus-payment-queue") })
        let dataDirectory = try #require(queue.arguments.firstIndex(of: "--data-dir").map { queue.arguments[$0 + 1] })
        let serviceDirectory = URL(fileURLWithPath: dataDirectory).deletingLastPathComponent().path
        // Mid-flow: purchases have been committed (a new database's write-ahead log grows only by
        // commits).
        let database = URL(fileURLWithPath: dataDirectory).appendingPathComponent("payment-queue.sqlite").path
        func committed() -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: database + "-wal"))?[.size] as? Int) ?? 0
        }
        while ContinuousClock.now < deadline && committed() < 256 * 1024 && bench.isRunning {
            try await Task.sleep(for: .milliseconds(50))
        }
        try #require(committed() >= 256 * 1024, "no purchases committed; bench output:\n\(bench.output)")
        // The floor's processes too, when they have started by now.
        services += Self.children(of: pid).filter { $0.arguments.contains("flow-floor-part") }

        bench.signal(SIGTERM)
        // Ended by the signal, as a bench without a handler would be: only later than that.
        let status = await bench.waitForExit(timeout: .seconds(30))
        #expect(status == SIGTERM, "bench output:\n\(bench.output)")
        for service in services {
            #expect(!Self.isRunning(service), "\(service.arguments[0]) still running")
        }
        #expect(!FileManager.default.fileExists(atPath: serviceDirectory))
    }

    @Test("a paced flow run without the closed loop prints the paced figures, their CPU per flow and their plain-libzmq floor among them, and no closed-loop ones")
    func pacedOnly() async throws {
        let directory = try TemporaryDirectory(prefix: "bpaced")
        defer { directory.remove() }
        let bench = ServiceProcess(
            name: "storebus-bench",
            arguments: [
                "run", "--only", "flows", "--rounds", "1", "--flows", "128", "--devices", "8", "--paced-rate", "100", "--no-closed-loop", "--renewal-backlog", "2000",
                "--catalog", deployDirectory.appendingPathComponent("catalog/catalog.json").path
            ], logFile: directory.url.appendingPathComponent("bench.log"))
        try bench.start()
        defer { bench.signal(SIGKILL) }
        let status = await bench.waitForExit(timeout: .seconds(120))
        try #require(status == 0, "bench output:\n\(bench.output)")
        var figures: [String: Double] = [:]
        for line in bench.output.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 3, let value = Double(fields[1]) { figures[String(fields[0])] = value }
        }
        #expect(figures["purchase_flows_per_s"] == nil && figures["purchase_flow_cpu_us"] == nil, "\(figures)")
        #expect((figures["purchase_flow_paced_achieved_per_s"] ?? 0) > 0, "\(figures)")
        // Four processes, each well over a microsecond of CPU per flow, and nowhere near a second.
        let cpu = try #require(figures["purchase_flow_paced_cpu_us"], "\(figures)")
        #expect(cpu > 4 && cpu < 1_000_000)
        // The share of the machine's CPU time its hypervisor stole meanwhile (0 on bare metal).
        let steal = try #require(figures["purchase_flow_paced_steal_pct"], "\(figures)")
        #expect(steal >= 0 && steal <= 100)
        #expect(figures["purchase_flow_steal_pct"] == nil, "\(figures)")
        // The second paced run, beside a backlog of renewals the restarted payment queue works through.
        #expect((figures["purchase_flow_paced_p99_during_renewals_ms"] ?? 0) > 0, "\(figures)")
        #expect(figures["renewal_backlog"] == 2000 && (figures["renewals_per_s_during_paced_flows"] ?? 0) > 0, "\(figures)")
        // The floor beside them: the same paced flows over plain libzmq, run to the end.
        let floorP50 = try #require(figures["purchase_flow_paced_floor_p50_ms"], "\(figures)")
        let floorP99 = try #require(figures["purchase_flow_paced_floor_p99_ms"], "\(figures)")
        #expect(floorP50 > 0 && floorP50 <= floorP99 && floorP99 < 60_000, "\(figures)")
        // Its three processes' CPU a flow, beside the paced figure's.
        let floorCPU = try #require(figures["purchase_flow_paced_floor_cpu_us"], "\(figures)")
        #expect(floorCPU > 0 && floorCPU < 1_000_000, "\(figures)")
    }

    @Test("a closed-loop flow run prints its CPU per flow by process and, beside it, its plain-libzmq floor's closed loop and CPU per flow")
    func closedLoopFloor() async throws {
        let directory = try TemporaryDirectory(prefix: "bclosed")
        defer { directory.remove() }
        let bench = ServiceProcess(
            name: "storebus-bench",
            arguments: [
                "run", "--only", "flows", "--rounds", "1", "--flows", "1000", "--devices", "8", "--paced-rate", "0", "--no-reference",
                "--catalog", deployDirectory.appendingPathComponent("catalog/catalog.json").path
            ], logFile: directory.url.appendingPathComponent("bench.log"))
        try bench.start()
        defer { bench.signal(SIGKILL) }
        let status = await bench.waitForExit(timeout: .seconds(120))
        try #require(status == 0, "bench output:\n\(bench.output)")
        var figures: [String: Double] = [:]
        for line in bench.output.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 3, let value = Double(fields[1]) { figures[String(fields[0])] = value }
        }
        let cpu = try #require(figures["purchase_flow_cpu_us"], "\(figures)")
        #expect(cpu > 4 && cpu < 1_000_000, "\(figures)")
        #expect((figures["purchase_flow_cpu_us_payment_queue"] ?? 0) > 0, "\(figures)")
        // The floor: the same devices over plain libzmq, each starting its next flow as one ends.
        #expect((figures["purchase_flow_floor_per_s"] ?? 0) > 0, "\(figures)")
        let floorP50 = try #require(figures["purchase_flow_floor_p50_ms"], "\(figures)")
        let floorP99 = try #require(figures["purchase_flow_floor_p99_ms"], "\(figures)")
        #expect(floorP50 > 0 && floorP50 <= floorP99 && floorP99 < 60_000, "\(figures)")
        // Enough flows that its three processes spend more than /proc's 10 ms ticks.
        let floorCPU = try #require(figures["purchase_flow_floor_cpu_us"], "\(figures)")
        #expect(floorCPU > 0 && floorCPU < 1_000_000, "\(figures)")
        // Its three processes, each named.
        for part in ["bench", "relay", "back"] {
            #expect(figures["purchase_flow_floor_cpu_us_\(part)"] != nil, "\(part): \(figures)")
        }
        #expect(figures["purchase_flow_paced_floor_cpu_us"] == nil, "no paced run, no paced floor: \(figures)")
    }

    @Test("the machine's CPU time from /proc/stat: busy, idle and stolen ticks, and the share stolen between two readings")
    func machineCPUTime() throws {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let before = try #require(MachineCPUTime.parse("cpu  3644438 0 411251 3115954 76607 0 42325 447252 0 0"))
        #expect(before == MachineCPUTime(busy: 3644438 + 411251 + 42325, idle: 3115954 + 76607, steal: 447252))
        let after = MachineCPUTime(busy: before.busy + 600, idle: before.idle + 200, steal: before.steal + 200)
        #expect(before.stealPercent(until: after) == 20)
        #expect(before.stealPercent(until: before) == nil, "no time passed")
        #expect(MachineCPUTime.parse("cpu0 1 2 3 4 5 6 7 8 9 10") == nil, "one CPU's line, not the machine's")
        #expect(MachineCPUTime.parse("cpu 1 2 3") == nil, "too few columns")
        #expect(MachineCPUTime.parse("cpu 1 2 3 4 5 6 7 x") == nil)
        let now = try #require(MachineCPUTime.read())
        #expect(now.busy + now.idle > 0)
    }
}
