import Crypto
import Foundation
import Receipt
import ReceiptFormat
import StoreBusTesting
import StoreSchema

/// Signing a purchase's notification as the receipt service does for the notification service:
/// its signedTransactionInfo, then the signedPayload that carries it, two ES256 JWS under the
/// deployment's chain. In process, one at a time, beside its plain twin (`STOREBUS_FAST_PATHS=off`:
/// JSONEncoder's payloads, strings concatenated and the whole input hashed) and its floor: the same
/// two signing inputs signed by swift-crypto alone (hash and ECDSA, what no signer can skip).
struct SigningBench {
    let rounds: Int
    var verbose = false
    /// Notifications signed per round and figure.
    static let count = 2_000

    func run() throws {
        let directory = try TemporaryDirectory(prefix: "sb-signing")
        defer { directory.remove() }
        let key = try SigningAuthority(directory: directory.url).current()
        let floorKey = P256.Signing.PrivateKey()
        // The floor signs what the fast path signed: the same inputs, byte for byte.
        let inputs = try Self.notification(index: 0, key: key, written: true).map(Self.signingInput)
        var fast: [Double] = [], plain: [Double] = [], bare: [Double] = []
        for round in 0..<rounds {
            fast.append(try Self.microseconds { try Self.notification(index: $0, key: key, written: true) })
            plain.append(try Self.microseconds { try Self.notification(index: $0, key: key, written: false) })
            bare.append(
                try Self.microseconds { _ in
                    for input in inputs { _ = try floorKey.signature(for: input) }
                })
            if verbose {
                FileHandle.standardError.write(
                    "round \(round) notification signing (µs): fast \(fast.last!), plain \(plain.last!), bare \(bare.last!)\n".data(using: .utf8)!)
            }
        }
        report("notification_sign_us", median(fast), "us")
        report("notification_sign_plain_us", median(plain), "us")
        report("bare_es256_sign_pair_us", median(bare), "us")
        report("notification_sign_over_bare", median(zip(fast, bare).map { $0 / $1 }), "ratio")
    }

    /// Microseconds of this thread's CPU time per call of `body`, over ``count`` calls after a
    /// warm-up (the calls run on this thread, one after another).
    static func microseconds(_ body: (Int) throws -> some Any) throws -> Double {
        for index in 0..<100 { _ = try body(index) }
        let start = threadCPUNanoseconds()
        for index in 0..<count { _ = try body(index) }
        return Double(threadCPUNanoseconds() - start) / Double(count) / 1_000
    }

    static func threadCPUNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// What a compact JWS's signature covers: its header and payload segments and the dot between.
    static func signingInput(_ jws: String) -> Data {
        let bytes = Array(jws.utf8)
        return Data(bytes[..<(bytes.lastIndex(of: UInt8(ascii: ".")) ?? bytes.endIndex)])
    }

    /// A one-time purchase's notification signed with `key` as the receipt service writes it: its
    /// signedTransactionInfo and its signedPayload.
    static func notification(index: Int, key: SigningKey, written: Bool) throws -> [String] {
        let now = EpochMilliseconds.now
        var transaction = JWSTransactionDecodedPayload()
        transaction.transactionId = String(1_000_000_000 + index)
        transaction.originalTransactionId = transaction.transactionId
        transaction.bundleId = "com.example.puzzle"
        transaction.productId = "com.example.puzzle.coins100"
        transaction.purchaseDate = now
        transaction.originalPurchaseDate = now
        transaction.quantity = 1
        transaction.type = "Consumable"
        transaction.inAppOwnershipType = "PURCHASED"
        transaction.signedDate = now
        transaction.environment = "Sandbox"
        transaction.transactionReason = "PURCHASE"
        transaction.storefront = "USA"
        transaction.storefrontId = "143441"
        transaction.price = 990
        transaction.currency = "USD"
        var data = NotificationData()
        data.bundleId = transaction.bundleId
        data.environment = "Sandbox"
        data.signedTransactionInfo = try JWS.sign(transaction, with: key, written: written)
        var payload = ResponseBodyV2DecodedPayload()
        payload.notificationType = "ONE_TIME_CHARGE"
        payload.notificationUUID = UUID().uuidString.lowercased()
        payload.data = data
        payload.version = "2.0"
        payload.signedDate = now
        let signed = try JWS.sign(payload, with: key, written: written)
        return [data.signedTransactionInfo!, signed]
    }
}
