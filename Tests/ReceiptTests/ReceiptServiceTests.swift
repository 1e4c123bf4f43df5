import Foundation
import GRDB
import Receipt
import ReceiptFormat
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// The receipt service as a process: its HTTP verifyReceipt, and what it keeps across kills.
@Suite(.serialized)
struct ReceiptServiceTests {
    @Test("curl -d … /verifyReceipt answers what the bus method answers, in Apple's JSON form; a body that is not JSON is 21000")
    func httpVerifyReceipt() async throws {
        try await ReceiptVerificationTests.withBought(products: [ReceiptVerificationTests.levelPack, ReceiptVerificationTests.monthly]) { bought in
            let work = try TemporaryDirectory(prefix: "curl")
            defer { work.remove() }
            let data = Data(bought.receipt).base64EncodedString()
            let request: [String: Any] = ["receipt-data": data, "password": puzzleSharedSecret, "exclude-old-transactions": false]
            try JSONSerialization.data(withJSONObject: request).write(to: URL(fileURLWithPath: work.path("request.json")))
            let url = "http://\(bought.cluster.receiptHTTPAddress)/verifyReceipt"
            let curl = try await runCommand(
                "/usr/bin/curl",
                [
                    "-sS", "--max-time", "30", "-H", "Content-Type: application/json",
                    "-d", "@\(work.path("request.json"))", url
                ])
            #expect(curl.status == 0, "curl: \(curl.output)")
            let http = try #require(try JSONSerialization.jsonObject(with: Data(curl.output.utf8)) as? [String: Any], "not JSON: \(curl.output)")
            let bus = try await bought.verify(bought.receipt, password: puzzleSharedSecret)
            #expect(http["status"] as? Int == Int(bus.status))
            #expect(bus.status == 0)
            #expect(http["environment"] as? String == bus.environment)
            let receipt = try #require(http["receipt"] as? [String: Any])
            #expect(receipt["bundle_id"] as? String == bus.receipt.bundleID)
            #expect(receipt["receipt_type"] as? String == bus.receipt.receiptType)
            let inApp = try #require(receipt["in_app"] as? [[String: Any]])
            #expect(Set(inApp.compactMap { $0["transaction_id"] as? String }) == Set(bus.receipt.inApp.map(\.transactionID)))
            #expect(Set(inApp.compactMap { $0["product_id"] as? String }) == Set(bus.receipt.inApp.map(\.productID)))
            for entry in inApp {
                // Every id, quantity and *_ms a string; every date in its three encodings
                #expect(entry["quantity"] as? String == "1")
                for date in ["purchase_date", "original_purchase_date"] {
                    #expect((entry[date] as? String)?.hasSuffix(" Etc/GMT") == true, "\(date): \(entry)")
                    #expect((entry["\(date)_pst"] as? String)?.hasSuffix(" America/Los_Angeles") == true)
                    #expect((entry["\(date)_ms"] as? String).flatMap { Int64($0) } != nil)
                }
                let busEntry = try #require(bus.receipt.inApp.first { $0.transactionID == entry["transaction_id"] as? String })
                #expect(entry["purchase_date_ms"] as? String == String(Int64(busEntry.purchaseDate.date.timeIntervalSince1970 * 1000)))
                #expect(entry["original_transaction_id"] as? String == busEntry.originalTransactionID)
            }
            let subscription = try #require(inApp.first { $0["product_id"] as? String == ReceiptVerificationTests.monthly })
            #expect(subscription["web_order_line_item_id"] as? String != nil)
            // A subscription in the receipt: latest_receipt_info, latest_receipt and pending_renewal_info
            let latest = try #require(http["latest_receipt_info"] as? [[String: Any]])
            #expect(Set(latest.compactMap { $0["transaction_id"] as? String }) == Set(bus.latestReceiptInfo.map(\.transactionID)))
            #expect((http["latest_receipt"] as? String)?.isEmpty == false)
            #expect((http["pending_renewal_info"] as? [[String: Any]])?.first?["product_id"] as? String == ReceiptVerificationTests.monthly)
            // A wrong password over HTTP is 21004 as on the bus
            let wrong: [String: Any] = ["receipt-data": data, "password": "wrong"]
            try JSONSerialization.data(withJSONObject: wrong).write(to: URL(fileURLWithPath: work.path("wrong.json")))
            let refused = try await runCommand("/usr/bin/curl", ["-sS", "--max-time", "30", "-d", "@\(work.path("wrong.json"))", url])
            #expect((try JSONSerialization.jsonObject(with: Data(refused.output.utf8)) as? [String: Any])?["status"] as? Int == 21004, "\(refused.output)")
            // A body that is not JSON: 21000, and the service keeps serving
            let garbage = try await runCommand("/usr/bin/curl", ["-sS", "--max-time", "30", "-d", "{not json", url])
            #expect((try JSONSerialization.jsonObject(with: Data(garbage.output.utf8)) as? [String: Any])?["status"] as? Int == 21000, "\(garbage.output)")
            #expect(try await bought.verify(bought.receipt, password: puzzleSharedSecret).status == 0)
        }
    }

