import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import ZeroMQ

/// Hosted content downloads through a whole deployment (the SDK, a gateway, the download service,
/// all on ipc endpoints): one device downloading 256 MiB, start to FINISHED (every chunk and the
/// whole package verified, unpacked, in place), and 16 devices downloading 64 MiB each at once;
/// beside them the floor, the same package pulled in the same chunks with the same window over
/// plain libzmq DEALER/ROUTER sockets (the server reads the file, the client takes the bytes); and
/// the largest resident size any StoreBus process reached.
struct DownloadBench {
    let rounds: Int
    var verbose = false
    static let chunk = 256 * 1024
    static let window = 4
    static let big = HostedContentFixture.Pack(productID: "com.storebus.demo.puzzle.benchpack256", megabytes: 256)
    static let mid = HostedContentFixture.Pack(productID: "com.storebus.demo.puzzle.benchpack64", megabytes: 64)
    static let devices = 16

    func run() async throws {
        let fixture = try HostedContentFixture(packs: [Self.big, Self.mid])
        defer { fixture.directory.remove() }
        try await fixture.cluster(logLevel: "error", gatewayCount: 1).running { cluster in
            try await measure(cluster, fixture)
        }
    }

    private func measure(_ cluster: StoreCluster, _ fixture: HostedContentFixture) async throws {
        let package = try packageFile(cluster, Self.big)
        let context = try ZeroMQ.Context(ioThreads: 1)
        let floorEndpoint = "ipc://\(fixture.directory.path("floor.sock"))"
        try Self.startChunkServer(context: context, endpoint: floorEndpoint, file: package)
        var bare: [Double] = [], single: [Double] = [], concurrent: [Double] = []
        let megabytes = Double(Self.big.packageLength) / Double(1 << 20)
        for round in 0..<rounds {
            bare.append(megabytes / (try Self.pullOverPlainZeroMQ(context: context, endpoint: floorEndpoint, length: Self.big.packageLength)))
            single.append(megabytes / (try await download(cluster, fixture, pack: Self.big, devices: 1, round: round)))
            let total = Double(Self.devices) * Double(Self.mid.packageLength) / Double(1 << 20)
            concurrent.append(total / (try await download(cluster, fixture, pack: Self.mid, devices: Self.devices, round: round)))
            if verbose {
                FileHandle.standardError.write(Data("round \(round): bare \(bare.last!) MB/s, one device \(single.last!) MB/s, \(Self.devices) devices \(concurrent.last!) MB/s\n".utf8))
            }
        }
        context.shutdown()
        let peak = [cluster.catalog, cluster.queue, cluster.receipt, cluster.download] + cluster.gateways
        let peakRSS = peak.compactMap { $0.pid.flatMap(Self.peakResidentBytes) }.max() ?? 0
        report("bare_zmq_chunk_mb_per_s", median(bare), "MB/s")
        report("download_mb_per_s", median(single), "MB/s")
        report("download_over_bare_zmq_chunk", median(zip(single, bare).map { $0 / $1 }), "ratio")
        report("downloads_concurrent_mb_per_s", median(concurrent), "MB/s")
        report("download_peak_rss_mb", Double(peakRSS) / Double(1 << 20), "MB")
    }

    /// The package the download service made of `pack`.
    private func packageFile(_ cluster: StoreCluster, _ pack: HostedContentFixture.Pack) throws -> URL {
        let packages = URL(fileURLWithPath: cluster.directory.path("download-data")).appendingPathComponent("packages")
        guard let name = try FileManager.default.contentsOfDirectory(atPath: packages.path)
            .first(where: { $0.hasPrefix(pack.productID + "-") && $0.hasSuffix(".tar") })
        else { throw ClusterFailure(description: "no package of \(pack.productID)") }
        return packages.appendingPathComponent(name)
    }

    /// Seconds for `devices` devices, each buying `pack`, to download it to FINISHED at once.
    private func download(_ cluster: StoreCluster, _ fixture: HostedContentFixture, pack: HostedContentFixture.Pack, devices: Int, round: Int) async throws -> Double {
        let place = fixture.directory.url.appendingPathComponent("devices")
        var queues: [(PaymentQueue, Recorder, PaymentTransaction)] = []
        for index in 0..<devices {
            let (queue, recorder) = try await cluster.device("bench-\(round)-\(devices)-\(index)", downloads: place.appendingPathComponent("\(index)"), window: Self.window)
            queues.append((queue, recorder, try await cluster.buy(pack.productID, queue, recorder)))
        }
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (queue, recorder, transaction) in queues {
                group.addTask {
                    try await queue.startDownloads(transaction.downloads)
                    guard await recorder.download(transaction.id, reaches: .finished, timeout: .seconds(600)) else {
                        throw ClusterFailure(description: "the download of \(transaction.id) did not finish: \(recorder.downloadStates(of: transaction.id))")
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = start.duration(to: .now)
        for (queue, _, _) in queues { await queue.close() }
        try? FileManager.default.removeItem(at: place)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// The floor's server: a ROUTER thread answering each request (an 8-byte offset) with the
    /// package's bytes from there, a chunk at most.
    static func startChunkServer(context: ZeroMQ.Context, endpoint: String, file: URL) throws {
        let descriptor = open(file.path, O_RDONLY)
        guard descriptor >= 0 else { throw ClusterFailure(description: "cannot open \(file.path)") }
        let ready = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { close(descriptor) }
            guard let router = try? Socket(context: context, type: .router), (try? router.bind(endpoint)) != nil else {
                ready.signal()
                return
            }
            defer { router.close() }
            ready.signal()
            var buffer = [UInt8](repeating: 0, count: chunk)
            while true {
                guard let message = try? router.receive() else { return }  // ETERM at shutdown
                var frames = message.frames
                let offset = frames[frames.count - 1].withUnsafeBytes { $0.loadUnaligned(as: Int64.self) }
                let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, chunk, off_t(offset)) }
                frames[frames.count - 1] = Array(buffer[0..<max(0, count)])
                do { try router.send(frames: frames) } catch { return }
            }
        }
        thread.start()
        ready.wait()
    }

    /// Seconds to pull `length` bytes in chunks, `window` requests in flight, over plain libzmq.
    static func pullOverPlainZeroMQ(context: ZeroMQ.Context, endpoint: String, length: Int64) throws -> Double {
        let dealer = try Socket(context: context, type: .dealer)
        defer { dealer.close() }
        try dealer.connect(endpoint)
        let start = DispatchTime.now().uptimeNanoseconds
        var next: Int64 = 0
        var received: Int64 = 0
        var inFlight = 0
        while received < length {
            while inFlight < window && next < length {
                try dealer.send(frames: [withUnsafeBytes(of: next) { Array($0) }])
                next += Int64(chunk)
                inFlight += 1
            }
            let reply = try dealer.receive().frames[0]
            inFlight -= 1
            guard !reply.isEmpty else { throw ClusterFailure(description: "the floor's server sent an empty chunk") }
            received += Int64(reply.count)
        }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// The largest resident size a process reached (VmHWM), in bytes.
    static func peakResidentBytes(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return nil }
        let digits = line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        return digits.map { $0 * 1024 }
    }
}
