import Testing

@testable import StoreBus

@Suite("Queue names")
struct QueueNamesTests {
    @Test("two names are the same only byte for byte: not a prefix, not another normalization of the same text")
    func sameName() {
        let long = String(repeating: "device-", count: 20)
        #expect(QueueNames.same("", ""))
        #expect(QueueNames.same("alice", "alice"))
        #expect(QueueNames.same(long + "é", long + "é"))
        #expect(!QueueNames.same("alice", "alic"))
        #expect(!QueueNames.same("", "a"))
        #expect(!QueueNames.same(long + "a", long + "b"))
        // "café" composed (U+00E9) and decomposed (e, U+0301): equal as Strings, different names.
        #expect("caf\u{E9}" == "cafe\u{301}")
        #expect(!QueueNames.same("caf\u{E9}", "cafe\u{301}"))
    }
}
