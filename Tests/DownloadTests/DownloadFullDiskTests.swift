import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// A full disk on the device: `storectl download` writing into a small tmpfs (its own mount
/// namespace, made with unshare), then resumed once the tmpfs is grown.
@Suite(.serialized)
struct DownloadFullDiskTests {
    @Test("a full disk fails the download with that error and keeps the partial file; once space is freed, a resume continues from the bytes kept to the right content")
    func fullDisk() async throws {
        let fixture = try DownloadFixture(megabytes: 64)
        defer { fixture.directory.remove() }
        try await fixture.cluster(gatewayCount: 1).running { cluster in
            // The device is storectl; this queue of the same device watches its callbacks.
            let (watcher, recorder) = try await cluster.device("alice", downloads: fixture.directory.url.appendingPathComponent("unused"))
            let bought = try await cluster.buy(DownloadFixture.bigPack, watcher, recorder)
            let mount = fixture.directory.url.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: mount, withIntermediateDirectories: true)
            let logs = fixture.directory
            let client = [
                "--gateway", cluster.gatewayEndpoints[0], "--api-key", appKey, "--app", puzzle, "--account", "alice", "--device", "phone",
                "--directory", mount.path,
                // The test is about a full disk, not about how fast a busy machine answers.
                "--timeout", "120"
            ]
            let storectl = Executables.directory.appendingPathComponent("storectl").path
            func quoted(_ words: [String]) -> String { words.map { "'\($0)'" }.joined(separator: " ") }
            // In a mount namespace of its own (a user namespace too when not root): a 24 MiB tmpfs
            // for a 64 MiB package, then grown to 256 MiB (the package and its unpacked files).
            let script = """
                set -u
                mount -t tmpfs -o size=24m tmpfs '\(mount.path)' || { echo "cannot mount a tmpfs"; exit 90; }
                \(quoted([storectl, "download", "start"] + client + [bought.id])) > '\(logs.path("first.log"))' 2>&1
                echo "first=$?"
                du -b '\(mount.path)'/*.partial | cut -f1 > '\(logs.path("partial-size"))'
                mount -o remount,size=256m '\(mount.path)' || exit 91
                \(quoted([storectl, "download", "resume"] + client + [bought.id])) > '\(logs.path("second.log"))' 2>&1
                echo "second=$?"
                sha256sum '\(mount.path)/\(bought.id)-\(DownloadFixture.bigPack)/Contents/big.bin' | cut -d' ' -f1
                """
            let arguments =
                getuid() == 0
                ? ["--mount", "--propagation", "private", "/bin/sh", "-c", script]
                : ["--user", "--map-root-user", "--mount", "/bin/sh", "-c", script]
            let run = try await runCommand("/usr/bin/unshare", arguments, log: logs.path("unshare.log"))
            let first = (try? String(contentsOfFile: logs.path("first.log"), encoding: .utf8)) ?? ""
            let second = (try? String(contentsOfFile: logs.path("second.log"), encoding: .utf8)) ?? ""
            try #require(!run.output.contains("cannot mount a tmpfs"), "this machine cannot make a tmpfs in a mount namespace: \(run.output)")
            // The first run ends failed, saying why, with the bytes it kept.
            #expect(run.output.contains("first=1"), "\(run.output)\n\(first)")
            #expect(first.contains("No space left on device") && first.contains("bytes kept"), "\(first)\n\(cluster.logs)")
            #expect(first.contains("%"), "a progress line: \(first)")
            let partial = Int64((try? String(contentsOfFile: logs.path("partial-size"), encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
            #expect(partial > 4 << 20 && partial < fixture.packageLength, "partial file of \(partial) bytes kept")
            #expect(await recorder.download(bought.id, reaches: .failed))
            let failed = recorder.callbacks.lazy.compactMap { callback -> Download? in
                guard callback.seq != 0, case .updatedDownloads(let downloads) = callback.event else { return nil }
                return downloads.first { $0.transactionIdentifier == bought.id && $0.state == .failed }
            }.first
            #expect(failed?.error?.localizedDescription.contains("No space left on device") == true, "\(String(describing: failed))")
            #expect(failed?.contentURL == nil)
            // The resume completes, to the right content, having sent about the package once.
            #expect(run.output.contains("second=0"), "\(run.output)\n\(second)")
            #expect(second.contains("finished \(bought.id)"), "\(second)")
            let served = try await DownloadFixture.sha256(of: fixture.contentRoot.appendingPathComponent("bigpack/big.bin"))
            #expect(run.output.contains(served), "\(run.output)")
            #expect(await recorder.download(bought.id, reaches: .finished))
            #expect(recorder.downloadStates(of: bought.id) == [.active, .failed, .active, .finished])
            let status = try await DownloadTransferTests.status(watcher.connection, try #require(bought.downloads.first))
            #expect(status.bytesSent < fixture.packageLength + partial / 2, "the resume went on from the bytes kept: \(status.bytesSent) sent")
            await watcher.close()
        }
    }
}
