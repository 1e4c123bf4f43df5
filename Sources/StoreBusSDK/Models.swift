import Foundation
import StoreSchema

/// A product for sale, localized for the storefront it was asked in (SKProduct).
public struct Product: Sendable, Equatable, Identifiable {
    /// The product identifier.
    public var productIdentifier: String
    /// Display name in the storefront's language.
    public var localizedTitle: String
    /// Description in the storefront's language.
    public var localizedDescription: String
    /// Price as a decimal, in the storefront's currency.
    public var price: Decimal
    /// Locale the price is formatted for, such as `fr_FR`.
    public var priceLocale: Locale
    /// ISO 4217 currency code.
    public var currencyCode: String
    /// The price as the storefront shows it, such as `0,99 €`.
    public var formattedPrice: String
    /// Whether the product has hosted content to download.
    public var isDownloadable: Bool
    /// Sizes of the hosted content packages.
    public var downloadContentLengths: [Int64]
    /// Version of the hosted content.
    public var downloadContentVersion: String
    /// The kind of purchase; nil for a kind this SDK does not know.
    public var productType: ProductType?
    /// Subscriptions: the length of one period.
    public var subscriptionPeriod: SubscriptionPeriod?
    /// Auto-renewable subscriptions: the introductory offer, if the product has one.
    public var introductoryOffer: IntroductoryOffer?
    /// Auto-renewable subscriptions: the group of mutually exclusive subscriptions it belongs to.
    public var subscriptionGroupIdentifier: String?
    /// Escape hatch: the product as the contract's generated message has it, for what this type
    /// does not surface. Its shape follows
    /// proto-schemas/ and changes with it.
    public var rawRecord: Storebus_Catalog_V1_Product

    /// The product identifier, as `Identifiable` asks (SwiftUI lists, say).
    public var id: String { productIdentifier }

    init(_ product: Storebus_Catalog_V1_Product) {
        productIdentifier = product.productIdentifier
        localizedTitle = product.localizedTitle
        localizedDescription = product.localizedDescription
        price = Decimal(string: product.price, locale: Locale(identifier: "en_US_POSIX")) ?? 0
        priceLocale = Locale(identifier: product.priceLocale)
        currencyCode = product.currencyCode
        formattedPrice = product.formattedPrice
        isDownloadable = product.isDownloadable
        downloadContentLengths = product.downloadContentLengths
        downloadContentVersion = product.downloadContentVersion
        productType = ProductType(product.productType)
        subscriptionPeriod = product.hasSubscriptionPeriod ? SubscriptionPeriod(product.subscriptionPeriod) : nil
        introductoryOffer = product.hasIntroductoryPrice ? IntroductoryOffer(product.introductoryPrice) : nil
        subscriptionGroupIdentifier = product.subscriptionGroupIdentifier.isEmpty ? nil : product.subscriptionGroupIdentifier
        rawRecord = product
    }
}

/// A request to buy a product (SKPayment / SKMutablePayment).
public struct Payment: Sendable, Equatable {
    /// The product to buy.
    public var productIdentifier: String
    /// How many, 1 to 10 (``quantities``): a payment for any other number is refused before it is
    /// sent (paymentInvalid).
    public var quantity: Int
    /// The quantities a payment may ask for.
    public static let quantities = 1...10
    /// An opaque id of the user in your app.
    public var applicationUsername: String?
    /// Sandbox only: answer this payment with Ask to Buy.
    public var simulatesAskToBuyInSandbox: Bool

    /// A payment for one unit of `productIdentifier`.
    public init(productIdentifier: String, quantity: Int = 1, applicationUsername: String? = nil, simulatesAskToBuyInSandbox: Bool = false) {
        self.productIdentifier = productIdentifier
        self.quantity = quantity
        self.applicationUsername = applicationUsername
        self.simulatesAskToBuyInSandbox = simulatesAskToBuyInSandbox
    }

    /// A payment for `product`.
    public init(product: Product) {
        self.init(productIdentifier: product.productIdentifier)
    }

    init(_ payment: Storebus_PaymentQueue_V1_Payment) {
        productIdentifier = payment.productIdentifier
        quantity = Int(payment.quantity)
        applicationUsername = payment.applicationUsername.isEmpty ? nil : payment.applicationUsername
        simulatesAskToBuyInSandbox = payment.simulatesAskToBuyInSandbox
    }

