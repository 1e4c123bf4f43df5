import Foundation
import StoreSchema

/// The store's clock for subscriptions: when a period that starts at a given time ends, at a
/// renewal rate (StoreKit Test's `SKTestSession.TimeRate`, Apple's sandbox table).
///
/// Dates stay real dates: a sandbox month starts now and ends five minutes later, and receipts and
/// transactions carry those dates. Only the length of a period changes with the rate.
public enum RenewalClock {
    /// A subscription period: a number of days, weeks, months or years.
    public struct Period: Sendable, Equatable {
        public var unit: Storebus_Catalog_V1_PeriodUnit
        public var count: Int

        /// A period of `count` `unit`s.
        public init(unit: Storebus_Catalog_V1_PeriodUnit, count: Int) {
            self.unit = unit
            self.count = count
        }

        /// Reads `P<n>D`, `P<n>W`, `P<n>M` or `P<n>Y` (the catalog's ISO 8601 form), n from 1 to 999.
        public init?(iso8601 text: String) {
            guard text.count >= 3, text.hasPrefix("P"), let count = Int(text.dropFirst().dropLast()), (1...999).contains(count) else { return nil }
            switch text.last {
            case "D": unit = .day
            case "W": unit = .week
            case "M": unit = .month
            case "Y": unit = .year
            default: return nil
            }
            self.count = count
        }

        /// The ISO 8601 form.
        public var iso8601: String {
            let letter: String
            switch unit {
            case .day: letter = "D"
            case .week: letter = "W"
            case .year: letter = "Y"
            default: letter = "M"
            }
            return "P\(count)\(letter)"
        }
    }

    /// The rate a deployment uses unless told otherwise: Apple's sandbox.
    public static let defaultRate = Storebus_PaymentQueue_V1_RenewalRate.monthlyRenewalEveryFiveMinutes

    /// Every rate a caller may set (all but unspecified).
    public static let rates: [Storebus_PaymentQueue_V1_RenewalRate] = [
        .realTime, .monthlyRenewalEveryHour, .monthlyRenewalEveryThirtyMinutes, .monthlyRenewalEveryFiveMinutes,
        .monthlyRenewalEveryThirtySeconds, .oneRenewalEveryFifteenMinutes, .oneRenewalEveryFiveMinutes,
        .oneRenewalEveryMinute, .oneRenewalEveryTwoSeconds
    ]

    /// The rate's name in the contract, `RENEWAL_RATE_REAL_TIME`.
    public static func name(of rate: Storebus_PaymentQueue_V1_RenewalRate) -> String {
        // As swift-protobuf writes it in a message's JSON: `{"rate":"RENEWAL_RATE_REAL_TIME"}`.
        let json = (try? Storebus_PaymentQueue_V1_GetRenewalRateResponse.with { $0.rate = rate }.jsonString()) ?? ""
        return json.split(separator: "\"").dropFirst(3).first.map(String.init) ?? "\(rate.rawValue)"
    }

    /// The rate named `name` (as the contract names it), if it is one a caller may set.
    public static func rate(named name: String) -> Storebus_PaymentQueue_V1_RenewalRate? {
        rates.first { self.name(of: $0) == name }
    }

    /// When a period of `period` that starts at `startMS` (milliseconds since 1970) ends at `rate`.
    public static func end(of period: Period, startingAt startMS: Int64, rate: Storebus_PaymentQueue_V1_RenewalRate) -> Int64 {
        switch rate {
        case .realTime, .UNRECOGNIZED:
            return calendarEnd(of: period, startingAt: startMS)
        case .oneRenewalEveryFifteenMinutes: return startMS + 15 * 60_000
        case .oneRenewalEveryFiveMinutes: return startMS + 5 * 60_000
        case .oneRenewalEveryMinute: return startMS + 60_000
        case .oneRenewalEveryTwoSeconds: return startMS + 2_000
        case .unspecified, .monthlyRenewalEveryHour, .monthlyRenewalEveryThirtyMinutes, .monthlyRenewalEveryFiveMinutes, .monthlyRenewalEveryThirtySeconds:
            return startMS + scaledMilliseconds(of: period, rate: rate == .unspecified ? defaultRate : rate)
        }
    }

    /// How billing retry goes for a subscription of `period` at `rate`, in milliseconds: the grace
    /// period (Apple's: 6 days for weekly subscriptions, 16 for the others), how long the store
    /// retries (60 days), and the time between retries (a twelfth of that), on the store's clock: a
    /// day lasts a thirtieth of a month at the monthly rates, and at the fixed ones a month lasts a
    /// period and the grace period one period.
    public static func billing(of period: Period, rate: Storebus_PaymentQueue_V1_RenewalRate) -> (grace: Int64, retry: Int64, interval: Int64) {
        let graceDays: Int64 = period.unit == .week || (period.unit == .day && period.count <= 7) ? 6 : 16
        // Thirty days on the store's clock, and the grace period.
        let month: Int64
        let grace: Int64
        switch rate {
        case .realTime, .UNRECOGNIZED:
            month = 30 * 86_400_000
            grace = graceDays * 86_400_000
        case .oneRenewalEveryFifteenMinutes, .oneRenewalEveryFiveMinutes, .oneRenewalEveryMinute, .oneRenewalEveryTwoSeconds:
            month = end(of: period, startingAt: 0, rate: rate)
            grace = month
        default:
            month = scaledMilliseconds(of: Period(unit: .month, count: 1), rate: rate == .unspecified ? defaultRate : rate)
            grace = graceDays * month / 30
        }
        let retry = 2 * month
        return (grace, retry, max(1, retry / 12))
    }

    /// A period's length at a rate that scales months (Apple's tables: a week, a month; two, three
    /// and six months are that many months, a year twelve; a day is two fifteenths of a month, so
    /// that the sandbox's three-day trial lasts its two minutes).
    static func scaledMilliseconds(of period: Period, rate: Storebus_PaymentQueue_V1_RenewalRate) -> Int64 {
        let (week, month): (Int64, Int64)
        switch rate {
        case .monthlyRenewalEveryHour: (week, month) = (15 * 60_000, 60 * 60_000)
        case .monthlyRenewalEveryThirtyMinutes: (week, month) = (10 * 60_000, 30 * 60_000)
        case .monthlyRenewalEveryThirtySeconds: (week, month) = (10_000, 30_000)
        default: (week, month) = (3 * 60_000, 5 * 60_000)
        }
        let count = Int64(period.count)
        switch period.unit {
        case .day: return count * month * 2 / 15
        case .week: return count * week
        case .year: return count * 12 * month
        default: return count * month
        }
    }

    /// The end of a period in calendar time (UTC): a month from January 31 ends on the last day of
    /// February, as Foundation's calendar says.
    static func calendarEnd(of period: Period, startingAt startMS: Int64) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var components = DateComponents()
        switch period.unit {
        case .day: components.day = period.count
        case .week: components.day = 7 * period.count
        case .year: components.year = period.count
        default: components.month = period.count
        }
        let start = Date(timeIntervalSince1970: TimeInterval(startMS) / 1000)
        guard let end = calendar.date(byAdding: components, to: start) else { return startMS }
        // Whole milliseconds from the start, so that the start's own milliseconds carry over exactly.
        return startMS + Int64((end.timeIntervalSince(start) * 1000).rounded())
    }
}
