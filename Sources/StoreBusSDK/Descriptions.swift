import Foundation

// One line each, for logs and `print`: the fields an app reads, not the generated record behind
// them (`rawRecord` holds that).

extension Product: CustomStringConvertible {
    /// `com.example.gems100 "100 Gems" 0,99 €`, with the period of a subscription and hosted content.
    public var description: String {
        var text = "\(productIdentifier) \"\(localizedTitle)\" \(formattedPrice)"
        if let subscriptionPeriod { text += " every \(subscriptionPeriod)" }
        if isDownloadable { text += " (hosted content)" }
        return text
    }
}

extension Payment: CustomStringConvertible {
    /// `3 x com.example.gems100`, with the application username and Ask to Buy when set.
    public var description: String {
        var text = "\(quantity) x \(productIdentifier)"
        if let applicationUsername { text += " for \(applicationUsername)" }
        if simulatesAskToBuyInSandbox { text += " (ask to buy)" }
        return text
    }
}

extension PaymentTransaction: CustomStringConvertible {
    /// `1000000000000003 restored 1 x com.example.pack (original 1000000000000001)`, with the error
    /// of a failed one and the downloads.
    public var description: String {
        var text = "\(transactionIdentifier) \(transactionState.rawValue) \(payment)"
        if let originalTransactionIdentifier { text += " (original \(originalTransactionIdentifier))" }
        if isRenewal { text += " (renewal)" }
        if let expirationDate { text += ", expires \(expirationDate.formatted(.iso8601))" }
        if let error { text += ": \(error)" }
        if !downloads.isEmpty { text += "; downloads: " + downloads.map(\.description).joined(separator: ", ") }
        if isFinished { text += "; finished" }
        return text
    }
}

extension Download: CustomStringConvertible {
    /// `com.example.pack 1.0 (86528 bytes) active 45%, 3 s left`.
    public var description: String {
        var text = "\(contentIdentifier) \(contentVersion) (\(contentLength) bytes) \(state.rawValue)"
        if state == .active || state == .paused { text += " \(Int(progress * 100))%" }
        if state == .active && timeRemaining >= 0 { text += ", \(Int(timeRemaining.rounded(.up))) s left" }
        if let contentURL { text += " at \(contentURL.path)" }
        if let error { text += ": \(error)" }
        return text
    }
}
