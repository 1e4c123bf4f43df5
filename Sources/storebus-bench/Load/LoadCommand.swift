import ArgumentParser
import Foundation
import StoreBus
import StoreBusSDK
import Synchronization

/// `storebus-bench load`: simulated devices run a mix of purchase flows against a running
/// deployment through its gateways, at a fixed offered rate (each latency counted from the flow's
/// scheduled start, so that a stall is not hidden) or in a closed loop, for a duration or a count.
/// A live line while it runs; at the end, a table (and `--json`, `--report DIR` with an HTML page).
struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Load a running StoreBus deployment through its gateways with a mix of purchase flows."
    )

    @Option(name: .customLong("gateway"), help: "Gateway endpoint (repeatable). Default: STOREBUS_GATEWAY or tcp://127.0.0.1:7300.")
    var gateways: [String] = []
    @Option(name: .customLong("gateway-key"), help: "The gateways' CURVE public key (.pub file or key). Default: STOREBUS_GATEWAY_KEY, else data/keys/gateway.pub when it exists.")
    var gatewayKey: String?
    @Option(name: .customLong("api-key"), help: "The app's API key. Default: STOREBUS_API_KEY or make run's demo key.")
    var apiKey: String?
    @Option(name: .customLong("admin-key"), help: "An admin key, to approve Ask to Buy requests. Default: STOREBUS_ADMIN_KEY or make run's.")
    var adminKey: String?
    @Option(
        name: .customLong("shared-secret"),
        help: "The app's shared secret, the password of verifyReceipt for receipts holding subscriptions. Default: STOREBUS_SHARED_SECRET or make run's.")
    var sharedSecret: String?
    @Option(help: "The app's bundle identifier.")
    var app = "com.storebus.demo.puzzle"
    @Option(help: "The consumable the purchase and Ask to Buy flows buy.")
    var consumable = "com.storebus.demo.puzzle.coins100"
    @Option(help: "The product with hosted content the download flows buy.")
    var downloadable = "com.storebus.demo.puzzle.levelpack1"
    @Option(help: "The auto-renewable subscription the subscribe flows buy, and its group.")
    var subscription = "com.storebus.demo.puzzle.premium.monthly"
    @Option(name: .customLong("subscription-group"), help: "The group of --subscription.")
    var subscriptionGroup = "puzzle.premium"

    @Option(help: "Simulated devices (each an account with its queue open).")
    var devices = 16
    @Option(help: "Offered flows per second; 0 for a closed loop (each device starts its next flow when one ends).")
    var rate: Double = 20
    @Option(help: "Seconds to run.")
    var duration: Double = 60
    @Option(help: "Stop after this many flows (before --duration if sooner).")
    var count: Int?
    @Option(name: .customLong("flows-per-account"), help: "Flows a device runs for one account before it moves to a new one (a new customer).")
    var flowsPerAccount = 20
    @Option(help: "The mix of flows, kind=weight: purchase, download, ask-to-buy, restore, subscribe.")
    var mix = "purchase=60,download=10,ask-to-buy=10,restore=10,subscribe=10"

    @Flag(help: "Soak: say whether each local process's resident memory stayed within 10% after --warm-up, and whether latency drifted.")
    var soak = false
    @Option(name: .customLong("warm-up"), help: "Seconds of warm-up the soak's memory check leaves out.")
    var warmUp: Double = 20

    @Flag(help: "Run an app backend beside the devices: it follows the app's notifications with the server key, and the results give their lag.")
    var backend = false
    @Option(name: .customLong("server-key"), help: "The app's server key, for --backend. Default: STOREBUS_SERVER_KEY or make run's demo key.")
    var serverKey: String?

    @Option(help: "Write the results as JSON to this file.")
    var json: String?
    @Option(help: "Write a self-contained HTML report (report.html) and results.json into this folder.")
    var report: String?
    @Option(name: .customLong("live-interval"), help: "Seconds between live lines.")
    var liveInterval: Double = 1

    func validate() throws {
        guard devices >= 1, devices <= 10_000 else { throw ValidationError("--devices must be from 1 to 10,000") }
        guard flowsPerAccount >= 1 else { throw ValidationError("--flows-per-account must be 1 or more") }
        guard rate >= 0, rate.isFinite, duration > 0, duration.isFinite else { throw ValidationError("--rate must be 0 or more, --duration more than 0") }
        _ = try weights()
    }

    func weights() throws -> [(FlowKind, Int)] {
        var result: [(FlowKind, Int)] = []
        for item in mix.split(separator: ",") {
            let parts = item.split(separator: "=").map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let kind = FlowKind(rawValue: parts[0]), let weight = Int(parts[1]), weight >= 0 else {
                throw ValidationError("--mix: \"\(item)\" is not kind=weight (kinds: \(FlowKind.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            if weight > 0 { result.append((kind, weight)) }
        }
        guard !result.isEmpty else { throw ValidationError("--mix gives no flow a weight") }
        return result
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let endpoints = gateways.isEmpty ? (environment["STOREBUS_GATEWAY"].map { [$0] } ?? ["tcp://127.0.0.1:7300"]) : gateways
        var key: String?
        if let value = gatewayKey ?? environment["STOREBUS_GATEWAY_KEY"], !value.isEmpty {
            key = try CurveKeyFile.publicKey(fileOrKey: value)
        } else if FileManager.default.fileExists(atPath: "data/keys/gateway.pub") {
            key = try CurveKeyFile.readPublicKey(at: "data/keys/gateway.pub")
        }
        let runID = String(UInt64(Date().timeIntervalSince1970 * 1000), radix: 36)
        let downloads = FileManager.default.temporaryDirectory.appendingPathComponent("storebus-load-\(runID)")
        defer { try? FileManager.default.removeItem(at: downloads) }
        let target = LoadTarget(
            gateways: endpoints, gatewayKey: key,
            appKey: apiKey ?? environment["STOREBUS_API_KEY"] ?? "storebus-local-demo-app-key",
            adminKey: adminKey ?? environment["STOREBUS_ADMIN_KEY"] ?? "storebus-local-demo-admin-key",
            sharedSecret: sharedSecret ?? environment["STOREBUS_SHARED_SECRET"] ?? "storebus-local-puzzle-shared-secret",
            app: app, consumable: consumable, downloadable: downloadable, subscription: subscription, subscriptionGroup: subscriptionGroup,
            runID: runID, downloadDirectory: downloads
        )
        let admin = try StoreConnection(configuration: target.configuration(account: "load-admin", device: "load-admin", key: target.adminKey))
        try await admin.authenticate()
        var simulated: [LoadDevice] = []
        for index in 0..<devices { simulated.append(try LoadDevice(index: index, generation: 0, target: target, admin: admin)) }

        let follower = backend ? try LoadBackend(target: target, serverKey: serverKey ?? environment["STOREBUS_SERVER_KEY"] ?? "storebus-local-demo-server-key") : nil
        let following = follower.map { follower in Task { await follower.run() } }
        let sampler = ProcessSampler()
        let plan = FlowPlan(weights: try weights())
        let start = ContinuousClock.now
        let recorder = LoadRecorder(start: start)
        let limit = count ?? Int.max
        let end = start + .milliseconds(Int64(duration * 1000))
        let mode = rate > 0 ? "offered \(rate) flows/s" : "closed loop"
        FileHandle.standardError.write(
            Data("load: \(devices) devices, \(mode), \(Int(duration)) s, mix \(mix), gateways \(endpoints.joined(separator: ",")), \(sampler.processes.count) local processes metered\n".utf8))

        let live = Task { [liveInterval] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int64(liveInterval * 1000)))
                sampler.sample(at: (ContinuousClock.now - start).seconds)
                FileHandle.standardError.write(Data((LoadCommand.liveLine(recorder, now: .now) + "\n").utf8))
            }
        }
        let jobs = JobBoard()
        await withTaskGroup(of: Void.self) { group in
            if rate > 0 {
                // The schedule: flow k starts at start + k / rate, handed to the first free device.
                let interval = 1 / rate
                group.addTask {
                    var index = 0
                    while index < limit {
                        let scheduled = start + .milliseconds(Int64(Double(index) * interval * 1000))
                        if scheduled >= end { break }
                        try? await Task.sleep(until: scheduled, clock: .continuous)
                        await jobs.put(Job(kind: plan.kind(index), scheduled: scheduled))
                        index += 1
                    }
                    await jobs.close()
                }
            }
            for (index, first) in simulated.enumerated() {
                group.addTask { [rate, flowsPerAccount] in
                    var device = first
                    var generation = 0
                    var flows = 0
                    flowing: while true {
                        if flows == flowsPerAccount {
                            // A new customer on this device.
                            await device.close()
                            generation += 1
                            flows = 0
                            guard let next = try? LoadDevice(index: index, generation: generation, target: target, admin: admin) else { break flowing }
                            device = next
                        }
                        flows += 1
                        let job: Job
                        if rate > 0 {
                            guard let next = await jobs.take() else { break flowing }
                            job = next
                        } else {
                            let index = await jobs.claim(limit: limit)
                            guard let index, ContinuousClock.now < end else { break flowing }
                            job = Job(kind: plan.kind(index), scheduled: .now)
                        }
                        recorder.flowStarted()
                        var failure: FlowFailure?
                        do {
                            try await device.run(job.kind) { recorder.step(job.kind, $0, seconds: $1) }
                        } catch let error as FlowFailure {
                            failure = error
                        } catch {
                            failure = FlowFailure(step: "flow", code: "ERROR", message: "\(error)")
                        }
                        recorder.flowEnded(job.kind, latency: (ContinuousClock.now - job.scheduled).seconds, failure: failure)
                    }
                    await device.close()
                }
            }
        }
        let elapsed = (ContinuousClock.now - start).seconds
        live.cancel()
        if let following {
            // The last flows' notifications arrive within moments.
            try? await Task.sleep(for: .seconds(2))
            following.cancel()
            _ = await following.value
            await follower?.close()
        }
        sampler.sample(at: elapsed)
        await admin.close()

        let results = LoadResults(
            recorder: recorder.snapshot, run: .init(elapsedSeconds: elapsed, devices: devices, offeredRate: rate, mix: mix, gateways: endpoints),
            sampler: sampler, soakWarmUp: soak ? warmUp : nil, backend: follower?.figures
        )
        print(results.table())
        let encoded = try results.json()
        if let json { try encoded.write(to: URL(fileURLWithPath: json)) }
        if let report {
            let folder = URL(fileURLWithPath: report, isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try encoded.write(to: folder.appendingPathComponent("results.json"))
            try Data(results.html().utf8).write(to: folder.appendingPathComponent("report.html"))
            FileHandle.standardError.write(Data("report: \(folder.appendingPathComponent("report.html").path)\n".utf8))
        }
        if soak, results.soakVerdict?.flat == false { throw ExitCode(2) }
    }

    /// The live line: time, flows done and their rate, errors, latency so far.
    static func liveLine(_ recorder: LoadRecorder, now: ContinuousClock.Instant) -> String {
        let state = recorder.snapshot
        let elapsed = (now - recorder.start).seconds
        let recent = state.seconds.suffix(2).first
        return String(
            format: "%6.1fs  flows %d (%.1f/s, last second %d)  errors %d  in flight %d  p50 %.1f ms  p99 %.1f ms  max %.1f ms",
            elapsed, state.completed, Double(state.completed) / max(elapsed, 0.001), recent?.completed ?? 0, state.failed,
            state.started - state.completed - state.failed, state.all.milliseconds(50), state.all.milliseconds(99), state.all.maxMilliseconds
        )
    }
}

