import Crypto
import Foundation
import StoreBusTesting
import Testing

@testable import ContentPackage

/// Hosted content packages: what they hold, that tar reads them, and what stops one being made.
struct ContentPackageTests {
    /// Files of the given sizes (random bytes) in a new directory.
    static func files(_ sizes: [Int], in directory: TemporaryDirectory, seed: UInt64 = 37) throws -> [ContentPackage.File] {
        var random = SeededRandom(seed: seed)
        return try sizes.enumerated().map { index, size in
            let path = index == 0 ? "levels/\(index).json" : "file-\(index).bin"
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
            let url = directory.url.appendingPathComponent("source/\(path)")
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
            let digest = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
            return ContentPackage.File(path: path, source: url, length: Int64(size), sha256: digest)
        }
    }

    @Test("a package is as long as announced, hashes to what it reports, is the same bytes every time, and GNU tar unpacks the files byte for byte")
    func packsAndUnpacks() async throws {
        let directory = try TemporaryDirectory(prefix: "pkg")
        defer { directory.remove() }
        let sizes = [0, 1, 511, 512, 513, 70_000, 1 << 20]
        let files = try Self.files(sizes, in: directory)
        let package = directory.url.appendingPathComponent("content.tar")
        let (length, sha256) = try ContentPackage.write(files, to: package)
        #expect(length == ContentPackage.archiveLength(fileLengths: sizes.map(Int64.init)))
        let bytes = try Data(contentsOf: package)
        #expect(Int64(bytes.count) == length)
        #expect(SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined() == sha256)
        // Again: the same bytes
        let again = directory.url.appendingPathComponent("again.tar")
        #expect(try ContentPackage.write(files, to: again).sha256 == sha256)
        // tar lists and extracts every file as it was
        let out = directory.url.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let tar = try await runCommand("/usr/bin/tar", ["-xf", package.path, "-C", out.path])
        #expect(tar.status == 0, "\(tar.output)")
        for file in files {
            #expect(try Data(contentsOf: out.appendingPathComponent(file.path)) == Data(contentsOf: file.source), "\(file.path)")
        }
        let listing = try await runCommand("/usr/bin/tar", ["-tvf", package.path])
        #expect(listing.output.contains("levels/0.json") && listing.output.contains("rw-r--r-- 0/0"), "\(listing.output)")
    }

    @Test("a file missing, longer, shorter or with another SHA-256 than the catalog says stops the package, naming the file; no partial package is left")
    func refusesWhatDisagrees() throws {
        let directory = try TemporaryDirectory(prefix: "pkg")
        defer { directory.remove() }
        let files = try Self.files([1000, 2000], in: directory)
        let package = directory.url.appendingPathComponent("content.tar")
        var cases: [(String, [ContentPackage.File])] = []
        var longer = files; longer[1].length = 1999
        cases.append(("longer than the catalog's 1999 bytes", longer))
        var shorter = files; shorter[1].length = 2001
        cases.append(("has 2000 bytes, the catalog says 2001", shorter))
        var hashed = files; hashed[0].sha256 = String(repeating: "0", count: 64)
        cases.append(("the catalog says 0000", hashed))
        var missing = files; missing[0].source = directory.url.appendingPathComponent("nowhere")
        cases.append(("no such file", missing))
        for (expected, candidate) in cases {
            do {
                _ = try ContentPackage.write(candidate, to: package)
                Issue.record("packed despite: \(expected)")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
            #expect(!FileManager.default.fileExists(atPath: package.path))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0.hasSuffix(".partial") }
            #expect(leftovers.isEmpty)
        }
        // A path that ustar cannot hold
        var long = files; long[0].path = String(repeating: "x", count: 120)
        #expect(throws: ContentPackage.Failure.self) { _ = try ContentPackage.write(long, to: package) }
        // A long path that splits at a slash is fine
        var split = files; split[0].path = String(repeating: "d", count: 90) + "/" + String(repeating: "f", count: 90)
        #expect(try ContentPackage.write(split, to: package).length == ContentPackage.archiveLength(fileLengths: [1000, 2000]))
    }

    @Test("sizes past 8 GiB are written in base-256, as GNU tar reads them")
    func largeSizes() {
        let field = ContentPackage.size(1 << 40)
        #expect(field.count == 12 && field[0] == 0x80)
        #expect(field[1...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } == 1 << 40)
        #expect(ContentPackage.size(1000) == Array("00000001750".utf8) + [0])
    }

    @Test("unpacking with the kernel's copy (the fast path) and by reads and writes (its plain twin), synced or not, makes the same files as the sources; a cut archive stops both")
    func unpacksBothWays() throws {
        let directory = try TemporaryDirectory(prefix: "pkg")
        defer { directory.remove() }
        let sizes = [0, 1, 511, 512, 513, 70_000, (1 << 20) + 3, 3 << 20]
        let files = try Self.files(sizes, in: directory, seed: 41)
        let package = directory.url.appendingPathComponent("content.tar")
        let (length, _) = try ContentPackage.write(files, to: package)
        for (inKernel, durable) in [(true, false), (false, false), (true, true), (false, true)] {
            let out = directory.url.appendingPathComponent("out-\(inKernel)-\(durable)")
            try ContentPackage.unpack(package, into: out, inKernel: inKernel, durable: durable)
            for file in files {
                #expect(try Data(contentsOf: out.appendingPathComponent(file.path)) == Data(contentsOf: file.source), "\(file.path), in kernel: \(inKernel), synced: \(durable)")
            }
            let found = FileManager.default.enumerator(atPath: out.path)?.compactMap { $0 as? String }.filter { !$0.hasSuffix("levels") } ?? []
            #expect(Set(found) == Set(files.map(\.path)))
        }
        #expect(throws: ContentPackage.Failure.self) { try ContentPackage.syncFolder(directory.url.appendingPathComponent("no-such-folder")) }
        // Cut in the middle of the largest file's bytes, and in a header
        let whole = try Data(contentsOf: package)
        for cut in [Int(length) - (1 << 20), 512 + 100] {
            let damaged = directory.url.appendingPathComponent("cut-\(cut).tar")
            try whole.prefix(cut).write(to: damaged)
            for inKernel in [true, false] {
                #expect(throws: ContentPackage.Failure.self, "cut at \(cut), in kernel: \(inKernel)") {
                    try ContentPackage.unpack(damaged, into: directory.url.appendingPathComponent("cut-\(cut)-\(inKernel)"), inKernel: inKernel)
                }
            }
        }
    }

