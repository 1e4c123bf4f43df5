import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing
import ZeroMQ

/// A response as a raw DEALER sees it: ["", header, body].
private func parse(_ message: Message?) -> (requestID: String, code: StatusCode, error: Storebus_Common_V1_ErrorStatus?)? {
    guard let message, let response = Frames.parseAtClient(message.frames) else { return nil }
    let error = response.code == .ok ? nil : try? JSONCodec.decode(Storebus_Common_V1_ErrorStatus.self, from: response.body)
    return (String(decoding: response.requestID, as: UTF8.self), response.code, error)
}

private let countPath = Storebus_Testkit_V1_Journal.countEntries.path
private let appendPath = Storebus_Testkit_V1_Journal.append.path

@Suite("Bad input never crashes a process and always gets an answer")
struct BadInputTests {
    @Test(
        "each malformed message gets a status code and the process keeps serving",
        arguments: [
            (["no delimiter here"], "", StatusCode.invalidArgument, "delimiter"),
            (["", "XXXX\n1", "{}"], "", .invalidArgument, "unknown header tag"),
            (["", "SB1Q\n7\n1000\n\(countPath)", "{}", "extra frame"], "7", .invalidArgument, "body frame"),
            (["", "SB1Q\n8\n1000"], "8", .invalidArgument, "at least 4 lines"),
            (["", "SB1Q\n9\nsoon\n\(countPath)", "{}"], "9", .invalidArgument, "timeout"),
            (["", "SB1Q\n10\n1000\nnot-a-path", "{}"], "10", .invalidArgument, "method"),
            (["", "SB1Q\n11\n1000\n\(countPath)\nBad Key: x", "{}"], "11", .invalidArgument, "metadata"),
            (["", "SB1Q\n12\n1000\n/storebus.nothing.v1.Nope/Call", "{}"], "12", .unimplemented, "unknown method"),
            (["", "SB1Q\n13\n1000\n\(appendPath)", "{\"key\": "], "13", .invalidArgument, "not valid JSON"),
            (["", "SB1Q\n14\n1000\n\(appendPath)", "{\"key\": [1], \"text\": \"x\"}"], "14", .invalidArgument, "key"),
            (["", "SB1Q\n15\n1000\n\(appendPath)", "{\"key\": \"\(String(repeating: "k", count: 300))\"}"], "15", .invalidArgument, "key"),
            (["", "SB1Q\n16\n0\n\(countPath)", "{}"], "16", .deadlineExceeded, "deadline")
        ])
    func malformedMessages(frames: [String], requestID: String, code: StatusCode, mentions: String) async throws {
        let journal = try JournalFixture()
        try await journal.start()
        let peer = try RawPeer(endpoint: journal.rpcEndpoint)
        try peer.send(strings: frames)
        let answer = try #require(parse(try await peer.receive()), "no answer to \(frames)")
        #expect(answer.code == code)
        #expect(answer.requestID == requestID)
        let text = (answer.error?.message ?? "") + " " + (answer.error?.fieldViolations.map { $0.field + " " + $0.description_p }.joined() ?? "")
        #expect(text.lowercased().contains(mentions.lowercased()), "\(text)")
        // And a well-formed request right after is answered normally
        try peer.send(strings: ["", "SB1Q\n99\n1000\n\(countPath)", "{}"])
        #expect(parse(try await peer.receive())?.code == .ok)
        #expect(journal.process.isRunning)
        await journal.stop()
    }

    @Test(
        "a malformed cancel is never answered (an answer could be mistaken for the call's result)",
        arguments: [
            ["", "SB1C"], ["", "SB1C\n28\nextra"], ["", "SB1C\n29", "unexpected body"]
        ])
    func malformedCancel(frames: [String]) async throws {
        let journal = try JournalFixture()
        try await journal.start()
        let peer = try RawPeer(endpoint: journal.rpcEndpoint)
        try peer.send(strings: frames)
        try peer.send(strings: ["", "SB1Q\n30\n1000\n\(countPath)", "{}"])
        let answer = try #require(parse(try await peer.receive()))
        #expect(answer.requestID == "30", "the first answer is the request's: the cancel got none")
        #expect(answer.code == .ok)
        await journal.stop()
    }

