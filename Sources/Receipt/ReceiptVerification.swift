import Foundation
import ReceiptFormat
import StoreBus
import StoreBusStorage
import StoreSchema
import SwiftProtobuf

/// The outcome of checking a receipt, as Apple's verifyReceipt reports it: a status and, when it is
/// 0, the decoded receipt and the account's latest purchases.
public struct ReceiptVerification: Sendable {
    /// verifyReceipt's status codes.
    public enum Status: Int, Sendable {
        case valid = 0
        case malformedRequest = 21000
        case malformed = 21002
        case notAuthenticated = 21003
        case sharedSecretMismatch = 21004
        case unavailable = 21005
        case sandboxReceiptInProduction = 21007
        case productionReceiptInSandbox = 21008
        case accountNotFound = 21010
        case internalError = 21100

        /// Whether trying again later may succeed (Apple's `is-retryable`, its 211xx range).
        public var isRetryable: Bool { rawValue >= 21100 && rawValue <= 21199 || self == .unavailable }
    }

    public var status: Status
    /// The environment of the answer: this deployment's.
    public var environment: ReceiptEnvironment
    /// Why the status is not 0, for logs and people.
    public var problem: String?
    /// The decoded receipt (status 0).
    public var receipt: AppReceipt?
    /// What the store knows of the receipt's purchases, by transaction id.
    public var known: [String: KnownPurchase] = [:]
    /// The account's current purchases, when the receipt holds auto-renewable subscriptions.
    public var latest: [StoredPurchase]?
    /// A fresh receipt holding `latest`.
    public var latestReceipt: [UInt8]?
    /// How each auto-renewable subscription of `latest` renews (pending_renewal_info).
    var renewals: [SubscriptionStatus] = []
    /// When the request was answered.
    public var requestDate: Date

    init(_ status: Status, _ environment: ReceiptEnvironment, problem: String? = nil, now: Date) {
        self.status = status
        self.environment = environment
        self.problem = problem
        requestDate = now
    }
}

extension ReceiptBook {
    /// Checks `receiptData` (base64) as verifyReceipt does, in this order: the encoding (not base64:
    /// 21002), then ``ReceiptVerifier``'s checks, shared with offline verifiers (not a PKCS#7 signed
    /// message: 21002; the message's structure: 21003, a changed byte; the payload: 21002 when
    /// authentically signed yet not a receipt, else 21003; the environment: 21007, 21008; the
    /// signature against this deployment's root: 21003), then the account (21010) and the shared
    /// secret (21004).
    public func verify(receiptData: String, password: String?, excludeOldTransactions: Bool, now: Date = Date()) async -> ReceiptVerification {
        let environment = configuration.environment
        func refuse(_ status: ReceiptVerification.Status, _ problem: String) -> ReceiptVerification {
            ReceiptVerification(status, environment, problem: problem, now: now)
        }
        // Line breaks and spaces (some clients wrap base64) are ignored (Base64Text.decode).
        guard let bytes = Base64Text.decode(receiptData) else {
            return refuse(.malformed, "receipt-data is not base64")
        }
        let receipt: AppReceipt
        do {
            // The checks every verifier makes, in one order (ReceiptVerifier), against this
            // deployment's root and environment.
            receipt = try await authority.verifier.verify(
                bytes, environment: environment, now: now)
        } catch {
            switch error {
            case .malformed(let why): return refuse(.malformed, why)
            case .otherEnvironment(.sandbox): return refuse(.sandboxReceiptInProduction, "a sandbox receipt sent to a production deployment")
            case .otherEnvironment(.production): return refuse(.productionReceiptInSandbox, "a production receipt sent to a sandbox deployment")
            case .notAuthenticated(let why): return refuse(.notAuthenticated, why)
            case .otherApp, .otherDevice: return refuse(.notAuthenticated, error.description)
            }
        }
        do {
            guard let owner = try await store.owner(opaque: receipt.opaqueValue), QueueNames.same(owner.app, receipt.bundleID) else {
                return refuse(.accountNotFound, "no account of this deployment has receipts with this opaque value")
            }
            guard !owner.revoked else { return refuse(.accountNotFound, "the receipt was issued revoked") }
            guard try AppReceipt.hash(deviceID: owner.device, opaque: receipt.opaqueValue, bundleID: receipt.bundleID) == receipt.sha1Hash else {
                return refuse(.notAuthenticated, "the receipt's hash does not match its device")
            }
            let subscribed = receipt.inApp.contains { $0.productType == Storebus_Catalog_V1_ProductType.autoRenewableSubscription.rawValue - 1 }
            let secret = configuration.app(receipt.bundleID).sharedSecret
            if let password, !password.isEmpty {
                guard !secret.isEmpty, password == secret else { return refuse(.sharedSecretMismatch, "the password is not the app's shared secret") }
            } else if subscribed {
                return refuse(.sharedSecretMismatch, "a receipt with auto-renewable subscriptions needs the app's shared secret as password")
            }
            var answer = ReceiptVerification(.valid, environment, now: now)
            answer.receipt = receipt
            // Every purchase of a receipt is its account's (cleared ones too, for a receipt older
            // than the clear): one query, of the few columns an answer reads beside each entry
            // unless the subscriptions' answer needs whole purchases.
            if !subscribed {
                answer.known = try await store.knownPurchases(app: owner.app, account: owner.account)
            } else {
                let held = try await store.purchases(app: owner.app, account: owner.account, includingCleared: true)
                answer.known = KnownPurchase.byID(held)
                let current = held.filter { !$0.cleared && $0.inReceipt }
                var latest = current
                if excludeOldTransactions {
                    // Only the latest period of each subscription; other purchases as they are.
                    let newest = Dictionary(grouping: latest.filter { $0.productType == .autoRenewableSubscription }, by: \.originalID)
                        .compactMapValues { $0.max { ($0.expiresMS ?? $0.purchaseMS) < ($1.expiresMS ?? $1.purchaseMS) }?.id }
                    let keep = Set(newest.values)
                    latest.removeAll { $0.productType == .autoRenewableSubscription && !keep.contains($0.id) }
                }
                answer.latest = latest
                let originals = Set(latest.filter { $0.productType == .autoRenewableSubscription }.map(\.originalID))
                let states = try await store.renewalStates(app: owner.app, account: owner.account)
                answer.renewals = SubscriptionStatus.all(current, states: states, now: now).filter { originals.contains($0.originalID) }
                answer.latestReceipt = try await refresh(
                    app: owner.app, account: owner.account, device: owner.device,
                    applicationVersion: receipt.applicationVersion, properties: nil, held: current, now: now
                ).receipt
            }
            return answer
        } catch {
            return refuse(.internalError, "the receipt service could not read its records: \(error)")
        }
    }
}

