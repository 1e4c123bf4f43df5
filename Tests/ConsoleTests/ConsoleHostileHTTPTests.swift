import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

/// The console's HTTP face, asked with curl what a browser would never send: each request gets a
/// status that says what is wrong, nothing is done without a login, a form token and the console's
/// own origin, values are escaped on the page, and the process keeps serving.
@Suite("The console against hostile requests", .serialized)
struct ConsoleHostileHTTPTests {
    /// curl's answer: the body, then the status on a line of its own.
    static func curl(_ arguments: [String]) async throws -> (status: Int, body: String) {
        let answer = try await runCommand("/usr/bin/curl", ["-sS", "--max-time", "30", "-w", "\n%{http_code}"] + arguments)
        let lines = answer.output.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? -1, lines.dropLast().joined(separator: "\n"))
    }

    /// The login's cookie as a Cookie header, from curl's jar.
    static func cookieHeader(_ jar: String) -> String {
        let line = (try? String(contentsOfFile: jar, encoding: .utf8))?.split(separator: "\n").first { $0.contains("storebus_console") }
        return "storebus_console=" + (line?.split(separator: "\t").last.map(String.init) ?? "")
    }

    @Test(
        "forged, cross-site, tokenless, malformed, oversized and unknown requests are each answered with a status that says so and change nothing; hostile names are escaped; the console keeps serving"
    )
    func hostileRequests() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let (console, address) = try await ConsoleBrowserTests.startConsole(cluster)
            let jar = cluster.directory.path("cookies")
            let (_, buy) = try await ConsoleBrowserTests.storectl(cluster, ["buy", levelPack, "--account", "held"], name: "buy-held")
            let held = try #require(ConsoleBrowserTests.transactionID(buy), "\(buy)")

            let login = try await Self.curl(["-c", jar, "-X", "POST", "--data-urlencode", "adminKey=\(adminKey)", "\(address)/login"])
            #expect(login.status == 303)
            let store = try await Self.curl(["-b", jar, "\(address)/"])
            #expect(store.status == 200)
            let formToken = try #require(
                store.body.range(of: #"name="formToken" value=""#).map { range in String(store.body[range.upperBound...].prefix { $0 != "\"" }) })
            let cookie = ["-b", jar]
            let token = "formToken=\(formToken)"

            let cases: [(name: String, arguments: [String], status: Int, says: String?)] = [
                ("an unknown page", cookie + ["\(address)/nope"], 404, nil),
                ("a forged cookie", ["-b", "storebus_console=forged", "\(address)/apps/\(puzzle)"], 303, nil),
                ("no login, an action", ["-X", "POST", "-d", "\(token)&confirm=yes", "\(address)/actions/reset"], 401, "Log in first"),
                ("no form token", cookie + ["-X", "POST", "-d", "confirm=yes", "\(address)/actions/reset"], 403, "form token"),
                ("a wrong form token", cookie + ["-X", "POST", "-d", "formToken=guess&confirm=yes", "\(address)/actions/reset"], 403, "form token"),
                (
                    "another origin", cookie + ["-X", "POST", "-H", "Origin: http://evil.example", "-d", "\(token)&confirm=yes", "\(address)/actions/reset"], 403,
                    "another site"
                ),
                (
                    "a cross-site fetch", cookie + ["-X", "POST", "-H", "Sec-Fetch-Site: cross-site", "-d", "\(token)&confirm=yes", "\(address)/actions/reset"],
                    403, "another site"
                ),
                ("a broken form", cookie + ["-X", "POST", "-d", "\(token)&mode=%%%", "\(address)/actions/policy"], 400, "could not be read"),
                ("a stream without a login", ["\(address)/events?cursor=0"], 401, nil),
                ("a stream with no cursor", cookie + ["\(address)/events?cursor=abc"], 400, "cursor"),
                ("a stream with another", cookie + ["-H", "Last-Event-ID: 1.-2", "\(address)/events"], 400, "cursor"),
                ("an unknown app", cookie + ["\(address)/apps/%ZZ"], 404, nil),
                ("an unknown transaction", cookie + ["\(address)/apps/\(puzzle)/accounts/held/transactions/9"], 404, "no transaction 9"),
                ("a long account", cookie + ["\(address)/apps/\(puzzle)/accounts/\(String(repeating: "a", count: 300))"], 400, nil),
                // curl leaves out a cookie that makes the headers too long, as a browser would.
                ("a long path", ["-H", "Cookie: \(Self.cookieHeader(jar))", "\(address)/\(String(repeating: "x", count: 20_000))"], 404, nil)
            ]
            for entry in cases {
                let answer = try await Self.curl(entry.arguments)
                #expect(answer.status == entry.status, "\(entry.name): \(answer.status) \(answer.body.prefix(300))")
                if let says = entry.says { #expect(answer.body.contains(says), "\(entry.name): \(answer.body.prefix(300))") }
            }
            // A login with megabytes for a key is refused like any wrong key.
            let huge = cluster.directory.path("huge-form")
            try Data(("adminKey=" + String(repeating: "k", count: 3 << 20)).utf8).write(to: URL(fileURLWithPath: huge))
            #expect(try await Self.curl(["-X", "POST", "--data-binary", "@\(huge)", "\(address)/login"]).status == 401)

            // Actions a form could not make are answered on the next page with why; nothing changes.
            for (action, body, says) in [
                ("reset", "\(token)", "tick the box"), ("refund", "\(token)&transaction=\(held)", "tick the box"), ("nothing", "\(token)", "there is no action"),
                ("policy", "\(token)&app=\(puzzle)&account=held&mode=sometimes", "choose one of the modes"),
                ("approve", "\(token)&transaction=%3Cb%3E", "failed")
            ] {
                let posted = try await Self.curl(cookie + ["-X", "POST", "-d", "\(body)&back=//evil.example/", "\(address)/actions/\(action)"])
                #expect(posted.status == 303, "\(action): \(posted.body)")
                let next = try await Self.curl(cookie + ["\(address)/"])
                #expect(next.body.contains(says), "\(action): \(next.body.prefix(2000))")
                #expect(!next.body.contains("<b>"), "\(action): escaped")
            }
            let admin = try cluster.admin()
            let kept = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
                .with {
                    $0.appBundleID = puzzle
                    $0.accountID = "held"
                    $0.includeFinished = true
                })
            #expect(kept.transactions.map(\.transactionIdentifier) == [held] && !kept.transactions[0].hasCancellationDate, "nothing reset or refunded")
            await admin.close()

            // A name with markup is shown as text.
            let markup = try await Self.curl(cookie + ["\(address)/apps/\(puzzle)/accounts/%3Cscript%3Ealert(1)%3C%2Fscript%3E"])
            #expect(markup.status == 200 && markup.body.contains("Account &lt;script&gt;alert(1)&lt;/script&gt;") && !markup.body.contains("<script>alert"))

            // A client that starts a request and never ends its headers is let go.
            let slow = try await runCommand(
                "/usr/bin/python3",
                [
                    "-c",
                    """
                    import socket, sys, time
                    host, port = sys.argv[1].rsplit(":", 1)
                    s = socket.create_connection((host, int(port))); s.settimeout(120)
                    s.sendall(b"GET /login HTTP/1.1\\r\\nHost: x\\r\\nX-Slow: ")
                    start = time.monotonic(); data = s.recv(1024)
                    print("closed after %.0f s" % (time.monotonic() - start) if not data else "answered: %r" % data[:40])
                    """, String(address.dropFirst("http://".count))
                ])
            #expect(slow.output.hasPrefix("closed after"), "\(slow.output)")

            // Still serving, and the login still works.
            #expect(console.isRunning)
            #expect(try await Self.curl(cookie + ["\(address)/sandbox"]).status == 200)
            _ = await console.stop()
        }
    }
}
