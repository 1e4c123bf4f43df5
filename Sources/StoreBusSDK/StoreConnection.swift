import Foundation
import Logging
import StoreBus
import StoreSchema
import Synchronization

/// Where a client finds StoreBus and who it is.
public struct StoreConfiguration: Sendable {
    /// The gateways' RPC endpoints, such as `tcp://127.0.0.1:7300`. Calls go to a connected one; when
    /// one goes away the client continues on another, or on the same one once it is back.
    public var gatewayEndpoints: [String]
    /// The gateways' CURVE public key (40 characters of Z85, from the `gateway.pub` file of the
    /// deployment): the connection is then encrypted and the gateway proven to hold the matching
    /// secret key. nil: plain TCP (a gateway that serves plain TCP, on a trusted network).
    public var gatewayPublicKey: String?
    /// The app's API key, as configured in the gateways.
    public var apiKey: String
    /// The app's bundle identifier.
    public var appBundleID: String
    /// The App Store account.
    public var accountID: String
    /// This device.
    public var deviceID: String
    /// Timeout of each call. Default 10 s.
    public var callTimeout: Duration = .seconds(10)
    /// Callbacks the gateway may send per answer, 1 to 500. Default 64.
    public var observerCredit: UInt32 = 64
    /// How long the gateway holds an observer call when nothing happens, up to 30 s. Default 20 s.
    /// Under 100 ms the queue polls instead, backing off while nothing comes.
    public var observerHold: Duration = .seconds(20)
    /// First pause before the observing loop, or a payment, finish or restore whose outcome is
    /// unknown, tries again after a failure (at least 10 ms); it doubles up to 2 s. The sockets'
    /// own reconnection is the RPC client's.
    public var reconnectDelay: Duration = .milliseconds(100)
    /// Where refreshed app receipts are kept (see ``appStoreReceiptURL``). Default
    /// `storebus-receipts` in the temporary directory.
    public var receiptDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("storebus-receipts")
    /// Where downloaded content goes (the app's caches directory): a partial file and its record
    /// while a download runs, then a folder holding `Contents/`, named by transaction and content.
    /// Default `storebus-downloads` in the temporary directory: give queues of different stores
    /// (which may number their transactions alike) folders of their own.
    public var downloadDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("storebus-downloads")
    /// Bytes asked for by each chunk read of a download (4 KiB to 1 MiB). Default 256 KiB.
    public var downloadChunkBytes = 256 * 1024
    /// Chunk reads a download keeps in flight (its credit). Default 4.
    public var downloadWindow = 4
    /// How long a download may go without a chunk arriving (the store out of reach) before it fails
    /// with cloudServiceNetworkConnectionFailed; it may be resumed later. Default 60 s.
    public var downloadStallTimeout: Duration = .seconds(60)

    /// A configuration.
    public init(gatewayEndpoints: [String], apiKey: String, appBundleID: String, accountID: String, deviceID: String) {
        self.gatewayEndpoints = gatewayEndpoints
        self.apiKey = apiKey
        self.appBundleID = appBundleID
        self.accountID = accountID
        self.deviceID = deviceID
    }

    /// The credit actually asked for: 1 to 500 (the gateway's limit).
    var boundedObserverCredit: UInt32 { min(max(observerCredit, 1), 500) }

    /// The hold actually asked for, in milliseconds: 0 to 30,000 (the gateway's limit).
    var observerHoldMilliseconds: UInt32 {
        let (seconds, attoseconds) = observerHold.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return UInt32(min(max(milliseconds, 0), 30_000))
    }

    /// The queue this configuration names.
    var queue: Storebus_PaymentQueue_V1_QueueRef {
        .with {
            $0.appBundleID = appBundleID
            $0.accountID = accountID
            $0.deviceID = deviceID
        }
    }
}

/// An error from StoreBus, with the status code and the sentence the service gave.
public struct StoreError: Error, Sendable, CustomStringConvertible, Equatable {
    /// gRPC status code name, such as `PERMISSION_DENIED`.
    public var code: String
    /// What went wrong.
    public var message: String
    /// The underlying status.
    public var status: StatusCode
    /// A stable machine-readable reason in `UPPER_SNAKE_CASE` when the server gave one, such as
    /// `INVALID_API_KEY`, `OTHER_ACCOUNT` or `ADMIN_REQUIRED` (see proto-schemas/README.md); empty
    /// otherwise. Branch on `status` and `reason`, never on `message`.
    public var reason: String
    /// The domain of `reason`, such as `storebus.gateway`; empty when there is no reason.
    public var domain: String

