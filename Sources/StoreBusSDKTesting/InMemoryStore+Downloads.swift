import ContentPackage
import Crypto
import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

// The store in memory's hosted content: downloads offered with a purchase, their states as the
// download state machine moves them, and their bytes.
extension InMemoryStore {
    /// The downloads a PURCHASED or RESTORED transaction offers: its product's content, WAITING.
    static func offered(_ packages: [String: Package], _ transaction: Storebus_PaymentQueue_V1_PaymentTransaction) -> [Storebus_PaymentQueue_V1_Download] {
        guard let package = packages[transaction.payment.productIdentifier] else { return [] }
        return [
            .with {
                $0.contentIdentifier = transaction.payment.productIdentifier
                $0.contentVersion = Package.version
                $0.contentLength = Int64(package.bytes.count)
                $0.transactionIdentifier = transaction.transactionIdentifier
                $0.state = .waiting
            }
        ]
    }

    /// The download moved to `target` (progress, time left, URL and error as the service sets them).
    static func moved(_ download: Storebus_PaymentQueue_V1_Download, to target: Storebus_PaymentQueue_V1_DownloadState) -> Storebus_PaymentQueue_V1_Download {
        var moved = download
        moved.state = target
        moved.progress = target == .finished ? 1 : 0
        moved.timeRemainingSeconds = target == .finished ? 0 : -1
        moved.clearError()
        moved.contentURL = ""
        return moved
    }

    /// The product of a download: its content identifier (the double's content is the product's).
    static func product(of ref: Storebus_Download_V1_DownloadRef, in state: State) throws -> String {
        guard let stored = state.transactions[ref.transactionIdentifier], stored.transaction.downloads.contains(where: { $0.contentIdentifier == ref.contentIdentifier }) else {
            throw RPCError.resource(.notFound, type: "download", name: ref.contentIdentifier, "no download \(ref.contentIdentifier) of transaction \(ref.transactionIdentifier)")
        }
        return ref.contentIdentifier
    }

    func changeDownloads<Request: DownloadsRequest, Response: DownloadsResponse>(
        _ request: Request, action: Storebus_PaymentQueue_V1_DownloadAction, queue: Storebus_PaymentQueue_V1_QueueRef, as: Response.Type
    ) throws -> Response {
        var response = Response()
        response.downloads = try changeDownloads(request.downloads, action: action, queue: queue)
        if var begun = response as? any BeginDownloadsResponse {
            begun.keySeq = state.withLock { UInt64($0.logs[queue.key]?.count ?? 0) }
            response = begun as! Response
        }
        return response
    }

