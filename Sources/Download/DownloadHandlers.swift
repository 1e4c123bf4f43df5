import ContentPackage
import Crypto
import Foundation
import Metrics
import StoreBus
import StoreBusServer
import StoreBusStorage
import StoreSchema
import ZeroMQ

/// The handlers of `storebus.download.v1.Download`.
///
/// The payment queue keeps the download states (its UpdateDownloads checks the transaction and the
/// state machine, and announces each change to the device); this service checks the receipt before
/// it lets a download become active, and serves the packages' bytes to active downloads only.
/// Requests arrive with their queue filled and checked and their downloads named within the
/// contract's rules (1 to 100 per call; the router's interceptors).
public struct DownloadHandlers: Storebus_Download_V1_Download.Handlers {
    /// The size of chunk ReadChunk gives when asked for none (download.proto's rule bounds a request's
    /// `max_bytes` at 1 MiB).
    public static let defaultChunkBytes = ContentStore.digestGrid

    let content: ContentStore
    let ledger: DownloadLedger
    /// The payment queue's instances, each account's calls sent to the owner of its shard.
    let paymentQueue: ShardRouter
    let receipts: ReceiptCheck
    /// Where the payment queue's log stands, and the positions this service's follower has reached.
    let head: LogHead
    let applied: PositionWaiter<String>
    /// The payment queue's log's shards, as the follower found them.
    let shards: LogShards
    /// Which of them this instance serves, and the map of all.
    let served: DownloadShards

    init(
        content: ContentStore, ledger: DownloadLedger, paymentQueue: ShardRouter, receipts: ReceiptCheck, applied: PositionWaiter<String>, shards: LogShards,
        served: DownloadShards
    ) {
        self.content = content
        self.ledger = ledger
        self.paymentQueue = paymentQueue
        head = LogHead(client: paymentQueue.any)
        self.receipts = receipts
        self.applied = applied
        self.shards = shards
        self.served = served
    }

    /// A router answering every Download method.
    var router: RPCRouter {
        var router = RPCRouter()
        router.register(self)
        return router
    }

    public var codecs: MessageCodecs {
        var codecs = MessageCodecs()
        codecs.use(.readChunk, for: Storebus_Download_V1_Download.readChunk)
        return codecs
    }

    /// Every method but ReadChunk awaits other services and the ledger's thread; ReadChunk reads,
    /// hashes and encodes up to a megabyte, off the loop.
    public var loopSafe: LoopSafeMethods {
        .all(of: Storebus_Download_V1_Download.self, except: [Storebus_Download_V1_Download.readChunk.erased])
    }

    public func startDownloads(_ request: Storebus_Download_V1_StartDownloadsRequest, context: ServerContext) async throws -> Storebus_Download_V1_StartDownloadsResponse {
        let (downloads, keySeq) = try await begin(request.queue, request.downloads, action: .start, context)
        return .with {
            $0.downloads = downloads; $0.keySeq = keySeq
        }
    }

    public func resumeDownloads(_ request: Storebus_Download_V1_ResumeDownloadsRequest, context: ServerContext) async throws -> Storebus_Download_V1_ResumeDownloadsResponse {
        let (downloads, keySeq) = try await begin(request.queue, request.downloads, action: .resume, context)
        return .with {
            $0.downloads = downloads; $0.keySeq = keySeq
        }
    }

    public func pauseDownloads(_ request: Storebus_Download_V1_PauseDownloadsRequest, context: ServerContext) async throws -> Storebus_Download_V1_PauseDownloadsResponse {
        let downloads = try await apply(request.downloads.map { update($0, .pause) }, queue: request.queue, context)
        return .with { $0.downloads = downloads }
    }

    public func cancelDownloads(_ request: Storebus_Download_V1_CancelDownloadsRequest, context: ServerContext) async throws -> Storebus_Download_V1_CancelDownloadsResponse {
        let downloads = try await apply(request.downloads.map { update($0, .cancel) }, queue: request.queue, context)
        return .with { $0.downloads = downloads }
    }

    public func completeDownload(_ request: Storebus_Download_V1_CompleteDownloadRequest, context: ServerContext) async throws -> Storebus_Download_V1_CompleteDownloadResponse {
        let package = try package(request.queue, request.download)
        guard request.sha256.lowercased() == package.sha256 else {
            throw RPCError.resource(
                .failedPrecondition, type: "download", name: request.download.contentIdentifier,
                "SHA-256 \(RPCError.echo(request.sha256)) is not the package's \(package.sha256): read it again"
            )
            .withReason("DIGEST_MISMATCH", domain: "storebus.download")
        }
        var update = update(request.download, .complete)
        update.contentURL = request.contentURL
        let downloads = try await apply([update], queue: request.queue, context)
        return .with { $0.download = downloads.first ?? .init() }
    }