    @Test(
        "a request that reuses the id of a call still running is refused on an empty id line, however it is refused (duplicate, malformed, unknown method); the running call keeps the only answer with its id"
    )
    func reusedRunningID() async throws {
        let journal = try JournalFixture()
        try await journal.start()
        let peer = try RawPeer(endpoint: journal.rpcEndpoint)
        let echoPath = Storebus_Diagnostics_V1_Diagnostics.echo.path
        // Given a call with id "run" that runs for 6 s (room for a stalled host to send the rest first)
        try peer.send(strings: ["", "SB1Q\nrun\n20000\n\(echoPath)", "{\"payload\":\"first\",\"delayMs\":6000}"])
        let client = try journal.client()
        #expect(await waitUntil { (try? await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init()).inFlight) == 1 })
        // When the same connection sends more requests with that id, each refused for its own reason
        let refusals: [(frames: [String], code: StatusCode, reason: String)] = [
            (["", "SB1Q\nrun\n1000\n\(countPath)", "{}"], .invalidArgument, "DUPLICATE_REQUEST_ID"),
            (["", "SB1Q\nrun\n1000\n/storebus.nothing.v1.Nope/Call", "{}"], .invalidArgument, "DUPLICATE_REQUEST_ID"),
            (["", "SB1Q\nrun\nsoon\n\(countPath)", "{}"], .invalidArgument, "MALFORMED_MESSAGE"),
            (["", "SB1Q\nrun\n1000\n\(countPath)", "{}", "extra frame"], .invalidArgument, "MALFORMED_MESSAGE"),
            (["", "SB1Q\nrun\n1000\nnot-a-path", "{}"], .invalidArgument, "MALFORMED_MESSAGE")
        ]
        for refusal in refusals {
            try peer.send(strings: refusal.frames)
            let answer = try #require(parse(try await peer.receive()), "no answer to \(refusal.frames)")
            // Then each is answered at once, on an empty id line, so it cannot pass for the running call's answer
            #expect(answer.requestID == "", "\(refusal.frames)")
            #expect(answer.code == refusal.code, "\(refusal.frames)")
            #expect(answer.error?.info.reason == refusal.reason, "\(refusal.frames): \(String(describing: answer.error))")
        }
        // And a malformed request with another id still has that id echoed
        try peer.send(strings: ["", "SB1Q\nother\nsoon\n\(countPath)", "{}"])
        #expect(parse(try await peer.receive())?.requestID == "other")
        // And the running call's own answer is the one that carries its id
        let first = try #require(parse(try await peer.receive(timeout: .seconds(20))))
        #expect(first.requestID == "run")
        #expect(first.code == .ok)
        // And once it has been answered, the id can be used again
        try peer.send(strings: ["", "SB1Q\nrun\n1000\n/storebus.nothing.v1.Nope/Call", "{}"])
        let reused = try #require(parse(try await peer.receive()))
        #expect(reused.requestID == "run")
        #expect(reused.code == .unimplemented)
        await client.shutdown()
        await journal.stop()
    }

    @Test("a message over the size limit closes that connection; the process keeps serving others")
    func oversizedMessage() async throws {
        let journal = try JournalFixture()
        try await journal.start()
        let peer = try RawPeer(endpoint: journal.rpcEndpoint)
        let huge = [UInt8](repeating: 0x20, count: Int(WireProtocol.defaultMaxMessageBytes) + 1024)
        try peer.send([[], Array("SB1Q\n1\n1000\n\(countPath)".utf8), huge])
        #expect(try await peer.receive(timeout: .milliseconds(500)) == nil, "dropped by MAXMSGSIZE, never answered")
        let client = try journal.client()
        let count = try await client.call(Storebus_Testkit_V1_Journal.countEntries, .init())
        #expect(count.count == 0)
        await client.shutdown()
        #expect(journal.process.isRunning)
        await journal.stop()
    }