/// What an answer tells of a purchase beside its receipt entry, from the store's record of it.
public struct KnownPurchase: Sendable, Equatable {
    public var cancellationReason: Storebus_PaymentQueue_V1_RevocationReason
    public var device: String
    public var isUpgraded: Bool

    public init(cancellationReason: Storebus_PaymentQueue_V1_RevocationReason = .unspecified, device: String = "", isUpgraded: Bool = false) {
        self.cancellationReason = cancellationReason
        self.device = device
        self.isUpgraded = isUpgraded
    }

    init(_ purchase: StoredPurchase) {
        self.init(cancellationReason: purchase.cancellationReason, device: purchase.device, isUpgraded: purchase.isUpgraded)
    }

    /// The purchases' known parts by transaction id: a whole purchase per entry, copied into the
    /// table and out of it for each lookup, was a quarter of a 100-purchase verification's writing
    /// (each copy retains a dozen strings).
    static func byID(_ purchases: [StoredPurchase]) -> [String: KnownPurchase] {
        Dictionary(purchases.map { ($0.id, KnownPurchase($0)) }, uniquingKeysWith: { first, _ in first })
    }
}

extension ReceiptVerification {
    /// The answer as the bus method gives it.
    func response(book: ReceiptBook) -> Storebus_Receipt_V1_VerifyReceiptResponse {
        var response = Storebus_Receipt_V1_VerifyReceiptResponse()
        response.status = Int32(status.rawValue)
        response.environment = environment.rawValue
        response.isRetryable = status.isRetryable
        guard status == .valid, let receipt else { return response }
        response.receipt = .with {
            $0.bundleID = receipt.bundleID
            $0.applicationVersion = receipt.applicationVersion
            $0.receiptCreationDate = Google_Protobuf_Timestamp(millisecondsOf: receipt.creationDate)
            $0.originalApplicationVersion = receipt.originalApplicationVersion
            $0.receiptType = receipt.receiptType
            if let expiration = receipt.expirationDate { $0.expirationDate = Google_Protobuf_Timestamp(millisecondsOf: expiration) }
            $0.inApp = receipt.inApp.map { entry in
                var message = ReceiptBook.inAppPurchase(entry)
                if let purchase = known[entry.transactionID] {
                    message.cancellationReason = purchase.cancellationReason
                    message.deviceID = purchase.device
                }
                return message
            }
        }
        if let latest {
            do {
                response.latestReceiptInfo = try latest.map { try book.inAppPurchase($0, now: requestDate) }
            } catch {
                // Never an unsigned transaction in place of a signed one: the service's own failure,
                // which the caller may retry.
                var failed = Storebus_Receipt_V1_VerifyReceiptResponse()
                failed.status = Int32(Status.internalError.rawValue)
                failed.environment = environment.rawValue
                failed.isRetryable = true
                return failed
            }
        }
        if let latestReceipt { response.latestReceipt = Base64Text.encode(latestReceipt) }
        response.pendingRenewalInfo = renewals.map(\.message)
        return response
    }