    @Test("the receipt service SIGKILLed several times while purchases flow: afterwards no purchase is missing from, or doubled in, any receipt")
    func killedWhilePurchasesFlow() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let accounts = ["kill-a", "kill-b", "kill-c"]
            var queues: [(PaymentQueue, Recorder)] = []
            for account in accounts { queues.append(try await cluster.launch(account: account)) }
            let perAccount = 16
            let phones = queues.map(\.0)
            // Purchases flow from every account while the receipt service is killed and restarted
            let buyers = Task {
                try await withThrowingTaskGroup(of: (String, [String]).self) { group in
                    for (index, account) in accounts.enumerated() {
                        let queue = phones[index]
                        group.addTask {
                            var ids: [String] = []
                            for _ in 0..<perAccount {
                                ids.append(try await queue.addPayment(Payment(productIdentifier: coins)).id)
                                try await Task.sleep(for: .milliseconds(20))
                            }
                            return (account, ids)
                        }
                    }
                    var bought: [String: [String]] = [:]
                    for try await (account, ids) in group { bought[account] = ids }
                    return bought
                }
            }
            for _ in 0..<3 {
                try await Task.sleep(for: .milliseconds(150))
                await cluster.receipt.kill()
                try await cluster.startReceipt()
            }
            let bought = try await buyers.value
            for (index, account) in accounts.enumerated() {
                let recorder = queues[index].1
                for id in bought[account] ?? [] { #expect(await recorder.purchased(id), "\(id) of \(account) was not purchased") }
            }
            // Then each account's receipt holds each of its purchases exactly once
            for account in accounts {
                let expected = bought[account] ?? []
                #expect(expected.count == perAccount)
                let connection = try StoreConnection(configuration: cluster.configuration(account: account))
                let receipt = try await ReceiptFlowTests.receipt(connection) { Set($0.inApp.map(\.transactionID)) == Set(expected) }
                let listed = receipt.inApp.map(\.transactionID)
                #expect(listed.count == expected.count, "\(account): \(listed.count) entries for \(expected.count) purchases")
                #expect(Set(listed) == Set(expected))
                await connection.close()
            }
            for (queue, recorder) in queues {
                recorder.cancel()
                await queue.close()
            }
        }
    }

    @Test(
        "power loss simulated: the receipt database put back to a copy from before its last follower pages, the service restarted: it applies them again and its tables end as they were"
    )
    func powerLossTakesBackFollowerPages() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let (queue, recorder) = try await ReceiptFlowTests.launch(cluster, account: "power", device: "phone")
            let connection = try StoreConnection(configuration: cluster.configuration(account: "power", device: "phone"))
            var bought: [String] = []
            func buy(_ count: Int) async throws {
                for _ in 0..<count { bought.append(try await queue.addPayment(Payment(productIdentifier: coins)).id) }
                let expected = Set(bought)
                _ = try await ReceiptFlowTests.receipt(connection) { Set($0.inApp.map(\.transactionID)) == expected }
            }
            // Given purchases the receipt service has applied, and a copy of its database then
            try await buy(3)
            let data = cluster.directory.path("receipt-data")
            let copy = cluster.directory.path("receipt-copy")
            _ = await cluster.receipt.stop()
            try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
            let files = ["receipt.sqlite", "receipt.sqlite-wal"]
            for file in files where FileManager.default.fileExists(atPath: "\(data)/\(file)") {
                try FileManager.default.copyItem(atPath: "\(data)/\(file)", toPath: "\(copy)/\(file)")
            }
            try await cluster.startReceipt()
            // And more purchases it applied after the copy
            try await buy(5)
            let applied = try Self.followerState(data)
            #expect(applied.transactions.count == 8)

            // When the power goes (the process killed, its database back to the copy) and it starts again
            await cluster.receipt.kill()
            for file in files + ["receipt.sqlite-shm"] { try? FileManager.default.removeItem(atPath: "\(data)/\(file)") }
            for file in files where FileManager.default.fileExists(atPath: "\(copy)/\(file)") {
                try FileManager.default.copyItem(atPath: "\(copy)/\(file)", toPath: "\(data)/\(file)")
            }
            #expect(try Self.followerState(data).transactions.count == 3, "the copy is from before the last pages")
            try await cluster.startReceipt()

            // Then the follower applies the lost pages again: the same rows, every purchase in the receipt once
            let again = try await waitUntil(timeout: .seconds(20), interval: .milliseconds(50)) { try Self.followerState(data) == applied }
            let now = try Self.followerState(data)
            #expect(again, "the receipt database did not come back to what it held: \(now) against \(applied)")
            let receipt = try await ReceiptFlowTests.receipt(connection) { Set($0.inApp.map(\.transactionID)) == Set(bought) }
            #expect(receipt.inApp.count == bought.count)
            await connection.close()
            recorder.cancel()
            await queue.close()
        }
    }

    /// What the receipt service's follower applied, read from its database in `directory`.
    struct FollowerState: Equatable, CustomStringConvertible {
        var transactions: [[String]]
        var subscriptions: [[String]]
        var description: String { "\(transactions.count) transactions, \(subscriptions.count) subscriptions" }
    }

    static func followerState(_ directory: String) throws -> FollowerState {
        // Read-write (it only reads): a read-only connection cannot open a WAL database whose -wal
        // file is not there, as after the copy is put back.
        let database = try DatabaseQueue(path: "\(directory)/receipt.sqlite")
        defer { try? database.close() }
        return try database.read { db in
            func rows(_ sql: String) throws -> [[String]] {
                try Row.fetchAll(db, sql: sql).map { row in row.databaseValues.map(\.description) }
            }
            return FollowerState(
                transactions: try rows("SELECT * FROM rc_transaction ORDER BY id"), subscriptions: try rows("SELECT * FROM rc_subscription ORDER BY app, account, grp"))
        }
    }
}
