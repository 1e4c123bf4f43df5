import ContentPackage
import Crypto
import Foundation
import Logging
import StoreBus
import StoreSchema
import Synchronization

/// The device side of downloads: pulls each active download's package in chunks through the
/// gateway, keeping at most `downloadWindow` reads in flight (credit-based flow control: memory
/// stays bounded whatever the package's size or the link's speed), writes them into a partial file
/// in the download directory, checks each chunk's digest and then the whole package's SHA-256,
/// unpacks it and moves it into place in one rename, and reports the download finished.
///
/// What was written survives a stop, a crash or a full disk: a partial file and, beside it, what it
/// is (`.partial.json`: content version, package digest and length, and the bytes kept, written
/// after an fsync). Resuming continues from the bytes kept; a content version that changed
/// meanwhile starts again from zero.
final class DownloadEngine: Sendable {
    struct Key: Hashable, Sendable {
        var transaction: String
        var content: String
    }

    /// A running transfer.
    private struct Running {
        var id: UInt64
        var task: Task<Void, Never>
        /// The queue position of the start or resume that began it: callbacks at or before it are older news.
        var since: UInt64
        let meter: Meter
    }

    /// What a transfer knows of its progress, for the ticks.
    final class Meter: Sendable {
        struct Reading {
            var done: Int64 = 0
            var length: Int64 = 0
            var started = ContinuousClock.now
            var startDone: Int64 = -1
        }

        let reading = Mutex(Reading())
    }

    /// What a partial file holds.
    struct Sidecar: Codable, Equatable {
        var version: String
        var sha256: String
        var length: Int64
        /// Bytes from the start written and synced.
        var kept: Int64
        /// The digest of the package's pieces' digests and the pieces' size, when the service gave
        /// them (absent from sidecars written before they were kept).
        var piecesSHA256: String?
        var pieceBytes: Int64?
    }

    private let connection: StoreConnection
    private let running = Mutex<[Key: Running]>([:])
    private let nextID = Atomic<UInt64>(0)
    private let logger: Logger
    /// Hands a callback of the queue's own making (progress ticks, failures) to the queue's listeners.
    let sink = Mutex<(@Sendable (PaymentQueueCallback.Event) -> Void)?>(nil)

    init(connection: StoreConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    func deliver(_ event: PaymentQueueCallback.Event) {
        sink.withLock { $0 }?(event)
    }

    private var configuration: StoreConfiguration { connection.configuration }

    // MARK: Files

    static func safe(_ text: String) -> String {
        String(text.unicodeScalars.map { CharacterSet.alphanumerics.contains($0) || $0 == "." || $0 == "-" ? Character($0) : "_" }.prefix(120))
    }

    func folder(_ key: Key) -> URL {
        configuration.downloadDirectory.appendingPathComponent("\(Self.safe(key.transaction))-\(Self.safe(key.content))")
    }

    func partial(_ key: Key) -> URL { folder(key).appendingPathExtension("partial") }
    /// Where the package is unpacked before it is renamed into place (hidden beside it).
    func unpacking(_ key: Key) -> URL {
        let final = folder(key)
        return final.deletingLastPathComponent().appendingPathComponent(".\(final.lastPathComponent).unpacking")
    }
    func sidecar(_ key: Key) -> URL { folder(key).appendingPathExtension("partial.json") }

    func loadSidecar(_ key: Key) -> Sidecar? { Self.loadSidecar(sidecar(key)) }

    static func loadSidecar(_ url: URL) -> Sidecar? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        return try? JSONDecoder().decode(Sidecar.self, from: data)
    }

    /// Removes a download's partial data (a cancel).
    func discard(_ key: Key) {
        try? FileManager.default.removeItem(at: partial(key))
        try? FileManager.default.removeItem(at: sidecar(key))
        try? FileManager.default.removeItem(at: unpacking(key))
    }

    /// Bytes kept of a download (what a resume continues from).
    func kept(_ key: Key) -> Int64 { loadSidecar(key)?.kept ?? 0 }

    // MARK: Running

    /// Whether the download is being transferred here.
    func isRunning(_ key: Key) -> Bool { running.withLock { $0[key] != nil } }

    /// Starts transferring `download` (made ACTIVE at queue position `since`), unless it already is.
    func begin(_ download: Download, since: UInt64) {
        let key = Key(transaction: download.transactionIdentifier, content: download.contentIdentifier)
        running.withLock { running in
            if let known = running[key] {
                running[key]?.since = max(known.since, since)
                return
            }
            let meter = Meter()
            let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
            let task = Task { [self] in
                await transfer(download, key: key, meter: meter)
                self.running.withLock { running in
                    if running[key]?.id == id { running[key] = nil }
                }
            }
            running[key] = Running(id: id, task: task, since: since, meter: meter)
        }
    }