    var message: Storebus_PaymentQueue_V1_Payment {
        .with {
            $0.productIdentifier = productIdentifier
            $0.quantity = Int32(clamping: quantity)
            $0.applicationUsername = applicationUsername ?? ""
            $0.simulatesAskToBuyInSandbox = simulatesAskToBuyInSandbox
        }
    }
}

/// SKPaymentTransactionState.
public enum PaymentTransactionState: String, Sendable, Equatable, CaseIterable {
    /// Being processed by the store.
    case purchasing
    /// Paid: deliver the content, then finish the transaction.
    case purchased
    /// Not paid: `error` says why; finish the transaction.
    case failed
    /// A past purchase restored: deliver the content, then finish.
    case restored
    /// Waiting for an outside action, such as a parent's approval (Ask to Buy).
    case deferred

    /// The state of a transaction record.
    init(_ state: Storebus_PaymentQueue_V1_TransactionState) {
        switch state {
        case .purchased: self = .purchased
        case .failed: self = .failed
        case .restored: self = .restored
        case .deferred: self = .deferred
        default: self = .purchasing
        }
    }
}

/// A StoreKit error (SKError) as transactions and restores report it.
public struct StoreKitError: Error, Sendable, Equatable, CustomStringConvertible {
    /// SKError.Code, with StoreKit's raw values (2 is paymentCancelled, 5 storeProductNotAvailable).
    public var code: Code
    /// Text for the user.
    public var localizedDescription: String

    /// SKError.Code.
    public struct Code: RawRepresentable, Sendable, Equatable, Hashable, CustomStringConvertible {
        /// SKError.Code's number.
        public var rawValue: Int
        /// The code with this number; numbers StoreBus does not name are kept as they are.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// An error the store could not say more about.
        public static let unknown = Code(rawValue: 0)
        /// The client may not make the request (an unknown or unauthorised app, say).
        public static let clientInvalid = Code(rawValue: 1)
        /// The user cancelled the payment, or a parent declined an Ask to Buy request. Apps show
        /// nothing for it.
        public static let paymentCancelled = Code(rawValue: 2)
        /// A payment parameter was not recognised by the store.
        public static let paymentInvalid = Code(rawValue: 3)
        /// The account may not make payments (sandbox restriction).
        public static let paymentNotAllowed = Code(rawValue: 4)
        /// The product is not for sale in the account's storefront.
        public static let storeProductNotAvailable = Code(rawValue: 5)
        /// The user did not allow access to cloud service information.
        public static let cloudServicePermissionDenied = Code(rawValue: 6)
        /// The store could not be reached.
        public static let cloudServiceNetworkConnectionFailed = Code(rawValue: 7)
        /// The payment carried requestData, which the app is not entitled to use.
        public static let unauthorizedRequestData = Code(rawValue: 10)

        /// The code's StoreKit name, such as `paymentCancelled`.
        public var description: String {
            Storebus_PaymentQueue_V1_SKError(rawValue: rawValue).map { "\($0)" } ?? "code \(rawValue)"
        }
    }

    init(_ error: Storebus_PaymentQueue_V1_StoreKitError) {
        code = Code(rawValue: error.code.rawValue)
        localizedDescription = error.localizedDescription
    }

    /// An error with a code and a text.
    public init(code: Code, localizedDescription: String) {
        self.code = code
        self.localizedDescription = localizedDescription
    }

    /// The text for the user, followed by the code's name.
    public var description: String { "\(localizedDescription) (\(code))" }
}

/// SKDownloadState.
public enum DownloadState: String, Sendable, Equatable, CaseIterable {
    /// Not started yet.
    case waiting
    /// Transferring.
    case active
    /// Paused; ``PaymentQueue/resume(_:)`` continues it.
    case paused
    /// Done: ``Download/contentURL`` holds the content.
    case finished
    /// Stopped by an error (``Download/error``); it may be resumed, from the bytes kept, or cancelled.
    case failed
    /// Cancelled; its partial data is gone.
    case cancelled

    init(_ state: Storebus_PaymentQueue_V1_DownloadState) {
        switch state {
        case .active: self = .active
        case .paused: self = .paused
        case .finished: self = .finished
        case .failed: self = .failed
        case .cancelled: self = .cancelled
        default: self = .waiting
        }
    }
}

