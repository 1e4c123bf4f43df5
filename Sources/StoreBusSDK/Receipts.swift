import Foundation
@_exported import ReceiptFormat
import StoreBus
import StoreSchema

/// Asks the store for a fresh app receipt and keeps it where ``StoreConnection/appStoreReceiptURL``
/// points (SKReceiptRefreshRequest). It creates no transaction: a receipt refreshed twice with no
/// purchase between holds the same purchases.
///
/// ```swift
/// let bytes = try await ReceiptRefreshRequest(connection: connection).start()
/// let receipt = try await ReceiptVerifier(rootCertificatePEM: rootPEM).verify(Array(bytes), deviceID: deviceID)
/// ```
public struct ReceiptRefreshRequest: Sendable {
    /// Sandbox test properties of the receipt asked for (SKReceiptRefreshRequest's
    /// `receiptProperties`); a production store refuses them.
    public struct Properties: Sendable, Equatable {
        /// An expired receipt (SKReceiptPropertyIsExpired).
        public var isExpired = false
        /// A revoked receipt: verifyReceipt answers 21010 (SKReceiptPropertyIsRevoked).
        public var isRevoked = false
        /// A volume purchase receipt, with an expiration date (SKReceiptPropertyIsVolumePurchase).
        public var isVolumePurchase = false

        /// Properties, all false unless given.
        public init(isExpired: Bool = false, isRevoked: Bool = false, isVolumePurchase: Bool = false) {
            self.isExpired = isExpired
            self.isRevoked = isRevoked
            self.isVolumePurchase = isVolumePurchase
        }
    }

    /// The test properties asked for; nil for a normal receipt.
    public var receiptProperties: Properties?
    /// The app's version (CFBundleVersion) the receipt is for; nil for "1.0".
    public var applicationVersion: String?
    private let connection: StoreConnection

    /// A request for the connection's app, account and device.
    public init(receiptProperties: Properties? = nil, applicationVersion: String? = nil, connection: StoreConnection) {
        self.receiptProperties = receiptProperties
        self.applicationVersion = applicationVersion
        self.connection = connection
    }

    /// Refreshes the receipt, writes it to ``StoreConnection/appStoreReceiptURL`` (whole, through a
    /// rename) and returns its bytes.
    @discardableResult
    public func start() async throws -> Data {
        let response = try await connection.call(
            Storebus_Receipt_V1_Receipt.refreshReceipt,
            .with {
                $0.appBundleID = connection.configuration.appBundleID
                $0.accountID = connection.configuration.accountID
                $0.deviceID = connection.configuration.deviceID
                $0.applicationVersion = applicationVersion ?? ""
                if let properties = receiptProperties {
                    $0.properties = .with {
                        $0.isExpired = properties.isExpired
                        $0.isRevoked = properties.isRevoked
                        $0.isVolumePurchase = properties.isVolumePurchase
                    }
                }
            })
        guard let bytes = Data(base64Encoded: response.receiptData) else {
            throw StoreError(RPCError(.internalError, "the receipt service answered a receipt that is not base64"))
        }
        let url = connection.appStoreReceiptURL
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try bytes.write(to: url, options: .atomic)
        return bytes
    }
}

extension StoreConfiguration {
    /// Where the receipt of this app, account and device is kept:
    /// `<receiptDirectory>/<app>/<account>/<device>/receipt`, each name percent-encoded.
    public var appStoreReceiptURL: URL {
        func component(_ name: String) -> String {
            name.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._"))) ?? "_"
        }
        return
            receiptDirectory
            .appendingPathComponent(component(appBundleID)).appendingPathComponent(component(accountID))
            .appendingPathComponent(component(deviceID)).appendingPathComponent("receipt")
    }
}

extension StoreConnection {
    /// Where the app receipt is kept once refreshed (Bundle.main.appStoreReceiptURL); the file is
    /// missing until a ``ReceiptRefreshRequest`` writes it.
    public var appStoreReceiptURL: URL { configuration.appStoreReceiptURL }

    /// The receipt's bytes as ``appStoreReceiptURL`` gives them, or nil when none was refreshed yet.
    public func appStoreReceipt() -> Data? {
        try? Data(contentsOf: appStoreReceiptURL)
    }

    /// What the account has unlocked in the app now, product by product: the persistent record
    /// "Unlocking Purchased Content" tells apps to consult. With `queuePosition`, the `seq` of a
    /// callback this device's queue has delivered (``PaymentQueue/acknowledgedPosition``), the answer
    /// reflects the queue up to there at least: right after `purchased`, the purchase is listed.
    public func entitlements(asOfQueuePosition queuePosition: UInt64 = 0) async throws -> [Entitlement] {
        try await call(
            Storebus_Receipt_V1_Receipt.getEntitlements,
            .with {
                $0.appBundleID = configuration.appBundleID
                $0.accountID = configuration.accountID
                $0.deviceID = configuration.deviceID
                $0.minQueueSeq = queuePosition
            }
        ).entitlements.map(Entitlement.init)
    }

    /// The root certificate the store's receipts and signed transactions chain to, in PEM: give it
    /// to ``ReceiptVerifier``.
    public func rootCertificatePEM() async throws -> String {
        try await call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init()).rootCertificatePem
    }

    /// One transaction of the account as a signed JWS (the App Store Server API's
    /// signedTransactionInfo); ``ReceiptVerifier/verifyTransaction(_:)`` checks it.
    public func signedTransaction(_ transactionIdentifier: String) async throws -> String {
        try await call(
            Storebus_Receipt_V1_Receipt.getTransaction,
            .with {
                $0.appBundleID = configuration.appBundleID
                $0.accountID = configuration.accountID
                $0.transactionID = transactionIdentifier
            }
        ).transaction.signedTransactionInfo
    }
}

/// Something the account owns in the app, and why.
public struct Entitlement: Sendable, Equatable, Identifiable {
    /// The product.
    public var productIdentifier: String
    /// The original purchase behind it.
    public var originalTransactionIdentifier: String
    /// When it was bought.
    public var purchaseDate: Date?
    /// End of the current period (subscriptions).
    public var expiresDate: Date?
    /// Whether it unlocks content now: owned, not refunded, not expired.
    public var isActive: Bool
    /// Whether it was refunded or revoked.
    public var isRevoked: Bool
    /// Why, in words: "purchased on …", "subscribed until …", "refunded on …".
    public var reason: String
    /// Escape hatch: the entitlement as the contract's generated message has it.
    public var rawRecord: Storebus_Receipt_V1_Entitlement

    /// The product identifier, as `Identifiable` asks.
    public var id: String { productIdentifier }

    init(_ entitlement: Storebus_Receipt_V1_Entitlement) {
        productIdentifier = entitlement.productIdentifier
        originalTransactionIdentifier = entitlement.originalTransactionIdentifier
        purchaseDate = entitlement.hasPurchaseDate ? entitlement.purchaseDate.date : nil
        expiresDate = entitlement.hasExpiresDate ? entitlement.expiresDate.date : nil
        isActive = entitlement.active
        isRevoked = entitlement.revoked
        reason = entitlement.reason
        rawRecord = entitlement
    }
}

extension PaymentQueue {
    /// What the account has unlocked, as of every callback this queue has handed over: right after
    /// an observer hears `purchased` (or `restored`, or a refund), the answer says so, without polling
    /// (``StoreConnection/entitlements(asOfQueuePosition:)``).
    public func entitlements() async throws -> [Entitlement] {
        try await connection.entitlements(asOfQueuePosition: acknowledgedPosition)
    }
}
