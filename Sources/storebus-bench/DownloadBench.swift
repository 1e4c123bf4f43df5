import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Synchronization
import ZeroMQ

/// Hosted content downloads through a whole deployment (the SDK, a gateway, the download service,
/// all on ipc endpoints): one device downloading 256 MiB, start to FINISHED (every chunk and the
/// whole package verified, unpacked, in place), and 16 devices downloading 64 MiB each at once;
/// beside them the floor, the same package pulled in the same chunks with the same window over
/// plain libzmq DEALER/ROUTER sockets (the server reads the file, the client takes the bytes); the
/// largest resident size any StoreBus process reached; and the download service's Echo round trips
/// while a reader pulls 1 MiB chunks from it at full speed, beside the same round trips idle.
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
        let package = try cluster.packageFile(of: Self.big.productID)
        let context = try ZeroMQ.Context(ioThreads: 1, batchScheduledIO: false)
        let floorEndpoint = "ipc://\(fixture.directory.path("floor.sock"))"
        try Self.startChunkServer(context: context, endpoint: floorEndpoint, file: package)
        var bare: [Double] = [], single: [Double] = [], concurrent: [Double] = [], disk: [Double] = []
        var idleP99: [Double] = [], duringP99: [Double] = [], readerRate: [Double] = []
        var bareIdleP99: [Double] = [], bareDuringP99: [Double] = []
        let megabytes = Double(Self.big.packageLength) / Double(1 << 20)
        for round in 0..<rounds {
            bare.append(megabytes / (try Self.pullOverPlainZeroMQ(context: context, endpoint: floorEndpoint, length: Self.big.packageLength)))
            disk.append(megabytes / (try Self.writeAsDeviceDoes(package: package, into: fixture.directory.url)))
            single.append(megabytes / (try await download(cluster, fixture, pack: Self.big, devices: 1, round: round)))
            let total = Double(Self.devices) * Double(Self.mid.packageLength) / Double(1 << 20)
            concurrent.append(total / (try await download(cluster, fixture, pack: Self.mid, devices: Self.devices, round: round)))
            let bareEcho = try await onThread("bench") {
                try Self.bareEchoDuringChunks(context: context, endpoint: floorEndpoint, length: Self.big.packageLength)
            }
            bareIdleP99.append(bareEcho.idleP99)
            bareDuringP99.append(bareEcho.duringP99)
            let echo = try await echoDuringDownload(cluster, fixture, round: round)
            idleP99.append(echo.idleP99)
            duringP99.append(echo.duringP99)
            readerRate.append(echo.readerMBPerSecond)
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
        report("bare_device_write_mb_per_s", median(disk), "MB/s")
        report("download_over_bare_device_write", median(zip(single, disk).map { $0 / $1 }), "ratio")
        report("downloads_concurrent_mb_per_s", median(concurrent), "MB/s")
        report("download_peak_rss_mb", Double(peakRSS) / Double(1 << 20), "MB")
        report("rpc_rtt_p99_download_idle_us", median(idleP99), "us")
        report("rpc_rtt_p99_during_download_us", median(duringP99), "us")
        report("rpc_rtt_p99_during_download_over_idle", median(zip(duringP99, idleP99).map { $0 / $1 }), "ratio")
        report("bare_zmq_rtt_p99_chunks_idle_us", median(bareIdleP99), "us")
        report("bare_zmq_rtt_p99_during_chunks_us", median(bareDuringP99), "us")
        report("bare_zmq_rtt_p99_during_chunks_over_idle", median(zip(bareDuringP99, bareIdleP99).map { $0 / $1 }), "ratio")
        report("download_1mib_reader_mb_per_s", median(readerRate), "MB/s")
    }

    /// Echo round trips to the download service (p99, µs): idle, then while a reader of another
    /// connection pulls the big package in 1 MiB ReadChunk calls, `window` at a time, over and over.
    private func echoDuringDownload(_ cluster: StoreCluster, _ fixture: HostedContentFixture, round: Int) async throws -> (idleP99: Double, duringP99: Double, readerMBPerSecond: Double) {
        let account = "bench-echo-\(round)"
        let place = fixture.directory.url.appendingPathComponent("echo-device")
        let (device, recorder) = try await cluster.device(account, downloads: place, window: Self.window)
        defer { try? FileManager.default.removeItem(at: place) }
        let transaction = try await cluster.buy(Self.big.productID, device, recorder)
        await device.close()
        let endpoint = [cluster.directory.ipcEndpoint("download")]
        let readerRPC = try RPCClient(configuration: ClientConfiguration(endpoints: endpoint))
        let echoRPC = try RPCClient(configuration: ClientConfiguration(endpoints: endpoint))
        defer {
            Task {
                await readerRPC.shutdown(); await echoRPC.shutdown()
            }
        }
        let downloads = Storebus_Download_V1_Download.Client(readerRPC)
        let queue = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = puzzle
            $0.accountID = account
            $0.deviceID = "phone"
        }
        let refs = transaction.downloads.map { download in
            Storebus_Download_V1_DownloadRef.with {
                $0.transactionIdentifier = transaction.id
                $0.contentIdentifier = download.contentIdentifier
            }
        }
        guard let ref = refs.first else { throw ClusterFailure(description: "\(Self.big.productID) has no hosted content") }
        _ = try await downloads.startDownloads(
            .with {
                $0.queue = queue; $0.downloads = refs
            })
        let count = 2_000
        let idle = try await RunBenchmarks.echoRoundTrips(echoRPC, RunBenchmarks.echoRequest, count: count)
        let chunk: Int64 = 1 << 20
        let length = Self.big.packageLength
        let stop = StopFlag()
        let start = ContinuousClock.now
        async let pulled: Int64 = withThrowingTaskGroup(of: Int64.self) { group in
            for lane in 0..<Self.window {
                group.addTask {
                    var offset = Int64(lane) * chunk, bytes: Int64 = 0
                    while !stop.raised {
                        let answer = try await downloads.readChunk(
                            .with {
                                $0.queue = queue
                                $0.download = ref
                                $0.offset = offset
                                $0.maxBytes = UInt32(chunk)
                            })
                        bytes += Int64(answer.data.count)
                        offset += Int64(Self.window) * chunk
                        if offset >= length { offset = Int64(lane) * chunk }
                    }
                    return bytes
                }
            }
            return try await group.reduce(0, +)
        }
        // Let the reader reach full speed before measuring.
        try await Task.sleep(for: .milliseconds(300))
        let during = try await RunBenchmarks.echoRoundTrips(echoRPC, RunBenchmarks.echoRequest, count: count)
        stop.raise()
        let bytes = try await pulled
        let seconds = Double(start.duration(to: .now).components.attoseconds) / 1e18 + Double(start.duration(to: .now).components.seconds)
        return (
            Double(idle.valueAtPercentile(99)) / 1000, Double(during.valueAtPercentile(99)) / 1000,
            Double(bytes) / Double(1 << 20) / seconds
        )
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

    /// The floor's server: a ROUTER thread answering each chunk request (16 bytes: an offset and a
    /// length, at most 1 MiB) with the package's bytes from there, and echoing any other request, as
    /// the download service answers ReadChunk and Echo on one socket.
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
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                guard let message = try? router.receive() else { return } // ETERM at shutdown
                var frames = message.frames
                let request = frames[frames.count - 1]
                if request.count == 16 {
                    let (offset, wanted) = request.withUnsafeBytes { ($0.loadUnaligned(as: Int64.self), $0.loadUnaligned(fromByteOffset: 8, as: Int64.self)) }
                    let size = Int(min(max(wanted, 0), Int64(buffer.count)))
                    let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, size, off_t(offset)) }
                    frames[frames.count - 1] = Array(buffer[0..<max(0, count)])
                }
                do { try router.send(frames: frames) } catch { return }
            }
        }
        thread.start()
        ready.wait()
    }

    /// A chunk request to the floor's server.
    static func chunkRequest(offset: Int64, length: Int) -> [UInt8] {
        withUnsafeBytes(of: offset) { Array($0) } + withUnsafeBytes(of: Int64(length)) { Array($0) }
    }

    /// The floor of the Echo-during-download figure: Echo round trips (p99, µs) to the floor's chunk
    /// server, idle and while a reader on another connection pulls 1 MiB chunks from it, `window` in
    /// flight, over and over.
    static func bareEchoDuringChunks(context: ZeroMQ.Context, endpoint: String, length: Int64) throws -> (idleP99: Double, duringP99: Double) {
        let echo = TransportBench(body: (try? JSONCodec.encode(RunBenchmarks.echoRequest)) ?? [], iterations: 2_000, window: 1)
        let idle = try echo.roundTrips(endpoint: endpoint, context: context)
        let stop = StopFlag()
        let done = DispatchSemaphore(value: 0)
        let readerFailure = LockedBox<String?>(nil)
        let reader = Thread {
            defer { done.signal() }
            do {
                let dealer = try Socket(context: context, type: .dealer)
                defer { dealer.close() }
                try dealer.connect(endpoint)
                let chunk: Int64 = 1 << 20
                var next: Int64 = 0, inFlight = 0
                while !stop.raised || inFlight > 0 {
                    while !stop.raised && inFlight < window {
                        try dealer.send(frames: [chunkRequest(offset: next, length: Int(chunk))])
                        next = next + chunk >= length ? 0 : next + chunk
                        inFlight += 1
                    }
                    _ = try dealer.receive()
                    inFlight -= 1
                }
            } catch {
                readerFailure.set("\(error)")
            }
        }
        reader.start()
        Thread.sleep(forTimeInterval: 0.3)
        let during = try echo.roundTrips(endpoint: endpoint, context: context)
        stop.raise()
        done.wait()
        if let failure = readerFailure.get() { throw ClusterFailure(description: "the floor's reader failed: \(failure)") }
        return (Double(idle.valueAtPercentile(99)) / 1000, Double(during.valueAtPercentile(99)) / 1000)
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
                try dealer.send(frames: [chunkRequest(offset: next, length: chunk)])
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

    /// Seconds for the disk work the SDK does for a download, with nothing else: the package
    /// written into a new file in chunks and synced every 8 MiB and at the end, then copied by the
    /// kernel into a second file (the unpacked content) and synced, as the SDK does before FINISHED.
    /// No network, JSON or digests.
    static func writeAsDeviceDoes(package: URL, into directory: URL) throws -> Double {
        let input = open(package.path, O_RDONLY)
        guard input >= 0 else { throw ClusterFailure(description: "cannot open \(package.path)") }
        defer { close(input) }
        let partial = directory.appendingPathComponent("floor.partial"), unpacked = directory.appendingPathComponent("floor.unpacked")
        defer {
            unlink(partial.path)
            unlink(unpacked.path)
        }
        let start = DispatchTime.now().uptimeNanoseconds
        let output = open(partial.path, O_RDWR | O_CREAT | O_TRUNC, 0o644)
        guard output >= 0 else { throw ClusterFailure(description: "cannot make \(partial.path)") }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: chunk)
        var offset = 0, unsynced = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress!, chunk, off_t(offset)) }
            guard count > 0 else { break }
            guard buffer.withUnsafeBytes({ pwrite(output, $0.baseAddress!, count, off_t(offset)) }) == count else {
                throw ClusterFailure(description: "a write of the device floor failed: \(String(cString: strerror(errno)))")
            }
            offset += count
            unsynced += count
            if unsynced >= 8 << 20 {
                fsync(output)
                unsynced = 0
            }
        }
        fsync(output)
        let copy = open(unpacked.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard copy >= 0 else { throw ClusterFailure(description: "cannot make \(unpacked.path)") }
        defer { close(copy) }
        var from = 0
        while from < offset {
            let sent = sendfile(copy, output, &from, offset - from)
            guard sent > 0 else { throw ClusterFailure(description: "the device floor's copy failed: \(String(cString: strerror(errno)))") }
        }
        fsync(copy)
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

/// A flag one task raises and others read.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)

    var raised: Bool { value.load(ordering: .relaxed) }
    func raise() { value.store(true, ordering: .relaxed) }
}