    /// The answer as Apple's verifyReceipt endpoint writes it: every id, quantity and `*_ms` a
    /// string, every date in three forms (`_date`, `_date_ms`, `_date_pst`).
    func appleJSON() -> JSONObjectWriter {
        var json = JSONObjectWriter()
        json.set("status", status.rawValue)
        json.set("environment", environment.rawValue)
        if status.isRetryable { json.set("is-retryable", true) }
        guard status == .valid, let receipt else { return json }
        var body = JSONObjectWriter()
        body.set("receipt_type", receipt.receiptType)
        body.set("adam_id", 0)
        body.set("app_item_id", 0)
        body.set("bundle_id", receipt.bundleID)
        body.set("application_version", receipt.applicationVersion)
        body.set("download_id", 0)
        body.set("version_external_identifier", 0)
        body.set("original_application_version", receipt.originalApplicationVersion)
        AppleDates.setInApp("in_app", receipt.inApp.map { ($0, known[$0.transactionID]) }, to: &body)
        AppleDates.add("receipt_creation_date", receipt.creationDate, to: &body)
        AppleDates.add("request_date", requestDate, to: &body)
        AppleDates.add("original_purchase_date", receipt.originalPurchaseDate, to: &body)
        if let expiration = receipt.expirationDate { AppleDates.add("expiration_date", expiration, to: &body) }
        json.set("receipt", body)
        if let latest {
            AppleDates.setInApp("latest_receipt_info", latest.sorted { $0.purchaseMS > $1.purchaseMS }.map { (ReceiptBook.entry($0), KnownPurchase($0)) }, to: &json)
            json.set("pending_renewal_info", renewals.map(\.appleJSON))
        }
        if let latestReceipt { json.set("latest_receipt", Base64Text.encode(latestReceipt)) }
        return json
    }
}

/// Apple's three encodings of a date, and an in-app purchase in its JSON form.
enum AppleDates {
    static func add(_ name: String, _ date: Date, to json: inout JSONObjectWriter) {
        json.set(name, format(date, zone: "Etc/GMT"))
        json.set("\(name)_ms", String(ReceiptStore.milliseconds(date)))
        json.set("\(name)_pst", format(date, zone: "America/Los_Angeles"))
    }

    /// Apple's Pacific time zone, looked up once (a lookup per date took a tenth of an answer).
    static let pacific = TimeZone(identifier: "America/Los_Angeles")

    /// "2026-11-27 13:08:59 Etc/GMT", or the time in `zone` (Etc/GMT or America/Los_Angeles) with its name.
    static func format(_ date: Date, zone: String) -> String {
        "\(UTCDate.plain(date, offset: offset(date, zone: zone))) \(zone)"
    }

    /// Seconds from UTC of `zone` (Etc/GMT or America/Los_Angeles) at `date`.
    static func offset(_ date: Date, zone: String) -> Int {
        zone == "Etc/GMT" ? 0 : ((zone == "America/Los_Angeles" ? pacific : TimeZone(identifier: zone))?.secondsFromGMT(for: date) ?? 0)
    }

