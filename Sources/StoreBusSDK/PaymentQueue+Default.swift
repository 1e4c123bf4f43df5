import Foundation
import Synchronization

/// The default queue (SKPaymentQueue.default()), for the common app with one device and one account.
extension PaymentQueue {
    private static let defaultQueue = Mutex<PaymentQueue?>(nil)

    /// Makes the default queue for `configuration`, closing the one before if there was one (a sign
    /// in with another account, say). Call it once at launch, before ``default()``.
    @discardableResult
    public static func configureDefault(_ configuration: StoreConfiguration) async throws -> PaymentQueue {
        let queue = try PaymentQueue(configuration: configuration)
        let previous = defaultQueue.withLock { current in
            defer { current = queue }
            return current
        }
        await previous?.shutdown()
        return queue
    }

    /// The default queue. ``configureDefault(_:)`` must have made it: a call before is a programming
    /// error, and stops the program saying so.
    public static func `default`() -> PaymentQueue {
        guard let queue = defaultQueue.withLock({ $0 }) else {
            preconditionFailure("PaymentQueue.default() called before PaymentQueue.configureDefault(_:)")
        }
        return queue
    }
}