    /// Applies `action` to each download, as the payment queue's state machine does, all or none.
    func changeDownloads(
        _ refs: [Storebus_Download_V1_DownloadRef], action: Storebus_PaymentQueue_V1_DownloadAction, queue: Storebus_PaymentQueue_V1_QueueRef,
        contentURL: String = "", error: Storebus_PaymentQueue_V1_StoreKitError? = nil
    ) throws -> [Storebus_Download_V1_DownloadStatus] {
        let statuses = try state.withLock { state -> [Storebus_Download_V1_DownloadStatus] in
            var changed = state.transactions
            var announced: [Storebus_PaymentQueue_V1_Download] = []
            var statuses: [Storebus_Download_V1_DownloadStatus] = []
            for ref in refs {
                guard let stored = changed[ref.transactionIdentifier], stored.account == queue.accountID else {
                    if changed[ref.transactionIdentifier] != nil {
                        throw RPCError(.permissionDenied, "transaction \(ref.transactionIdentifier) belongs to another account").withReason("OTHER_ACCOUNT", domain: "storebus.payment_queue")
                    }
                    throw RPCError(.notFound, "no transaction \(ref.transactionIdentifier) in this queue")
                }
                guard stored.queueKey == queue.key else { throw RPCError(.notFound, "no transaction \(ref.transactionIdentifier) in this queue") }
                guard !stored.transaction.finished else {
                    throw RPCError(.failedPrecondition, "transaction \(ref.transactionIdentifier) is finished").withReason("TRANSACTION_FINISHED", domain: "storebus.payment_queue")
                }
                guard let index = stored.transaction.downloads.firstIndex(where: { $0.contentIdentifier == ref.contentIdentifier }) else {
                    throw RPCError(.notFound, "transaction \(ref.transactionIdentifier) has no content \(ref.contentIdentifier)")
                }
                let download = stored.transaction.downloads[index]
                guard let target = download.state.after(action) else {
                    throw RPCError(.failedPrecondition, "the download cannot be moved from \(download.state) by \(action)").withReason("DOWNLOAD_STATE", domain: "storebus.payment_queue")
                }
                var after = target == download.state ? download : Self.moved(download, to: target)
                if target == .finished { after.contentURL = contentURL.isEmpty ? download.contentURL : contentURL }
                if target == .failed, let error { after.error = error }
                if after != download {
                    changed[ref.transactionIdentifier]?.transaction.downloads[index] = after
                    announced.append(after)
                }
                statuses.append(
                    .with {
                        $0.download = after
                        $0.productIdentifier = stored.transaction.payment.productIdentifier
                        $0.sha256 = state.packages[stored.transaction.payment.productIdentifier]?.sha256 ?? ""
                    })
            }
            state.transactions = changed
            if !announced.isEmpty {
                for download in announced {
                    let key = state.transactions[download.transactionIdentifier]!.queueKey
                    Self.append(&state, key) { $0.updatedDownloads.downloads = [download] }
                }
            }
            return statuses
        }
        wake()
        return statuses
    }

    /// ReadChunk's answer: its JSON and, when the request asked for `data_frame`, the bytes as the
    /// attachment.
    func readChunk(_ request: Storebus_Download_V1_ReadChunkRequest, queue: Storebus_PaymentQueue_V1_QueueRef) throws -> (json: [UInt8], attachment: [UInt8]?) {
        let (package, download) = try state.withLock { state -> (Package, Storebus_PaymentQueue_V1_Download) in
            guard let stored = state.transactions[request.download.transactionIdentifier], stored.queueKey == queue.key,
                let download = stored.transaction.downloads.first(where: { $0.contentIdentifier == request.download.contentIdentifier }),
                let package = state.packages[stored.transaction.payment.productIdentifier]
            else { throw RPCError(.notFound, "no such download in this queue") }
            guard download.state == .active, !stored.transaction.finished else {
                throw RPCError(.failedPrecondition, "the download is not active").withReason("DOWNLOAD_NOT_ACTIVE", domain: "storebus.download")
            }
            return (package, download)
        }
        guard request.ifVersion.isEmpty || request.ifVersion == download.contentVersion else {
            throw RPCError(.failedPrecondition, "the content's version changed").withReason("CONTENT_VERSION_CHANGED", domain: "storebus.download")
        }
        let length = Int64(package.bytes.count)
        guard request.offset >= 0, request.offset <= length else { throw RPCError(.outOfRange, "offset \(request.offset) is past the package") }
        let count = Int(min(Int64(request.maxBytes == 0 ? 262_144 : request.maxBytes), length - request.offset))
        let data = Array(package.bytes[Int(request.offset)..<(Int(request.offset) + count)])
        let response = Storebus_Download_V1_ReadChunkResponse.with {
            $0.chunkSha256 = ContentPackage.hex(SHA256.hash(data: data))
            $0.offset = request.offset
            $0.version = download.contentVersion
            $0.contentLength = length
            $0.sha256 = package.sha256
            $0.eof = request.offset + Int64(count) == length
            $0.dataFrame = request.dataFrame
            $0.piecesSha256 = package.piecesSHA256
            $0.pieceBytes = UInt32(ContentPackage.pieceBytes)
        }
        return request.dataFrame ? (ReadChunkJSON.encode(response, data: []), data) : (ReadChunkJSON.encode(response, data: data), nil)
    }
}
