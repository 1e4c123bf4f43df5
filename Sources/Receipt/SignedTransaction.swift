import Crypto
import Foundation
import StoreSchema
import SwiftASN1
import X509

/// Transactions as the App Store Server API signs them: a JWS (compact serialization), ES256, whose
/// header carries the `x5c` chain (leaf, intermediate, root) and whose payload is a
/// JWSTransactionDecodedPayload. Apple's server libraries, given StoreBus's root in place of
/// Apple's, accept them unchanged.
public enum SignedTransaction {
    /// The JWSTransactionDecodedPayload of `purchase`, signed at `signedDate`.
    public static func payload(_ purchase: StoredPurchase, environment: ReceiptEnvironment, signedDate: Date) -> [String: Any] {
        var payload: [String: Any] = [
            "transactionId": purchase.id,
            "originalTransactionId": purchase.originalID,
            "bundleId": purchase.app,
            "productId": purchase.productID,
            "purchaseDate": purchase.purchaseMS,
            "originalPurchaseDate": purchase.originalPurchaseMS,
            "quantity": purchase.quantity,
            "type": type(purchase.productType),
            "inAppOwnershipType": "PURCHASED",
            "signedDate": ReceiptStore.milliseconds(signedDate),
            "environment": environment.rawValue,
            "transactionReason": "PURCHASE",
            "storefront": purchase.storefront,
        ]
        if let id = storefrontIDs[purchase.storefront] { payload["storefrontId"] = id }
        if let price = milliunits(purchase.price), !purchase.currency.isEmpty {
            payload["price"] = price
            payload["currency"] = purchase.currency
        }
        if let expiresMS = purchase.expiresMS { payload["expiresDate"] = expiresMS }
        if purchase.productType == .autoRenewableSubscription { payload["webOrderLineItemId"] = String(webOrderLineItemID(purchase)) }
        if let cancellationMS = purchase.cancellationMS {
            payload["revocationDate"] = cancellationMS
            payload["revocationReason"] = appleReason(purchase.cancellationReason)
        }
        if let token = UUID(uuidString: purchase.applicationUsername) { payload["appAccountToken"] = token.uuidString.lowercased() }
        return payload
    }

    /// The JWS of `purchase`, signed with `key` at `signedDate`.
    public static func sign(_ purchase: StoredPurchase, environment: ReceiptEnvironment, with key: SigningKey, at signedDate: Date) throws -> String {
        try sign(payload: payload(purchase, environment: environment, signedDate: signedDate), with: key)
    }

    /// Any JSON object as a JWS signed with `key`, the chain in its header.
    public static func sign(payload: [String: Any], with key: SigningKey) throws -> String {
        let header: [String: Any] = ["alg": "ES256", "x5c": try key.chain.map { Data(try SigningAuthority.der($0)).base64EncodedString() }]
        let input = Base64URL.encode(try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys]))
            + "." + Base64URL.encode(try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys]))
        let signature = try key.privateKey.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// Why a JWS does not verify.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// The payload of `jws` once its signature and chain are checked against `roots`, the chain
    /// judged at the payload's signedDate as Apple's libraries do with online checks off.
    public static func verify(_ jws: String, roots: [Certificate]) async throws(Failure) -> [String: Any] {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
              let signatureBytes = Base64URL.decode(parts[2])
        else { throw Failure(description: "not a JWS in compact serialization") }
        guard let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
              let payload = try? JSONSerialization.jsonObject(with: Data(payloadBytes)) as? [String: Any]
        else { throw Failure(description: "the header or payload is not a JSON object") }
        guard header["alg"] as? String == "ES256" else { throw Failure(description: "the algorithm is not ES256") }
        guard let x5c = header["x5c"] as? [String], x5c.count == 3 else { throw Failure(description: "the header has no x5c chain of three certificates") }
        let chain: [Certificate]
        do {
            chain = try x5c.map { text in
                guard let der = Data(base64Encoded: text) else { throw Failure(description: "an x5c entry is not base64") }
                return try Certificate(derEncoded: Array(der))
            }
        } catch {
            throw Failure(description: "an x5c certificate does not parse: \(error)")
        }
        guard chain[0].extensions[oid: SigningAuthority.signingMarker] != nil, chain[1].extensions[oid: SigningAuthority.intermediateMarker] != nil else {
            throw Failure(description: "the chain's certificates lack the signing extensions")
        }
        let signedMS = (payload["signedDate"] as? NSNumber)?.int64Value ?? (payload["receiptCreationDate"] as? NSNumber)?.int64Value
        let time = signedMS.map { Date(timeIntervalSince1970: Double($0) / 1000) } ?? Date()
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) { RFC5280Policy(validationTime: time) }
        let result = await verifier.validate(leaf: chain[0], intermediates: CertificateStore([chain[1]]))
        guard case .validCertificate = result else { throw Failure(description: "the chain does not lead to a trusted root: \(result)") }
        guard let key = P256.Signing.PublicKey(chain[0].publicKey),
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
              key.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { throw Failure(description: "the signature does not match") }
        return payload
    }

    /// App Store Server API names of product types.
    static func type(_ type: Storebus_Catalog_V1_ProductType) -> String {
        switch type {
        case .consumable: "Consumable"
        case .nonConsumable: "Non-Consumable"
        case .autoRenewableSubscription: "Auto-Renewable Subscription"
        case .nonRenewingSubscription: "Non-Renewing Subscription"
        default: "Non-Consumable"
        }
    }

    /// Apple's revocation and cancellation reasons: 1, an issue in the app; 0, anything else.
    static func appleReason(_ reason: Storebus_PaymentQueue_V1_RevocationReason) -> Int {
        reason == .appIssue ? 1 : 0
    }

    /// A decimal price in thousandths of the currency unit (the App Store Server API's price).
    static func milliunits(_ price: String) -> Int64? {
        guard !price.isEmpty, let value = Decimal(string: price, locale: Locale(identifier: "en_US_POSIX")) else { return nil }
        var scaled = value * 1000
        var rounded = Decimal()
        NSDecimalRound(&rounded, &scaled, 0, .plain)
        return NSDecimalNumber(decimal: rounded).int64Value
    }

    /// The id of a subscription purchase across devices: StoreBus derives it from the original
    /// transaction id (a restored copy has its original's).
    static func webOrderLineItemID(_ purchase: StoredPurchase) -> Int64 {
        (Int64(purchase.originalID) ?? 0) + 1_000_000_000_000
    }

    /// Apple's numeric storefront ids of some ISO 3166-1 alpha-3 storefronts.
    static let storefrontIDs: [String: String] = [
        "USA": "143441", "FRA": "143442", "DEU": "143443", "GBR": "143444", "ITA": "143450", "NLD": "143452",
        "ESP": "143454", "CAN": "143455", "SWE": "143456", "CHE": "143459", "AUS": "143460", "JPN": "143462",
        "KOR": "143466", "IND": "143467", "MEX": "143468", "BRA": "143503",
    ]
}
