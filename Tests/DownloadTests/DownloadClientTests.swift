import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// A content version that changes under a paused download, and `storectl` at a terminal.
@Suite(.serialized)
struct DownloadClientTests {
    static let removeAds = "com.storebus.demo.puzzle.removeads"

    @Test("a content version changed while a download was paused: the resume starts again from zero and ends with the new content")
    func versionChangedWhilePaused() async throws {
        let fixture = try DownloadFixture(megabytes: 32)
        defer { fixture.directory.remove() }
        try await fixture.cluster(gatewayCount: 1).running { cluster in
            let directory = fixture.directory.url.appendingPathComponent("phone")
            let (phone, recorder) = try await cluster.device("alice", downloads: directory)
            let bought = try await cluster.buy(DownloadFixture.bigPack, phone, recorder)
            let download = try #require(bought.downloads.first)
            try await phone.startDownloads([download])
            #expect(await DownloadTransferTests.progress(recorder, bought.id, atLeast: 0.3))
            try await phone.pauseDownloads([download])
            let kept = phone.bytesKept(of: download)
            #expect(kept > 0)

            // The operator publishes version 1.1 of the content (other bytes, the same length).
            var newer = fixture.pack
            newer.version = "1.1"
            newer.seed = 99
            try fixture.content.write([newer])
            let admin = try cluster.admin()
            let reloaded = try await admin.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .init())
            #expect(reloaded.changed, "\(reloaded.problems)")
            await cluster.download.stop()
            try await cluster.startDownload()

            try await phone.resumeDownloads([download])
            #expect(await recorder.download(bought.id, reaches: .finished, timeout: .seconds(120)))
            let folder = try #require(recorder.lastDownload(of: bought.id)?.contentURL)
            #expect(try DownloadFixture.sha256(of: folder.appendingPathComponent("Contents/big.bin")) == DownloadFixture.sha256(of: fixture.content.file(of: newer)))
            let status = try await DownloadTransferTests.status(phone.connection, download)
            #expect(status.download.contentVersion == "1.1")
            #expect(status.bytesSent >= fixture.packageLength + kept, "started again from zero: \(status.bytesSent) sent")
            await admin.close()
            await phone.close()
        }
    }

    @Test("cancel mid-transfer: observers hear cancelled, the partial data goes, and the download can no longer be resumed")
    func cancelMidTransfer() async throws {
        let fixture = try DownloadFixture(megabytes: 32)
        defer { fixture.directory.remove() }
        try await fixture.cluster(gatewayCount: 1).running { cluster in
            let directory = fixture.directory.url.appendingPathComponent("phone")
            let (phone, recorder) = try await cluster.device("alice", downloads: directory, window: 1)
            let bought = try await cluster.buy(DownloadFixture.bigPack, phone, recorder)
            let download = try #require(bought.downloads.first)
            try await phone.startDownloads([download])
            #expect(await DownloadTransferTests.progress(recorder, bought.id, atLeast: 0.1))
            let cancelled = try await phone.cancelDownloads([download])
            #expect(cancelled.map(\.state) == [.cancelled])
            #expect(await recorder.download(bought.id, reaches: .cancelled))
            #expect(phone.bytesKept(of: download) == 0)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            #expect(leftovers.isEmpty, "\(leftovers)")
            let resumed = await DownloadRefusalTests.refusal { try await phone.resumeDownloads([download]) }
            #expect(resumed?.status == .failedPrecondition, "\(String(describing: resumed))")
            // The transaction is still there to finish.
            try await phone.finish(bought)
            #expect(await recorder.wait { $0.removed(bought.id) })
            #expect(recorder.downloadStates(of: bought.id) == [.active, .cancelled])
            await phone.close()
        }
    }

    @Test("storectl restore --download: the chosen product's content is downloaded again, then its transaction finished; the other restored transaction is finished at once")
    func restoreWithDownload() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let (phone, recorder) = try await cluster.device("carol", downloads: cluster.directory.url.appendingPathComponent("phone"))
            for product in [levelPack, Self.removeAds] {
                let bought = try await cluster.buy(product, phone, recorder)
                try await phone.finish(bought)
            }
            await phone.close()

            let downloads = cluster.directory.url.appendingPathComponent("tablet")
            let restore = try await runCommand(
                Executables.directory.appendingPathComponent("storectl").path,
                [
                    "restore", "--gateway", cluster.gatewayEndpoints[0], "--api-key", appKey, "--app", puzzle, "--account", "carol",
                    "--device", "tablet", "--directory", downloads.path, "--download", levelPack
                ], log: cluster.directory.path("restore.log"))
            #expect(restore.status == 0, "\(restore.output)")
            #expect(restore.output.contains("finished") && restore.output.contains("\(Self.removeAds) without downloading"), "\(restore.output)")
            let content = try FileManager.default.contentsOfDirectory(atPath: downloads.path).filter { $0.hasSuffix("-\(levelPack)") }
            #expect(content.count == 1, "\(content)")
            let levels = downloads.appendingPathComponent(content.first ?? "").appendingPathComponent("Contents/levels.json")
            #expect(try Data(contentsOf: levels) == Data(contentsOf: deployDirectory.appendingPathComponent("content/puzzle-levelpack1/levels.json")))

            // Both restored transactions were finished: the tablet's queue holds none.
            let (tablet, _) = try await cluster.device("carol", device: "tablet", downloads: downloads)
            #expect(tablet.transactions.isEmpty, "\(tablet.transactions.map(\.payment.productIdentifier))")
            await tablet.close()
        }
    }
}