    init(_ error: RPCError) {
        code = error.code.name
        message = error.message
        status = error.code
        reason = error.details.info.reason
        domain = error.details.info.domain
    }

    /// Whether waiting and trying again may help (no gateway reachable, a deadline, a restart).
    /// UNAUTHENTICATED is not: ``StoreConnection/call(_:_:timeout:idempotencyKey:)`` has already
    /// opened a new session once, so the API key itself is refused, which the app must hear about.
    var isTransient: Bool {
        [.unavailable, .deadlineExceeded, .cancelled, .resourceExhausted, .outOfRange].contains(status)
    }

    /// The message, followed by the status code's name.
    public var description: String { "\(message) (\(code))" }
}

extension StoreConfiguration {
    /// The public key in a StoreBus key file (a deployment's `gateway.pub`; `make run` writes
    /// `data/keys/gateway.pub`), for ``gatewayPublicKey``.
    public static func publicKey(inFile path: String) throws -> String {
        do { return try CurveKeyFile.readPublicKey(at: path) } catch {
            throw StoreError(RPCError.invalidArgument(field: "gatewayPublicKey", "\(error)"))
        }
    }
}

/// Where a ``StoreConnection``'s calls go: the gateways, over ZeroMQ (an `RPCClient`, what
/// ``StoreConnection/init(configuration:logger:)`` makes), or a store in memory (StoreBusSDKTesting's
/// `InMemoryStore`, for an app's unit tests).
public protocol StoreTransport: Sendable {
    /// Sends a call, its body proto3 JSON, and returns the answer whatever its status; throws only
    /// for failures of the call itself (deadline, cancellation, nothing to send to).
    func callRaw(path: String, idempotent: Bool, body: [UInt8], options: CallOptions) async throws(RPCError) -> RawResponse
    /// Ends the transport; later calls fail.
    func shutdown() async
}

extension RPCClient: StoreTransport {}

/// An authenticated link to the gateways: one RPC client and a session that is opened on first use
/// and opened again when it expires.
public final class StoreConnection: Sendable {
    /// The configuration.
    public let configuration: StoreConfiguration
    let client: any StoreTransport
    private let session = Mutex<String?>(nil)
    private let closed = Atomic<Bool>(false)
    private let logger: Logger

    /// Connects to the gateways (the session opens with the first call).
    public init(configuration: StoreConfiguration, logger: Logger = Logger(label: "storebus.sdk")) throws {
        self.configuration = configuration
        self.logger = logger
        guard !configuration.gatewayEndpoints.isEmpty else {
            throw StoreError(RPCError.invalidArgument(field: "gatewayEndpoints", "name at least one gateway endpoint"))
        }
        var clientConfiguration = ClientConfiguration(endpoints: configuration.gatewayEndpoints)
        clientConfiguration.defaultTimeout = configuration.callTimeout
        if let key = configuration.gatewayPublicKey {
            guard CurveKeyFile.isZ85Key(key) else {
                throw StoreError(RPCError.invalidArgument(field: "gatewayPublicKey", "a CURVE public key is 40 characters of Z85"))
            }
            clientConfiguration.serverPublicKey = key
        }
        do {
            client = try RPCClient(configuration: clientConfiguration, logger: logger)
        } catch let error as RPCError {
            throw StoreError(error)
        } catch {
            throw StoreError(RPCError(.invalidArgument, "cannot use the gateway endpoints \(configuration.gatewayEndpoints.joined(separator: ", ")): \(error)"))
        }
    }

    /// A connection whose calls go to `transport` instead of the gateways (a store in memory);
    /// `configuration` names the device, its gateway endpoints are not used.
    public init(configuration: StoreConfiguration, transport: any StoreTransport, logger: Logger = Logger(label: "storebus.sdk")) {
        self.configuration = configuration
        self.logger = logger
        client = transport
    }

    /// A call of `method` through the transport, its answer decoded.
    private func send<Request, Response>(_ method: MethodDescriptor<Request, Response>, _ request: Request, options: CallOptions) async throws(RPCError) -> Response {
        let body = try JSONCodec.encode(request)
        let response = try await client.callRaw(path: method.path, idempotent: method.idempotent, body: body, options: options)
        if let error = response.error { throw error }
        return try JSONCodec.decode(Response.self, from: response.body)
    }

