import Testing

@testable import StoreBusSDK

/// The download engine's window of chunk reads: how many in flight, and how far ahead of the bytes
/// kept.
@Suite("Download chunk window")
struct ChunkWindowTests {
    @Test("one read until the package is identified, then the window in order of offset, never past its end")
    func fills() {
        var window = DownloadEngine.ChunkWindow(chunk: 10, window: 4, from: 0)
        #expect(window.offsetsToRead(identified: false, length: 0, kept: 0) == [0])
        #expect(window.offsetsToRead(identified: false, length: 0, kept: 0).isEmpty, "one at a time until identified")
        window.answered()
        #expect(window.offsetsToRead(identified: true, length: 45, kept: 10) == [10, 20, 30, 40])
        window.answered()
        #expect(window.offsetsToRead(identified: true, length: 45, kept: 20).isEmpty, "the end of the package")
    }

    @Test("while the first chunk missing is asked again, the others do not run on past a window beyond the bytes kept")
    func boundedAheadOfKept() {
        var window = DownloadEngine.ChunkWindow(chunk: 10, window: 4, from: 0)
        #expect(window.offsetsToRead(identified: true, length: 1000, kept: 0) == [0, 10, 20, 30])
        // Chunk 0 fails and is asked again; 10, 20 and 30 arrive (written ahead, kept still 0).
        window.answered()
        window.retrying()
        for _ in 0..<3 { window.answered() }
        #expect(window.offsetsToRead(identified: true, length: 1000, kept: 0).isEmpty, "nothing past 40 while 0 is missing: \(window.inFlight) in flight")
        // Chunk 0 arrives: the bytes kept jump to 40, and the window moves on.
        window.answered()
        #expect(window.offsetsToRead(identified: true, length: 1000, kept: 40) == [40, 50, 60, 70])
    }
}
