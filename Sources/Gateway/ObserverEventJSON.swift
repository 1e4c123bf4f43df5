import StoreBus
import StoreSchema

/// Observer callbacks in proto3 JSON, made from the payment queue's event JSON.
///
/// Events the contract delivers as a callback of the very same fields (transactions updated and
/// removed, restores, downloads: `deliveredVerbatimAsObserverEvent`, generated from payment_queue.proto)
/// become callbacks by moving bytes: the callback's member is the event payload's member, field for
/// field the same message, so it is copied as it is instead of being decoded into messages and
/// encoded again. The record's positions
/// and key are read and checked against the doorbell, and the record has been checked to be
/// well-formed JSON in valid UTF-8, so a copy can never break an answer's syntax. A field of
/// PaymentTransaction newer than this gateway passes through; clients ignore unknown fields, as
/// proto3 JSON readers do. Anything else (other events, escapes in the key, field names spelled in
/// snake_case, members this gateway does not know) goes through the full decode.
enum ObserverEventJSON {
    /// The callback JSON of a payment-queue event record, or nil when `json` is not the record at
    /// `seq`, `key`, `keySeq`.
    static func callback(record json: [UInt8], seq: UInt64, key: String, keySeq: UInt64) -> [UInt8]? {
        if let spliced = splice(json, seq: seq, key: key, keySeq: keySeq) { return spliced }
        guard let record = try? JSONCodec.decode(Storebus_PaymentQueue_V1_QueueEventRecord.self, from: json),
            record.seq == seq, record.key == key, record.keySeq == keySeq
        else { return nil }
        return try? JSONCodec.encode(GatewayHandlers.callback(record))
    }

    /// The events copied as callbacks: the contract delivers each as a callback of the very same
    /// fields (`delivered_as`), so its JSON is the callback's.
    private static let verbatim = Storebus_PaymentQueue_V1_QueueEvent.deliveredVerbatimAsObserverEvent

    /// The members an event record may have, the positions checked against the doorbell first.
    private static let recordMembers = ["seq", "key", "keySeq", "payload", "type", "time"]

    /// The callback JSON by copying, or nil when the record is not of the shape copied.
    static func splice(_ json: [UInt8], seq: UInt64, key: String, keySeq: UInt64) -> [UInt8]? {
        // Copied bytes must be valid UTF-8 as well as JSON: ASCII is, the rest is checked. The
        // payload's members are found in the same pass as the record's.
        guard JSONScanner.isASCII(json) || String(validating: json, as: UTF8.self) != nil,
            let (record, payloadMembers) = JSONScanner.members(of: json, in: 0..<json.count, andOf: "payload")
        else { return nil }
        // The record's members seen so far, one bit each in `recordMembers` order (a Set<String>
        // hashed each name: about 20K of the gateway's 560K instructions per flow).
        var seen: UInt8 = 0
        for member in record {
            guard let bit = recordMembers.firstIndex(of: member.name) else { return nil }
            // A member given twice is left to the decoder to judge.
            guard seen & (1 << bit) == 0 else { return nil }
            seen |= 1 << bit
            switch bit {
            case 0:
                guard JSONScanner.unsigned(json, member.value) == seq else { return nil }
            case 1:
                guard JSONScanner.plainString(json, member.value) == Array(key.utf8) else { return nil }
            case 2:
                guard JSONScanner.unsigned(json, member.value) == keySeq else { return nil }
            default:
                continue
            }
        }
        // The payload's members exist only when it does, as an object.
        guard seen & 0b111 == 0b111, let members = payloadMembers else { return nil }
        var callback: (name: String, value: Range<Int>)?
        for member in members {
            if member.name == "queue" { continue }
            // An event the contract delivers as a callback of the very same fields; any other is
            // left to the decoder.
            guard let name = verbatim[member.name], callback == nil, json[member.value.lowerBound] == UInt8(ascii: "{") else { return nil }
            callback = (name, member.value)
        }
        guard let callback else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(callback.value.count + callback.name.utf8.count + 32)
        out += #"{"seq":""#.utf8
        out += String(keySeq).utf8
        out += #"",""#.utf8
        out += callback.name.utf8
        out += #"":"#.utf8
        out += json[callback.value]
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// An ObserveResponse holding `events` (callback JSON each) and `headSeq`.
    static func response(events: [[UInt8]], headSeq: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(events.reduce(40) { $0 + $1.count + 1 })
        out += #"{"events":["#.utf8
        for (index, event) in events.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += event
        }
        out += #"],"headSeq":""#.utf8
        out += String(headSeq).utf8
        out += #""}"#.utf8
        return out
    }
}
