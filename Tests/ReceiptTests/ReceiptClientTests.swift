import Foundation
import Receipt
import ReceiptFormat
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// Receipts from the client side: the SDK's ReceiptRefreshRequest, offline verifier and
/// entitlements, storectl's receipt commands, and a signing key rotated under way.
@Suite(.serialized)
struct ReceiptClientTests {
    @Test("the SDK refreshes the receipt into appStoreReceiptURL, verifies it offline against the root, and reads entitlements and signed transactions")
    func sdk() async throws {
        try await ReceiptVerificationTests.withBought() { bought in
            let directory = try TemporaryDirectory(prefix: "sdkr")
            defer { directory.remove() }
            var configuration = bought.cluster.configuration(account: "alice", gateways: [0])
            configuration.receiptDirectory = directory.url
            let connection = try StoreConnection(configuration: configuration)
            #expect(connection.appStoreReceipt() == nil)
            let bytes = try await ReceiptRefreshRequest(applicationVersion: "42", connection: connection).start()
            #expect(connection.appStoreReceipt() == bytes)
            #expect(connection.appStoreReceiptURL.path.hasPrefix(directory.url.path))
            let verifier = try ReceiptVerifier(rootCertificatePEM: try await connection.rootCertificatePEM())
            let receipt = try await verifier.verify(Array(bytes), bundleID: puzzle, deviceID: "phone")
            #expect(receipt.applicationVersion == "42")
            #expect(receipt.inApp.map(\.transactionID) == [bought.transactionID])
            // Another device's hash, another app, a changed byte: each refused, saying which
            await #expect(throws: ReceiptVerifier.Failure.otherDevice) { _ = try await verifier.verify(Array(bytes), deviceID: "tablet") }
            await #expect(throws: ReceiptVerifier.Failure.otherApp(puzzle)) { _ = try await verifier.verify(Array(bytes), bundleID: notes) }
            var changed = Array(bytes)
            changed[changed.count / 2] ^= 0x20
            do throws(ReceiptVerifier.Failure) {
                _ = try await verifier.verify(changed)
                Issue.record("a changed receipt verified")
            } catch {
                if case .notAuthenticated = error {} else { Issue.record("\(error)") }
            }
            // The signed transaction verifies offline too
            let payload = try await verifier.verifyTransaction(try await connection.signedTransaction(bought.transactionID))
            #expect(payload.transactionId == bought.transactionID)
            // Entitlements, as the SDK gives them
            let entitlements = try await connection.entitlements()
            #expect(entitlements.map(\.productIdentifier) == [ReceiptVerificationTests.levelPack])
            #expect(entitlements.first?.isActive == true)
            #expect(entitlements.first?.reason.hasPrefix("purchased on ") == true)
            await connection.close()
        }
    }

