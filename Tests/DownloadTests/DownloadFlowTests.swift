import ContentPackage
import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// Downloads of hosted content through a whole system of real processes: the catalog names the
/// content, the payment queue keeps the states, the receipt proves the purchase, the download
/// service serves the bytes, the gateways carry it all.
@Suite(.serialized)
struct DownloadFlowTests {
    @Test("the sample level pack downloads after purchase: active then finished, unpacked as its files, in order with the queue's callbacks")
    func samplePack() async throws {
        let fixture = try DownloadFixture(megabytes: 1)
        defer { fixture.directory.remove() }
        try await fixture.cluster().running { cluster in
            let downloads = fixture.directory.url.appendingPathComponent("phone-downloads")
            let (phone, recorder) = try await cluster.device("alice", downloads: downloads)
            let bought = try await cluster.buy(DownloadFixture.levelPack, phone, recorder)
            let offered = try #require(bought.downloads.first)
            #expect(offered.state == .waiting && offered.contentLength == 86_528 && offered.contentVersion == "1.0")

            let started = try await phone.startDownloads(bought.downloads)
            #expect(started.map(\.state) == [.active])
            #expect(await recorder.download(bought.id, reaches: .finished))
            #expect(recorder.downloadStates(of: bought.id) == [.active, .finished])
            let finished = try #require(recorder.lastDownload(of: bought.id))
            #expect(finished.progress == 1 && finished.timeRemaining == 0 && finished.error == nil)
            let folder = try #require(finished.contentURL)
            for name in ["levels.json", "palette.txt"] {
                let got = try Data(contentsOf: folder.appendingPathComponent("Contents/\(name)"))
                let want = try Data(contentsOf: deployDirectory.appendingPathComponent("content/puzzle-levelpack1/\(name)"))
                #expect(got == want, "\(name) byte for byte")
            }
            #expect(!FileManager.default.fileExists(atPath: folder.path + ".partial"), "the partial file is gone once in place")
            // The queue's transaction shows the download finished too.
            #expect(phone.transactions.first { $0.id == bought.id }?.downloads.first?.state == .finished)

            // Finishing the transaction after a finished download cancels nothing.
            try await phone.finish(bought)
            #expect(await recorder.wait { $0.removed(bought.id) })
            #expect(recorder.downloadStates(of: bought.id) == [.active, .finished])
            await phone.close()
        }
    }
}