/// A flow to run, and when it was meant to start.
struct Job: Sendable {
    let kind: FlowKind
    let scheduled: ContinuousClock.Instant
}

/// Which kind of flow the k-th is: the weights spread evenly (a weighted round robin), so any
/// stretch of the run has the mix.
struct FlowPlan: Sendable {
    let cycle: [FlowKind]

    init(weights: [(FlowKind, Int)]) {
        let total = weights.reduce(0) { $0 + $1.1 }
        var credit = weights.map { _ in 0 }
        var cycle: [FlowKind] = []
        for _ in 0..<total {
            for index in weights.indices { credit[index] += weights[index].1 }
            let chosen = credit.indices.max { credit[$0] < credit[$1] }!
            credit[chosen] -= total
            cycle.append(weights[chosen].0)
        }
        self.cycle = cycle
    }

    func kind(_ index: Int) -> FlowKind { cycle[index % cycle.count] }
}

/// Flows waiting for a free device (offered rate), or the count of flows started (closed loop).
actor JobBoard {
    private var waiting: [Job] = []
    private var takers: [CheckedContinuation<Job?, Never>] = []
    private var closed = false
    private var claimed = 0

    func put(_ job: Job) {
        if !takers.isEmpty { takers.removeFirst().resume(returning: job) } else { waiting.append(job) }
    }

    func take() async -> Job? {
        if !waiting.isEmpty { return waiting.removeFirst() }
        if closed { return nil }
        return await withCheckedContinuation { takers.append($0) }
    }

    func close() {
        closed = true
        for taker in takers { taker.resume(returning: nil) }
        takers.removeAll()
    }

    func claim(limit: Int) -> Int? {
        guard claimed < limit else { return nil }
        defer { claimed += 1 }
        return claimed
    }
}
