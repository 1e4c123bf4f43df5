import Foundation
import StoreBus
import StoreSchema
import Testing

@testable import Gateway

/// A transaction with every field set, its strings needing escapes and holding non-ASCII text.
private let richTransaction = Storebus_PaymentQueue_V1_PaymentTransaction.with {
    $0.transactionIdentifier = "1000000000000000042"
    $0.transactionState = .purchased
    $0.payment = .with {
        $0.productIdentifier = "com.example.\"gems\"\\100"
        $0.quantity = 3
        $0.applicationUsername = "ünïcödé 日本 🎉\n\ttab"
        $0.requestData = Data([0, 1, 2, 255])
        $0.simulatesAskToBuyInSandbox = true
    }
    $0.transactionDate = .init(seconds: 1_790_000_000, nanos: 123_000_000)
    $0.error = .with {
        $0.code = .paymentCancelled
        $0.localizedDescription = "Cancelled \u{1}"
    }
    $0.downloads = [
        .with {
            $0.contentIdentifier = "level-2"
            $0.contentVersion = "1.0"
            $0.contentLength = 1 << 40
            $0.state = .waiting
        }
    ]
}

private let queue = Storebus_PaymentQueue_V1_QueueRef.with {
    $0.appBundleID = "com.example.app"
    $0.accountID = "acct"
    $0.deviceID = "dev"
}

private func record(_ seq: UInt64, key: String = "com.example.app|acct|dev", _ keySeq: UInt64, _ event: Storebus_PaymentQueue_V1_QueueEvent.OneOf_Event) -> Storebus_PaymentQueue_V1_QueueEventRecord {
    .with {
        $0.seq = seq
        $0.key = key
        $0.keySeq = keySeq
        $0.type = "storebus.payment_queue.v1.QueueEvent"
        $0.time = .init(seconds: 1_790_000_000, nanos: 5_000_000)
        $0.payload.event = event
        $0.payload.queue = queue
    }
}

/// The record's JSON as the payment queue writes it (EventLog.appendJSON's layout), with spaces.
private func handWritten(_ record: Storebus_PaymentQueue_V1_QueueEventRecord) throws -> [UInt8] {
    let payload = try record.payload.jsonString()
    return Array(
        "{ \"seq\" : \"\(record.seq)\", \"key\":\"\(record.key)\",\"keySeq\":\"\(record.keySeq)\",\"type\":\"\(record.type)\",\"time\":\"2026-09-21T13:46:40.005Z\" ,\"payload\": \(payload) }\n".utf8)
}

private func decoded(_ json: [UInt8]?) -> Storebus_Gateway_V1_ObserverEvent? {
    json.flatMap { try? JSONCodec.decode(Storebus_Gateway_V1_ObserverEvent.self, from: $0) }
}

@Suite("Gateway: observer callbacks made from event JSON")
struct ObserverEventJSONTests {
    @Test("events delivered as callbacks of the same fields (transactions, restores, downloads) are copied, and the copies decode to the callbacks the decoder makes")
    func copiedCallbacks() throws {
        for event: Storebus_PaymentQueue_V1_QueueEvent.OneOf_Event in [
            .updatedTransactions(.with { $0.transactions = [richTransaction, .with { $0.transactionIdentifier = "2" }] }),
            .removedTransactions(.with { $0.transactions = [richTransaction] }),
            .updatedTransactions(.init()),
            .restoreCompletedTransactionsFinished(
                .with {
                    $0.restoreID = "r"; $0.restoredCount = 4
                }),
            .restoreCompletedTransactionsFailed(
                .with {
                    $0.restoreID = "r";
                    $0.error = .with {
                        $0.code = .paymentNotAllowed; $0.localizedDescription = "no"
                    }
                }),
            .updatedDownloads(
                .with {
                    $0.downloads = [
                        .with {
                            $0.transactionIdentifier = "1"; $0.contentIdentifier = "pack"; $0.state = .active; $0.progress = 0.5
                        }
                    ]
                })
        ] {
            let record = record(77, 5, event)
            for json in [try JSONCodec.encode(record), try handWritten(record)] {
                let copied = ObserverEventJSON.splice(json, seq: 77, key: record.key, keySeq: 5)
                #expect(copied != nil, "copied, not decoded: \(String(decoding: json, as: UTF8.self))")
                #expect(decoded(copied) == GatewayHandlers.callback(record))
                #expect(decoded(ObserverEventJSON.callback(record: json, seq: 77, key: record.key, keySeq: 5)) == GatewayHandlers.callback(record))
            }
        }
    }

