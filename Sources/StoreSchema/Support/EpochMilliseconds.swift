import Foundation
import SwiftProtobuf

/// Milliseconds since 1970: StoreBus's one unit of time in its databases, events and answers, and the
/// one way to and from `Date` and `Timestamp`.
///
/// A `Date` is a Double of seconds, which holds most instants in milliseconds only approximately
/// (the nearest Double to 1795222923.270 is 1795222923.2699999809…). Converting it with swift-protobuf's
/// `Timestamp(date:)` writes that approximation (`…23.269999981Z`), and converting it back to
/// milliseconds by truncation gives one millisecond less. Here, a date goes to the nearest millisecond,
/// and a Timestamp is made from whole milliseconds, so that the same instant reads the same in every
/// answer (`…23.270Z`).
public enum EpochMilliseconds {
    /// The nearest whole millisecond to `date`.
    public static func of(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// The millisecond now.
    public static var now: Int64 { of(Date()) }

    /// The date of `milliseconds`; ``of(_:)`` gives them back exactly.
    public static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

extension Google_Protobuf_Timestamp {
    /// The instant `milliseconds` after 1970, exactly (negative values before).
    public init(milliseconds: Int64) {
        let (seconds, remainder) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        // Nanos are never negative: an instant before 1970 borrows a second.
        self.init(seconds: remainder < 0 ? seconds - 1 : seconds, nanos: Int32(remainder < 0 ? remainder + 1000 : remainder) * 1_000_000)
    }

    /// `date` at the nearest millisecond (``EpochMilliseconds``).
    public init(millisecondsOf date: Date) {
        self.init(milliseconds: EpochMilliseconds.of(date))
    }

    /// The instant in whole milliseconds, rounded to the nearest.
    public var milliseconds: Int64 {
        seconds * 1000 + Int64((Double(nanos) / 1_000_000).rounded())
    }
}
