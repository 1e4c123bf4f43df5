import Foundation
import StoreBus
import StoreSchema

/// A request body as a tree, so that a change can reach any member: an object's members in order
/// (repeated names allowed, as a hostile client may send them), or a value's JSON text.
public indirect enum HostileBody: Sendable {
    case object([(String, HostileBody)])
    case value(String)

    public var json: String {
        switch self {
        case .value(let text): text
        case .object(let members): "{" + members.map { "\"\($0.0)\":\($0.1.json)" }.joined(separator: ",") + "}"
        }
    }

    /// The path (member indices) of every value that is not an object, at any depth.
    public var leaves: [[Int]] {
        guard case .object(let members) = self else { return [[]] }
        return members.indices.flatMap { index in members[index].1.leaves.map { [index] + $0 } }
    }

    /// This body with the value at `path` replaced by `value`.
    public func replacing(_ path: ArraySlice<Int>, with value: String) -> HostileBody {
        guard let first = path.first, case .object(var members) = self else { return .value(value) }
        members[first].1 = members[first].1.replacing(path.dropFirst(), with: value)
        return .object(members)
    }

    /// This body with one member, at any depth, changed: its value replaced by a hostile one,
    /// removed, repeated with another value, or joined by an unknown member.
    public func mutated(using random: inout SeededRandom) -> HostileBody {
        guard case .object(var members) = self else { return .value(HostileCalls.value(using: &random)) }
        let unknown = ("unknown\(Int.random(in: 0..<3, using: &random))", HostileBody.value(HostileCalls.value(using: &random)))
        guard !members.isEmpty else { return .object([unknown]) }
        let index = Int.random(in: 0..<members.count, using: &random)
        switch Int.random(in: 0..<10, using: &random) {
        case 0: members.append(unknown)
        case 1: members.remove(at: index)
        case 2: members.append((members[index].0, .value(HostileCalls.value(using: &random))))
        // A nested message's member.
        case 3...4: members[index].1 = members[index].1.mutated(using: &random)
        default: members[index].1 = .value(HostileCalls.value(using: &random))
        }
        return .object(members)
    }
}

/// Calls with hostile bodies, sent over a raw connection, and what came back: for tests that every
/// process answers whatever a client sends with a status code and keeps serving.
public enum HostileCalls {
    /// Values a hostile or careless client might put in any field: wrong types, numbers at and past
    /// every integer width (as numbers and as the strings proto3 JSON uses for 64-bit ones), odd and
    /// huge strings, long arrays, deep nesting.
    public static let values: [String] = [
        "\"\"", "null", "true", "[]", "{}", "0", "-1", "1.5", "1e400", "-0", "\"NaN\"", "\"Infinity\"",
        "2147483647", "2147483648", "-2147483649", "4294967295", "4294967296",
        "9223372036854775807", "18446744073709551615", "18446744073709551616", "-9223372036854775809",
        "\"18446744073709551615\"", "\"9223372036854775807\"", "\"-1\"", "\"0x10\"",
        "\"\\u0000\\n\\\"\\\\ é 漢 🙂\"", "\"\\ud800\"", "\"../../etc/passwd\"", "\"POLICY_MODE_ASK_TO_BUY\"",
        "\"SK_ERROR_PAYMENT_CANCELLED\"", "[\"\(coins)\",\"\(coins)\",\"\",null]", "{\"queue\":{}}",
        "\"\(String(repeating: "x", count: 300))\"", "\"\(String(repeating: "é", count: 40_000))\"",
        String(repeating: "[", count: 400) + String(repeating: "]", count: 400),
        "[" + (0..<1_500).map { "\"p\($0)\"" }.joined(separator: ",") + "]"
    ]

    public static func value(using random: inout SeededRandom) -> String {
        values[Int.random(in: 0..<values.count, using: &random)]
    }

