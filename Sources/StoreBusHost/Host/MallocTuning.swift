import CMallocTuning

/// glibc's malloc, set for processes that move large messages (a fast path: a service started with
/// `STOREBUS_FAST_PATHS=off` keeps glibc's defaults).
///
/// A download's 256 KiB chunk crosses a gateway in three buffers: the one libzmq reads it into,
/// the bytes the RPC client hands on, and the copy `zmq_send` makes. By default glibc gives a block
/// over 128 KiB a mapping of its own until one is freed, and gives the free memory at the top of a
/// thread's arena back to the kernel once it passes twice the largest such block: with a window of
/// chunks in flight, nearly every buffer was new pages, each 4 KiB a page fault and a page zeroed
/// (a third of the gateway's CPU in a download, in a profile). Blocks of up to
/// ``mmapThreshold`` now come from the arenas, and an arena keeps up to ``trimThreshold`` free.
public enum MallocTuning {
    /// Blocks this large or larger get a mapping of their own (a 1 MiB chunk and its copies do not).
    public static let mmapThreshold = 4 << 20
    /// Free memory at an arena's top beyond this goes back to the kernel.
    public static let trimThreshold = 64 << 20

    /// Sets both thresholds (which also ends glibc's adjusting of them); false where that failed or
    /// the C library is not glibc.
    @discardableResult
    public static func apply() -> Bool {
        storebus_malloc_set_thresholds(Int32(mmapThreshold), Int32(trimThreshold)) == 1
    }
}
