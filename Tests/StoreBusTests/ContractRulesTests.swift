import Foundation
import Logging
import StoreBus
import StoreBusServer
import StoreSchema
import Synchronization
import Testing

/// The per-call policy the contract declares (proto-schemas/storebus/options/v1/options.proto's
/// `rules`), as protoc-gen-storebus writes it and the router's interceptors run it.
@Suite("Contract rules and interceptors")
struct ContractRulesTests {
    static let principal = Principal(app: "com.example.app", account: "alice", device: "phone")

    static func context(_ metadata: Metadata = Metadata()) -> ServerContext {
        ServerContext(method: "/test/Method", requestID: "1", deadline: nil, metadata: metadata, logger: Logger(label: "test"))
    }

    static func intercepted<Request: ContractChecked>(_ request: Request, metadata: Metadata = Metadata()) throws(RPCError) -> Request {
        var request = request
        for interceptor in StandardInterceptors.all {
            try interceptor.intercept(&request, method: Storebus_PaymentQueue_V1_PaymentQueue.addPayment.erased, context: context(metadata))
        }
        return request
    }

    static var principalMetadata: Metadata {
        var metadata = Metadata()
        principal.apply(to: &metadata)
        return metadata
    }

    @Test("a call with a principal acts on its own queue when it names none")
    func fillsTheQueue() throws {
        // Given an AddPayment naming no queue, through the gateway
        let request = Storebus_PaymentQueue_V1_AddPaymentRequest.with { $0.payment.productIdentifier = "coins" }
        // When the interceptors run
        let filled = try Self.intercepted(request, metadata: Self.principalMetadata)
        // Then the queue is the session's
        #expect(filled.queue.appBundleID == "com.example.app")
        #expect(filled.queue.accountID == "alice")
        #expect(filled.queue.deviceID == "phone")
    }

