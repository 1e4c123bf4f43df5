/// A JWS payload that writes its own JSON, members in byte order of their keys, absent ones left
/// out: the bytes JSONEncoder writes with `[.sortedKeys, .withoutEscapingSlashes]` (and
/// ``SortedJSONEncoder``, which builds a tree of the value through `Encodable` first: for a
/// notification's two payloads that tree cost half as much as their two ECDSA signatures).
/// `SortedJSONEncoderTests` holds each of them to JSONEncoder's bytes for random payloads, which
/// set any of the type's stored properties (found by reflection): a property added to a payload
/// and not written here fails it.
public protocol SortedJSONWritable {
    /// Appends the value's JSON object to `out`.
    func writeSortedJSON(to out: inout [UInt8])
}

/// Writes one JSON object's members, called in byte order of their keys (plain identifiers, which
/// JSON needs no escapes for).
struct SortedJSONObject {
    private var first = true

    /// Opens the object on `out`.
    init(_ out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
    }

    /// Closes the object on `out`.
    func close(_ out: inout [UInt8]) {
        out.append(UInt8(ascii: "}"))
    }

    private mutating func key(_ key: StaticString, _ out: inout [UInt8]) {
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        out.append(UInt8(ascii: "\""))
        out.append(UInt8(ascii: ":"))
    }

    mutating func member(_ name: StaticString, _ value: String?, _ out: inout [UInt8]) {
        guard let value else { return }
        key(name, &out)
        SortedJSONEncoder.quote(value, to: &out)
    }

    mutating func member(_ name: StaticString, _ value: Int64?, _ out: inout [UInt8]) {
        guard let value else { return }
        key(name, &out)
        out += String(value).utf8
    }

    mutating func member(_ name: StaticString, _ value: Int?, _ out: inout [UInt8]) {
        member(name, value.map(Int64.init), &out)
    }

    mutating func member(_ name: StaticString, _ value: Bool?, _ out: inout [UInt8]) {
        guard let value else { return }
        key(name, &out)
        out += (value ? "true" : "false").utf8
    }

    mutating func member(_ name: StaticString, _ value: (some SortedJSONWritable)?, _ out: inout [UInt8]) {
        guard let value else { return }
        key(name, &out)
        value.writeSortedJSON(to: &out)
    }
}

extension JWSTransactionDecodedPayload: SortedJSONWritable {
    public func writeSortedJSON(to out: inout [UInt8]) {
        var object = SortedJSONObject(&out)
        object.member("appAccountToken", appAccountToken, &out)
        object.member("bundleId", bundleId, &out)
        object.member("currency", currency, &out)
        object.member("environment", environment, &out)
        object.member("expiresDate", expiresDate, &out)
        object.member("inAppOwnershipType", inAppOwnershipType, &out)
        object.member("isUpgraded", isUpgraded, &out)
        object.member("offerDiscountType", offerDiscountType, &out)
        object.member("offerIdentifier", offerIdentifier, &out)
        object.member("offerType", offerType, &out)
        object.member("originalPurchaseDate", originalPurchaseDate, &out)
        object.member("originalTransactionId", originalTransactionId, &out)
        object.member("price", price, &out)
        object.member("productId", productId, &out)
        object.member("purchaseDate", purchaseDate, &out)
        object.member("quantity", quantity, &out)
        object.member("revocationDate", revocationDate, &out)
        object.member("revocationReason", revocationReason, &out)
        object.member("signedDate", signedDate, &out)
        object.member("storefront", storefront, &out)
        object.member("storefrontId", storefrontId, &out)
        object.member("subscriptionGroupIdentifier", subscriptionGroupIdentifier, &out)
        object.member("transactionId", transactionId, &out)
        object.member("transactionReason", transactionReason, &out)
        object.member("type", type, &out)
        object.member("webOrderLineItemId", webOrderLineItemId, &out)
        object.close(&out)
    }
}

extension JWSRenewalInfoDecodedPayload: SortedJSONWritable {
    public func writeSortedJSON(to out: inout [UInt8]) {
        var object = SortedJSONObject(&out)
        object.member("autoRenewProductId", autoRenewProductId, &out)
        object.member("autoRenewStatus", autoRenewStatus, &out)
        object.member("currency", currency, &out)
        object.member("environment", environment, &out)
        object.member("expirationIntent", expirationIntent, &out)
        object.member("gracePeriodExpiresDate", gracePeriodExpiresDate, &out)
        object.member("isInBillingRetryPeriod", isInBillingRetryPeriod, &out)
        object.member("offerDiscountType", offerDiscountType, &out)
        object.member("offerIdentifier", offerIdentifier, &out)
        object.member("offerType", offerType, &out)
        object.member("originalTransactionId", originalTransactionId, &out)
        object.member("priceIncreaseStatus", priceIncreaseStatus, &out)
        object.member("productId", productId, &out)
        object.member("recentSubscriptionStartDate", recentSubscriptionStartDate, &out)
        object.member("renewalDate", renewalDate, &out)
        object.member("renewalPrice", renewalPrice, &out)
        object.member("signedDate", signedDate, &out)
        object.close(&out)
    }
}

extension ResponseBodyV2DecodedPayload: SortedJSONWritable {
    public func writeSortedJSON(to out: inout [UInt8]) {
        var object = SortedJSONObject(&out)
        object.member("data", data, &out)
        object.member("notificationType", notificationType, &out)
        object.member("notificationUUID", notificationUUID, &out)
        object.member("signedDate", signedDate, &out)
        object.member("subtype", subtype, &out)
        object.member("version", version, &out)
        object.close(&out)
    }
}

extension NotificationData: SortedJSONWritable {
    public func writeSortedJSON(to out: inout [UInt8]) {
        var object = SortedJSONObject(&out)
        object.member("appAppleId", appAppleId, &out)
        object.member("bundleId", bundleId, &out)
        object.member("bundleVersion", bundleVersion, &out)
        object.member("environment", environment, &out)
        object.member("signedRenewalInfo", signedRenewalInfo, &out)
        object.member("signedTransactionInfo", signedTransactionInfo, &out)
        object.member("status", status, &out)
        object.close(&out)
    }
}