    /// A session the gateway opened: what it allows and until when.
    public struct Session: Sendable, Equatable {
        /// When the session ends (the connection then opens another by itself).
        public var expiresAt: Date
        /// The method paths the session may call, such as `/storebus.catalog.v1.Catalog/FetchProducts`.
        public var allowedMethods: [String]
        /// Whether the key is an admin key (admin methods allowed).
        public var isAdmin: Bool
    }

    /// Opens a session now (otherwise the first call does); throws UNAUTHENTICATED for a wrong key.
    @discardableResult
    public func authenticate() async throws -> Session {
        let response = try await openSession()
        return Session(expiresAt: response.expiresAt.date, allowedMethods: response.allowedMethods, isAdmin: response.admin)
    }

    private func openSession() async throws -> Storebus_Gateway_V1_AuthenticateResponse {
        let response: Storebus_Gateway_V1_AuthenticateResponse
        do {
            response = try await send(
                Storebus_Gateway_V1_Gateway.authenticate,
                .with {
                    $0.apiKey = configuration.apiKey
                    $0.appBundleID = configuration.appBundleID
                    $0.accountID = configuration.accountID
                    $0.deviceID = configuration.deviceID
                }, options: CallOptions(timeout: configuration.callTimeout))
        } catch {
            throw StoreError(error)
        }
        session.withLock { $0 = response.sessionID }
        return response
    }

    /// Escape hatch: calls any method of the contract (its generated descriptor and messages, such
    /// as `Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction`) through the gateway in this
    /// connection's session, opening or renewing the session as needed; for what the StoreKit-shaped
    /// types do not cover (admin tools, new methods). Retryable failures (no gateway reachable) are retried by the RPC layer for
    /// idempotent methods, or when `idempotencyKey` is set.
    public func call<Request, Response>(
        _ method: MethodDescriptor<Request, Response>, _ request: Request,
        timeout: Duration? = nil, idempotencyKey: String? = nil
    ) async throws -> Response {
        try await withSession { token in
            var options = CallOptions(timeout: timeout, metadata: [GatewayMetadata.session: token], idempotencyKey: idempotencyKey)
            options.timeout = timeout ?? configuration.callTimeout
            return try await send(method, request, options: options)
        }
    }

    /// Calls `path` with a JSON body and returns the answer's JSON body, as ``call(_:_:timeout:idempotencyKey:)``
    /// does for messages: for bodies the SDK reads itself (downloads' chunks).
    func callRaw(path: String, idempotent: Bool, body: [UInt8]) async throws -> [UInt8] {
        try await callRawReply(path: path, idempotent: idempotent, body: body).body
    }

    /// ``callRaw(path:idempotent:body:)``, with the answer's attachment.
    func callRawReply(path: String, idempotent: Bool, body: [UInt8]) async throws -> RawResponse {
        try await withSession { token in
            let response = try await client.callRaw(
                path: path, idempotent: idempotent, body: body,
                options: CallOptions(timeout: configuration.callTimeout, metadata: [GatewayMetadata.session: token])
            )
            guard response.code == .ok else { throw response.error ?? RPCError(response.code, "\(path) failed") }
            return response
        }
    }

    /// Runs `call` with the session's token, opening a session first when there is none, and once
    /// more with a new one when the gateway refuses the token (expired, or signed by a secret the
    /// gateways no longer share). Errors come out as ``StoreError``.
    private func withSession<T>(_ call: (String) async throws -> T) async throws -> T {
        var renewed = false
        while true {
            let token: String
            if let current = session.withLock({ $0 }) {
                token = current
            } else {
                token = try await openSession().sessionID
                renewed = true
            }
            do {
                return try await call(token)
            } catch let error as RPCError where error.code == .unauthenticated && !renewed {
                logger.debug("Session refused; authenticating again", metadata: ["reason": "\(error.message)"])
                session.withLock { if $0 == token { $0 = nil } }
            } catch let error as RPCError {
                throw StoreError(error)
            }
        }
    }

    /// Closes the connection; later calls fail.
    public func close() async {
        closed.store(true, ordering: .releasing)
        await client.shutdown()
    }

    /// Whether ``close()`` was called.
    public var isClosed: Bool { closed.load(ordering: .acquiring) }

    deinit {
        // Dropped without close(): the client's loop thread keeps itself (and its sockets, and their
        // reconnection attempts) alive until it is shut down. A second shutdown does nothing.
        let client = self.client
        Task { await client.shutdown() }
    }
}

/// Metadata keys of the gateway's client protocol.
public enum GatewayMetadata {
    /// The session token from Authenticate.
    public static let session = "session"
}
