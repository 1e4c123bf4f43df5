import Foundation
import StoreSchema
import SwiftProtobuf
import Testing

@Suite("One codec of milliseconds, dates and timestamps")
struct EpochMillisecondsTests {
    @Test("an instant in milliseconds reads the same as a Timestamp, whatever Double made of it")
    func exactTimestamp() throws {
        // 1795222923.270 s has no exact Double: swift-protobuf's Timestamp(date:) writes .269999980Z.
        let milliseconds: Int64 = 1_795_222_923_270
        let viaDate = Google_Protobuf_Timestamp(millisecondsOf: EpochMilliseconds.date(milliseconds))
        #expect(try viaDate.jsonString() == #""2026-11-21T01:02:03.270Z""#)
        #expect(viaDate == Google_Protobuf_Timestamp(milliseconds: milliseconds))
        #expect(try Google_Protobuf_Timestamp(milliseconds: -1).jsonString() == #""1969-12-31T23:59:59.999Z""#)
    }

    @Test("milliseconds go to a date and a Timestamp and back unchanged, before and after 1970")
    func roundTrips() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<10_000 {
            let milliseconds = Int64.random(in: -62_135_596_800_000...253_402_300_799_999, using: &generator)
            #expect(EpochMilliseconds.of(EpochMilliseconds.date(milliseconds)) == milliseconds)
            #expect(Google_Protobuf_Timestamp(milliseconds: milliseconds).milliseconds == milliseconds)
            #expect(Google_Protobuf_Timestamp(millisecondsOf: EpochMilliseconds.date(milliseconds)).milliseconds == milliseconds)
        }
    }
}
