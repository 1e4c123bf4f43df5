import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// Content only for whom it belongs to, and nothing sent otherwise; finishing a transaction
/// cancels its downloads first.
@Suite(.serialized)
struct DownloadRefusalTests {
    static func ref(_ download: Download) -> Storebus_Download_V1_DownloadRef {
        .with {
            $0.transactionIdentifier = download.transactionIdentifier
            $0.contentIdentifier = download.contentIdentifier
        }
    }

    /// The error `call` throws, or nil when it succeeds.
    static func refusal(_ call: () async throws -> Void) async -> StoreError? {
        do {
            try await call()
            return nil
        } catch let error as StoreError {
            return error
        } catch {
            return StoreError?.none
        }
    }

    @Test("another account's transaction, a refunded product, a finished transaction, an unreachable receipt service: refused with the code that says so, and not a byte sent")
    func refusals() async throws {
        let fixture = try DownloadFixture(megabytes: 1)
        defer { fixture.directory.remove() }
        try await fixture.cluster().running { cluster in
            let (alice, aliceRecorder) = try await cluster.device("alice", downloads: fixture.directory.url.appendingPathComponent("alice"))
            let (bob, _) = try await cluster.device("bob", downloads: fixture.directory.url.appendingPathComponent("bob"))
            let pack = try await cluster.buy(DownloadFixture.levelPack, alice, aliceRecorder)
            let download = try #require(pack.downloads.first)

            // Another account's transaction: PERMISSION_DENIED, and no read of it is served.
            let otherAccount = await Self.refusal { try await bob.startDownloads([download]) }
            #expect(otherAccount?.status == .permissionDenied && otherAccount?.reason == "OTHER_ACCOUNT", "\(String(describing: otherAccount))")
            let bobReads = await Self.refusal {
                _ = try await bob.connection.call(Storebus_Download_V1_Download.readChunk, .with { $0.download = Self.ref(download) })
            }
            #expect(bobReads?.status == .notFound, "\(String(describing: bobReads))")
            // Nor by alice before she starts it.
            let early = await Self.refusal {
                _ = try await alice.connection.call(Storebus_Download_V1_Download.readChunk, .with { $0.download = Self.ref(download) })
            }
            #expect(early?.status == .notFound, "\(String(describing: early))")

            // The receipt service out of reach: UNAVAILABLE, the download still waiting.
            await cluster.receipt.stop()
            let unreachable = await Self.refusal { try await alice.startDownloads([download]) }
            #expect(unreachable?.status == .unavailable || unreachable?.status == .deadlineExceeded, "\(String(describing: unreachable))")
            #expect(aliceRecorder.downloadStates(of: pack.id).isEmpty)
            try await cluster.startReceipt()

            // Refunded: the receipt shows it cancelled, so nothing is served.
            let admin = try cluster.admin()
            _ = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction,
                .with {
                    $0.transactionIdentifier = pack.id
                    $0.revocationReason = .appIssue
                })
            let refunded = await Self.refusal { try await alice.startDownloads([download]) }
            #expect(refunded?.status == .failedPrecondition && refunded?.reason == "NOT_IN_RECEIPT", "\(String(describing: refunded))")
            #expect(aliceRecorder.downloadStates(of: pack.id).isEmpty)

            // A finished transaction: FAILED_PRECONDITION.
            let second = try await cluster.buy(DownloadFixture.bigPack, alice, aliceRecorder)
            try await alice.finish(second)
            #expect(await aliceRecorder.wait { $0.removed(second.id) })
            let finished = await Self.refusal { try await alice.startDownloads(second.downloads) }
            #expect(finished?.status == .failedPrecondition && finished?.reason == "TRANSACTION_FINISHED", "\(String(describing: finished))")

            // Nothing of either was ever sent.
            let statuses = try await alice.connection.call(Storebus_Download_V1_Download.getDownloads, .init())
            #expect(statuses.downloads.allSatisfy { $0.bytesSent == 0 }, "\(statuses.downloads)")
            await admin.close()
            await alice.close()
            await bob.close()
        }
    }

    @Test("finishing a transaction during its download: the download is reported cancelled before the transaction is removed, its partial data goes, and it can no longer be used")
    func finishDuringDownload() async throws {
        let fixture = try DownloadFixture(megabytes: 64)
        defer { fixture.directory.remove() }
        try await fixture.cluster().running { cluster in
            let directory = fixture.directory.url.appendingPathComponent("phone")
            let (phone, recorder) = try await cluster.device("alice", downloads: directory, window: 1)
            let bought = try await cluster.buy(DownloadFixture.bigPack, phone, recorder)
            let download = try #require(bought.downloads.first)
            try await phone.startDownloads([download])
            #expect(await DownloadTransferTests.progress(recorder, bought.id, atLeast: 0.05))

            try await phone.finish(bought)
            // Once FinishTransaction has answered, not one more chunk is served, at once: the download
            // service catches up with the payment queue before it reads.
            let atOnce = await Self.refusal {
                _ = try await phone.connection.call(Storebus_Download_V1_Download.readChunk, .with { $0.download = Self.ref(download) })
            }
            #expect(atOnce?.status == .failedPrecondition && atOnce?.reason == "DOWNLOAD_NOT_ACTIVE", "\(String(describing: atOnce))")
            #expect(await recorder.wait { $0.removed(bought.id) })
            // Cancelled, then removed: in that order on the observer stream.
            let order = recorder.callbacks.filter { $0.seq != 0 }.compactMap { callback -> String? in
                switch callback.event {
                case .updatedDownloads(let downloads) where downloads.contains { $0.transactionIdentifier == bought.id }:
                    return "download \(downloads.first { $0.transactionIdentifier == bought.id }!.state.rawValue)"
                case .removedTransactions(let transactions) where transactions.contains { $0.id == bought.id }:
                    return "removed"
                default:
                    return nil
                }
            }
            #expect(order == ["download active", "download cancelled", "removed"])
            // The removed transaction carries its download cancelled.
            let removed = recorder.callbacks.lazy.compactMap { callback -> PaymentTransaction? in
                guard case .removedTransactions(let transactions) = callback.event else { return nil }
                return transactions.first { $0.id == bought.id }
            }.first
            #expect(removed?.downloads.first?.state == .cancelled)
            // The partial data goes.
            let partial = directory.appendingPathComponent("\(bought.id)-\(DownloadFixture.bigPack).partial")
            #expect(await waitUntil(timeout: .seconds(20)) { !FileManager.default.fileExists(atPath: partial.path) })
            // Afterwards the download is unusable.
            let again = await Self.refusal { try await phone.resumeDownloads([download]) }
            #expect(again?.status == .failedPrecondition, "\(String(describing: again))")
            let read = await waitUntil(timeout: .seconds(20)) {
                let refusal = await Self.refusal {
                    _ = try await phone.connection.call(Storebus_Download_V1_Download.readChunk, .with { $0.download = Self.ref(download) })
                }
                return refusal?.status == .failedPrecondition && refusal?.reason == "DOWNLOAD_NOT_ACTIVE"
            }
            #expect(read, "a read of a finished transaction's download is refused")
            await phone.close()
        }
    }
}
