import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import Testing

/// A package damaged on the download service's disk after it was made: the device checks each
/// chunk against the digest the service recorded when it made the package, asks again, and gives
/// up saying why; it never places damaged content.
@Suite(.serialized)
struct DownloadIntegrityTests {
    @Test("a package damaged on the server's disk: the device's download fails as damaged, and no content is placed")
    func damagedOnServer() async throws {
        let fixture = try DownloadFixture(megabytes: 1)
        defer { fixture.directory.remove() }
        try await fixture.cluster(gatewayCount: 1).running { cluster in
            // One byte flipped in the middle of the package, as a failing disk would.
            let package = try cluster.packageFile(of: DownloadFixture.levelPack)
            let handle = try FileHandle(forUpdating: package)
            let middle = try handle.seekToEnd() / 2
            try handle.seek(toOffset: middle)
            let byte = try #require(try handle.read(upToCount: 1)?.first)
            try handle.seek(toOffset: middle)
            try handle.write(contentsOf: [byte ^ 0x5A])
            try handle.close()

            let downloads = fixture.directory.url.appendingPathComponent("phone-downloads")
            let (phone, recorder) = try await cluster.device("alice", downloads: downloads)
            let bought = try await cluster.buy(DownloadFixture.levelPack, phone, recorder)
            _ = try await phone.startDownloads(bought.downloads)
            #expect(await recorder.download(bought.id, reaches: .failed, timeout: .seconds(120)), "\(recorder.downloadStates(of: bought.id))")
            let failed = try #require(recorder.lastDownload(of: bought.id))
            // The service serves the digests it recorded when it made the package: the device finds
            // the chunk damaged. With fast paths off it hashes each chunk as it reads it, the chunk
            // matches, and the whole package's SHA-256 does not.
            let servicesFast = FastPaths.enabled(environmentValue: ProcessInfo.processInfo.environment["STOREBUS_FAST_PATHS"])
            let why = servicesFast ? "chunks of the content keep arriving damaged" : "does not match its SHA-256"
            #expect(failed.error?.localizedDescription.contains(why) == true, "\(String(describing: failed.error))")
            #expect(failed.contentURL == nil, "no content placed")
            let placed = (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? []
            #expect(!placed.contains { !$0.hasSuffix(".partial") && !$0.hasSuffix(".partial.json") }, "\(placed)")
            await phone.close()
        }
    }
}
