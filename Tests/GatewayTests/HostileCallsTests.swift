import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

/// A request body as a tree, so that a mutation can reach any member: an object's members in order
/// (duplicates allowed, as a hostile client may send them), or a value's JSON text.
private indirect enum Body: Sendable {
    case object([(String, Body)])
    case value(String)

    var json: String {
        switch self {
        case .value(let text): text
        case .object(let members): "{" + members.map { "\"\($0.0)\":\($0.1.json)" }.joined(separator: ",") + "}"
        }
    }

    /// The path (member indices) of every value that is not an object, at any depth.
    var leaves: [[Int]] {
        guard case .object(let members) = self else { return [[]] }
        return members.indices.flatMap { index in members[index].1.leaves.map { [index] + $0 } }
    }

    /// This body with the value at `path` replaced by `value`.
    func replacing(_ path: ArraySlice<Int>, with value: String) -> Body {
        guard let first = path.first, case .object(var members) = self else { return .value(value) }
        members[first].1 = members[first].1.replacing(path.dropFirst(), with: value)
        return .object(members)
    }

    /// This body with one member, at any depth, changed: its value replaced by a hostile one,
    /// removed, repeated, or joined by an unknown member.
    func mutated(using random: inout SeededRandom) -> Body {
        guard case .object(var members) = self else { return .value(hostileValue(using: &random)) }
        let unknown = ("unknown\(Int.random(in: 0..<3, using: &random))", Body.value(hostileValue(using: &random)))
        guard !members.isEmpty else { return .object([unknown]) }
        let index = Int.random(in: 0..<members.count, using: &random)
        switch Int.random(in: 0..<10, using: &random) {
        case 0: members.append(unknown)
        case 1: members.remove(at: index)
        case 2: members.append((members[index].0, .value(hostileValue(using: &random))))
        // A nested message's member.
        case 3...4: members[index].1 = members[index].1.mutated(using: &random)
        default: members[index].1 = .value(hostileValue(using: &random))
        }
        return .object(members)
    }
}

/// Values a hostile or careless client might put in any field: wrong types, numbers at and past
/// every integer width (as numbers and as the strings proto3 JSON uses for 64-bit ones), odd and huge
/// strings, long arrays, deep nesting.
private let hostileValues: [String] = [
    "\"\"", "null", "true", "[]", "{}", "0", "-1", "1.5", "1e400", "-0", "\"NaN\"", "\"Infinity\"",
    "2147483647", "2147483648", "-2147483649", "4294967295", "4294967296",
    "9223372036854775807", "18446744073709551615", "18446744073709551616", "-9223372036854775809",
    "\"18446744073709551615\"", "\"9223372036854775807\"", "\"-1\"", "\"0x10\"",
    "\"\\u0000\\n\\\"\\\\ é 漢 🙂\"", "\"\\ud800\"", "\"../../etc/passwd\"", "\"POLICY_MODE_ASK_TO_BUY\"",
    "\"SK_ERROR_PAYMENT_CANCELLED\"", "[\"\(coins)\",\"\(coins)\",\"\",null]", "{\"queue\":{}}",
    "\"\(String(repeating: "x", count: 300))\"", "\"\(String(repeating: "é", count: 40_000))\"",
    String(repeating: "[", count: 400) + String(repeating: "]", count: 400),
    "[" + (0..<1_500).map { "\"p\($0)\"" }.joined(separator: ",") + "]",
]

private func hostileValue(using random: inout SeededRandom) -> String {
    hostileValues[Int.random(in: 0..<hostileValues.count, using: &random)]
}