    @Test("10,000 random byte strings and multipart shapes, then the process still answers correctly")
    func fuzz() async throws {
        let journal = try JournalFixture()
        try await journal.start()
        let peer = try RawPeer(endpoint: journal.rpcEndpoint)
        // The 10,000 sends and the draining of answers run on a thread of their own, off the pool.
        let sent = try await onThread("fuzz") {
            var random = SeededRandom(seed: 0x5704_EB05)
            let templates: [[String]] = [
                ["", "SB1Q\n1\n1000\n\(countPath)", "{}"],
                ["", "SB1Q\n2\n1000\n\(appendPath)", "{\"key\":\"k\",\"text\":\"t\"}"],
                ["", "SB1C\n3"]
            ]
            var sent = 0
            for round in 0..<10_000 {
                var frames: [[UInt8]]
                if round % 2 == 0 {
                    // Random shapes: 1 to 6 frames of 0 to 80 random bytes (sometimes much longer).
                    frames = (0..<Int.random(in: 1...6, using: &random)).map { _ in
                        let length = Int.random(in: 0...10, using: &random) == 0 ? Int.random(in: 0...4000, using: &random) : Int.random(in: 0...80, using: &random)
                        return (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
                    }
                } else {
                    // Mutations of well-formed messages: flipped bytes, dropped or duplicated frames.
                    frames = templates[Int.random(in: 0..<templates.count, using: &random)].map { Array($0.utf8) }
                    for _ in 0..<Int.random(in: 1...4, using: &random) {
                        let index = Int.random(in: 0..<frames.count, using: &random)
                        switch Int.random(in: 0...3, using: &random) {
                        case 0 where !frames[index].isEmpty:
                            frames[index][Int.random(in: 0..<frames[index].count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                        case 1 where frames.count > 1: frames.remove(at: index)
                        case 2: frames.insert(frames[index], at: index)
                        default: frames[index] += [UInt8.random(in: 0...255, using: &random)]
                        }
                    }
                }
                try peer.send(frames)
                sent += 1
                while try peer.receiveBlocking(timeout: .zero) != nil {}
            }
            while try peer.receiveBlocking(timeout: .milliseconds(200)) != nil {}
            return sent
        }
        #expect(sent == 10_000)
        #expect(journal.process.isRunning, "\(journal.process.output)")

        // Then the process still answers correctly, and counted what it could not parse
        let client = try journal.client()
        let stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
        #expect(stats.malformedMessages > 1_000)
        let before = try await client.call(Storebus_Testkit_V1_Journal.countEntries, .init()).count
        let appended = try await client.call(
            Storebus_Testkit_V1_Journal.append,
            .with {
                $0.key = "after-fuzz"; $0.text = "ok"
            })
        #expect(appended.keySeq == 1)
        #expect(try await client.call(Storebus_Testkit_V1_Journal.countEntries, .init()).count == before + 1)
        let health = try await client.call(Storebus_Health_V1_Health.check, .init())
        #expect(health.status == .serving)
        await client.shutdown()
        await journal.stop()
    }
}

@Suite("Process start-up and shutdown")
struct ProcessLifecycleTests {
    @Test("an endpoint that cannot be bound is a clear message and a non-zero exit")
    func bindFailure() async throws {
        let directory = try TemporaryDirectory(prefix: "bind")
        defer { directory.remove() }
        let first = ServiceProcess(
            name: "storebus-testkit-journal", arguments: ["--rpc-endpoint", "tcp://127.0.0.1:*", "--event-endpoint", directory.ipcEndpoint("ev1"), "--data-dir", directory.path("d1")],
            logFile: directory.url.appendingPathComponent("first.log"))
        try first.start()
        #expect(await waitUntil { first.output.contains(" ready rpc=") })
        let ready = try #require(first.output.split(separator: "\n").first { $0.contains(" ready rpc=") })
        let endpoint = String(ready.split(separator: " ").first { $0.hasPrefix("rpc=") }!.dropFirst(4))
        let second = ServiceProcess(
            name: "storebus-testkit-journal", arguments: ["--rpc-endpoint", endpoint, "--event-endpoint", directory.ipcEndpoint("ev2"), "--data-dir", directory.path("d2")],
            logFile: directory.url.appendingPathComponent("second.log"))
        try second.start()
        let status = await second.waitForExit(timeout: .seconds(20))
        #expect(status != nil && status != 0)
        #expect(second.output.contains("cannot listen on \(endpoint)"), "\(second.output)")
        await first.stop()
    }

    @Test("a data directory that cannot be written is a clear message and a non-zero exit")
    func unwritableDataDirectory() async throws {
        let directory = try TemporaryDirectory(prefix: "ro")
        defer { directory.remove() }
        let process = ServiceProcess(
            name: "storebus-testkit-journal",
            arguments: ["--rpc-endpoint", directory.ipcEndpoint("rpc"), "--event-endpoint", directory.ipcEndpoint("ev"), "--data-dir", "/proc/storebus-cannot-write-here"],
            logFile: directory.url.appendingPathComponent("ro.log"))
        try process.start()
        let status = await process.waitForExit(timeout: .seconds(20))
        #expect(status != nil && status != 0)
        #expect(process.output.contains("cannot be written"), "\(process.output)")
    }

    @Test("SIGTERM stops the process gracefully with exit status 0, and its data survives")
    func gracefulShutdown() async throws {
        let journal = try JournalFixture()
        try await journal.start()
        let client = try journal.client()
        _ = try await client.call(
            Storebus_Testkit_V1_Journal.append,
            .with {
                $0.key = "x"; $0.text = "kept"
            })
        #expect(await journal.process.stop(grace: .seconds(10)) == 0)
        try await journal.start()
        #expect(try await client.call(Storebus_Testkit_V1_Journal.countEntries, .init()).count == 1)
        await client.shutdown()
        await journal.stop()
    }

    @Test("a background service that fails stops the process with a non-zero exit status, saying why")
    func failingServiceExitsNonZero() async throws {
        let directory = try TemporaryDirectory(prefix: "fail")
        defer { directory.remove() }
        let process = ServiceProcess(
            name: "storebus-testkit-journal",
            arguments: [
                "--rpc-endpoint", directory.ipcEndpoint("rpc"), "--event-endpoint", directory.ipcEndpoint("ev"), "--data-dir", directory.path("data"),
                "--fail-after-ms", "300"
            ], logFile: directory.url.appendingPathComponent("fail.log"))
        try process.start()
        let status = await process.waitForExit(timeout: .seconds(20))
        if status == nil { await process.kill() }
        #expect(status == 1, "\(process.output)")
        #expect(process.output.contains("failed on purpose"), "\(process.output)")
    }

    @Test("SIGTERM the instant the ready line is printed is a graceful shutdown with exit status 0")
    func terminateRightAfterReady() async throws {
        let journal = try JournalFixture()
        defer { journal.directory.remove() }
        for _ in 1...3 {
            try journal.process.start(onReady: { pid in kill(pid, SIGTERM) })
            let status = await journal.process.waitForExit(timeout: .seconds(20))
            if status == nil { await journal.process.kill() }
            #expect(status == 0, "\(journal.process.output)")
        }
    }
}
