import ContentPackage
import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// 64 MiB of hosted content through real processes: paused and resumed, across a SIGKILL of the
/// download service and of a gateway, byte for byte.
@Suite(.serialized)
struct DownloadTransferTests {
    /// The status the download service gives of `download`.
    static func status(_ connection: StoreConnection, _ download: Download) async throws -> Storebus_Download_V1_DownloadStatus {
        let answer = try await connection.call(
            Storebus_Download_V1_Download.getDownloads,
            .with {
                $0.downloads = [
                    .with {
                        $0.transactionIdentifier = download.transactionIdentifier
                        $0.contentIdentifier = download.contentIdentifier
                    }
                ]
            })
        guard let status = answer.downloads.first else { throw ClusterFailure(description: "no status of \(download.contentIdentifier)") }
        return status
    }

    /// Waits until this queue's own progress ticks say at least `fraction` of the download is in.
    static func progress(_ recorder: Recorder, _ id: String, atLeast fraction: Double) async -> Bool {
        await recorder.wait(timeout: .seconds(120)) { recorder in
            recorder.callbacks.contains { callback in
                guard callback.seq == 0, case .updatedDownloads(let downloads) = callback.event else { return false }
                return downloads.contains { $0.transactionIdentifier == id && $0.progress >= fraction }
            }
        }
    }

    /// The big file as the device unpacked it matches the one served.
    static func checkContent(_ fixture: DownloadFixture, _ download: Download?) throws {
        let folder = try #require(download?.contentURL)
        let got = folder.appendingPathComponent("Contents/big.bin")
        #expect(try DownloadFixture.sha256(of: got) == DownloadFixture.sha256(of: fixture.contentRoot.appendingPathComponent("bigpack/big.bin")))
        let size = (try FileManager.default.attributesOfItem(atPath: got.path)[.size] as? NSNumber)?.int64Value
        #expect(size == fixture.bigFileLength)
    }

    @Test("64 MiB paused half-way and resumed: progress ticks every 250 ms, the resume continues from the bytes kept, bytes sent at most the package plus two windows, byte for byte")
    func pauseAndResume() async throws {
        let fixture = try DownloadFixture(megabytes: 64)
        defer { fixture.directory.remove() }
        try await fixture.cluster().running { cluster in
            let directory = fixture.directory.url.appendingPathComponent("phone")
            let (phone, recorder) = try await cluster.device("alice", downloads: directory, window: 4)
            let bought = try await cluster.buy(DownloadFixture.bigPack, phone, recorder)
            let download = try #require(bought.downloads.first)
            #expect(download.contentLength == fixture.packageLength)

            try await phone.startDownloads([download])
            #expect(await Self.progress(recorder, bought.id, atLeast: 0.5))
            let paused = try await phone.pauseDownloads([download])
            #expect(paused.map(\.state) == [.paused])
            let kept = phone.bytesKept(of: download)
            #expect(kept > 0 && kept < fixture.packageLength, "kept \(kept) of \(fixture.packageLength)")
            let partial = directory.appendingPathComponent("\(bought.id)-\(DownloadFixture.bigPack).partial")
            let partialSize = (try FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? NSNumber)?.int64Value
            // The bytes kept, and at most the chunks that had come ahead of them (a window less one)
            // past the one still missing, its hole included: a window in all, which a resume cuts
            // off before it goes on.
            #expect(partialSize.map { $0 >= kept && $0 <= kept + 4 * 256 * 1024 } == true, "partial \(partialSize ?? -1), kept \(kept)")
            #expect(await recorder.download(bought.id, reaches: .paused))
            // Ticks while active: every 250 ms at most apart, each with a progress and a time left.
            let ticks = recorder.callbacks.compactMap { callback -> Download? in
                guard callback.seq == 0, case .updatedDownloads(let downloads) = callback.event else { return nil }
                return downloads.first { $0.transactionIdentifier == bought.id }
            }
            #expect(ticks.count >= 2)
            #expect(ticks.allSatisfy { $0.state == .active && (0...1).contains($0.progress) && ($0.timeRemaining == -1 || $0.timeRemaining >= 0) })
            #expect(ticks.contains { $0.timeRemaining > 0 })

            // A read while paused sends nothing.
            let admin = try StoreConnection(configuration: cluster.configuration(account: "alice"))
            let sentAtPause = try await Self.status(admin, download).bytesSent
            await #expect(throws: StoreError.self) {
                _ = try await admin.call(
                    Storebus_Download_V1_Download.readChunk,
                    .with {
                        $0.download = .with {
                            $0.transactionIdentifier = bought.id
                            $0.contentIdentifier = DownloadFixture.bigPack
                        }
                        $0.offset = kept
                    })
            }
            #expect(try await Self.status(admin, download).bytesSent == sentAtPause)

            try await phone.resumeDownloads([download])
            #expect(await recorder.download(bought.id, reaches: .finished, timeout: .seconds(180)))
            #expect(recorder.downloadStates(of: bought.id) == [.active, .paused, .active, .finished])
            try Self.checkContent(fixture, recorder.lastDownload(of: bought.id))
            let sent = try await Self.status(admin, download).bytesSent
            // Sent twice at most: the window of reads in flight at the pause (served, then dropped by
            // the stopped transfer) and the chunks that had come ahead of the bytes in order (a
            // window less one, not kept: the bytes kept are contiguous).
            let window = Int64(4 * 256 * 1024)
            #expect(sent >= fixture.packageLength && sent <= fixture.packageLength + 2 * window, "sent \(sent) for a package of \(fixture.packageLength)")
            await admin.close()
            await phone.close()
        }
    }

    @Test(
        "SIGKILLed mid-transfer, the download service (started again) or a gateway (the other takes over): the device goes on from where it was, to the right SHA-256",
        arguments: ["download service", "gateway"])
    func killedMidTransfer(process: String) async throws {
        let fixture = try DownloadFixture(megabytes: 64)
        defer { fixture.directory.remove() }
        try await fixture.cluster().running { cluster in
            let directory = fixture.directory.url.appendingPathComponent("phone")
            let (phone, recorder) = try await cluster.device("alice", downloads: directory)
            let bought = try await cluster.buy(DownloadFixture.bigPack, phone, recorder)
            try await phone.startDownloads(bought.downloads)
            #expect(await Self.progress(recorder, bought.id, atLeast: 0.25))
            if process == "gateway" {
                await cluster.gateways[0].kill()
            } else {
                await cluster.download.kill()
                try await cluster.startDownload()
            }
            #expect(await recorder.download(bought.id, reaches: .finished, timeout: .seconds(180)))
            #expect(recorder.downloadStates(of: bought.id) == [.active, .finished])
            try Self.checkContent(fixture, recorder.lastDownload(of: bought.id))
            await phone.close()
        }
    }
}
