import ContentPackage
import Crypto
import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

@testable import StoreBusSDK

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

    @Test("ReadChunk through a gateway: the bytes as base64 in the JSON and as a frame of their own (data_frame) are the same, with the same digests, the attachment only when asked")
    func dataFrame() async throws {
        let fixture = try DownloadFixture(megabytes: 1)
        defer { fixture.directory.remove() }
        try await fixture.cluster().running { cluster in
            let (phone, recorder) = try await cluster.device("carol", downloads: fixture.directory.url.appendingPathComponent("phone-downloads"))
            let bought = try await cluster.buy(DownloadFixture.levelPack, phone, recorder)
            // No device pulls it: this connection reads the chunks itself.
            await phone.close()
            let connection = try StoreConnection(configuration: cluster.configuration(account: "carol"))
            let ref = Storebus_Download_V1_DownloadRef.with {
                $0.transactionIdentifier = bought.id
                $0.contentIdentifier = bought.downloads.first?.contentIdentifier ?? ""
            }
            let started = try await connection.call(Storebus_Download_V1_Download.startDownloads, .with { $0.downloads = [ref] })
            let sha256 = try #require(started.downloads.first).sha256
            var packages: [[UInt8]] = []
            var piecesSHA256: Set<String> = []
            for frame in [false, true] {
                var package: [UInt8] = []
                while true {
                    let request = Storebus_Download_V1_ReadChunkRequest.with {
                        $0.queue = connection.configuration.queue
                        $0.download = ref
                        $0.offset = Int64(package.count)
                        $0.maxBytes = 30_000
                        $0.dataFrame = frame
                    }
                    let answer = try await connection.callRawReply(path: Storebus_Download_V1_Download.readChunk.path, idempotent: true, body: try JSONCodec.encode(request))
                    #expect((answer.attachment != nil) == frame)
                    let (response, chunk) = try ReadChunkJSON.decode(answer.body, attachment: answer.attachment)
                    let data = chunk.bytes
                    #expect(response.dataFrame == frame && response.offset == Int64(package.count))
                    #expect(response.chunkSha256 == ContentPackage.hex(SHA256.hash(data: data)))
                    #expect(response.pieceBytes == 262_144)
                    piecesSHA256.insert(response.piecesSha256)
                    package += data
                    if response.eof || data.isEmpty { break }
                }
                packages.append(package)
            }
            #expect(packages[0] == packages[1] && packages[0].count == 86_528)
            #expect(ContentPackage.hex(SHA256.hash(data: packages[1])) == sha256)
            // Every answer gives the digest of the package's pieces' digests (one piece here).
            #expect(piecesSHA256 == [ContentPackage.PiecesDigest([ContentPackage.hex(SHA256.hash(data: packages[1]))]).finalize()])
            await connection.close()
        }
    }
}