    public func failDownload(_ request: Storebus_Download_V1_FailDownloadRequest, context: ServerContext) async throws -> Storebus_Download_V1_FailDownloadResponse {
        let package = try package(request.queue, request.download)
        guard (0...package.length).contains(request.bytesKept) else {
            throw RPCError.invalidArgument(field: "bytesKept", "must be from 0 to the package's \(package.length) bytes")
        }
        var update = update(request.download, .fail)
        update.error = request.error
        update.progress = package.length > 0 ? Double(request.bytesKept) / Double(package.length) : 0
        let downloads = try await apply([update], queue: request.queue, context)
        return .with { $0.download = downloads.first ?? .init() }
    }

    public func getDownloads(_ request: Storebus_Download_V1_GetDownloadsRequest, context: ServerContext) async throws -> Storebus_Download_V1_GetDownloadsResponse {
        try served.check(request.queue)
        try await ledger.readThrough(
            request.downloads.map { DownloadKey(transaction: $0.transactionIdentifier, content: $0.contentIdentifier) }, shardOf: served.shard(ofQueueKey:))
        let known: [(DownloadKey, LedgerEntry)]
        if request.downloads.isEmpty {
            known = ledger.entries(queueKey: request.queue.key)
        } else {
            known = try request.downloads.map { ref in
                let key = DownloadKey(transaction: ref.transactionIdentifier, content: ref.contentIdentifier)
                guard let entry = ledger.entry(key), entry.queueKey == request.queue.key else {
                    throw Self.notStarted(ref)
                }
                return (key, entry)
            }
        }
        return .with { $0.downloads = known.map { status($0.0, $0.1) } }
    }