    @Test("a rotated signing key signs new receipts; receipts and transactions the old one signed still verify")
    func rotation() async throws {
        try await ReceiptVerificationTests.withBought() { bought in
            let admin = try bought.cluster.admin()
            let before = try await bought.alice.call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init())
            let oldJWS = try await bought.alice.signedTransaction(bought.transactionID)
            let rotated = try await admin.call(Storebus_Receipt_V1_Receipt.rotateSigningKey, .init())
            #expect(rotated.leafCount == 2)
            // A user session may not rotate keys
            let refused = await #expect(throws: StoreError.self) { _ = try await bought.alice.call(Storebus_Receipt_V1_Receipt.rotateSigningKey, .init()) }
            #expect(refused?.status == .permissionDenied)
            let after = try await bought.alice.call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init())
            #expect(after.rootCertificatePem == before.rootCertificatePem)
            #expect(after.leafCertificatesPem.count == 2)
            #expect(after.leafCertificatesPem.first == rotated.leafCertificatePem)
            #expect(after.leafCertificatesPem.last == before.leafCertificatesPem.first)
            let jwks = try #require(try JSONSerialization.jsonObject(with: Data(after.jwksJson.utf8)) as? [String: Any])
            #expect((jwks["keys"] as? [[String: Any]])?.first?["kid"] as? String == rotated.keyID)
            // A new receipt carries the new leaf, the old one the old leaf; both verify
            let data = try await bought.alice.call(Storebus_Receipt_V1_Receipt.refreshReceipt, .init()).receiptData
            let newReceipt = Array(try #require(Data(base64Encoded: data)))
            #expect(Self.contains(newReceipt, pem: rotated.leafCertificatePem))
            #expect(Self.contains(bought.receipt, pem: try #require(before.leafCertificatesPem.first)))
            #expect(try await bought.verify(newReceipt).status == 0)
            #expect(try await bought.verify(bought.receipt).status == 0)
            let verifier = try ReceiptVerifier(rootCertificatePEM: after.rootCertificatePem)
            _ = try await verifier.verify(bought.receipt)
            _ = try await verifier.verify(newReceipt)
            _ = try await verifier.verifyTransaction(oldJWS)
            _ = try await verifier.verifyTransaction(try await bought.alice.signedTransaction(bought.transactionID))
            // And after a restart the service signs with the newest leaf still
            await bought.cluster.receipt.stop()
            try await bought.cluster.startReceipt()
            let restarted = try await bought.alice.call(Storebus_Receipt_V1_Receipt.refreshReceipt, .init()).receiptData
            #expect(Self.contains(Array(try #require(Data(base64Encoded: restarted))), pem: rotated.leafCertificatePem))
            await admin.close()
        }
    }

    @Test("storectl receipt refresh, show, verify and root-certificate, and storectl entitlements, print what a person wants to read")
    func storectl() async throws {
        try await ReceiptVerificationTests.withBought() { bought in
            let file = bought.cluster.directory.path("receipt.b64")
            let refresh = try await Self.storectl(bought.cluster, ["receipt", "refresh", "--account", "alice", "--device", "phone", "--out", file], name: "refresh")
            #expect(refresh.status == 0, "\(refresh.output)")
            #expect(refresh.output.contains("1 purchase"), "\(refresh.output)")
            let show = try await Self.storectl(bought.cluster, ["receipt", "show", "--file", file], name: "show")
            #expect(show.status == 0, "\(show.output)")
            #expect(show.output.contains("bundle id                     \(puzzle)"), "\(show.output)")
            #expect(show.output.contains("\(bought.transactionID)  \(ReceiptVerificationTests.levelPack)  x1  bought "), "\(show.output)")
            let verify = try await Self.storectl(bought.cluster, ["receipt", "verify", "--file", file], name: "verify")
            #expect(verify.status == 0, "\(verify.output)")
            #expect(verify.output.contains("status 0: valid (Sandbox)"), "\(verify.output)")
            // A changed receipt: the status and its meaning, exit 1
            var bytes = bought.receipt
            bytes[bytes.count / 2] ^= 0x10
            try Data(bytes).base64EncodedString().write(toFile: file, atomically: true, encoding: .utf8)
            let refused = try await Self.storectl(bought.cluster, ["receipt", "verify", "--file", file], name: "verify-changed")
            #expect(refused.status == 1, "\(refused.output)")
            #expect(refused.output.contains("status 21003: not authentic"), "\(refused.output)")
            let root = try await Self.storectl(bought.cluster, ["receipt", "root-certificate"], name: "root")
            #expect(root.status == 0)
            #expect(root.output.hasPrefix("-----BEGIN CERTIFICATE-----"), "\(root.output)")
            _ = try ReceiptVerifier(rootCertificatePEM: root.output)
            let entitlements = try await Self.storectl(bought.cluster, ["entitlements", "--account", "alice"], name: "entitlements")
            #expect(entitlements.status == 0, "\(entitlements.output)")
            #expect(entitlements.output.contains("active   \(ReceiptVerificationTests.levelPack)  original \(bought.transactionID)  purchased on "), "\(entitlements.output)")
            // An operator rotates the signing key; the receipt refreshed before still verifies
            let rotate = try await Self.storectl(bought.cluster, ["admin", "rotate-signing-key"], name: "rotate")
            #expect(rotate.status == 0 && rotate.output.contains("2 signing keys kept"), "\(rotate.output)")
            #expect(try await bought.verify(bought.receipt).status == 0)
        }
    }

    /// Whether the receipt's bytes hold the certificate in `pem` (CMS carries its signer's).
    static func contains(_ receipt: [UInt8], pem: String) -> Bool {
        guard let der = ReceiptVerificationTests.der(pem: pem) else { return false }
        return receipt.indices.contains { start in start + der.count <= receipt.count && receipt[start] == der[0] && Array(receipt[start..<(start + der.count)]) == der }
    }

    static func storectl(_ cluster: StoreCluster, _ arguments: [String], name: String) async throws -> (status: Int32?, output: String) {
        let process = ServiceProcess(
            name: "storectl", arguments: arguments + ["--gateway", cluster.gatewayEndpoints[0]],
            logFile: cluster.directory.url.appendingPathComponent("storectl-\(name).log"))
        try process.start(environment: ["STOREBUS_API_KEY": appKey, "STOREBUS_ADMIN_KEY": adminKey, "TMPDIR": cluster.directory.path("tmp")])
        let status = await process.waitForExit(timeout: .seconds(60))
        return (status, process.output)
    }
}