/// Changes one to four bytes of `text`: the JSON itself broken.
private func brokenBytes(_ text: String, using random: inout SeededRandom) -> [UInt8] {
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

@Suite("Hostile calls through the gateway")
struct HostileCallsTests {
    private static let account = "hostile"

    /// A valid body for each method a session may call, with the fixture's app and account.
    private static func templates(queue: Body) -> [String: Body] {
        let app = "\"\(puzzle)\""
        let account = "\"\(Self.account)\""
        let someID = "\"1000000000000001\""
        let appAndAccount: Body = .object([("appBundleId", .value(app)), ("accountId", .value(account))])
        return [
            Storebus_Gateway_V1_Gateway.authenticate.path: .object([
                ("apiKey", .value("\"\(appKey)\"")), ("appBundleId", .value(app)), ("accountId", .value(account)), ("deviceId", .value("\"d\"")),
            ]),
            Storebus_Gateway_V1_Gateway.observe.path: .object([
                ("afterSeq", .value("\"0\"")), ("credit", .value("2")), ("waitMs", .value("50")), ("replay", .value("false")),
            ]),
            Storebus_Catalog_V1_Catalog.fetchProducts.path: .object([
                ("appBundleId", .value(app)), ("productIdentifiers", .value("[\"\(coins)\",\"nope\"]")), ("storefront", .value("\"USA\"")),
            ]),
            Storebus_Catalog_V1_Catalog.lookupProducts.path: .object([
                ("appBundleId", .value(app)), ("productIdentifiers", .value("[\"\(coins)\"]")), ("storefront", .value("\"FRA\"")), ("includeFiles", .value("true")),
            ]),
            Storebus_Catalog_V1_Catalog.getCatalogInfo.path: .object([]),
            Storebus_Catalog_V1_Catalog.reloadCatalog.path: .object([("dryRun", .value("true"))]),
            Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments.path: appAndAccount,
            Storebus_PaymentQueue_V1_PaymentQueue.addPayment.path: .object([
                ("queue", queue),
                ("payment", .object([
                    ("productIdentifier", .value("\"\(coins)\"")), ("quantity", .value("1")), ("applicationUsername", .value("\"u\"")),
                    ("requestData", .value("\"\"")), ("simulatesAskToBuyInSandbox", .value("false")),
                ])),
                ("storefront", .value("\"USA\"")), ("idempotencyKey", .value("\"k\"")),
            ]),
            Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction.path: .object([("queue", queue), ("transactionIdentifier", .value(someID))]),
            Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions.path: .object([
                ("queue", queue), ("applicationUsername", .value("\"u\"")), ("idempotencyKey", .value("\"r\"")),
            ]),
            Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path: .object([("queue", queue)]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(account)),
                ("policy", .object([
                    ("mode", .value("\"POLICY_MODE_APPROVE\"")), ("failError", .value("\"SK_ERROR_PAYMENT_CANCELLED\"")),
                    ("delayMs", .value("0")), ("purchasesRestricted", .value("false")),
                ])),
            ]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.getPaymentPolicy.path: appAndAccount,
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy.path: .object([("transactionIdentifier", .value(someID))]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.declineAskToBuy.path: .object([("transactionIdentifier", .value(someID))]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.resolveInterruptedPurchase.path: .object([("transactionIdentifier", .value(someID))]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction.path: .object([("transactionIdentifier", .value(someID)), ("reason", .value("\"r\""))]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(account)), ("includeFinished", .value("true")), ("pageSize", .value("10")), ("pageToken", .value("\"\"")),
            ]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.clearAccountTransactions.path: appAndAccount,
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges.path: .object([
                ("appBundleId", .value(app)), ("accountId", .value(account)), ("pageSize", .value("10")), ("pageToken", .value("\"\"")),
            ]),
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.reset.path: .object([]),
        ]
    }

    /// Opens a session over the raw connection; returns its token.
    /// Opens a session over the raw connection; returns its token and the methods it may call.
    private static func authenticate(_ peer: RawPeer, key: String) async throws -> (token: String, methods: Set<String>) {
        let body = "{\"apiKey\":\"\(key)\",\"appBundleId\":\"\(puzzle)\",\"accountId\":\"\(account)\",\"deviceId\":\"d\"}"
        try peer.send(strings: ["", "SB1Q\nauth\n5000\n\(Storebus_Gateway_V1_Gateway.authenticate.path)", body])
        let message = try #require(try await peer.receive(timeout: .seconds(10)))
        let answer = try #require(Frames.parseAtClient(message.frames))
        #expect(answer.code == .ok)
        let session = try JSONCodec.decode(Storebus_Gateway_V1_AuthenticateResponse.self, from: answer.body)
        return (session.sessionID, Set(session.allowedMethods))
    }

    @Test("every hostile value in every field of every method a user or an admin session may call, then 1,500 calls with several changes, broken JSON or a missing or forged session, through a gateway to the catalog and payment queue processes: each is answered once with a status code other than INTERNAL, no process stops, and a purchase works after")
    func hostileCalls() async throws {
        let store = try StoreFixture()
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let user = try await Self.authenticate(peer, key: appKey)
        let admin = try await Self.authenticate(peer, key: adminKey)
        let queue: Body = .object([("appBundleId", .value("\"\(puzzle)\"")), ("accountId", .value("\"\(Self.account)\"")), ("deviceId", .value("\"d\""))])
        let templates = Self.templates(queue: queue).sorted { $0.key < $1.key }
        let open = Storebus_Gateway_V1_Gateway.authenticate.path
        #expect(Set(templates.map(\.key)) == admin.methods.union(user.methods).union([open]), "a template for each method a session may call")

        // Each value of the list in each field, with a session that may call the method: every
        // handler meets every value.
        var calls: [(path: String, session: String?, body: [UInt8])] = []
        for (path, template) in templates {
            let session = user.methods.contains(path) ? user.token : admin.token
            for leaf in template.leaves {
                for value in hostileValues {
                    calls.append((path, session, Array(template.replacing(leaf[...], with: value).json.utf8)))
                }
            }
        }
        let systematic = calls.count
        // Then calls with one to three changes anywhere, one in ten with its JSON broken, with a user
        // session, an admin one, none or a forged one.
        var random = SeededRandom(seed: 0x40_571_1E)
        for _ in 0..<1_500 {
            let (path, template) = templates[Int.random(in: 0..<templates.count, using: &random)]
            var body = template
            for _ in 0..<Int.random(in: 1...3, using: &random) { body = body.mutated(using: &random) }
            let bytes = Int.random(in: 0..<10, using: &random) == 0 ? brokenBytes(body.json, using: &random) : Array(body.json.utf8)
            let session: String? = switch Int.random(in: 0..<20, using: &random) {
            case 0: nil
            case 1: String(user.token.dropLast()) + (user.token.last == "A" ? "B" : "A")
            case 2..<10: user.token
            default: admin.token
            }
            calls.append((path, session, bytes))
        }
        let total = calls.count
        let toSend = calls

        // Sent and answered on a thread of its own, at most 32 calls in flight; each call has a 3 s
        // deadline, so held Observe calls and anything slow are answered too.
        let codes = try await onThread("hostile") { () -> [Int: [Int64]] in
            var answers: [Int: [Int64]] = [:]
            var outstanding = 0
            func take(_ frames: [[UInt8]]) {
                guard let answer = Frames.parseAtClient(frames), let id = Int(String(decoding: answer.requestID, as: UTF8.self)) else {
                    answers[-1, default: []].append(-1)
                    return
                }
                answers[id, default: []].append(Int64(answer.code.rawValue))
                outstanding -= 1
            }
            for (id, call) in toSend.enumerated() {
                var header = "SB1Q\n\(id)\n3000\n\(call.path)"
                if let session = call.session { header += "\nsession: \(session)" }
                try peer.send([[], Array(header.utf8), call.body])
                outstanding += 1
                while let message = try peer.receiveBlocking(timeout: outstanding >= 32 ? .seconds(10) : .zero) {
                    take(message.frames)
                    if outstanding < 32 { break }
                }
            }
            while outstanding > 0, let message = try peer.receiveBlocking(timeout: .seconds(10)) { take(message.frames) }
            // Nothing more comes: one answer a call.
            while let message = try peer.receiveBlocking(timeout: .milliseconds(300)) { take(message.frames) }
            return answers
        }
        #expect(systematic > 2_000)

        // Then every call was answered exactly once, with a status code, and nothing else came
        #expect(codes[-1] == nil, "answers that were not a call's: \(codes[-1]?.count ?? 0)")
        let unanswered = (0..<total).filter { codes[$0] == nil }
        #expect(unanswered.isEmpty, "unanswered calls: \(unanswered.prefix(10))")
        let repeated = codes.filter { $0.key >= 0 && $0.value.count > 1 }
        #expect(repeated.isEmpty, "calls answered more than once: \(repeated.keys.sorted().prefix(10))")
        let byCode = Dictionary(grouping: codes.values.flatMap { $0 }, by: { $0 }).mapValues(\.count)
        #expect(byCode.keys.allSatisfy { (0...16).contains($0) }, "\(byCode)")
        // And none was an internal error: bad input is named as such
        #expect(byCode[Int64(StatusCode.internalError.rawValue)] == nil && byCode[Int64(StatusCode.unknown.rawValue)] == nil, "\(byCode)")
        // And the run reached the services' handlers: many calls were refused for their content, and
        // many were served
        #expect(byCode[Int64(StatusCode.invalidArgument.rawValue), default: 0] > 300, "\(byCode)")
        #expect(byCode[Int64(StatusCode.ok.rawValue), default: 0] > 200, "\(byCode)")
        #expect(byCode[Int64(StatusCode.unauthenticated.rawValue), default: 0] > 50, "\(byCode)")
        // And every process is still running
        for process in [store.catalog, store.queue] + store.gateways {
            #expect(process.isRunning, "\(process.output)")
        }
        // And a device still buys and finishes as usual
        let (client, recorder) = try await store.launch(account: "after-hostile")
        try await completedPurchase(client, recorder)
        recorder.cancel()
        await client.close()
        await store.stop()
    }
}