    @Test(
        "another app, account or device is PERMISSION_DENIED with its reason, before any field rule",
        arguments: [
            ("com.other.app", "alice", "phone", "OTHER_APP"),
            ("com.example.app", "bob", "phone", "OTHER_ACCOUNT"),
            ("com.example.app", "alice", "tablet", "OTHER_DEVICE")
        ])
    func refusesOthers(app: String, account: String, device: String, reason: String) throws {
        // A product identifier too long as well: the principal's refusal comes first.
        let request = Storebus_PaymentQueue_V1_AddPaymentRequest.with {
            $0.queue = .with {
                $0.appBundleID = app; $0.accountID = account; $0.deviceID = device
            }
            $0.payment.productIdentifier = String(repeating: "x", count: 300)
        }
        #expect {
            _ = try Self.intercepted(request, metadata: Self.principalMetadata)
        } throws: { error in
            let error = error as! RPCError
            return error.code == .permissionDenied && error.details.info.reason == reason
        }
    }

    @Test("a call without a principal is not filled: an empty queue breaks the name rule")
    func noPrincipal() throws {
        let request = Storebus_PaymentQueue_V1_FinishTransactionRequest.with { $0.transactionIdentifier = "1" }
        #expect { _ = try Self.intercepted(request) } throws: { error in
            let error = error as! RPCError
            return error.code == .invalidArgument && error.details.fieldViolations.first?.field == "queue.appBundleId"
        }
    }

    static let queue = Storebus_PaymentQueue_V1_QueueRef.with {
        $0.appBundleID = "a"; $0.accountID = "b"; $0.deviceID = "c"
    }

    static func update(_ change: (inout Storebus_PaymentQueue_V1_DownloadUpdate) -> Void = { _ in }) -> Storebus_PaymentQueue_V1_DownloadUpdate {
        var update = Storebus_PaymentQueue_V1_DownloadUpdate.with {
            $0.transactionIdentifier = "7"
            $0.contentIdentifier = "level-1"
            $0.action = .start
        }
        change(&update)
        return update
    }

    static let violations: [(String, Storebus_PaymentQueue_V1_UpdateDownloadsRequest, String, String)] = [
        ("no update", .with { $0.queue = queue }, "updates", "must be 1 to 100 items"),
        (
            "101 updates",
            .with {
                $0.queue = queue; $0.updates = Array(repeating: update(), count: 101)
            }, "updates", "must be 1 to 100 items"
        ),
        (
            "empty id",
            .with {
                $0.queue = queue; $0.updates = [update(), update { $0.transactionIdentifier = "" }]
            }, "updates[1].transactionIdentifier", "must be 1 to 64 bytes"
        ),
        (
            "id of 65 bytes",
            .with {
                $0.queue = queue; $0.updates = [update { $0.transactionIdentifier = String(repeating: "9", count: 65) }]
            }, "updates[0].transactionIdentifier", "must be 1 to 64 bytes"
        ),
        // 128 two-byte characters: 256 bytes, though 128 characters.
        (
            "content id of 256 bytes",
            .with {
                $0.queue = queue; $0.updates = [update { $0.contentIdentifier = String(repeating: "é", count: 128) }]
            }, "updates[0].contentIdentifier", "must be 1 to 255 bytes"
        ),
        (
            "no action",
            .with {
                $0.queue = queue; $0.updates = [update { $0.action = .unspecified }]
            }, "updates[0].action", "must be one of"
        ),
        (
            "unknown action",
            .with {
                $0.queue = queue; $0.updates = [update { $0.action = .UNRECOGNIZED(99) }]
            }, "updates[0].action", "must be one of"
        ),
        (
            "long URL",
            .with {
                $0.queue = queue; $0.updates = [update { $0.contentURL = String(repeating: "u", count: 2049) }]
            }, "updates[0].contentUrl", "must be at most 2048 bytes"
        ),
        (
            "queue name with |",
            .with {
                $0.queue = .with {
                    $0.appBundleID = "a|b"; $0.accountID = "b"; $0.deviceID = "c"
                }; $0.updates = [update()]
            }, "queue.appBundleId", "must not contain"
        )
    ]

    @Test("each broken rule is INVALID_ARGUMENT naming the field as JSON does, nested and indexed", arguments: violations)
    func fieldRules(_ name: String, _ request: Storebus_PaymentQueue_V1_UpdateDownloadsRequest, _ field: String, _ sentence: String) throws {
        #expect { _ = try Self.intercepted(request) } throws: { error in
            let error = error as! RPCError
            let violation = error.details.fieldViolations.first
            return error.code == .invalidArgument && violation?.field == field && violation?.description_p.hasPrefix(sentence) == true
        }
    }

    @Test("a request within every rule passes unchanged")
    func withinRules() throws {
        let request = Storebus_PaymentQueue_V1_UpdateDownloadsRequest.with {
            $0.queue = Self.queue
            $0.updates = Array(repeating: Self.update { $0.contentIdentifier = String(repeating: "é", count: 127) }, count: 100)
        }
        #expect(try Self.intercepted(request) == request)
        let policy = Storebus_PaymentQueue_V1_SetPaymentPolicyRequest.with {
            $0.appBundleID = "a"; $0.policy.mode = .approve; $0.policy.delayMs = 600_000
        }
        #expect(try Self.intercepted(policy) == policy)
        var slower = policy
        slower.policy.delayMs = 600_001
        #expect(throws: RPCError.self) { try Self.intercepted(slower) }
    }

    @Test("the idempotency key: the metadata fills the field; both and different, or too long, are refused")
    func idempotencyKey() throws {
        let base = Storebus_PaymentQueue_V1_AddPaymentRequest.with {
            $0.queue = Self.queue; $0.payment.productIdentifier = "coins"
        }
        let filled = try Self.intercepted(base, metadata: [WireProtocol.idempotencyKeyMetadata: "k1"])
        #expect(filled.idempotencyKey == "k1")
        var own = base
        own.idempotencyKey = "k1"
        #expect(try Self.intercepted(own, metadata: [WireProtocol.idempotencyKeyMetadata: "k1"]).idempotencyKey == "k1")
        #expect { _ = try Self.intercepted(own, metadata: [WireProtocol.idempotencyKeyMetadata: "k2"]) } throws: { error in
            (error as! RPCError).details.fieldViolations.first?.field == "idempotencyKey"
        }
        #expect { _ = try Self.intercepted(base, metadata: [WireProtocol.idempotencyKeyMetadata: String(repeating: "k", count: 129)]) } throws: { error in
            (error as! RPCError).details.fieldViolations.first?.field == "idempotency-key"
        }
        // A request without such a field ignores the metadata.
        let finish = Storebus_PaymentQueue_V1_FinishTransactionRequest.with {
            $0.queue = Self.queue; $0.transactionIdentifier = "1"
        }
        #expect(try Self.intercepted(finish, metadata: [WireProtocol.idempotencyKeyMetadata: "k1"]) == finish)
    }

    /// An in-memory journal: the generated protocol, served by a router and called with the
    /// generated client.
    struct MemoryJournal: Storebus_Testkit_V1_Journal.Handlers {
        let counts = CountBox()

        final class CountBox: Sendable {
            let value = Mutex(0)
        }

        func append(_ request: Storebus_Testkit_V1_AppendRequest, context: ServerContext) async throws -> Storebus_Testkit_V1_AppendResponse {
            let seq = counts.value.withLock {
                $0 += 1; return $0
            }
            return .with { $0.seq = UInt64(seq) }
        }

        func countEntries(_ request: Storebus_Testkit_V1_CountEntriesRequest, context: ServerContext) async throws -> Storebus_Testkit_V1_CountEntriesResponse {
            .with { $0.count = UInt64(counts.value.withLock { $0 }) }
        }
    }

    @Test("generated handlers served by a router answer the generated client; a broken rule never reaches them")
    func generatedHandlersAndClient() async throws {
        var router = RPCRouter()
        let journal = MemoryJournal()
        router.register(journal)
        let server = try TestServer(extra: router)
        let rpc = try RPCClient(configuration: ClientConfiguration(endpoints: [server.endpoint]))
        let client = Storebus_Testkit_V1_Journal.Client(rpc)
        let first = try? await client.append(
            .with {
                $0.key = "k"; $0.text = "one"
            })
        #expect(first?.seq == 1)
        var refused: RPCError?
        do {
            _ = try await client.append(
                .with {
                    $0.key = ""; $0.text = "two"
                })
        } catch {
            refused = error
        }
        #expect(refused?.code == .invalidArgument && refused?.details.fieldViolations.first?.field == "key")
        let count = try? await client.countEntries(.init())
        #expect(count?.count == 1)
        await rpc.shutdown()
        await server.stop()
    }
}
