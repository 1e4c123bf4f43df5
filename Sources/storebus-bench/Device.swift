import Catalog
import CatalogFormat
import Foundation
import Logging
import StoreBus
import StoreBusTesting
import StoreSchema
import Synchronization
import ZeroMQ

/// One simulated device: a session, its observer, and the flow it repeats.
///
/// Its flow's calls send bodies encoded once, when they are the same every time, and it reads only
/// the members of the answers it checks (``FlowAnswers``), as a load generator does: decoding every
/// answer in full took about a quarter of the bench process's CPU in a profile, CPU taken from the
/// two cores that the services it measures share with it.
///
/// By default a device asks for the callback it waits for once the call that causes it has been
/// answered: Observe calls after its position until the callback is among those it brought. With
/// `parked`, it observes as the SDK's PaymentQueue does: one Observe call waits at the gateway at
/// all times (the long-poll chain, each call acknowledging what the last one brought), the flow's
/// own calls go out beside it, and the purchased and removed steps wait for their callback to have
/// arrived on the chain, before the call that caused it was answered or after.
final class Device: Sendable {
    let client: RPCClient
    let options: CallOptions
    let queue: Storebus_PaymentQueue_V1_QueueRef
    let product: String
    /// The flow's FetchProducts and AddPayment requests, the same for every flow of the device.
    let fetchBody: [UInt8]
    let addBody: [UInt8]
    /// The Observe and FinishTransaction requests, each swift-protobuf's encoding with one value put
    /// in (the position, the transaction): encoding the whole message each time took a tenth of the
    /// bench's instructions.
    let observeBody: BodyTemplate
    let finishBody: BodyTemplate
    /// Callbacks heard and not yet waited for, and the flow's wait, if it is waiting.
    private let inbox = Mutex(Inbox())
    private let observer = Mutex<Task<Void, Never>?>(nil)
    /// The position acknowledged so far, when the device observes without a parked call.
    private let position: Mutex<UInt64>
    /// Flows started, which numbers their payments' idempotency keys.
    private let flowsStarted = Atomic<UInt64>(0)
    /// Each step's latencies (ns) since the last `takeSteps`, in `stepNames` order.
    private let steps = Mutex(Array(repeating: [UInt64](), count: Device.stepNames.count))
    static let stepNames = ["fetch", "add", "purchased", "finish", "removed"]

    /// A callback a flow waits for: a transaction purchased, or removed from the queue.
    struct Arrival: Hashable {
        enum Kind { case purchased, removed }
        let kind: Kind
        let transaction: String
    }

    struct Inbox {
        var heard: Set<Arrival> = []
        var waiting: (arrival: Arrival, continuation: CheckedContinuation<Void, any Error>)?
        /// Why the chain ended (the bench is stopping, or a call failed); nil while it runs.
        var ended: (any Error)?
    }

    func takeSteps() -> [[UInt64]] {
        steps.withLock { steps in
            defer { steps = Array(repeating: [], count: Device.stepNames.count) }
            return steps
        }
    }

    private func timed<T>(_ step: Int, _ body: () async throws -> T) async rethrows -> T {
        let begin = DispatchTime.now().uptimeNanoseconds
        let result = try await body()
        let elapsed = DispatchTime.now().uptimeNanoseconds - begin
        steps.withLock { $0[step].append(elapsed) }
        return result
    }

    private init(client: RPCClient, options: CallOptions, queue: Storebus_PaymentQueue_V1_QueueRef, product: String, position: UInt64) throws {
        self.client = client
        self.options = options
        self.queue = queue
        self.product = product
        self.position = Mutex(position)
        fetchBody = try JSONCodec.encode(
            Storebus_Catalog_V1_FetchProductsRequest.with {
                $0.appBundleID = queue.appBundleID
                $0.productIdentifiers = [product]
            })
        addBody = try JSONCodec.encode(
            Storebus_PaymentQueue_V1_AddPaymentRequest.with {
                $0.queue = queue
                $0.payment = .with {
                    $0.productIdentifier = product; $0.quantity = 1
                }
            })
        let seqSentinel = UInt64(9_876_543_210_123)
        observeBody = try BodyTemplate(
            JSONCodec.encode(
                Storebus_Gateway_V1_ObserveRequest.with {
                    $0.afterSeq = seqSentinel
                    $0.waitMs = 5_000
                }), around: String(seqSentinel))
        let idSentinel = "flow-bench-transaction-sentinel"
        finishBody = try BodyTemplate(
            JSONCodec.encode(
                Storebus_PaymentQueue_V1_FinishTransactionRequest.with {
                    $0.queue = queue
                    $0.transactionIdentifier = idSentinel
                }), around: idSentinel)
    }

    /// Calls `method` with an encoded request; the answer's body on OK, its error otherwise.
    private func call<Request, Response>(_ method: MethodDescriptor<Request, Response>, body: [UInt8], options: CallOptions) async throws -> [UInt8] {
        let response = try await client.callRaw(path: method.path, idempotent: method.idempotent, body: body, options: options)
        if let error = response.error { throw error }
        return response.body
    }

