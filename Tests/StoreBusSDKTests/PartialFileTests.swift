import ContentPackage
import Crypto
import Foundation
import StoreBusTesting
import Testing

@testable import StoreBusSDK

/// A download's partial file checks the whole package by the digest of its pieces' digests (the
/// fast path: each byte hashed once, when the device's chunks are the service's pieces) or by
/// hashing its bytes again (the plain twin): the same verdict for packages of every length, chunks
/// in any order, resumes from any chunk, and damage served or met on the device's disk.
struct PartialFileTests {
    static let piece = 4_096

    /// What a download meets.
    enum Trouble: CaseIterable {
        case none
        /// One chunk arrives with a byte changed, its digest that of what arrived (a service
        /// hashing a package damaged on its disk as it reads it).
        case servedDamaged
        /// Stopped after some chunks, reopened and finished.
        case resumed
        /// Stopped, a byte of what was kept changed on the device's disk, reopened and finished.
        case damagedWhileStopped
        /// Stopped, and the sidecar rewritten as an SDK before the pieces' digests wrote it.
        case resumedFromOldSidecar
    }

    /// Downloads `package` into a partial file in `directory`, chunks in a random order, meeting
    /// `trouble`; the verdict and whether the pieces checked it.
    static func download(
        _ package: [UInt8], pieces: String, trouble: Trouble, piecesAllowed: Bool, chunkBytes: Int = piece, in directory: URL, using random: inout SeededRandom
    ) throws -> (intact: Bool, checksPieces: Bool) {
        let partial = directory.appendingPathComponent("package.partial"), sidecar = directory.appendingPathComponent("package.partial.json")
        try? FileManager.default.removeItem(at: partial)
        try? FileManager.default.removeItem(at: sidecar)
        let length = Int64(package.count)
        var file = try DownloadEngine.PartialFile.opening(partial, sidecar: sidecar, length: length, chunkBytes: Int64(chunkBytes), piecesAllowed: piecesAllowed)
        file.identify(version: "1.0", sha256: ContentPackage.hex(SHA256.hash(data: package)), length: length, pieces: (pieces, Int64(piece)))
        var offsets = Array(stride(from: 0, to: package.count, by: chunkBytes)).shuffled(using: &random)
        let damaged = trouble == .servedDamaged ? offsets.randomElement(using: &random) : nil
        func write(_ offset: Int) throws {
            var chunk = Array(package[offset..<min(offset + chunkBytes, package.count)])
            if offset == damaged { chunk[Int.random(in: 0..<chunk.count, using: &random)] ^= 0x20 }
            try file.write(.decoded(chunk), at: Int64(offset), digest: ContentPackage.hex(SHA256.hash(data: chunk)))
        }
        if [.resumed, .damagedWhileStopped, .resumedFromOldSidecar].contains(trouble) {
            // Chunks in order up to a point, kept, and the file closed.
            offsets.sort()
            let stop = Int.random(in: 1...offsets.count, using: &random)
            for offset in offsets[..<stop] { try write(offset) }
            try file.keep()
            offsets = Array(offsets[stop...]).shuffled(using: &random)
            if trouble == .damagedWhileStopped {
                let handle = try FileHandle(forUpdating: partial)
                let at = UInt64.random(in: 0..<UInt64(file.contiguous), using: &random)
                try handle.seek(toOffset: at)
                try handle.write(contentsOf: [package[Int(at)] ^ 0x01])
                try handle.close()
            }
            if trouble == .resumedFromOldSidecar {
                var old = try JSONSerialization.jsonObject(with: Data(contentsOf: sidecar)) as! [String: Any]
                old["piecesSHA256"] = nil
                old["pieceBytes"] = nil
                try JSONSerialization.data(withJSONObject: old).write(to: sidecar)
            }
            file = try DownloadEngine.PartialFile.opening(partial, sidecar: sidecar, length: length, chunkBytes: Int64(chunkBytes), piecesAllowed: piecesAllowed)
            #expect(file.identified && file.contiguous == file.sidecar.kept)
        }
        for offset in offsets { try write(offset) }
        return (file.isWholeAndIntact(), file.checksPieces)
    }

    @Test("packages of 1 byte to 9 pieces, every trouble, 400 downloads: the pieces' digests and the package's SHA-256 give the same verdict, and the pieces check whenever they may")
    func sameVerdicts() throws {
        let directory = try TemporaryDirectory(prefix: "partial")
        defer { directory.remove() }
        var random = SeededRandom(seed: 20_261_201)
        var differ: [String] = []
        for round in 0..<400 {
            let trouble = Trouble.allCases[round % Trouble.allCases.count]
            let length = [1, Self.piece - 1, Self.piece, Self.piece + 1, 3 * Self.piece, Int.random(in: 1...(9 * Self.piece), using: &random)].randomElement(using: &random)!
            let package = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let pieces = ContentPackage.PiecesDigest(
                stride(from: 0, to: length, by: Self.piece).map { ContentPackage.hex(SHA256.hash(data: package[$0..<min($0 + Self.piece, length)])) }
            ).finalize()
            // Both ways meet the same chunks in the same order.
            var verdicts: [Bool] = []
            var replay = random
            for piecesAllowed in [true, false] {
                replay = random
                let (intact, checksPieces) = try Self.download(package, pieces: pieces, trouble: trouble, piecesAllowed: piecesAllowed, in: directory.url, using: &replay)
                verdicts.append(intact)
                #expect(checksPieces == (piecesAllowed && trouble != .resumedFromOldSidecar), "round \(round), \(trouble)")
            }
            random = replay
            let expected = [.none, .resumed, .resumedFromOldSidecar].contains(trouble)
            if verdicts != [expected, expected] { differ.append("round \(round), \(trouble), \(length) bytes: \(verdicts)") }
        }
        #expect(differ.isEmpty, "\(differ.prefix(5))")
    }

    @Test("the pieces' digests are what checks: one the service got wrong fails the fast path alone; chunks other than the pieces, or no digest given, hash the package again")
    func piecesDecide() throws {
        let directory = try TemporaryDirectory(prefix: "partial")
        defer { directory.remove() }
        var random = SeededRandom(seed: 7)
        let package = (0..<(5 * Self.piece + 100)).map { _ in UInt8.random(in: 0...255, using: &random) }
        let wrong = ContentPackage.PiecesDigest(["not the pieces"]).finalize()
        var fast = try Self.download(package, pieces: wrong, trouble: .none, piecesAllowed: true, in: directory.url, using: &random)
        #expect(fast.checksPieces && !fast.intact)
        let plain = try Self.download(package, pieces: wrong, trouble: .none, piecesAllowed: false, in: directory.url, using: &random)
        #expect(!plain.checksPieces && plain.intact)
        // Chunks of twice the pieces' size: the package is hashed again, and its SHA-256 decides.
        fast = try Self.download(package, pieces: wrong, trouble: .none, piecesAllowed: true, chunkBytes: 2 * Self.piece, in: directory.url, using: &random)
        #expect(!fast.checksPieces && fast.intact)
        fast = try Self.download(package, pieces: "", trouble: .none, piecesAllowed: true, in: directory.url, using: &random)
        #expect(!fast.checksPieces && fast.intact)
    }
}
