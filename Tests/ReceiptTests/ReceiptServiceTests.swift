import Foundation
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
}