    /// An Observe call after `position`: the events it brought, as ``FlowAnswers/observed(_:)`` reads them.
    private func observeCall(after position: UInt64) async throws -> [(seq: UInt64, arrivals: [Arrival])] {
        // A position of 0 reads "0" where proto3 JSON would leave the member out: the same request.
        let body = observeBody.with(String(position).utf8)
        return try FlowAnswers.observed(try await call(Storebus_Gateway_V1_Gateway.observe, body: body, options: options))
    }

    /// Authenticates and attaches (the launch replay) as an app would; with `parked`, starts the
    /// observer's long-poll chain.
    static func open(client: RPCClient, app: String, account: String, product: String, parked: Bool) async throws -> Device {
        let session = try await client.call(
            Storebus_Gateway_V1_Gateway.authenticate,
            .with {
                $0.apiKey = appKey
                $0.appBundleID = app
                $0.accountID = account
                $0.deviceID = "device"
            })
        let options = CallOptions(timeout: .seconds(30), metadata: ["session": session.sessionID])
        let replay = try await client.call(Storebus_Gateway_V1_Gateway.observe, .with { $0.replay = true }, options: options)
        let device = try Device(client: client, options: options, queue: session.queue, product: product, position: replay.headSeq)
        if parked {
            let position = replay.headSeq
            device.observer.withLock { observer in
                observer = Task(executorPreference: client.executor) { await device.observe(after: position) }
            }
        }
        return device
    }

    /// Ends the observer's chain (its waiting call is cancelled) and waits for it.
    func stopObserving() async {
        let task = observer.withLock { $0 }
        task?.cancel()
        await task?.value
    }

    /// The long-poll chain: each call acknowledges the position reached and waits for what follows.
    /// When it ends (cancelled, or a call failed), a flow waiting on it, or waiting later, gets why.
    private func observe(after start: UInt64) async {
        var acknowledged = start
        var failure: any Error = CancellationError()
        while !Task.isCancelled {
            let events: [(seq: UInt64, arrivals: [Arrival])]
            do {
                events = try await observeCall(after: acknowledged)
            } catch {
                failure = error
                break
            }
            var heard: [Arrival] = []
            for event in events {
                heard += event.arrivals
                acknowledged = event.seq
            }
            let resumed = inbox.withLock { inbox -> CheckedContinuation<Void, any Error>? in
                inbox.heard.formUnion(heard)
                guard let waiting = inbox.waiting, inbox.heard.remove(waiting.arrival) != nil else { return nil }
                inbox.waiting = nil
                return waiting.continuation
            }
            resumed?.resume()
        }
        let waiting = inbox.withLock { inbox in
            inbox.ended = failure
            defer { inbox.waiting = nil }
            return inbox.waiting
        }
        waiting?.continuation.resume(throwing: failure)
    }

    /// Returns once the observer has heard `arrival` (at once if it already has).
    private func wait(for arrival: Arrival) async throws {
        guard observer.withLock({ $0 != nil }) else { return try await observe(until: arrival) }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome = inbox.withLock { inbox -> Result<Bool, any Error> in
                if inbox.heard.remove(arrival) != nil { return .success(true) }
                if let ended = inbox.ended { return .failure(ended) }
                inbox.waiting = (arrival, continuation)
                return .success(false)
            }
            switch outcome {
            case .success(true): continuation.resume()
            case .success(false): break
            case .failure(let error): continuation.resume(throwing: error)
            }
        }
    }

    /// Fetch, add, purchased callback, finish, removed callback.
    func purchaseFlow() async throws {
        let products = try await timed(0) {
            try await call(Storebus_Catalog_V1_Catalog.fetchProducts, body: fetchBody, options: options)
        }
        try FlowAnswers.checkListed(product, in: products)
        var addOptions = options
        // Unique per payment of this device's account in this run's fresh database. (Foundation's
        // UUID() opens, reads and closes /dev/urandom each time: three system calls a flow in the
        // process that shares the two cores with the services it measures.)
        addOptions.idempotencyKey = "flow-\(flowsStarted.add(1, ordering: .relaxed).newValue)"
        let added = try await timed(1) {
            try await call(Storebus_PaymentQueue_V1_PaymentQueue.addPayment, body: addBody, options: addOptions)
        }
        let id = try FlowAnswers.transactionIdentifier(added)
        try await timed(2) { try await wait(for: Arrival(kind: .purchased, transaction: id)) }
        // The identifier was read as a plain string (no escapes, no quotes): it goes in as it is.
        let finish = finishBody.with(id.utf8)
        _ = try await timed(3) {
            try await call(Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction, body: finish, options: options)
        }
        try await timed(4) { try await wait(for: Arrival(kind: .removed, transaction: id)) }
    }

    /// Without a parked call: Observe calls after the position reached until one brings `arrival`.
    private func observe(until arrival: Arrival) async throws {
        while true {
            let after = position.withLock { $0 }
            var found = false
            for event in try await observeCall(after: after) {
                found = found || event.arrivals.contains(arrival)
                position.withLock { $0 = event.seq }
            }
            if found { return }
        }
    }
}