    /// `text` with one to four bytes changed, removed or inserted: the JSON itself broken.
    public static func broken(_ text: String, using random: inout SeededRandom) -> [UInt8] {
        var bytes = Array(text.utf8)
        for _ in 0..<Int.random(in: 1...4, using: &random) where !bytes.isEmpty {
            let index = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<3, using: &random) {
            case 0: bytes[index] = UInt8.random(in: 0...255, using: &random)
            case 1: bytes.remove(at: index)
            default: bytes.insert(UInt8.random(in: 0...255, using: &random), at: index)
            }
        }
        return bytes
    }

    /// One call: a method, its metadata lines (`key: value`), a body.
    public struct Call: Sendable {
        public let path: String
        public let metadata: [String]
        public let body: [UInt8]

        public init(path: String, metadata: [String], body: [UInt8]) {
            self.path = path
            self.metadata = metadata
            self.body = body
        }
    }

    /// Each of ``values`` in each field of each template, with the metadata `metadata` gives for its
    /// method: every handler meets every value.
    public static func everyValueInEveryField(_ templates: [(path: String, body: HostileBody)], metadata: (String) -> [String]) -> [Call] {
        templates.flatMap { template in
            template.body.leaves.flatMap { leaf in
                values.map { Call(path: template.path, metadata: metadata(template.path), body: Array(template.body.replacing(leaf[...], with: $0).json.utf8)) }
            }
        }
    }

    /// `count` calls to templates picked at random, each with one to three changes anywhere and one
    /// in ten with its JSON broken, with the metadata `metadata` picks.
    public static func randomlyChanged(
        _ templates: [(path: String, body: HostileBody)], count: Int, seed: UInt64,
        metadata: (inout SeededRandom, String) -> [String]
    ) -> [Call] {
        var random = SeededRandom(seed: seed)
        return (0..<count).map { _ in
            let template = templates[Int.random(in: 0..<templates.count, using: &random)]
            var body = template.body
            for _ in 0..<Int.random(in: 1...3, using: &random) { body = body.mutated(using: &random) }
            let bytes = Int.random(in: 0..<10, using: &random) == 0 ? broken(body.json, using: &random) : Array(body.json.utf8)
            return Call(path: template.path, metadata: metadata(&random, template.path), body: bytes)
        }
    }

    /// What came back for a list of calls.
    public struct Answers: Sendable {
        /// The status codes answered to each call, by its index.
        public let codes: [Int: [StatusCode]]
        /// How many calls were sent.
        public let sent: Int
        /// Messages that were no answer to any call.
        public let stray: Int

        /// Calls never answered.
        public var unanswered: [Int] { (0..<sent).filter { codes[$0] == nil } }
        /// Calls answered more than once.
        public var repeated: [Int] { codes.filter { $0.value.count > 1 }.keys.sorted() }
        /// How many answers carried each code.
        public var byCode: [StatusCode: Int] { Dictionary(grouping: codes.values.flatMap { $0 }, by: { $0 }).mapValues(\.count) }
    }

    /// Sends `calls` over `peer` (request id: the call's index), at most `window` in flight, each with
    /// a deadline of `timeoutMilliseconds`, so that the server answers even a call it would hold.
    /// Waits for the answers, then a moment more for anything else, on a thread of its own.
    public static func send(_ calls: [Call], over peer: RawPeer, timeoutMilliseconds: Int = 3_000, window: Int = 32) async throws -> Answers {
        try await onThread("hostile-calls") {
            var codes: [Int: [StatusCode]] = [:]
            var stray = 0
            var outstanding = 0
            func take(_ frames: [[UInt8]]) {
                guard let answer = Frames.parseAtClient(frames), let id = Int(String(decoding: answer.requestID, as: UTF8.self)),
                    (0..<calls.count).contains(id)
                else { return stray += 1 }
                codes[id, default: []].append(answer.code)
                outstanding -= 1
            }
            sending: for (id, call) in calls.enumerated() {
                let header = (["SB1Q", "\(id)", "\(timeoutMilliseconds)", call.path] + call.metadata).joined(separator: "\n")
                try peer.send([[], Array(header.utf8), call.body])
                outstanding += 1
                while let message = try peer.receiveBlocking(timeout: .zero) { take(message.frames) }
                while outstanding >= window {
                    // A full window with no answer for ten seconds: the server has stopped answering
                    // (or died). The calls not yet sent stay unanswered, and the caller's check fails
                    // on them rather than waiting ten seconds for each.
                    guard let message = try peer.receiveBlocking(timeout: .seconds(10)) else { break sending }
                    take(message.frames)
                }
            }
            while outstanding > 0, let message = try peer.receiveBlocking(timeout: .seconds(10)) { take(message.frames) }
            // Nothing more comes: one answer a call.
            while let message = try peer.receiveBlocking(timeout: .milliseconds(300)) { take(message.frames) }
            return Answers(codes: codes, sent: calls.count, stray: stray)
        }
    }
}

