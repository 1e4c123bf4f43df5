import Foundation
import StoreBus
import StoreSchema

/// Hosted content (SKPaymentQueue's start, pause, resume and cancel of downloads).
///
/// Download a purchased or restored transaction's content before finishing it: finishing cancels
/// the downloads that are not done. State changes arrive as updatedDownloads callbacks; a finished
/// download's ``Download/contentURL`` is a folder holding `Contents/`, in ``StoreConfiguration/downloadDirectory``.
extension PaymentQueue {
    /// Starts downloads (SKPaymentQueue.start): the store checks the account's receipt, then this
    /// queue transfers the content. Errors (a transaction finished, a product not in the receipt,
    /// the store out of reach) reach the observers as the downloads failed with that error.
    public func start(_ downloads: [Download]) {
        inBackground(downloads, failing: true) { try await $0.startDownloads($1) }
    }

    /// Pauses downloads (SKPaymentQueue.pause): the transfer stops, keeping what it wrote.
    public func pause(_ downloads: [Download]) {
        inBackground(downloads, failing: false) { try await $0.pauseDownloads($1) }
    }

    /// Resumes paused or failed downloads (SKPaymentQueue.resume), from the bytes kept.
    public func resume(_ downloads: [Download]) {
        inBackground(downloads, failing: true) { try await $0.resumeDownloads($1) }
    }

    /// Cancels downloads (SKPaymentQueue.cancel); their partial data is discarded.
    public func cancel(_ downloads: [Download]) {
        inBackground(downloads, failing: false) { try await $0.cancelDownloads($1) }
    }

    /// Runs a download call in a task of its own; an error is told to the observers as the downloads
    /// failed (`failing`: a start or resume), or logged (a pause or cancel, which change nothing then).
    private func inBackground(_ downloads: [Download], failing: Bool, _ call: @escaping @Sendable (PaymentQueue, [Download]) async throws -> [Download]) {
        Task { [self] in
            do {
                _ = try await call(self, downloads)
            } catch let error where failing {
                failLocally(downloads, error)
            } catch {
                logger.warning("A download call failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Starts downloads and returns them as the store now has them (ACTIVE); the transfer runs in
    /// the background. Throws the store's refusal.
    @discardableResult
    public func startDownloads(_ downloads: [Download]) async throws -> [Download] {
        try await begin(downloads, Storebus_Download_V1_Download.startDownloads)
    }

    /// Resumes paused or failed downloads from the bytes kept; throws the store's refusal.
    @discardableResult
    public func resumeDownloads(_ downloads: [Download]) async throws -> [Download] {
        try await begin(downloads, Storebus_Download_V1_Download.resumeDownloads)
    }

    /// Pauses downloads and waits for their transfers to stop; returns them PAUSED.
    @discardableResult
    public func pauseDownloads(_ downloads: [Download]) async throws -> [Download] {
        let answer = try await connection.call(
            Storebus_Download_V1_Download.pauseDownloads,
            .with {
                $0.queue = connection.configuration.queue
                $0.downloads = downloads.map(\.ref)
            })
        for download in downloads { await self.downloads.stop(download.key) }
        return answer.downloads.map { Download($0.download) }
    }

    /// Cancels downloads, stops their transfers and discards their partial data; returns them CANCELLED.
    @discardableResult
    public func cancelDownloads(_ downloads: [Download]) async throws -> [Download] {
        let answer = try await connection.call(
            Storebus_Download_V1_Download.cancelDownloads,
            .with {
                $0.queue = connection.configuration.queue
                $0.downloads = downloads.map(\.ref)
            })
        for download in downloads {
            await self.downloads.stop(download.key)
            self.downloads.discard(download.key)
        }
        return answer.downloads.map { Download($0.download) }
    }

    /// Bytes of a download already on this device (what a resume continues from).
    public func bytesKept(of download: Download) -> Int64 {
        downloads.kept(download.key)
    }

    /// Waits until none of `downloads` is being transferred by this queue any more (finished,
    /// failed, paused or cancelled).
    public func waitForTransfers(of downloads: [Download]) async {
        for download in downloads { await self.downloads.wait(download.key) }
    }

    private func begin<Request: DownloadsRequest, Response: BeginDownloadsResponse>(
        _ downloads: [Download], _ method: MethodDescriptor<Request, Response>
    ) async throws -> [Download] {
        var request = Request()
        request.queue = connection.configuration.queue
        request.downloads = downloads.map(\.ref)
        let answer = try await connection.call(method, request)
        return transfer(answer.downloads, since: answer.keySeq)
    }

    private func transfer(_ statuses: [Storebus_Download_V1_DownloadStatus], since: UInt64) -> [Download] {
        statuses.map { status in
            let download = Download(status.download)
            if download.state == .active { self.downloads.begin(download, since: since) }
            return download
        }
    }

    /// Tells the observers that `downloads` failed with `error` (a start or resume the store refused).
    private func failLocally(_ downloads: [Download], _ error: any Error) {
        let failure = StoreKitError(code: .unknown, localizedDescription: "\(error)")
        self.downloads.deliver(
            .updatedDownloads(
                downloads.map { download in
                    var failed = download
                    failed.state = .failed
                    failed.error = failure
                    failed.timeRemaining = -1
                    failed.contentURL = nil
                    return failed
                }))
    }
}

extension Download {
    var ref: Storebus_Download_V1_DownloadRef {
        .with {
            $0.transactionIdentifier = transactionIdentifier
            $0.contentIdentifier = contentIdentifier
        }
    }

    var key: DownloadEngine.Key { DownloadEngine.Key(transaction: transactionIdentifier, content: contentIdentifier) }
}