/// A request body encoded once, with one value's place in it left open: the bytes before and after
/// a sentinel value, which occurs in the encoding exactly once.
struct BodyTemplate: Sendable {
    let prefix: [UInt8]
    let suffix: [UInt8]

    init(_ encoded: [UInt8], around sentinel: String) throws {
        let needle = Array(sentinel.utf8)
        let starts = encoded.indices.filter { encoded[$0...].starts(with: needle) }
        guard starts.count == 1, let start = starts.first else {
            throw FlowAnswers.Unexpected(description: "the sentinel \(sentinel) is not in the encoded request once: \(String(decoding: encoded, as: UTF8.self))")
        }
        prefix = Array(encoded[..<start])
        suffix = Array(encoded[(start + needle.count)...])
    }

    /// The body with `value`'s bytes in the sentinel's place.
    func with(_ value: some Collection<UInt8>) -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(prefix.count + value.count + suffix.count)
        body += prefix
        body += value
        body += suffix
        return body
    }
}

/// The members of the gateway's answers that a flow checks, read with ``JSONScanner`` from their
/// proto3 JSON. An answer without them, or not well-formed, ends the run with an error naming it.
enum FlowAnswers {
    struct Unexpected: Error, CustomStringConvertible {
        let description: String
    }

    /// Throws unless the FetchProductsResponse `json` lists `product` first.
    static func checkListed(_ product: String, in json: [UInt8]) throws {
        guard let products = JSONScanner.member("products", of: json, in: json.indices),
            let first = JSONScanner.elements(of: json, in: products)?.first,
            let identifier = JSONScanner.member("productIdentifier", of: json, in: first),
            JSONScanner.plainString(json, identifier) == Array(product.utf8)
        else { throw unexpected("FetchProducts", json) }
    }

    /// The identifier of the transaction in the AddPaymentResponse `json`.
    static func transactionIdentifier(_ json: [UInt8]) throws -> String {
        // The answer's members and the transaction's in one pass.
        guard let fields = JSONScanner.members(of: json, in: json.indices, andOf: "transaction")?.nested,
            let id = identifier(json, fields)
        else { throw unexpected("AddPayment", json) }
        return id
    }

    /// The events of the ObserveResponse `json`: each one's seq and the callbacks flows wait for in
    /// it (transactions updated to PURCHASED, transactions removed).
    static func observed(_ json: [UInt8]) throws -> [(seq: UInt64, arrivals: [Device.Arrival])] {
        // Only the members read are picked out of each object, the whole text checked all the same
        // (no String is made of any other member's name: a fifth of the bench's instructions did).
        // An answer without events leaves the member out (proto3 JSON omits empty repeated fields).
        guard let response = JSONScanner.values(of: json, in: json.indices, named: Names.response) else { throw unexpected("Observe", json) }
        guard let events = response[0] else { return [] }
        guard let elements = JSONScanner.objectValues(of: json, in: events, named: Names.event) else { throw unexpected("Observe", json) }
        return try elements.map { members in
            guard let seq = members[0].flatMap({ JSONScanner.unsigned(json, $0) }) else { throw unexpected("Observe", json) }
            var arrivals: [Device.Arrival] = []
            for (slot, removed) in [(1, false), (2, true)] {
                guard let callback = members[slot] else { continue }
                // A callback with no transactions (none here) omits the member, as above.
                guard let list = JSONScanner.values(of: json, in: callback, named: Names.callback) else { throw unexpected("Observe", json) }
                guard let transactions = list[0] else { continue }
                guard let items = JSONScanner.objectValues(of: json, in: transactions, named: Names.transaction) else { throw unexpected("Observe", json) }
                for fields in items {
                    guard let id = fields[0].flatMap({ JSONScanner.plainString(json, $0) }) else { throw unexpected("Observe", json) }
                    if removed {
                        arrivals.append(.init(kind: .removed, transaction: String(decoding: id, as: UTF8.self)))
                    } else if let state = fields[1], JSONScanner.plainString(json, state) == Names.purchased {
                        arrivals.append(.init(kind: .purchased, transaction: String(decoding: id, as: UTF8.self)))
                    }
                }
            }
            return (seq, arrivals)
        }
    }

    /// The member names `observed` picks, and the state it looks for.
    private enum Names {
        static let response = [Array("events".utf8)]
        static let event = ["seq", "updatedTransactions", "removedTransactions"].map { Array($0.utf8) }
        static let callback = [Array("transactions".utf8)]
        static let transaction = ["transactionIdentifier", "transactionState"].map { Array($0.utf8) }
        static let purchased = Array("TRANSACTION_STATE_PURCHASED".utf8)
    }

    /// The transactionIdentifier among the members of a PaymentTransaction object.
    private static func identifier(_ json: [UInt8], _ fields: [(name: String, value: Range<Int>)]) -> String? {
        guard let value = fields.first(where: { $0.name == "transactionIdentifier" }),
            let bytes = JSONScanner.plainString(json, value.value)
        else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func unexpected(_ call: String, _ json: [UInt8]) -> Unexpected {
        Unexpected(description: "the gateway's \(call) answer lacks what the flow checks: \(String(decoding: json.prefix(300), as: UTF8.self))")
    }
}