extension HostileCalls {
    /// A valid body for every method of StoreBus's services, by path, for the demo catalog's puzzle
    /// app and `account` (its queue on device `d`); Authenticate with `apiKey`.
    public static func templates(account: String, apiKey: String) -> [(path: String, body: HostileBody)] {
        let app = "\"\(puzzle)\""
        let accountJSON = "\"\(account)\""
        let someID = "\"1000000000000001\""
        let appAndAccount: HostileBody = .object([("appBundleId", .value(app)), ("accountId", .value(accountJSON))])
        let queue: HostileBody = .object([("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("deviceId", .value("\"d\""))])
        let downloadRef: HostileBody = .object([("transactionIdentifier", .value(someID)), ("contentIdentifier", .value("\"\(levelPack)\""))])
        let downloadRefs: HostileBody = .value("[{\"transactionIdentifier\":\(someID),\"contentIdentifier\":\"\(levelPack)\"}]")
        let templates: [String: HostileBody] = [
            Storebus_Gateway_V1_Gateway.authenticate.path: .object([
                ("apiKey", .value("\"\(apiKey)\"")), ("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("deviceId", .value("\"d\""))
            ]),
            Storebus_Gateway_V1_Gateway.observe.path: .object([
                ("afterSeq", .value("\"0\"")), ("credit", .value("2")), ("waitMs", .value("50")), ("replay", .value("false"))
            ]),
            Storebus_Catalog_V1_Catalog.fetchProducts.path: .object([
                ("appBundleId", .value(app)), ("productIdentifiers", .value("[\"\(coins)\",\"nope\"]")), ("storefront", .value("\"USA\""))
            ]),
            Storebus_Catalog_V1_Catalog.lookupProducts.path: .object([
                ("appBundleId", .value(app)), ("productIdentifiers", .value("[\"\(coins)\"]")), ("storefront", .value("\"FRA\"")), ("includeFiles", .value("true"))
            ]),
            Storebus_Catalog_V1_Catalog.getCatalogInfo.path: .object([]),
            Storebus_Catalog_V1_Catalog.listProducts.path: .object([("appBundleId", .value(app)), ("pageSize", .value("10")), ("pageToken", .value("\"\""))]),
            Storebus_Catalog_V1_Catalog.reloadCatalog.path: .object([("dryRun", .value("true"))]),
            Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments.path: appAndAccount,
            Storebus_PaymentQueue_V1_PaymentQueue.addPayment.path: .object([
                ("queue", queue),
                (
                    "payment",
                    .object([
                        ("productIdentifier", .value("\"\(coins)\"")), ("quantity", .value("1")), ("applicationUsername", .value("\"u\"")),
                        ("requestData", .value("\"\"")), ("simulatesAskToBuyInSandbox", .value("false"))
                    ])
                ),
                ("storefront", .value("\"USA\"")), ("idempotencyKey", .value("\"k\""))
            ]),
            Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction.path: .object([("queue", queue), ("transactionIdentifier", .value(someID))]),
            Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions.path: .object([
                ("queue", queue), ("applicationUsername", .value("\"u\"")), ("idempotencyKey", .value("\"r\""))
            ]),
            Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path: .object([("queue", queue)]),
            Storebus_PaymentQueue_V1_PaymentQueue.snapshotQueue.path: .object([("queue", queue)]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(accountJSON)),
                (
                    "policy",
                    .object([
                        ("mode", .value("\"POLICY_MODE_APPROVE\"")), ("failError", .value("\"SK_ERROR_PAYMENT_CANCELLED\"")),
                        ("delayMs", .value("0")), ("purchasesRestricted", .value("false"))
                    ])
                )
            ]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.getPaymentPolicy.path: appAndAccount,
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy.path: .object([("transactionIdentifier", .value(someID))]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.declineAskToBuy.path: .object([("transactionIdentifier", .value(someID))]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.resolveInterruptedPurchase.path: .object([("transactionIdentifier", .value(someID))]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction.path: .object([("transactionIdentifier", .value(someID)), ("reason", .value("\"r\""))]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("includeFinished", .value("true")), ("pageSize", .value("10")), ("pageToken", .value("\"\""))
            ]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.clearAccountTransactions.path: appAndAccount,
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("pageSize", .value("10")), ("pageToken", .value("\"\""))
            ]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.reset.path: .object([]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.getShardMap.path: .object([]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccounts.path: .object([
                ("appBundleId", .value(app)), ("pageSize", .value("10")), ("pageToken", .value("\"\""))
            ]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.readActivity.path: .object([("shard", .value("0")), ("afterSeq", .value("\"0\"")), ("limit", .value("10"))]),
            Storebus_PaymentQueue_V1_Subscriptions.setRenewalRate.path: .object([
                ("appBundleId", .value(app)), ("rate", .value("\"RENEWAL_RATE_MONTHLY_RENEWAL_EVERY_FIVE_MINUTES\""))
            ]),
            Storebus_PaymentQueue_V1_Subscriptions.getRenewalRate.path: .object([("appBundleId", .value(app))]),
            Storebus_PaymentQueue_V1_Subscriptions.setBillingControls.path: .object([
                ("appBundleId", .value(app)), ("controls", .value("{\"billingRetryOnRenewal\":false,\"gracePeriodEnabled\":true}"))
            ]),
            Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions.path: appAndAccount,
            Storebus_PaymentQueue_V1_Subscriptions.renewNow.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("subscriptionGroupIdentifier", .value("\"puzzle.premium\""))
            ]),
            Storebus_PaymentQueue_V1_Subscriptions.expireNow.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("subscriptionGroupIdentifier", .value("\"puzzle.premium\""))
            ]),
            Storebus_PaymentQueue_V1_Subscriptions.extendRenewalDate.path: .object([
                ("subscription", .value("{\"appBundleId\":\(app),\"accountId\":\(accountJSON),\"subscriptionGroupIdentifier\":\"puzzle.premium\"}")),
                ("extendByDays", .value("30")), ("extendReasonCode", .value("1"))
            ]),
            Storebus_PaymentQueue_V1_Subscriptions.setAutoRenew.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("subscriptionGroupIdentifier", .value("\"puzzle.premium\"")),
                ("autoRenewStatus", .value("false"))
            ]),
            Storebus_Receipt_V1_Receipt.refreshReceipt.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("deviceId", .value("\"d\"")), ("applicationVersion", .value("\"1\""))
            ]),
            Storebus_Receipt_V1_Receipt.verifyReceipt.path: .object([
                ("receiptData", .value("\"MIAGCSqGSIb3DQEHAqCAMIACAQE=\"")), ("password", .value("\"secret\"")), ("excludeOldTransactions", .value("true"))
            ]),
            Storebus_Receipt_V1_Receipt.getEntitlements.path: .object([("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("minSeq", .value("\"0\""))]),
            Storebus_Receipt_V1_Receipt.getTransaction.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("transactionId", .value(someID)), ("minSeq", .value("\"0\""))
            ]),
            Storebus_Receipt_V1_Receipt.getSubscriptionStatuses.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(accountJSON)), ("minSeq", .value("\"0\""))
            ]),
            Storebus_Receipt_V1_Receipt.getTransactionInfo.path: .object([("appBundleId", .value(app)), ("transactionId", .value(someID))]),
            Storebus_Receipt_V1_Receipt.getTransactionHistory.path: .object([
                ("appBundleId", .value(app)), ("transactionId", .value(someID)), ("revision", .value("\"MC4w\"")), ("startDateMs", .value("\"1\"")),
                ("productIds", .value("[\"\(coins)\"]")), ("productTypes", .value("[\"PRODUCT_TYPE_CONSUMABLE\"]")), ("descending", .value("true")),
                ("revoked", .value("false"))
            ]),
            Storebus_Receipt_V1_Receipt.getRefundHistory.path: .object([("appBundleId", .value(app)), ("transactionId", .value(someID)), ("revision", .value("\"\""))]),
            Storebus_Receipt_V1_Receipt.getAllSubscriptionStatuses.path: .object([
                ("appBundleId", .value(app)), ("transactionId", .value(someID)), ("statuses", .value("[1, 2]"))
            ]),
            Storebus_Receipt_V1_Receipt.signNotifications.path: .object([
                ("minSeq", .value("\"0\"")),
                ("notifications", .value("[{\"notificationUuid\":\"u\",\"notificationType\":\"TEST\",\"appBundleId\":\(app),\"signedDateMs\":\"1\"}]"))
            ]),
            Storebus_Notifications_V1_Notifications.readNotifications.path: .object([
                ("appBundleId", .value(app)), ("afterPosition", .value("\"0\"")), ("limit", .value("10")), ("waitMs", .value("0"))
            ]),
            Storebus_Notifications_V1_Notifications.requestTestNotification.path: .object([("appBundleId", .value(app))]),
            Storebus_Notifications_V1_Notifications.getRootCertificate.path: .object([("appBundleId", .value(app))]),
            Storebus_Notifications_V1_Notifications.getNotificationHistory.path: .object([
                ("appBundleId", .value(app)), ("afterPosition", .value("\"0\"")), ("limit", .value("5"))
            ]),
            Storebus_Notifications_V1_Notifications.setWebhook.path: .object([
                ("appBundleId", .value(app)), ("url", .value("\"http://127.0.0.1:9/hook\"")), ("sandboxUrl", .value("\"http://127.0.0.1:9/sandbox\""))
            ]),
            Storebus_Receipt_V1_Receipt.getSigningCertificates.path: .object([]),
            Storebus_Receipt_V1_Receipt.rotateSigningKey.path: .object([]),
            Storebus_PaymentQueue_V1_PaymentQueue.updateDownloads.path: .object([
                ("queue", queue),
                ("updates", .value("[{\"transactionIdentifier\":\(someID),\"contentIdentifier\":\"c\",\"action\":\"DOWNLOAD_ACTION_START\",\"progress\":0.5}]")),
                ("checkOnly", .value("true"))
            ]),
            Storebus_Download_V1_Download.startDownloads.path: .object([("queue", queue), ("downloads", downloadRefs)]),
            Storebus_Download_V1_Download.pauseDownloads.path: .object([("queue", queue), ("downloads", downloadRefs)]),
            Storebus_Download_V1_Download.resumeDownloads.path: .object([("queue", queue), ("downloads", downloadRefs)]),
            Storebus_Download_V1_Download.cancelDownloads.path: .object([("queue", queue), ("downloads", downloadRefs)]),
            Storebus_Download_V1_Download.completeDownload.path: .object([
                ("queue", queue), ("download", downloadRef), ("sha256", .value("\"\(String(repeating: "0", count: 64))\"")), ("contentUrl", .value("\"file:///tmp/c\""))
            ]),
            Storebus_Download_V1_Download.failDownload.path: .object([
                ("queue", queue), ("download", downloadRef),
                ("error", .object([("code", .value("\"SK_ERROR_UNKNOWN\"")), ("localizedDescription", .value("\"disk full\""))])),
                ("bytesKept", .value("\"0\""))
            ]),
            Storebus_Download_V1_Download.getDownloads.path: .object([("queue", queue), ("downloads", downloadRefs)]),
            Storebus_Download_V1_Download.getShardMap.path: .object([]),
            Storebus_Download_V1_Download.readChunk.path: .object([
                ("queue", queue), ("download", downloadRef), ("offset", .value("\"0\"")), ("maxBytes", .value("4096")), ("ifVersion", .value("\"1.0\""))
            ]),
            Storebus_Eventlog_V1_EventLog.readEvents.path: .object([("key", .value("\"\(puzzle)/\(account)/d\"")), ("afterSeq", .value("\"0\"")), ("limit", .value("10"))]),
            Storebus_Health_V1_Health.check.path: .object([("service", .value("\"\""))]),
            Storebus_Diagnostics_V1_Diagnostics.echo.path: .object([("payload", .value("\"p\"")), ("delayMs", .value("0"))]),
            Storebus_Diagnostics_V1_Diagnostics.getServerStats.path: .object([]),
            Storebus_Testkit_V1_Journal.append.path: .object([("key", .value("\"k\"")), ("text", .value("\"t\""))]),
            Storebus_Testkit_V1_Journal.countEntries.path: .object([("key", .value("\"k\""))])
        ]
        return templates.sorted { $0.key < $1.key }.map { (path: $0.key, body: $0.value) }
    }

    /// The templates of the methods of `services` (full names, for example
    /// `storebus.catalog.v1.Catalog`).
    public static func templates(account: String, apiKey: String = "", services: [String]) -> [(path: String, body: HostileBody)] {
        templates(account: account, apiKey: apiKey).filter { template in services.contains { template.path.hasPrefix("/\($0)/") } }
    }
}