    /// Sets `key` to the purchases' JSON array: written directly (``appendInApp(_:known:to:)``), or
    /// with fast paths off a ``JSONObjectWriter`` for each (``inApp(_:known:)``), its plain twin:
    /// building and writing those trees was two thirds of a 100-purchase answer's writing.
    /// `AppleJSONTests` holds the two to the same bytes.
    static func setInApp(_ key: String, _ purchases: [(InAppPurchaseEntry, KnownPurchase?)], to json: inout JSONObjectWriter, directly: Bool = FastPaths.enabled) {
        guard directly else { return json.set(key, purchases.map { inApp($0.0, known: $0.1) }) }
        var out: [UInt8] = []
        out.reserveCapacity(2 + 1_100 * purchases.count)
        out.append(UInt8(ascii: "["))
        for (index, (entry, known)) in purchases.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            appendInApp(entry, known: known, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        json.set(key, written: out)
    }

    /// Appends what ``inApp(_:known:)`` writes, member for member in the same order, with no
    /// string or object made on the way.
    static func appendInApp(_ entry: InAppPurchaseEntry, known: KnownPurchase?, to out: inout [UInt8]) {
        var first = true
        func key(_ name: StaticString) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }
        func quoted(_ bytes: some Sequence<UInt8>) {
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
        }
        func date(_ name: StaticString, _ ms: StaticString, _ pst: StaticString, _ date: Date) {
            key(name)
            out.append(UInt8(ascii: "\""))
            UTCDate.appendPlain(date, to: &out)
            out.append(contentsOf: " Etc/GMT\"".utf8)
            key(ms)
            quoted(String(ReceiptStore.milliseconds(date)).utf8)
            key(pst)
            out.append(UInt8(ascii: "\""))
            UTCDate.appendPlain(date, offset: offset(date, zone: "America/Los_Angeles"), to: &out)
            out.append(contentsOf: " America/Los_Angeles\"".utf8)
        }
        func flag(_ value: Bool) { value ? quoted("true".utf8) : quoted("false".utf8) }
        out.append(UInt8(ascii: "{"))
        if let cancelled = entry.cancellationDate {
            date("cancellation_date", "cancellation_date_ms", "cancellation_date_pst", cancelled)
            key("cancellation_reason")
            quoted(String(SignedTransaction.appleReason(known?.cancellationReason ?? .unspecified)).utf8)
        }
        if let expires = entry.expiresDate { date("expires_date", "expires_date_ms", "expires_date_pst", expires) }
        key("in_app_ownership_type")
        quoted("PURCHASED".utf8)
        if entry.webOrderLineItemID != nil {
            key("is_in_intro_offer_period")
            flag(entry.isInIntroOfferPeriod)
        }
        key("is_trial_period")
        flag(entry.isTrialPeriod)
        if known?.isUpgraded == true {
            key("is_upgraded")
            flag(true)
        }
        date("original_purchase_date", "original_purchase_date_ms", "original_purchase_date_pst", entry.originalPurchaseDate)
        key("original_transaction_id")
        JSONText.appendQuoted(entry.originalTransactionID, to: &out)
        key("product_id")
        JSONText.appendQuoted(entry.productID, to: &out)
        date("purchase_date", "purchase_date_ms", "purchase_date_pst", entry.purchaseDate)
        key("quantity")
        quoted(String(entry.quantity).utf8)
        key("transaction_id")
        JSONText.appendQuoted(entry.transactionID, to: &out)
        if let id = entry.webOrderLineItemID {
            key("web_order_line_item_id")
            quoted(String(id).utf8)
        }
        out.append(UInt8(ascii: "}"))
    }

    static func inApp(_ entry: InAppPurchaseEntry, known: KnownPurchase?) -> JSONObjectWriter {
        // Members set in their keys' byte order, the order they are written in.
        var json = JSONObjectWriter()
        if let cancelled = entry.cancellationDate {
            add("cancellation_date", cancelled, to: &json)
            json.set("cancellation_reason", String(SignedTransaction.appleReason(known?.cancellationReason ?? .unspecified)))
        }
        if let expires = entry.expiresDate { add("expires_date", expires, to: &json) }
        json.set("in_app_ownership_type", "PURCHASED")
        if entry.webOrderLineItemID != nil { json.set("is_in_intro_offer_period", entry.isInIntroOfferPeriod ? "true" : "false") }
        json.set("is_trial_period", entry.isTrialPeriod ? "true" : "false")
        if known?.isUpgraded == true { json.set("is_upgraded", "true") }
        add("original_purchase_date", entry.originalPurchaseDate, to: &json)
        json.set("original_transaction_id", entry.originalTransactionID)
        json.set("product_id", entry.productID)
        add("purchase_date", entry.purchaseDate, to: &json)
        json.set("quantity", String(entry.quantity))
        json.set("transaction_id", entry.transactionID)
        if let id = entry.webOrderLineItemID { json.set("web_order_line_item_id", String(id)) }
        return json
    }
}
