import StoreSchema

extension Storebus_PaymentQueue_V1_StoreKitError {
    /// A StoreKit error with its usual English description.
    public static func make(_ code: Storebus_PaymentQueue_V1_SKError, _ description: String? = nil) -> Self {
        .with {
            $0.code = code
            $0.localizedDescription = description ?? code.defaultDescription
        }
    }
}

extension Storebus_PaymentQueue_V1_SKError {
    /// The sentence StoreBus puts in `localizedDescription` when no other is given.
    public var defaultDescription: String {
        switch self {
        case .unknown: "An unknown error occurred."
        case .clientInvalid: "The client is not allowed to make this request."
        case .paymentCancelled: "The payment was cancelled."
        case .paymentInvalid: "The payment is not valid."
        case .paymentNotAllowed: "This account is not allowed to make payments."
        case .storeProductNotAvailable: "The product is not available in this storefront."
        case .unauthorizedRequestData: "The payment's request data is not authorized."
        default: "The purchase could not be completed."
        }
    }
}