    /// Stops the transfer of `key` (it keeps what it wrote) and waits for it to end.
    func stop(_ key: Key) async {
        let task = running.withLock { $0[key]?.task }
        task?.cancel()
        await task?.value
    }

    /// A state change the store announced at `seq`: a transfer that is not to go on stops, and a
    /// cancelled download's partial data goes.
    func announced(_ download: Download, seq: UInt64) {
        let key = Key(transaction: download.transactionIdentifier, content: download.contentIdentifier)
        let stale = running.withLock { $0[key].map { seq <= $0.since } ?? false }
        guard !stale, download.state == .paused || download.state == .cancelled else { return }
        Task {
            await stop(key)
            if download.state == .cancelled { discard(key) }
        }
    }

    /// Waits for the transfer of `key` to end by itself.
    func wait(_ key: Key) async {
        let task = running.withLock { $0[key]?.task }
        await task?.value
    }

    /// Stops every transfer (the queue closes).
    func stopAll() async {
        let tasks = running.withLock { $0.values.map(\.task) }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }

    // MARK: Transfer

    private enum Outcome {
        /// Every byte in, and the whole package checked (PartialFile.isWholeAndIntact).
        case complete
        case stopped
        case versionChanged
        /// Every byte in, but the whole package did not check.
        case damaged
        case failed(StoreKitError)
    }

