import Foundation
import StoreBusHost
import Testing

#if canImport(Glibc)
import Glibc

/// The services' malloc thresholds (``MallocTuning``, a fast path): counted in page faults, which
/// is what the defaults cost a gateway moving chunks.
struct MallocTuningTests {
    /// Minor page faults of the calling thread so far.
    static func threadFaults() -> Int {
        var usage = rusage()
        // RUSAGE_THREAD (1): Linux's, declared only under _GNU_SOURCE, which Glibc's module is not built with.
        getrusage(__rusage_who_t(1), &usage)
        return usage.ru_minflt
    }

    /// Takes `blocks` blocks of `bytes` each, writes every page of them, and frees them all: what
    /// a window of chunks in flight does to a process's heap.
    static func cycle(blocks: Int, bytes: Int) {
        let taken = (0..<blocks).map { _ in malloc(bytes)! }
        for block in taken {
            for page in stride(from: 0, to: bytes, by: 4096) { block.storeBytes(of: 1, toByteOffset: page, as: UInt8.self) }
        }
        for block in taken { free(block) }
    }

    @Test(
        "with the thresholds set, a window of 512 KiB blocks taken, written and freed over and over reuses its pages: a fraction of a page fault per page, where glibc's defaults fault on every page every time"
    )
    func blocksReusePages() async throws {
        #expect(MallocTuning.apply())
        let (blocks, bytes, rounds) = (6, 512 << 10, 40)
        let faults = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            // A thread of its own: the faults counted are this loop's alone.
            let thread = Thread {
                Self.cycle(blocks: blocks, bytes: bytes)
                let before = Self.threadFaults()
                for _ in 0..<rounds { Self.cycle(blocks: blocks, bytes: bytes) }
                continuation.resume(returning: Self.threadFaults() - before)
            }
            thread.start()
        }
        let pages = rounds * blocks * bytes / 4096
        #expect(faults < pages / 10, "\(faults) page faults writing \(pages) pages")
    }
}
#endif