    public func getShardMap(_ request: Storebus_PaymentQueue_V1_GetShardMapRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_GetShardMapResponse {
        try await served.map()
    }

    public func readChunk(_ request: Storebus_Download_V1_ReadChunkRequest, context: ServerContext) async throws -> Storebus_Download_V1_ReadChunkResponse {
        try await catchUp(with: request.queue, context)
        try await ledger.readThrough(
            [DownloadKey(transaction: request.download.transactionIdentifier, content: request.download.contentIdentifier)], shardOf: served.shard(ofQueueKey:))
        let (key, package) = try readable(request)
        let chunk = try await content.readChunk(package, offset: request.offset, maxBytes: request.maxBytes == 0 ? Self.defaultChunkBytes : Int(request.maxBytes))
        // Looked at again after the read (it ran on another thread), with the count in one step: a
        // pause, cancel or finish applied meanwhile stops this chunk too.
        let end = request.offset + Int64(chunk.bytes.count)
        guard ledger.sentIfActive(key, queueKey: request.queue.key, count: chunk.bytes.count, end: end) else {
            _ = try active(request)
            throw RPCError(.unavailable, "the download changed state while its chunk was read; read it again")
        }
        DownloadMetrics.bytesServed.increment(by: Int64(chunk.bytes.count))
        return .with {
            $0.data = chunk.bytes
            $0.chunkSha256 = chunk.sha256
            $0.offset = request.offset
            $0.version = package.version
            $0.contentLength = package.length
            $0.sha256 = package.sha256
            $0.eof = end == package.length
            $0.piecesSha256 = package.piecesSHA256
            $0.pieceBytes = UInt32(ContentStore.digestGrid)
            // The codec moves the bytes into the answer's attachment.
            $0.dataFrame = request.dataFrame
        }
    }

    // MARK: Checks

    /// Waits until this service has applied everything the payment queue had committed when this
    /// call began (its log's head, asked now): a finish, a cancel or a pause answered before is known
    /// before a byte is served. One small read of the payment queue's log per chunk; UNAVAILABLE
    /// (retryable) when the follower does not catch up in the call's time.
    private func catchUp(with queue: Storebus_PaymentQueue_V1_QueueRef, _ context: ServerContext) async throws {
        try served.check(queue)
        // The queue's account's shard (the whole log, when it is not sharded).
        let shard = shards.shard(app: queue.appBundleID, account: queue.accountID)
        let newest = try await head.newest(shard: shard, timeout: context.timeRemaining)
        let wait = min(context.timeRemaining ?? .seconds(5), .seconds(5))
        guard await applied.wait(FollowedLog.name(DownloadLedger.log, shard: shard), reaching: newest, timeout: wait) else {
            throw RPCError(.unavailable, "the download service has not yet applied the payment queue's log up to \(newest); try again")
        }
    }

    /// NOT_FOUND for a download this service was never asked to start in the queue.
    static func notStarted(_ ref: Storebus_Download_V1_DownloadRef) -> RPCError {
        RPCError.resource(
            .notFound, type: "download", name: ref.contentIdentifier,
            "no download of \(RPCError.echo(ref.contentIdentifier)) in transaction \(RPCError.echo(ref.transactionIdentifier)) has been started in this queue")
    }

    /// The package a download of `queue`'s app is of: NOT_FOUND when this service hosts none.
    private func package(_ queue: Storebus_PaymentQueue_V1_QueueRef, _ ref: Storebus_Download_V1_DownloadRef) throws(RPCError) -> ContentStore.Package {
        guard let package = content.package(app: queue.appBundleID, contentID: ref.contentIdentifier) else {
            throw RPCError.resource(.notFound, type: "content", name: ref.contentIdentifier, "no hosted content \(RPCError.echo(ref.contentIdentifier)) in \(RPCError.echo(queue.appBundleID))")
        }
        return package
    }

    private func update(_ ref: Storebus_Download_V1_DownloadRef, _ action: Storebus_PaymentQueue_V1_DownloadAction) -> Storebus_PaymentQueue_V1_DownloadUpdate {
        .with {
            $0.transactionIdentifier = ref.transactionIdentifier
            $0.contentIdentifier = ref.contentIdentifier
            $0.action = action
            if let entry = ledger.entry(DownloadKey(transaction: ref.transactionIdentifier, content: ref.contentIdentifier)),
                let package = content.package(app: entry.app, contentID: ref.contentIdentifier), package.length > 0
            {
                $0.progress = min(1, Double(entry.servedEnd) / Double(package.length))
            }
        }
    }

    // MARK: State changes

    /// Start or resume: the payment queue checks the transactions and states, the receipt the
    /// products, and only then do the downloads become active.
    private func begin(
        _ queue: Storebus_PaymentQueue_V1_QueueRef, _ refs: [Storebus_Download_V1_DownloadRef], action: Storebus_PaymentQueue_V1_DownloadAction, _ context: ServerContext
    ) async throws -> (downloads: [Storebus_Download_V1_DownloadStatus], keySeq: UInt64) {
        // Each content is checked to be hosted here by the apply below, before anything is changed.
        try served.check(queue)
        let updates = refs.map { update($0, action) }
        let checked = try await paymentQueue.call(
            Storebus_PaymentQueue_V1_PaymentQueue.updateDownloads,
            .with {
                $0.queue = queue
                $0.updates = updates
                $0.checkOnly = true
            }, options: CallOptions(timeout: context.timeRemaining), app: queue.appBundleID, account: queue.accountID)
        var products: [String] = []
        for product in checked.productIdentifiers where !products.contains(product) { products.append(product) }
        try await receipts.check(queue: queue, products: products, minSeq: checked.logSeq, timeout: context.timeRemaining)
        return try await applyWithPosition(updates, queue: queue, context)
    }

    /// Asks the payment queue for `updates`, records its answer, and answers the downloads' statuses.
    private func apply(_ updates: [Storebus_PaymentQueue_V1_DownloadUpdate], queue: Storebus_PaymentQueue_V1_QueueRef, _ context: ServerContext) async throws -> [Storebus_Download_V1_DownloadStatus] {
        try await applyWithPosition(updates, queue: queue, context).downloads
    }

    /// ``apply(_:queue:_:)``, with the queue position the statuses are as of.
    private func applyWithPosition(
        _ updates: [Storebus_PaymentQueue_V1_DownloadUpdate], queue: Storebus_PaymentQueue_V1_QueueRef, _ context: ServerContext
    ) async throws -> (downloads: [Storebus_Download_V1_DownloadStatus], keySeq: UInt64) {
        try served.check(queue)
        for update in updates { _ = try package(queue, .with { $0.contentIdentifier = update.contentIdentifier }) }
        let answer = try await paymentQueue.call(
            Storebus_PaymentQueue_V1_PaymentQueue.updateDownloads,
            .with {
                $0.queue = queue
                $0.updates = updates
            }, options: CallOptions(timeout: context.timeRemaining), app: queue.appBundleID, account: queue.accountID)
        try await ledger.record(queue: queue, app: queue.appBundleID, downloads: answer.downloads, productIDs: answer.productIdentifiers, keySeq: answer.keySeq)
        let statuses = zip(answer.downloads, answer.productIdentifiers).map { download, product in
            let key = DownloadKey(transaction: download.transactionIdentifier, content: download.contentIdentifier)
            var status = Storebus_Download_V1_DownloadStatus()
            status.download = download
            status.productIdentifier = product
            status.sha256 = content.package(app: queue.appBundleID, contentID: download.contentIdentifier)?.sha256 ?? ""
            status.bytesSent = ledger.entry(key)?.bytesSent ?? 0
            return status
        }
        return (statuses, answer.keySeq)
    }

    /// A ledger entry as a status.
    private func status(_ key: DownloadKey, _ entry: LedgerEntry) -> Storebus_Download_V1_DownloadStatus {
        let package = content.package(app: entry.app, contentID: key.content)
        return .with {
            $0.download = .with {
                $0.transactionIdentifier = key.transaction
                $0.contentIdentifier = key.content
                $0.state = entry.state
                $0.contentVersion = package?.version ?? ""
                $0.contentLength = package?.length ?? 0
                if let length = package?.length, length > 0 { $0.progress = min(1, Double(entry.servedEnd) / Double(length)) }
                $0.timeRemainingSeconds = -1
            }
            $0.productIdentifier = entry.productID
            $0.sha256 = package?.sha256 ?? ""
            $0.bytesSent = entry.bytesSent
        }
    }

    // MARK: Transfer

    /// The download a chunk is asked of and its package, when the download is active and the
    /// package is the version asked for.
    func readable(_ request: Storebus_Download_V1_ReadChunkRequest) throws -> (key: DownloadKey, package: ContentStore.Package) {
        let ref = request.download
        let key = try active(request)
        let package = try package(request.queue, ref)
        guard request.ifVersion.isEmpty || request.ifVersion == package.version else {
            throw RPCError.resource(
                .failedPrecondition, type: "content", name: ref.contentIdentifier,
                "the content is now version \(package.version), not \(RPCError.echo(request.ifVersion)): start again from offset 0"
            )
            .withReason("CONTENT_VERSION_CHANGED", domain: "storebus.download")
        }
        guard request.offset >= 0 else { throw RPCError.invalidArgument(field: "offset", "must not be negative") }
        return (key, package)
    }

    /// The download a chunk is asked of, when it is active in the request's queue: NOT_FOUND when
    /// it was never started there, FAILED_PRECONDITION (DOWNLOAD_NOT_ACTIVE) when it is not active
    /// or its transaction is finished.
    func active(_ request: Storebus_Download_V1_ReadChunkRequest) throws -> DownloadKey {
        let ref = request.download
        let key = DownloadKey(transaction: ref.transactionIdentifier, content: ref.contentIdentifier)
        guard let entry = ledger.entry(key), entry.queueKey == request.queue.key else {
            throw Self.notStarted(ref)
        }
        guard entry.state == .active, !entry.transactionFinished else {
            let state = entry.transactionFinished ? "the transaction is finished" : "the download is \(entry.state.name)"
            throw RPCError.resource(.failedPrecondition, type: "download", name: ref.contentIdentifier, "\(state): start or resume it before reading")
                .withReason("DOWNLOAD_NOT_ACTIVE", domain: "storebus.download")
        }
        return key
    }
}

/// The download service's own metrics (made at first use, after the process set up swift-metrics).
enum DownloadMetrics {
    /// `storebus_download_bytes_total`: bytes of hosted content served by ReadChunk.
    static let bytesServed = Counter(label: "storebus_download_bytes_total")
}

extension MessageCodec where Request == Storebus_Download_V1_ReadChunkRequest, Response == Storebus_Download_V1_ReadChunkResponse {
    /// ReadChunk's codec: the request by swift-protobuf; the answer's JSON written directly
    /// (``ReadChunkJSON``), its megabyte of base64 included, or, when the request asked for
    /// `data_frame`, without it: the bytes are the answer's attachment.
    static let readChunk = MessageCodec(
        decode: { body in try JSONCodec.decode(Request.self, from: body) },
        reply: { response in
            guard response.dataFrame else { return RawReply(body: ReadChunkJSON.encode(response)) }
            return RawReply(body: ReadChunkJSON.encode(response, data: []), attachment: response.data.withUnsafeBytes { HeldFrame(copying: $0) })
        }
    )
}
