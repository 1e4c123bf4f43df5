import Foundation
import Receipt
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import SwiftASN1
import Testing

@testable import ReceiptFormat

/// verifyReceipt's answers, and receipts and signed transactions as other tools see them: openssl,
/// Apple's app-store-server-library.
@Suite(.serialized)
struct ReceiptVerificationTests {
    static let levelPack = ReceiptFlowTests.levelPack
    static let monthly = "com.storebus.demo.puzzle.premium.monthly"

    /// A started cluster with alice's level pack bought, her receipt holding it, and a connection.
    struct Bought {
        let cluster: StoreCluster
        let alice: StoreConnection
        let transactionID: String
        let receipt: [UInt8]

        func verify(_ receipt: [UInt8], password: String? = nil) async throws -> Storebus_Receipt_V1_VerifyReceiptResponse {
            try await verify(data: Data(receipt).base64EncodedString(), password: password)
        }

        func verify(data: String, password: String? = nil) async throws -> Storebus_Receipt_V1_VerifyReceiptResponse {
            try await alice.call(
                Storebus_Receipt_V1_Receipt.verifyReceipt,
                .with {
                    $0.receiptData = data
                    if let password { $0.password = password }
                })
        }

    }

    /// Runs `body` with a started cluster where alice bought `products` and her receipt holds
    /// them; stops the cluster however `body` ends.
    static func withBought(products: [String] = [levelPack], environment: String = "sandbox", _ body: (Bought) async throws -> Void) async throws {
        try await StoreCluster(gatewayCount: 1, storeEnvironment: environment).running { cluster in
            let (phone, recorder) = try await cluster.launch(account: "alice")
            var ids: [String] = []
            for product in products {
                let bought = try await phone.addPayment(Payment(productIdentifier: product))
                #expect(await recorder.purchased(bought.id))
                ids.append(bought.id)
            }
            await phone.close()
            let alice = try StoreConnection(configuration: cluster.configuration(account: "alice", gateways: [0]))
            _ = try await ReceiptFlowTests.receipt(alice) { Set($0.inApp.map(\.transactionID)).isSuperset(of: ids) }
            let data = try await alice.call(Storebus_Receipt_V1_Receipt.refreshReceipt, .init()).receiptData
            let bought = Bought(cluster: cluster, alice: alice, transactionID: ids[0], receipt: Array(try #require(Data(base64Encoded: data))))
            do {
                try await body(bought)
            } catch {
                await alice.close()
                throw error
            }
            await alice.close()
        }
    }

    @Test("a receipt verifies with status 0; one byte changed anywhere past its type gives 21003; not a receipt, 21002")
    func tamperedReceipts() async throws {
        try await Self.withBought() { bought in
            let valid = try await bought.verify(bought.receipt)
            #expect(valid.status == 0)
            #expect(valid.environment == "Sandbox")
            #expect(valid.receipt.inApp.map(\.transactionID) == [bought.transactionID])
            #expect(valid.receipt.bundleID == puzzle)
            #expect(valid.latestReceiptInfo.isEmpty, "no auto-renewable subscription: no latest_receipt_info")
            // The first 15 bytes say "a PKCS#7 signed message"; every other byte is covered.
            var random = SeededRandom(seed: 36)
            var positions = Set((0..<48).map { _ in Int.random(in: 15..<bought.receipt.count, using: &random) })
            positions.formUnion([15, 40, bought.receipt.count / 2, bought.receipt.count - 40, bought.receipt.count - 1])
            for position in positions.sorted() {
                var tampered = bought.receipt
                tampered[position] ^= 0x01 << UInt8.random(in: 0...7, using: &random)
                let answer = try await bought.verify(tampered)
                #expect(answer.status == 21003, "byte \(position) of \(bought.receipt.count) changed: status \(answer.status)")
            }
            // Truncated: still a signed message that cannot be authenticated.
            #expect(try await bought.verify(Array(bought.receipt.prefix(bought.receipt.count / 2))).status == 21003)
            // Not base64, empty, random bytes, the content type changed: not a receipt at all.
            #expect(try await bought.verify(data: "not base64 at all!").status == 21002)
            #expect(try await bought.verify(data: "").status == 21002)
            #expect(try await bought.verify((0..<600).map { _ in UInt8.random(in: 0...255, using: &random) }).status == 21002)
            var otherType = bought.receipt
            otherType[otherType.count > 200 ? 14 : 0] ^= 0x01
            #expect(try await bought.verify(otherType).status == 21002)
        }
    }

    @Test("the service and the SDK's offline verifier classify every input alike: one verification path")
    func oneVerificationPath() async throws {
        try await Self.withBought() { bought in
            let root = try await bought.alice.rootCertificatePEM()
            let verifier = try ReceiptVerifier(rootCertificatePEM: root)
            let own = try SigningAuthority(directory: URL(fileURLWithPath: bought.cluster.directory.path("receipt-data")).appendingPathComponent("keys"))
            let elsewhere = try TemporaryDirectory(prefix: "ca")
            defer { elsewhere.remove() }
            let stranger = try SigningAuthority(directory: elsewhere.url)
            let payload = try ReceiptSignature.attachedPayload(of: bought.receipt)
            var random = SeededRandom(seed: 7)
            var flipped = bought.receipt
            flipped[bought.receipt.count / 2] ^= 0x10
            var otherType = bought.receipt
            otherType[otherType.count > 200 ? 14 : 0] ^= 0x01
            let inputs: [(String, [UInt8])] = [
                ("the receipt", bought.receipt),
                ("a byte changed", flipped),
                ("truncated", Array(bought.receipt.prefix(bought.receipt.count / 2))),
                ("random bytes", (0..<600).map { _ in UInt8.random(in: 0...255, using: &random) }),
                ("another content type", otherType),
                ("signed by another authority", try ReceiptSignature.sign(payload: payload, with: stranger.current(), at: Date())),
                ("not a receipt, signed by the deployment", try ReceiptSignature.sign(payload: [0x05, 0x00], with: own.current(), at: Date())),
                ("not a receipt, signed elsewhere", try ReceiptSignature.sign(payload: [0x05, 0x00], with: stranger.current(), at: Date()))
            ]
            for (name, input) in inputs {
                let status = try await bought.verify(input).status
                let offline: Int32
                do {
                    _ = try await verifier.verify(input, environment: .sandbox)
                    offline = 0
                } catch let error as ReceiptVerifier.Failure {
                    switch error {
                    case .malformed: offline = 21002
                    case .notAuthenticated, .otherApp, .otherDevice: offline = 21003
                    case .otherEnvironment(let environment): offline = environment == .sandbox ? 21007 : 21008
                    }
                } catch {
                    offline = -1
                }
                #expect(status == offline, "\(name): the service says \(status), the verifier \(offline)")
            }
        }
    }

    @Test("a CMS signed by another authority is 21003; one with attributes missing or doubled, signed by the deployment's key, is 21002")
    func foreignSignersAndBadPayloads() async throws {
        try await Self.withBought() { bought in
            let payload = try ReceiptSignature.attachedPayload(of: bought.receipt)
            let receipt = try AppReceipt(der: payload)
            // Another authority (a fresh one of its own) signing the very same payload
            let elsewhere = try TemporaryDirectory(prefix: "ca")
            let stranger = try SigningAuthority(directory: elsewhere.url)
            let foreign = try ReceiptSignature.sign(payload: payload, with: stranger.current(), at: Date())
            #expect(try await bought.verify(foreign).status == 21003)
            elsewhere.remove()
            // The deployment's own key (read from its data directory) signing broken payloads
            let own = try SigningAuthority(directory: URL(fileURLWithPath: bought.cluster.directory.path("receipt-data")).appendingPathComponent("keys"))
            #expect(try await bought.verify(try ReceiptSignature.sign(receipt, with: own.current(), at: Date())).status == 0)
            let der = try receipt.der()
            // Missing the bundle id (attribute 2): drop it from the set
            let withoutBundle = try Self.payload(der) { $0.filter { $0.type != 2 } }
            #expect(try await bought.verify(try ReceiptSignature.sign(payload: withoutBundle, with: own.current(), at: Date())).status == 21002)
            // The bundle id given twice
            let doubled = try Self.payload(der) { $0 + $0.filter { $0.type == 2 } }
            #expect(try await bought.verify(try ReceiptSignature.sign(payload: doubled, with: own.current(), at: Date())).status == 21002)
            // An attribute of a type Apple does not document is skipped, as Apple's parsers do
            let extra = try Self.payload(der) { $0 + [ReceiptAttribute(type: 9999, value: [0x0c, 0x01, 0x41])] }
            #expect(try await bought.verify(try ReceiptSignature.sign(payload: extra, with: own.current(), at: Date())).status == 0)
            // An opaque value no account has: 21010
            var stray = receipt
            stray.opaqueValue = Array(repeating: 7, count: 16)
            #expect(try await bought.verify(try ReceiptSignature.sign(stray, with: own.current(), at: Date())).status == 21010)
        }
    }

    @Test("shared secret: a wrong one is 21004, the app's passes; a receipt with a subscription needs it and carries latest_receipt_info")
    func sharedSecrets() async throws {
        try await Self.withBought(products: [Self.levelPack, Self.monthly]) { bought in
            #expect(try await bought.verify(bought.receipt, password: "wrong").status == 21004)
            #expect(try await bought.verify(bought.receipt).status == 21004, "a subscription needs the password")
            let valid = try await bought.verify(bought.receipt, password: puzzleSharedSecret)
            #expect(valid.status == 0)
            #expect(valid.latestReceiptInfo.count == 2)
            #expect(valid.latestReceiptInfo.allSatisfy { !$0.signedTransactionInfo.isEmpty })
            #expect(!valid.latestReceipt.isEmpty)
            #expect(try await bought.verify(data: valid.latestReceipt, password: puzzleSharedSecret).status == 0)
        }
    }

    @Test("a sandbox receipt sent to a production deployment is 21007, a production receipt sent to a sandbox one 21008")
    func environments() async throws {
        try await Self.withBought { (sandbox: Bought) async throws in
            try await Self.withBought(environment: "production") { (production: Bought) async throws in
                #expect(try await production.verify(production.receipt).status == 0)
                #expect(try await production.verify(production.receipt).environment == "Production")
                #expect(try await production.verify(sandbox.receipt).status == 21007)
                #expect(try await sandbox.verify(production.receipt).status == 21008)
                // Sandbox receipt properties are refused by a production deployment.
                let refused = await #expect(throws: StoreError.self) {
                    _ = try await production.alice.call(Storebus_Receipt_V1_Receipt.refreshReceipt, .with { $0.properties.isExpired = true })
                }
                #expect(refused?.status == .failedPrecondition)
            }
        }
    }

    @Test("openssl cms -verify accepts a receipt with the exported root and rejects it with another root")
    func opensslVerifies() async throws {
        try await Self.withBought() { bought in
            let work = try TemporaryDirectory(prefix: "ossl")
            defer { work.remove() }
            let certificates = try await bought.alice.call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init())
            try certificates.rootCertificatePem.write(toFile: work.path("root.pem"), atomically: true, encoding: .utf8)
            try Data(bought.receipt).write(to: URL(fileURLWithPath: work.path("receipt.der")))
            let accepted = try await runCommand(
                "/usr/bin/openssl",
                [
                    "cms", "-verify", "-inform", "DER", "-in", work.path("receipt.der"),
                    "-CAfile", work.path("root.pem"), "-out", work.path("payload.der")
                ])
            #expect(accepted.status == 0, "openssl: \(accepted.output)")
            let content = try Data(contentsOf: URL(fileURLWithPath: work.path("payload.der")))
            #expect(Array(content) == (try ReceiptSignature.attachedPayload(of: bought.receipt)))
            // Another root: a self-signed P-256 certificate made by openssl itself
            let made = try await runCommand(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=Not StoreBus", "-days", "2", "-keyout", work.path("other.key"), "-out", work.path("other.pem")
                ])
            #expect(made.status == 0, "openssl req: \(made.output)")
            let rejected = try await runCommand(
                "/usr/bin/openssl",
                [
                    "cms", "-verify", "-inform", "DER", "-in", work.path("receipt.der"),
                    "-CAfile", work.path("other.pem"), "-out", "/dev/null"
                ])
            #expect(rejected.status != 0)
            #expect(rejected.output.contains("unable to get") || rejected.output.contains("Verify error"), "openssl: \(rejected.output)")
        }
    }

    @Test("Apple's app-store-server-library accepts a signed transaction unchanged, refuses a changed one, and finds the transaction id in a receipt")
    func appleLibraryAccepts() async throws {
        let python = deployDirectory.deletingLastPathComponent().appendingPathComponent(".build/python-tools/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "make test-deps installs Apple's library into .build/python-tools")
        try await Self.withBought() { bought in
            let work = try TemporaryDirectory(prefix: "asl")
            defer { work.remove() }
            let certificates = try await bought.alice.call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init())
            let rootDER = try #require(Self.der(pem: certificates.rootCertificatePem))
            try Data(rootDER).write(to: URL(fileURLWithPath: work.path("root.der")))
            let transaction = try await bought.alice.call(Storebus_Receipt_V1_Receipt.getTransaction, .with { $0.transactionID = bought.transactionID }).transaction
            let jws = transaction.signedTransactionInfo
            // The same JWS with its payload's product changed (the signature kept)
            let parts = jws.split(separator: ".").map(String.init)
            let payloadBytes = try #require(Self.base64URL(parts[1]))
            var payload = try #require(try JSONSerialization.jsonObject(with: payloadBytes) as? [String: Any])
            payload["productId"] = "com.storebus.demo.puzzle.removeads"
            let changed = [parts[0], Self.base64URL(try JSONSerialization.data(withJSONObject: payload)), parts[2]].joined(separator: ".")
            let script = deployDirectory.deletingLastPathComponent().appendingPathComponent("scripts/apple-library-check.py").path
            let result = try await runCommand(
                python,
                [
                    script, work.path("root.der"), puzzle, "--transaction", jws, "--transaction", changed,
                    "--receipt", Data(bought.receipt).base64EncodedString()
                ])
            let lines = result.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            try #require(lines.count == 3, "the script said: \(result.output)")
            #expect(lines[0]["ok"] as? Bool == true, "\(lines[0])")
            let decoded = try #require(lines[0]["payload"] as? [String: Any])
            #expect(decoded["transactionId"] as? String == bought.transactionID)
            #expect(decoded["originalTransactionId"] as? String == bought.transactionID)
            #expect(decoded["productId"] as? String == Self.levelPack)
            #expect(decoded["bundleId"] as? String == puzzle)
            #expect(decoded["type"] as? String == "Non-Consumable")
            #expect(decoded["environment"] as? String == "Sandbox")
            #expect(decoded["inAppOwnershipType"] as? String == "PURCHASED")
            #expect(decoded["currency"] as? String == "USD")
            #expect((decoded["price"] as? NSNumber)?.intValue ?? 0 > 0)
            #expect(decoded["storefront"] as? String == "USA")
            #expect(lines[1]["ok"] as? Bool == false, "a changed payload must not verify: \(lines[1])")
            #expect(lines[2]["transactionId"] as? String == bought.transactionID, "\(lines[2])")
        }
    }

    @Test("a JWS with another transaction's header, or with its header and payload swapped, does not verify")
    func swappedHeaders() async throws {
        let directory = try TemporaryDirectory(prefix: "jws")
        defer { directory.remove() }
        let authority = try SigningAuthority(directory: directory.url)
        let other = try SigningAuthority(directory: directory.url.appendingPathComponent("other"))
        var payload = JWSTransactionDecodedPayload()
        payload.transactionId = "1"
        payload.bundleId = puzzle
        payload.signedDate = EpochMilliseconds.now
        let jws = try JWS.sign(payload, with: authority.current())
        let verified = try await JWS.verify(jws, as: JWSTransactionDecodedPayload.self, roots: [authority.root])
        #expect(verified == payload)
        let foreign = try JWS.sign(payload, with: other.current())
        let parts = jws.split(separator: ".").map(String.init)
        let foreignParts = foreign.split(separator: ".").map(String.init)
        for candidate in [
            [foreignParts[0], parts[1], parts[2]].joined(separator: "."), // another chain's header
            [parts[1], parts[0], parts[2]].joined(separator: "."), // header and payload swapped
            foreign, // signed by another authority
            parts[0] + "." + parts[1] // no signature
        ] {
            await #expect(throws: JWS.Failure.self) { _ = try await JWS.verify(candidate, as: JWSTransactionDecodedPayload.self, roots: [authority.root]) }
        }
    }

    /// A payload rebuilt from `der` with its attributes changed by `change`.
    static func payload(_ der: [UInt8], _ change: ([ReceiptAttribute]) -> [ReceiptAttribute]) throws -> [UInt8] {
        let attributes = try DER.set(of: ReceiptAttribute.self, identifier: .set, rootNode: DER.parse(der))
        return try ReceiptAttribute.setDER(change(attributes))
    }

    static func der(pem: String) -> [UInt8]? {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        return Data(base64Encoded: body).map(Array.init)
    }

    static func base64URL(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