/// Hosted content of a transaction (SKDownload). Its state changes arrive as updatedDownloads
/// callbacks, in order with the queue's other callbacks; while it is active, this queue also hands
/// over its progress at least every 250 ms (callbacks of its own, at position 0).
public struct Download: Sendable, Equatable {
    /// The content's identifier.
    public var contentIdentifier: String
    /// The content's version.
    public var contentVersion: String
    /// Size in bytes.
    public var contentLength: Int64
    /// The transaction it belongs to.
    public var transactionIdentifier: String
    /// The state. Tell completion by it, not by `progress`.
    public var state: DownloadState
    /// Fraction done, 0 to 1.
    public var progress: Double
    /// Estimated seconds left; -1 while unknown.
    public var timeRemaining: TimeInterval
    /// FINISHED only: the content, a folder holding `Contents/`.
    public var contentURL: URL?
    /// FAILED only: why.
    public var error: StoreKitError?
    /// Escape hatch: the download as the contract's generated message has it. Its shape follows
    /// proto-schemas/ and changes with it.
    public var rawRecord: Storebus_PaymentQueue_V1_Download

    init(_ download: Storebus_PaymentQueue_V1_Download) {
        contentIdentifier = download.contentIdentifier
        contentVersion = download.contentVersion
        contentLength = download.contentLength
        transactionIdentifier = download.transactionIdentifier
        state = DownloadState(download.state)
        progress = download.progress
        timeRemaining = download.state == .finished ? 0 : (download.timeRemainingSeconds > 0 ? download.timeRemainingSeconds : -1)
        contentURL = download.state == .finished && !download.contentURL.isEmpty ? URL(string: download.contentURL) : nil
        error = download.state == .failed && download.hasError ? StoreKitError(download.error) : nil
        rawRecord = download
    }
}

/// A transaction in the payment queue (SKPaymentTransaction).
public struct PaymentTransaction: Sendable, Equatable, Identifiable {
    /// Unique identifier.
    public var transactionIdentifier: String
    /// Current state.
    public var transactionState: PaymentTransactionState
    /// The payment that created it.
    public var payment: Payment
    /// When it entered its current state.
    public var transactionDate: Date?
    /// For restored transactions, the purchase restored (SKPaymentTransaction.original).
    public var original: PaymentTransaction? { originalStorage.first }
    /// For restored transactions, the identifier of the purchase restored.
    public var originalTransactionIdentifier: String? { original?.transactionIdentifier }
    /// Where ``original`` is kept: an array, as a struct cannot hold one of its own kind directly.
    private var originalStorage: [PaymentTransaction]
    /// For failed transactions, why.
    public var error: StoreKitError?
    /// Hosted content.
    public var downloads: [Download]
    /// Whether the transaction was finished (it is then in a removedTransactions callback).
    public var isFinished: Bool
    /// Subscriptions: when the period this transaction paid for ends.
    public var expirationDate: Date?
    /// Auto-renewable subscriptions: the subscription's first purchase, which every renewal names
    /// (not ``original``, which is a restored transaction's).
    public var subscriptionOriginalTransactionIdentifier: String?
    /// Whether the store made it when a subscription renewed (no payment was added for it).
    public var isRenewal: Bool
    /// Escape hatch: the transaction as the contract's generated message has it (storefront, product
    /// type, subscription dates, ...), for what this type does not surface. Its shape follows
    /// proto-schemas/ and changes with it.
    public var rawRecord: Storebus_PaymentQueue_V1_PaymentTransaction

    /// The transaction identifier, as `Identifiable` asks.
    public var id: String { transactionIdentifier }

    /// Escape hatch: a transaction from the contract's generated message, as the admin methods
    /// called through ``StoreConnection/call(_:_:timeout:idempotencyKey:)`` answer.
    public init(rawRecord transaction: Storebus_PaymentQueue_V1_PaymentTransaction) {
        self.init(transaction)
    }

    init(_ transaction: Storebus_PaymentQueue_V1_PaymentTransaction) {
        transactionIdentifier = transaction.transactionIdentifier
        transactionState = PaymentTransactionState(transaction.transactionState)
        payment = Payment(transaction.payment)
        transactionDate = transaction.hasTransactionDate ? transaction.transactionDate.date : nil
        originalStorage = transaction.hasOriginalTransaction ? [PaymentTransaction(transaction.originalTransaction)] : []
        error = transaction.hasError ? StoreKitError(transaction.error) : nil
        downloads = transaction.downloads.map(Download.init)
        isFinished = transaction.finished
        expirationDate = transaction.hasExpiresDate ? transaction.expiresDate.date : nil
        subscriptionOriginalTransactionIdentifier = transaction.originalTransactionID.isEmpty ? nil : transaction.originalTransactionID
        isRenewal = transaction.transactionReason == .renewal
        rawRecord = transaction
    }
}