    private func transfer(_ download: Download, key: Key, meter: Meter) async {
        let ticker = Task { [self] in
            var snapshot = download
            snapshot.state = .active
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(200))
                guard !Task.isCancelled else { return }
                let reading = meter.reading.withLock { $0 }
                guard reading.length > 0 else { continue }
                snapshot.progress = Double(reading.done) / Double(reading.length)
                snapshot.rawRecord.progress = snapshot.progress
                let elapsed = reading.started.duration(to: .now)
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                let rate = reading.startDone >= 0 && seconds > 0.3 ? Double(reading.done - reading.startDone) / seconds : 0
                snapshot.timeRemaining = rate > 0 ? Double(reading.length - reading.done) / rate : -1
                snapshot.rawRecord.timeRemainingSeconds = snapshot.timeRemaining
                deliver(.updatedDownloads([snapshot]))
            }
        }
        let outcome = await run(download, key: key, meter: meter)
        ticker.cancel()
        await ticker.value
        switch outcome {
        case .stopped, .versionChanged, .damaged:
            return
        case .complete:
            // The content is in place: the partial file goes before the store hears of it, so no
            // observer of FINISHED finds it still there.
            let sha256 = loadSidecar(key)?.sha256 ?? ""
            discard(key)
            do {
                let url = folder(key)
                _ = try await connection.call(
                    Storebus_Download_V1_Download.completeDownload,
                    .with {
                        $0.queue = configuration.queue
                        $0.download = .with {
                            $0.transactionIdentifier = key.transaction
                            $0.contentIdentifier = key.content
                        }
                        $0.sha256 = sha256
                        $0.contentURL = url.absoluteString
                    })
            } catch {
                logger.warning("Completing a download failed; start it again to report it", metadata: ["content": "\(key.content)", "error": "\(error)"])
            }
        case .failed(let error):
            var failed = download
            failed.state = .failed
            failed.error = error
            failed.timeRemaining = -1
            do {
                _ = try await connection.call(
                    Storebus_Download_V1_Download.failDownload,
                    .with {
                        $0.queue = configuration.queue
                        $0.download = .with {
                            $0.transactionIdentifier = key.transaction
                            $0.contentIdentifier = key.content
                        }
                        $0.error = .with {
                            $0.code = Storebus_PaymentQueue_V1_SKError(rawValue: error.code.rawValue) ?? .unknown
                            $0.localizedDescription = String(error.localizedDescription.prefix(1000))
                        }
                        $0.bytesKept = kept(key)
                    })
            } catch {
                // The store could not be told: this queue still says so to its observers.
                deliver(.updatedDownloads([failed]))
            }
        }
    }

    /// Transfers until the package is in place (complete), the transfer is stopped, or it fails.
    private func run(_ download: Download, key: Key, meter: Meter) async -> Outcome {
        var restarts = 0
        while true {
            var unpack: BackgroundUnpack?
            let outcome = await pull(download, key: key, meter: meter, unpack: &unpack)
            switch outcome {
            case .versionChanged where restarts < 3:
                restarts += 1
                discard(key)
                continue
            case .damaged where restarts < 3:
                logger.warning("A downloaded package did not match its SHA-256; reading it again", metadata: ["content": "\(key.content)"])
                restarts += 1
                discard(key)
                continue
            case .damaged:
                return .failed(StoreKitError(code: .unknown, localizedDescription: "the downloaded content does not match its SHA-256"))
            case .complete:
                switch place(key, unpacked: unpack) {
                case .success: return .complete
                case .failure(let error): return .failed(error)
                }
            default:
                return outcome
            }
        }
    }

    /// Ends the unpacking that followed the transfer (`unpacked`), or unpacks the package (checked
    /// already) beside it now, and renames that into place. Everything is synced
    /// before the rename and the rename after it: the package goes once this returns, and a device
    /// that loses power after FINISHED must still have the content.
    private func place(_ key: Key, unpacked: BackgroundUnpack?) -> Result<Void, StoreKitError> {
        do {
            let final = folder(key)
            let unpacking = unpacking(key)
            try (unpacked ?? BackgroundUnpack(partial: partial(key), into: unpacking, inKernel: FastPaths.enabled)).finish()
            try ContentPackage.syncFolder(unpacking)
            try? FileManager.default.removeItem(at: final)
            try FileManager.default.moveItem(at: unpacking, to: final)
            try ContentPackage.syncFolder(final.deletingLastPathComponent())
            return .success(())
        } catch {
            return .failure(StoreKitError(code: .unknown, localizedDescription: "the downloaded content could not be put in place: \(error)"))
        }
    }

    /// One pass of chunk reads from the bytes kept to the end of the package: a window of reads in
    /// flight (``ChunkWindow``), each chunk checked and written into the partial file
    /// (``PartialFile``), synced every 8 MiB (in the background) and at the end. With fast paths,
    /// the package is unpacked behind the bytes written in order (``BackgroundUnpack``, left in
    /// `unpack` when every byte is in and intact, ended and removed otherwise).
    private func pull(_ download: Download, key: Key, meter: Meter, unpack: inout BackgroundUnpack?) async -> Outcome {
        let configuration = self.configuration
        let chunk = Int64(min(max(configuration.downloadChunkBytes, 4096), 1 << 20))
        let file: PartialFile
        do {
            try FileManager.default.createDirectory(at: configuration.downloadDirectory, withIntermediateDirectories: true)
            file = try PartialFile.opening(partial(key), sidecar: sidecar(key), length: download.contentLength, chunkBytes: chunk)
        } catch let error as StoreKitError {
            return .failed(error)
        } catch {
            return .failed(Self.writeError(error))
        }
        let unpacker = FastPaths.enabled ? try? BackgroundUnpack(partial: partial(key), into: unpacking(key)) : nil
        unpacker?.advance(to: file.contiguous)
        var window = ChunkWindow(chunk: chunk, window: configuration.downloadWindow, from: file.contiguous)
        var lastProgress = ContinuousClock.now
        var mismatches = 0
        meter.reading.withLock {
            $0.done = file.contiguous
            $0.length = file.sidecar.length
            $0.started = .now
            $0.startDone = file.contiguous
        }
        let request = { (offset: Int64, version: String) -> Storebus_Download_V1_ReadChunkRequest in
            .with {
                $0.queue = configuration.queue
                $0.download = .with {
                    $0.transactionIdentifier = key.transaction
                    $0.contentIdentifier = key.content
                }
                $0.offset = offset
                $0.maxBytes = UInt32(chunk)
                $0.ifVersion = version
                // The bytes as a frame beside the JSON, not base64 inside it (the plain path: base64).
                $0.dataFrame = FastPaths.enabled
            }
        }
        let connection = self.connection
        let path = Storebus_Download_V1_Download.readChunk.path
        /// A chunk read, and whether its bytes match the digest its answer gives.
        typealias Chunk = (response: Storebus_Download_V1_ReadChunkResponse, data: ReadChunkJSON.ChunkData, digest: String, intact: Bool)
        return await withTaskGroup(of: (Int64, Result<Chunk, StoreError>).self) { group -> Outcome in
            func read(_ offset: Int64, after delay: Duration = .zero) {
                let call = request(offset, file.sidecar.version)
                group.addTask {
                    if delay > .zero { try? await Task.sleep(for: delay) }
                    do {
                        let answer = try await connection.callRawReply(path: path, idempotent: true, body: try JSONCodec.encode(call))
                        let (response, data) = try ReadChunkJSON.decode(answer.body, attachment: answer.attachment)
                        // Each chunk's digest is worked out and checked here, by the task that read
                        // it, on any of the pool's threads: the loop below only writes chunks in
                        // order and checks the package (by these digests, or hashing its bytes
                        // again), and the window's other chunks are checked meanwhile.
                        let digest = ContentPackage.hex(data.withUnsafeBytes { SHA256.hash(data: $0) })
                        return (offset, .success((response, data, digest, digest == response.chunkSha256)))
                    } catch let error as StoreError {
                        return (offset, .failure(error))
                    } catch {
                        return (offset, .failure(StoreError(RPCError(.unknown, "\(error)"))))
                    }
                }
            }
            func end(_ outcome: Outcome) -> Outcome {
                group.cancelAll()
                let kept: Result<Void, StoreKitError>
                do throws(StoreKitError) { try file.keep(); kept = .success(()) } catch { kept = .failure(error) }
                if case .complete = outcome, case .success = kept {
                    unpack = unpacker
                } else {
                    unpacker?.abandon()
                }
                if case .failure(let error) = kept { return .failed(error) }
                return outcome
            }
            var retryDelay = Duration.milliseconds(100)
            while true {
                // A first read learns the version and the length; then the window fills.
                for offset in window.offsetsToRead(identified: file.identified, length: file.sidecar.length, kept: file.contiguous) { read(offset) }
                if window.inFlight == 0 {
                    if file.identified && file.contiguous >= file.sidecar.length {
                        return end(file.isWholeAndIntact() ? .complete : .damaged)
                    }
                    return end(.stopped)
                }
                guard let (offset, result) = await group.next() else { return end(.stopped) }
                window.answered()
                if Task.isCancelled { return end(.stopped) }
                switch result {
                case .success(let (answer, data, digest, intact)):
                    if !file.identified {
                        file.identify(
                            version: answer.version, sha256: answer.sha256, length: answer.contentLength,
                            pieces: answer.piecesSha256.isEmpty ? nil : (answer.piecesSha256, Int64(answer.pieceBytes)))
                        meter.reading.withLock { $0.length = answer.contentLength }
                    } else if !file.holds(version: answer.version, sha256: answer.sha256) {
                        return end(.versionChanged)
                    }
                    let expected = min(chunk, file.sidecar.length - offset)
                    guard Int64(data.count) == expected, intact else {
                        mismatches += 1
                        if mismatches > 5 { return end(.failed(StoreKitError(code: .unknown, localizedDescription: "chunks of the content keep arriving damaged"))) }
                        window.retrying()
                        read(offset)
                        continue
                    }
                    do throws(StoreKitError) {
                        try file.write(data, at: offset, digest: digest)
                    } catch {
                        // A full disk, among others: keep what is written and whole, and say why.
                        group.cancelAll()
                        try? file.keep()
                        unpacker?.abandon()
                        return .failed(error)
                    }
                    unpacker?.advance(to: file.contiguous)
                    meter.reading.withLock { $0.done = file.contiguous }
                    lastProgress = .now
                    retryDelay = .milliseconds(100)
                    if file.unsynced >= 8 << 20 {
                        do throws(StoreKitError) { try file.keepSoon() } catch { return end(.failed(error)) }
                    }
                case .failure(let error):
                    switch error.reason {
                    case "CONTENT_VERSION_CHANGED": return end(.versionChanged)
                    case "DOWNLOAD_NOT_ACTIVE": return end(.stopped)
                    default: break
                    }
                    guard error.isTransient || error.status == .notFound && error.domain == "storebus.download" else {
                        return end(.failed(StoreKitError(code: .unknown, localizedDescription: error.message)))
                    }
                    guard lastProgress.duration(to: .now) < configuration.downloadStallTimeout else {
                        return end(
                            .failed(
                                StoreKitError(
                                    code: .cloudServiceNetworkConnectionFailed, localizedDescription: "the download made no progress for \(configuration.downloadStallTimeout): \(error.message)")))
                    }
                    window.retrying()
                    read(offset, after: retryDelay)
                    retryDelay = min(retryDelay * 2, .seconds(2))
                }
            }
        }
    }

    static func writeError(_ code: Int32) -> StoreKitError {
        StoreKitError(code: .unknown, localizedDescription: "the content could not be written: \(String(cString: strerror(code))) (errno \(code))")
    }

    static func writeError(_ error: any Error) -> StoreKitError {
        StoreKitError(code: .unknown, localizedDescription: "the content could not be written: \(error)")
    }
}
