// Durations as the wire and libzmq's socket options count them; package-wide, as the client, the
// server and their tests all convert so.
extension Duration {
    /// Whole milliseconds, clamped to `Int32`, for socket options.
    package var socketMilliseconds: Int32 {
        let (seconds, attoseconds) = components
        let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }

    /// Whole milliseconds, rounded up, never negative; UInt64.max for durations too long to count so.
    package var wireMilliseconds: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1000)
        let (total, carry) = whole.addingReportingOverflow(UInt64((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
        return overflow || carry ? .max : total
    }
}
