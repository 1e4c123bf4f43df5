import StoreSchema
import SwiftProtobuf

/// The proto3 JSON names of the contract's enums that StoreBus's hand-written JSON readers and
/// writers (fast paths) meet: each value's name, quoted, by raw value, as swift-protobuf writes it.
/// Asked of swift-protobuf once, so the names cannot drift from the generated code. A value's
/// default (0) is never written, so it has none here: a reader meeting it leaves the text to
/// swift-protobuf.
public enum ProtoEnumNames {
    public typealias Transaction = Storebus_PaymentQueue_V1_PaymentTransaction

    public static let transactionState = quoted(Storebus_PaymentQueue_V1_TransactionState.allCases) { value in Transaction.with { $0.transactionState = value } }
    public static let productType = quoted(Storebus_Catalog_V1_ProductType.allCases) { value in Transaction.with { $0.productType = value } }
    public static let skError = quoted(Storebus_PaymentQueue_V1_SKError.allCases) { value in Storebus_PaymentQueue_V1_StoreKitError.with { $0.code = value } }
    public static let revocationReason = quoted(Storebus_PaymentQueue_V1_RevocationReason.allCases) { value in Transaction.with { $0.cancellationReason = value } }
    public static let transactionReason = quoted(Storebus_PaymentQueue_V1_TransactionReason.allCases) { value in Transaction.with { $0.transactionReason = value } }
    public static let downloadState = quoted(Storebus_PaymentQueue_V1_DownloadState.allCases) { value in Storebus_PaymentQueue_V1_Download.with { $0.state = value } }

    /// Each of `cases`' name, quoted, by raw value: the value of the one member of the
    /// `{"field":"NAME"}` swift-protobuf writes for the message `holding` it.
    public static func quoted<E: SwiftProtobuf.Enum, Holder: SwiftProtobuf.Message>(_ cases: [E], _ holding: (E) -> Holder) -> [Int: [UInt8]] {
        var names: [Int: [UInt8]] = [:]
        for value in cases where value.rawValue != 0 {
            guard let json = try? holding(value).jsonUTF8Bytes() as [UInt8], let colon = json.firstIndex(of: UInt8(ascii: ":")),
                json.last == UInt8(ascii: "}")
            else { continue }
            names[value.rawValue] = Array(json[(colon + 1)..<(json.count - 1)])
        }
        return names
    }

    /// The raw value whose quoted name is `text` exactly, in `names`; nil for any other text.
    public static func value(named text: ArraySlice<UInt8>, in names: [Int: [UInt8]]) -> Int? {
        names.first { $0.value.count == text.count && $0.value.elementsEqual(text) }?.key
    }
}
