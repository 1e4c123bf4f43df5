import StoreBus
import StoreSchema

/// The two requests of every purchase, AddPayment and FinishTransaction, read from their proto3 JSON
/// without swift-protobuf when they have the plain shape clients send: through swift-protobuf's
/// decoder they took about 17K and 12K instructions, some 4% of a purchase's in this process.
///
/// The plain shape: an object of the message's own members by their JSON names, each given once,
/// strings of ASCII without escapes, the quantity a plain decimal that fits, the sandbox flag
/// `true` or `false`. Anything else (requestData, snake_case names, nulls, numbers written as
/// strings, unknown members, escapes, other UTF-8) gives nil, and the caller decodes the body with
/// ``JSONCodec``, which accepts all of proto3 JSON and names what it refuses. What is read here is
/// always the message swift-protobuf would read (the tests compare both on random requests).
enum RequestJSON {
    typealias Members = [(name: String, value: Range<Int>)]

    /// The AddPaymentRequest of `body`, or nil when it is not of the plain shape.
    static func addPayment(_ body: [UInt8]) -> Storebus_PaymentQueue_V1_AddPaymentRequest? {
        guard FastPaths.enabled, let members = JSONScanner.plainMembers(body) else { return nil }
        var request = Storebus_PaymentQueue_V1_AddPaymentRequest()
        for member in members {
            switch member.name {
            case "queue":
                guard let queue = queueRef(body, member.value) else { return nil }
                request.queue = queue
            case "payment":
                guard let payment = payment(body, member.value) else { return nil }
                request.payment = payment
            case "storefront":
                guard let text = string(body, member.value) else { return nil }
                request.storefront = text
            case "idempotencyKey":
                guard let text = string(body, member.value) else { return nil }
                request.idempotencyKey = text
            default:
                return nil
            }
        }
        return request
    }

    /// The FinishTransactionRequest of `body`, or nil when it is not of the plain shape.
    static func finishTransaction(_ body: [UInt8]) -> Storebus_PaymentQueue_V1_FinishTransactionRequest? {
        guard FastPaths.enabled, let members = JSONScanner.plainMembers(body) else { return nil }
        var request = Storebus_PaymentQueue_V1_FinishTransactionRequest()
        for member in members {
            switch member.name {
            case "queue":
                guard let queue = queueRef(body, member.value) else { return nil }
                request.queue = queue
            case "transactionIdentifier":
                guard let text = string(body, member.value) else { return nil }
                request.transactionIdentifier = text
            default:
                return nil
            }
        }
        return request
    }

    /// The FinishTransactionResponse's two answers, as swift-protobuf writes them.
    static let finished = Array("{}".utf8)
    static let finishedAlready = Array(#"{"alreadyFinished":true}"#.utf8)

    /// FinishTransaction's answer: one of the two constants above, or swift-protobuf's encoding of
    /// the message with the fast paths off (the same bytes; RequestJSONTests compares them).
    static func finishAnswer(alreadyFinished: Bool) throws -> [UInt8] {
        guard FastPaths.enabled else {
            return try JSONCodec.encode(Storebus_PaymentQueue_V1_FinishTransactionResponse.with { $0.alreadyFinished = alreadyFinished })
        }
        return alreadyFinished ? finishedAlready : finished
    }

    private static func queueRef(_ body: [UInt8], _ range: Range<Int>) -> Storebus_PaymentQueue_V1_QueueRef? {
        guard let members = object(body, range) else { return nil }
        var queue = Storebus_PaymentQueue_V1_QueueRef()
        for member in members {
            guard let text = string(body, member.value) else { return nil }
            switch member.name {
            case "appBundleId": queue.appBundleID = text
            case "accountId": queue.accountID = text
            case "deviceId": queue.deviceID = text
            default: return nil
            }
        }
        return queue
    }

    private static func payment(_ body: [UInt8], _ range: Range<Int>) -> Storebus_PaymentQueue_V1_Payment? {
        guard let members = object(body, range) else { return nil }
        var payment = Storebus_PaymentQueue_V1_Payment()
        for member in members {
            switch member.name {
            case "productIdentifier":
                guard let text = string(body, member.value) else { return nil }
                payment.productIdentifier = text
            case "applicationUsername":
                guard let text = string(body, member.value) else { return nil }
                payment.applicationUsername = text
            case "quantity":
                guard let quantity = int32(body, member.value) else { return nil }
                payment.quantity = quantity
            case "simulatesAskToBuyInSandbox":
                guard let flag = JSONScanner.bool(body, member.value) else { return nil }
                payment.simulatesAskToBuyInSandbox = flag
            default:
                return nil
            }
        }
        return payment
    }

    /// The members of the object at `range`, no name given twice.
    private static func object(_ body: [UInt8], _ range: Range<Int>) -> Members? {
        guard body[range.lowerBound] == UInt8(ascii: "{"), let members = JSONScanner.members(of: body, in: range), JSONScanner.distinctNames(members) else { return nil }
        return members
    }

    /// A string without escapes.
    private static func string(_ body: [UInt8], _ range: Range<Int>) -> String? {
        JSONScanner.plainText(body, range)
    }

    /// A plain decimal, no sign, no fraction or exponent, that fits an int32.
    private static func int32(_ body: [UInt8], _ range: Range<Int>) -> Int32? {
        guard body[range.lowerBound] != UInt8(ascii: "\""), let value = JSONScanner.unsigned(body, range), value <= UInt64(Int32.max) else { return nil }
        return Int32(value)
    }
}
