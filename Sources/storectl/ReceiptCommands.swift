import ArgumentParser
import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

/// `storectl receipt …`: the app receipt of a device, as a person wants to read it.
struct ReceiptCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipt",
        abstract: "Refresh, show and verify app receipts; print the root certificate they chain to.",
        subcommands: [ReceiptRefreshCommand.self, ReceiptShowCommand.self, ReceiptVerifyCommand.self, RootCertificateCommand.self]
    )
}

/// Where a receipt is read from: a file, or the device's receipt file (refreshed when missing).
struct ReceiptSource: ParsableArguments {
    @Option(help: "A receipt file (DER, or its base64). Default: the device's receipt, refreshed first when there is none.")
    var file: String?

    /// The receipt's bytes.
    func bytes(_ connection: StoreConnection) async throws -> Data {
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else { throw Failure(description: "Cannot read \(file).") }
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            return Data(base64Encoded: text) ?? data
        }
        if let kept = connection.appStoreReceipt() { return kept }
        return try await sentence { try await ReceiptRefreshRequest(connection: connection).start() }
    }
}

/// `storectl receipt refresh`: a new receipt for the device, kept where the SDK keeps it.
struct ReceiptRefreshCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "refresh", abstract: "Ask the store for a new receipt (SKReceiptRefreshRequest) and keep it.")

    @OptionGroup var client: ClientOptions
    @Option(help: "Also write the receipt, base64, to this file.")
    var out: String?
    @Flag(help: "Sandbox: an expired receipt.") var expired = false
    @Flag(help: "Sandbox: a revoked receipt (verifies with 21010).") var revoked = false

    func run() async throws {
        let connection = try StoreConnection(configuration: client.configuration())
        let properties = expired || revoked ? ReceiptRefreshRequest.Properties(isExpired: expired, isRevoked: revoked) : nil
        let bytes = try await sentence { try await ReceiptRefreshRequest(receiptProperties: properties, connection: connection).start() }
        if let out { try bytes.base64EncodedString().write(toFile: out, atomically: true, encoding: .utf8) }
        let receipt = try AppReceipt(der: ReceiptSignature.attachedPayload(of: Array(bytes)))
        print("receipt of \(receipt.bundleID) for \(client.account) on \(client.device): \(receipt.inApp.count) purchase\(receipt.inApp.count == 1 ? "" : "s"), \(bytes.count) bytes")
        print("kept at \(connection.appStoreReceiptURL.path)\(out.map { "; base64 in \($0)" } ?? "")")
        await connection.close()
    }
}

/// `storectl receipt show`: a receipt decoded.
struct ReceiptShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Decode a receipt and print its fields and purchases.")

    @OptionGroup var client: ClientOptions
    @OptionGroup var source: ReceiptSource

    func run() async throws {
        let connection = try StoreConnection(configuration: client.configuration())
        let bytes = try await source.bytes(connection)
        let receipt: AppReceipt
        do {
            receipt = try AppReceipt(der: ReceiptSignature.attachedPayload(of: Array(bytes)))
        } catch {
            throw Failure(description: "Not a receipt: \(error)")
        }
        print("bundle id                     \(receipt.bundleID)")
        print("receipt type                  \(receipt.receiptType)")
        print("application version           \(receipt.applicationVersion)")
        print("original application version  \(receipt.originalApplicationVersion)")
        print("created                       \(Self.date(receipt.creationDate))")
        print("original purchase date        \(Self.date(receipt.originalPurchaseDate))")
        if let expiration = receipt.expirationDate { print("expires                       \(Self.date(expiration))") }
        print("in-app purchases              \(receipt.inApp.count)")
        for entry in receipt.inApp {
            var line = "  \(entry.transactionID)  \(entry.productID)  x\(entry.quantity)  bought \(Self.date(entry.purchaseDate))"
            if entry.originalTransactionID != entry.transactionID { line += "  restores \(entry.originalTransactionID)" }
            if let expires = entry.expiresDate { line += "  expires \(Self.date(expires))" }
            if let cancelled = entry.cancellationDate { line += "  REFUNDED \(Self.date(cancelled))" }
            print(line)
        }
        await connection.close()
    }

    static func date(_ date: Date) -> String { date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt)) }
}

/// `storectl receipt verify`: what the store's verifyReceipt says of a receipt.
struct ReceiptVerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "verify", abstract: "Verify a receipt with the store (verifyReceipt); exits 1 unless its status is 0.")

    @OptionGroup var client: ClientOptions
    @OptionGroup var source: ReceiptSource
    @Option(help: "The app's shared secret (needed for receipts with auto-renewable subscriptions).")
    var password: String?

    static let meanings: [Int32: String] = [
        0: "valid", 21000: "the request could not be read", 21002: "malformed: not a receipt",
        21003: "not authentic: the signature does not verify, or the receipt was changed", 21004: "the shared secret does not match",
        21005: "the receipt service is unavailable", 21007: "a sandbox receipt sent to a production store",
        21008: "a production receipt sent to a sandbox store", 21010: "the account is not found or the receipt was revoked"
    ]

    func run() async throws {
        let connection = try StoreConnection(configuration: client.configuration())
        let bytes = try await source.bytes(connection)
        let answer = try await sentence {
            try await connection.call(
                Storebus_Receipt_V1_Receipt.verifyReceipt,
                .with {
                    $0.receiptData = bytes.base64EncodedString()
                    if let password { $0.password = password }
                })
        }
        print("status \(answer.status): \(Self.meanings[answer.status] ?? "see Apple's verifyReceipt status codes") (\(answer.environment))")
        for purchase in answer.receipt.inApp {
            let refunded = purchase.hasCancellationDate ? "  REFUNDED" : ""
            print("  \(purchase.transactionID)  \(purchase.productID)  original \(purchase.originalTransactionID)\(refunded)")
        }
        if !answer.latestReceiptInfo.isEmpty { print("latest receipt info: \(answer.latestReceiptInfo.count) purchases") }
        await connection.close()
        if answer.status != 0 { throw ExitCode(1) }
    }
}

/// `storectl receipt root-certificate`: the root to trust, for openssl or a server's verifier.
struct RootCertificateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "root-certificate", abstract: "Print the root certificate receipts and signed transactions chain to (PEM).")

    @OptionGroup var client: ClientOptions
    @Flag(help: "Print the signing keys as a JWKS document instead.")
    var jwks = false

    func run() async throws {
        let connection = try StoreConnection(configuration: client.configuration())
        let certificates = try await sentence { try await connection.call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init()) }
        print(jwks ? certificates.jwksJson : certificates.rootCertificatePem, terminator: jwks ? "\n" : "")
        await connection.close()
    }
}

/// `storectl entitlements`: what the account has unlocked.
struct EntitlementsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "entitlements", abstract: "List what the account owns in the app now, and why.")

    @OptionGroup var client: ClientOptions

    func run() async throws {
        let connection = try StoreConnection(configuration: client.configuration())
        let entitlements = try await sentence { try await connection.entitlements() }
        if entitlements.isEmpty { print("\(client.account) owns nothing in \(client.app)") }
        for entitlement in entitlements {
            let state = entitlement.isActive ? "active " : (entitlement.isRevoked ? "revoked" : "expired")
            print("\(state)  \(entitlement.productIdentifier)  original \(entitlement.originalTransactionIdentifier)  \(entitlement.reason)")
        }
        await connection.close()
    }
}
