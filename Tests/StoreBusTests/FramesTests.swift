import Testing
import ZeroMQ

@testable import StoreBus

@Suite("Wire frames")
struct FramesTests {
    @Test(
        "a header splits into the lines split(separator:) gives, empty ones kept",
        arguments: [
            "", "\n", "\n\n", "SB1Q", "SB1Q\n", "\nSB1Q", "SB1Q\nreq-1\n\n/a.B/C\nk: v", "a\n\n\nb\n", "é\nü\n"
        ])
    func headerLines(header: String) {
        let bytes = Array(header.utf8)
        let lines = Frames.lines(bytes)
        #expect(lines.map(Array.init) == bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init))
        #expect(lines.count == bytes.count { $0 == 0x0A } + 1)
    }

    @Test(
        "a metadata line parses only as `key: value` with a valid key and no carriage return",
        arguments: [
            ("session: abc", true), ("session:abc", true), ("session: ", true), ("x-1_a.b: v v", true),
            ("Session: abc", false), (": abc", false), ("session abc", false), ("sess ion: abc", false),
            ("session: abc\r", false), ("session: \(String(repeating: "t", count: 150))\r", false),
            ("\(String(repeating: "k", count: 64)): v", true), ("\(String(repeating: "k", count: 65)): v", false),
            ("clé: v", false)
        ])
    func metadataLine(line: String, valid: Bool) throws {
        let parsed = Metadata(lines: [ArraySlice(line.utf8)])
        #expect((parsed != nil) == valid)
        if let parsed, let colon = line.firstIndex(of: ":") {
            let key = String(line[..<colon])
            var value = line[line.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
            #expect(parsed.entries == [Metadata.Entry(key: key, value: String(value))])
        }
    }

    @Test("a response built by the server parses at the client, routing, body and attachment untouched")
    func responseRoundTrip() throws {
        let body = Array(#"{"payload":"x"}"#.utf8)
        for code in [StatusCode.ok, .notFound, .internalError] {
            for attachment in [nil, [], [0x00, 0x0A, 0xFF]] as [[UInt8]?] {
                let frames = Frames.response(envelope: Envelope(routing: []), requestID: Array("req-42".utf8), code: code, body: body, attachment: attachment)
                #expect(frames.count == (attachment == nil ? 3 : 4))
                let parsed = try #require(Frames.parseAtClient(frames))
                #expect(parsed.requestID == Array("req-42".utf8))
                #expect(parsed.code == code)
                #expect(parsed.body == body)
                #expect(parsed.attachment?.bytes == attachment)
            }
        }
    }

    @Test(
        "a response header that is not exactly tag, request id and status code is refused",
        arguments: [
            "SB1R\nreq-1",
            "SB1R\nreq-1\n",
            "SB1R\nreq-1\n0\n",
            "SB1R\nreq-1\n0\nextra",
            "SB1Q\nreq-1\n0",
            "SB1R\nreq-1\nOK",
            "SB1R\nreq-1\n99999999999",
            "SB1Rx\nreq-1\n0",
            ""
        ])
    func malformedResponseHeader(header: String) {
        #expect(Frames.parseAtClient([[], Array(header.utf8), []]) == nil)
    }

    @Test("a response whose frames do not follow the delimiter as header, body and at most one attachment is refused")
    func malformedResponseShape() {
        let header = Array("SB1R\nreq-1\n0".utf8)
        #expect(Frames.parseAtClient([header, []]) == nil)
        #expect(Frames.parseAtClient([[], header]) == nil)
        #expect(Frames.parseAtClient([[], header, [], [1]])?.attachment?.bytes == [1])
        #expect(Frames.parseAtClient([[], header, [], [], []]) == nil)
        // An attachment received held comes beside the frames: only after a body.
        #expect(Frames.parseAtClient([[], header, []], attachment: HeldFrame([1]))?.attachment?.bytes == [1])
        #expect(Frames.parseAtClient([[], header, [], [2]], attachment: HeldFrame([1])) == nil)
    }

    @Test("metadata keeps one value per key: setting replaces it, nil removes it, the last of a key given twice wins")
    func metadataEntries() throws {
        var metadata: Metadata = ["session": "one", "idempotency-key": "k", "session": "two"]
        #expect(metadata.entries.count == 2)
        #expect(metadata["session"] == "two")
        metadata["session"] = "three"
        metadata["principal-app"] = "com.example.app"
        #expect(metadata.values == ["session": "three", "idempotency-key": "k", "principal-app": "com.example.app"])
        metadata["idempotency-key"] = nil
        metadata["absent"] = nil
        #expect(metadata.entries.map(\.key) == ["session", "principal-app"])
        #expect(metadata == Metadata(["principal-app": "com.example.app", "session": "three"]))
        #expect(metadata != Metadata(["principal-app": "com.example.app", "session": "four"]))
        #expect(metadata != Metadata(["principal-app": "com.example.app"]))
        // On the wire, sorted by key; parsed back, a key given twice keeps its last value.
        #expect(metadata.encoded == Array("principal-app: com.example.app\nsession: three".utf8))
        let lines = "session: a\nprincipal-app: b\nsession: c".utf8.split(separator: 0x0A).map { ArraySlice($0) }
        let parsed = try #require(Metadata(lines: lines))
        #expect(parsed.values == ["session": "c", "principal-app": "b"])
        #expect(Metadata(lines: [ArraySlice("Session: a".utf8)]) == nil)
    }

    @Test("a header of thousands of metadata lines keeps each key once, its last value, in the order first given", arguments: [3, Metadata.linearLines, Metadata.linearLines + 1, 5_000])
    func manyMetadataLines(keys: Int) throws {
        // Every key twice, the second time with another value, and a line in between of a key
        // given before.
        var lines: [ArraySlice<UInt8>] = []
        for round in 0..<2 {
            for index in 0..<keys {
                lines.append(ArraySlice("k\(index): v\(index)-\(round)".utf8))
                if index % 7 == 3 { lines.append(ArraySlice("k0: again".utf8)) }
            }
        }
        let metadata = try #require(Metadata(lines: lines))
        #expect(metadata.entries.map(\.key) == (0..<keys).map { "k\($0)" })
        #expect(metadata["k0"] == (keys > 3 ? "again" : "v0-1"))
        #expect(metadata["k\(keys - 1)"] == "v\(keys - 1)-1")
        #expect(metadata.entries.dropFirst().allSatisfy { $0.value.hasSuffix("-1") })
    }

    @Test("a line break is found anywhere in a value, short or long, ASCII or not", arguments: [0, 1, 7, 15, 16, 150])
    func lineBreaks(length: Int) {
        let plain = String(repeating: "é", count: length / 2) + String(repeating: "t", count: length - length / 2)
        #expect(!Metadata.holdsLineBreak(plain))
        for breakCharacter in ["\n", "\r"] {
            for position in [0, length / 2, length] {
                var value = plain
                value.insert(contentsOf: breakCharacter, at: value.index(value.startIndex, offsetBy: min(position, value.count)))
                #expect(Metadata.holdsLineBreak(value), "\(value.debugDescription)")
            }
        }
    }

    @Test("an answer read off a DEALER keeps the frame after its body held, and parses as the frames it was sent as; one with a frame too many is refused")
    func responseReceivedHeld() throws {
        let context = try Context()
        defer { context.terminate() }
        let router = try Socket(context: context, type: .router)
        defer { router.close() }
        try router.bind("inproc://frames-held")
        let dealer = try Socket(context: context, type: .dealer)
        defer { dealer.close() }
        try dealer.connect("inproc://frames-held")
        try dealer.send(frames: [[], Array("hello".utf8)])
        let routing = try router.receive().frames[0]
        let body = Array(#"{"eof":true}"#.utf8)
        let chunk = (0..<100_000).map { UInt8(truncatingIfNeeded: $0) }
        let answer = Frames.response(envelope: Envelope(routing: [routing]), requestID: Array("7".utf8), code: .ok, body: body)
        try router.send(frames: answer, last: HeldFrame(chunk))
        try router.send(frames: answer)
        try router.send(frames: answer + [chunk, [1]])

        let attached = try dealer.receiveResponse(dontWait: false)
        #expect(attached.frames.count == 3 && attached.attachment?.bytes == chunk)
        let parsed = try #require(Frames.parseAtClient(attached.frames, attachment: attached.attachment))
        #expect(parsed.body == body && parsed.code == .ok && parsed.requestID == Array("7".utf8) && parsed.attachment?.bytes == chunk)
        let plain = try dealer.receiveResponse(dontWait: false)
        #expect(plain.attachment == nil && Frames.parseAtClient(plain.frames, attachment: nil)?.body == body)
        let overfull = try dealer.receiveResponse(dontWait: false)
        #expect(overfull.frames.count == 5 && overfull.attachment == nil)
        #expect(Frames.parseAtClient(overfull.frames, attachment: overfull.attachment) == nil)
        #expect(throws: ZMQError.self) { _ = try dealer.receiveResponse(dontWait: true) }
    }
}