    @Test("unpacking an archive as it grows, in pieces of any size (a download's fast path), makes the files unpacking it whole makes; it does not finish before the archive's end is in")
    func unpacksAsItGrows() throws {
        let directory = try TemporaryDirectory(prefix: "pkg")
        defer { directory.remove() }
        let sizes = [0, 1, 511, 512, 513, 70_000, (1 << 20) + 3, 3 << 20]
        let files = try Self.files(sizes, in: directory, seed: 43)
        let package = directory.url.appendingPathComponent("content.tar")
        _ = try ContentPackage.write(files, to: package)
        let whole = [UInt8](try Data(contentsOf: package))
        var random = SeededRandom(seed: 5)
        for (round, (inKernel, durable)) in [(true, true), (false, false), (true, false)].enumerated() {
            let growing = directory.url.appendingPathComponent("growing-\(round).tar")
            FileManager.default.createFile(atPath: growing.path, contents: nil)
            let handle = try FileHandle(forWritingTo: growing)
            defer { try? handle.close() }
            let out = directory.url.appendingPathComponent("grown-\(round)")
            let unpacker = try ContentPackage.Unpacker(growing, into: out, inKernel: inKernel, durable: durable)
            var written = 0
            while written < whole.count {
                // Small pieces (headers cut anywhere) and large ones (files' bytes across pieces).
                let piece = Bool.random(using: &random) ? Int.random(in: 1...700, using: &random) : Int.random(in: 1...400_000, using: &random)
                let end = min(whole.count, written + piece)
                try handle.write(contentsOf: whole[written..<end])
                written = end
                try unpacker.advance(to: Int64(written))
                if written < whole.count - 1024 {
                    #expect(!unpacker.ended)
                    #expect(throws: ContentPackage.Failure.self) { try unpacker.finish() }
                }
            }
            #expect(unpacker.ended && unpacker.position <= Int64(whole.count))
            try unpacker.finish()
            for file in files {
                #expect(try Data(contentsOf: out.appendingPathComponent(file.path)) == Data(contentsOf: file.source), "\(file.path), in kernel: \(inKernel), synced: \(durable)")
            }
            let found = FileManager.default.enumerator(atPath: out.path)?.compactMap { $0 as? String }.filter { !$0.hasSuffix("levels") } ?? []
            #expect(Set(found) == Set(files.map(\.path)))
        }
    }
}
