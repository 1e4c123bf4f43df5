import Foundation
import StoreSchema
import Testing

@testable import Console

/// The console's parts that need no process: cursors, scopes, logins, where a form may send a
/// person back to.
@Suite("Console parts")
struct ConsoleUnitTests {
    @Test("a cursor is one position per shard, dot-separated; anything else is no cursor")
    func cursors() {
        #expect(Activity.Cursor("12.0.7")?.positions == [12, 0, 7])
        #expect(Activity.Cursor("0")?.positions == [0])
        #expect(Activity.Cursor("18446744073709551615")?.positions == [.max])
        for bad in ["", "a", "1..2", ".1", "1.", "-1", "18446744073709551616", "1 2", "0x10", String(repeating: "1.", count: 1024) + "1"] {
            #expect(Activity.Cursor(bad) == nil, "\(bad.prefix(40))")
        }
        #expect(Activity.Cursor(positions: [3, 4]).text == "3.4")
        #expect(Activity.streamURL(cursor: .init(positions: [3, 4]), scope: .init(app: "a.b", account: "x y")) == "/events?cursor=3.4&app=a.b&account=x%20y")
    }

    @Test("a page's scope takes the queues of its app, or of its account in the app, or every queue")
    func scopes() {
        #expect(Activity.Scope().includes("a|b|c"))
        #expect(Activity.Scope(app: "a").includes("a|b|c"))
        #expect(!Activity.Scope(app: "a").includes("ab|b|c"))
        #expect(Activity.Scope(app: "a", account: "b").includes("a|b|c"))
        #expect(!Activity.Scope(app: "a", account: "b").includes("a|bb|c"))
        #expect(!Activity.Scope(app: "a", account: "b").includes("a|b"))
    }

    @Test("the log's events become rows and activity of their scope; a finish marks its row finished")
    func items() throws {
        var record = Storebus_PaymentQueue_V1_QueueEventRecord()
        record.seq = 4
        record.key = "app|kid|phone"
        record.time = .init(seconds: 1_800_000_000)
        var transaction = Storebus_PaymentQueue_V1_PaymentTransaction()
        transaction.transactionIdentifier = "1000000000000007"
        transaction.transactionState = .deferred
        transaction.queue = .with {
            $0.appBundleID = "app"
            $0.accountID = "kid"
            $0.deviceID = "phone"
        }
        transaction.payment.productIdentifier = "pack"
        record.payload.removedTransactions.transactions = [transaction]
        guard case .transaction(let row)? = Activity.items(record, scope: .init(app: "app")).first else {
            Issue.record("no row")
            return
        }
        #expect(row.id == "1000000000000007" && row.state == "deferred" && row.notes.contains("finished") && row.account == "kid")
        #expect(row.url == "/apps/app/accounts/kid/transactions/1000000000000007")
        #expect(Activity.items(record, scope: .init(app: "other")).isEmpty)
        record.payload.historyCleared = .init()
        guard case .other(let view)? = Activity.items(record, scope: .init()).first else {
            Issue.record("no activity")
            return
        }
        #expect(view.text == "purchase history cleared" && view.url == "/apps/app/accounts/kid")
    }

    @Test("progress shows as a whole percentage, 100 only when complete, 0 for what is not a number")
    func percentages() {
        #expect([0, 0.5, 0.999, 1, 7, -3, .nan, .infinity].map(ConsoleNames.percent) == [0, 50, 99, 100, 100, 0, 0, 0])
    }

    @Test("a form sends a person back within the console only")
    func backPaths() {
        #expect(ConsoleServer.localPath("/apps/a/accounts/b?x=1") == "/apps/a/accounts/b?x=1")
        for bad: String? in [nil, "", "//evil.example/", "http://evil.example/", "/\\evil.example", "apps", "/a\nb", "/a\u{7F}"] {
            #expect(ConsoleServer.localPath(bad) == "/", "\(String(describing: bad))")
        }
    }

    @Test("logins: tokens differ and are cookie-safe; one unused too long ends; past the limit the least recently used ends; a message is shown once")
    func logins() async throws {
        let sessions = ConsoleSessions(idle: .milliseconds(300), limit: 2)
        let first = sessions.open(adminKey: "k1")
        let second = sessions.open(adminKey: "k2")
        #expect(first.token != second.token && first.formToken != first.token)
        #expect(first.token.count == 43 && first.token.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(sessions.login(first.token)?.adminKey == "k1")
        // first was used last: a third login ends second.
        let third = sessions.open(adminKey: "k3")
        #expect(sessions.login(second.token) == nil && sessions.login(first.token) != nil && sessions.login(third.token) != nil)
        sessions.say(.init(text: "done", isError: false), to: third.token)
        #expect(sessions.takeFlash(third.token)?.text == "done")
        #expect(sessions.takeFlash(third.token) == nil)
        try await Task.sleep(for: .milliseconds(400))
        #expect(sessions.login(first.token) == nil, "idle too long")
        #expect(sessions.login(nil) == nil && sessions.login("") == nil && sessions.login("forged") == nil)
        #expect(ConsoleSessions.matches("abc", "abc") && !ConsoleSessions.matches("abd", "abc") && !ConsoleSessions.matches("ab", "abc"))
    }

    @Test("every setting is checked at start, naming the one that cannot work")
    func configuration() throws {
        #expect(throws: Never.self) { try ConsoleConfiguration().validate() }
        var bad = ConsoleConfiguration()
        bad.httpAddress = "nowhere"
        #expect(throws: (any Error).self) { try bad.validate() }
        bad = ConsoleConfiguration()
        bad.streamSeconds = 0
        #expect(throws: (any Error).self) { try bad.validate() }
        bad = ConsoleConfiguration()
        bad.gatewayEndpoints = []
        #expect(throws: (any Error).self) { try bad.validate() }
        let decoded = try JSONDecoder().decode(ConsoleConfiguration.self, from: Data(#"{"streamSeconds": 5}"#.utf8))
        #expect(decoded.streamSeconds == 5 && decoded.httpAddress == "127.0.0.1:7390")
    }
}