    @Test("events whose callback has fewer fields, events with no callback, escaped keys, snake_case names and unknown members go through the decoder")
    func decodedCallbacks() throws {
        let revoked = record(
            3, 2,
            .revokedEntitlements(
                .with {
                    $0.productIdentifiers = ["p"]; $0.transactionIdentifiers = ["1"]
                }))
        let refunded = record(3, 2, .refundedTransactions(.with { $0.transactions = [richTransaction] }))
        let escapedKey = record(3, key: "com.example.app|a\"b|dev", 2, .updatedTransactions(.with { $0.transactions = [richTransaction] }))
        let plain = record(3, 2, .updatedTransactions(.with { $0.transactions = [richTransaction] }))
        let plainJSON = String(decoding: try JSONCodec.encode(plain), as: UTF8.self)
        let variants: [(Storebus_PaymentQueue_V1_QueueEventRecord, [UInt8])] = [
            (revoked, try JSONCodec.encode(revoked)),
            (refunded, try JSONCodec.encode(refunded)),
            (escapedKey, try JSONCodec.encode(escapedKey)),
            (plain, Array(plainJSON.replacingOccurrences(of: "\"updatedTransactions\"", with: "\"updated_transactions\"").utf8)),
            (plain, Array(plainJSON.replacingOccurrences(of: "\"payload\":{", with: "\"payload\":{\"extra\":[1,{\"a\":null}],").utf8)),
            (plain, Array(plainJSON.replacingOccurrences(of: "{\"seq\"", with: "{\"future\":true,\"seq\"").utf8))
        ]
        for (record, json) in variants {
            #expect(ObserverEventJSON.splice(json, seq: record.seq, key: record.key, keySeq: record.keySeq) == nil)
            let callback = ObserverEventJSON.callback(record: json, seq: record.seq, key: record.key, keySeq: record.keySeq)
            #expect(decoded(callback) == GatewayHandlers.callback(record), "\(String(decoding: json, as: UTF8.self))")
        }
    }

    @Test("a record at other positions, another key, or not well-formed JSON in UTF-8 makes no callback")
    func refused() throws {
        let plain = record(3, 2, .updatedTransactions(.with { $0.transactions = [richTransaction] }))
        let json = try JSONCodec.encode(plain)
        let text = String(decoding: json, as: UTF8.self)
        #expect(ObserverEventJSON.callback(record: json, seq: 4, key: plain.key, keySeq: 2) == nil)
        #expect(ObserverEventJSON.callback(record: json, seq: 3, key: plain.key, keySeq: 1) == nil)
        #expect(ObserverEventJSON.callback(record: json, seq: 3, key: "other|key|x", keySeq: 2) == nil)
        var broken: [[UInt8]] = [
            Array(json.dropLast()),
            json + Array(" x".utf8),
            json + Array("{}".utf8),
            Array(text.replacingOccurrences(of: "\"transactions\":[", with: "\"transactions\":[,").utf8),
            Array(text.replacingOccurrences(of: "\"quantity\":3", with: "\"quantity\":03").utf8),
            Array(text.replacingOccurrences(of: "\"quantity\":3", with: "\"quantity\":tru").utf8),
            Array(text.replacingOccurrences(of: "level-2", with: "level\\x2").utf8),
            Array(text.replacingOccurrences(of: "level-2", with: "level\u{1}2").utf8),
            Array(text.replacingOccurrences(of: "level-2", with: "level\\u12").utf8),
            Array(text.replacingOccurrences(of: "\"seq\":\"3\"", with: "\"seq\":\"3\",\"seq\":\"3\"").utf8),
            // A member the copy does not check, twice; a position left out.
            Array(text.replacingOccurrences(of: "\"seq\":\"3\"", with: "\"seq\":\"3\",\"time\":\"1970-01-01T00:00:00Z\",\"time\":\"1970-01-01T00:00:00Z\"").utf8),
            Array(text.replacingOccurrences(of: "\"keySeq\":\"2\",", with: "").utf8)
        ]
        // A byte that is not UTF-8 inside a string.
        var invalid = json
        invalid[invalid.firstIndex(of: UInt8(ascii: "-"))!] = 0xFF
        broken.append(invalid)
        // Nesting deeper than any decoder here accepts.
        broken.append(Array(text.replacingOccurrences(of: "\"payload\":{", with: "\"payload\":{\"deep\":" + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + ",").utf8))
        for variant in broken {
            #expect(variant != json)
            #expect(ObserverEventJSON.splice(variant, seq: 3, key: plain.key, keySeq: 2) == nil, "\(String(decoding: variant, as: UTF8.self))")
        }
        #expect(ObserverEventJSON.callback(record: broken[0], seq: 3, key: plain.key, keySeq: 2) == nil)
        #expect(ObserverEventJSON.callback(record: invalid, seq: 3, key: plain.key, keySeq: 2) == nil)
    }

    @Test("an answer put together from kept callbacks decodes as the ObserveResponse holding them")
    func response() throws {
        let events = [
            GatewayHandlers.callback(record(1, 1, .updatedTransactions(.with { $0.transactions = [richTransaction] }))),
            GatewayHandlers.callback(record(2, 2, .removedTransactions(.with { $0.transactions = [richTransaction] })))
        ]
        let json = ObserverEventJSON.response(events: try events.map { try JSONCodec.encode($0) }, headSeq: 9)
        let response = try JSONCodec.decode(Storebus_Gateway_V1_ObserveResponse.self, from: json)
        #expect(response.events == events)
        #expect(response.headSeq == 9)
        #expect(try JSONCodec.decode(Storebus_Gateway_V1_ObserveResponse.self, from: ObserverEventJSON.response(events: [], headSeq: 0)) == .init())
    }
}
