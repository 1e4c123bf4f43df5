/// A payment or finish made with ``PaymentQueue/add(_:)`` or ``PaymentQueue/finishTransaction(_:)``
/// that ``PaymentQueue/shutdown(waitingAtMost:)`` cut off.
public enum PendingWork: Sendable, Equatable {
    case payment(Payment)
    case finish(PaymentTransaction)
}
