import Logging
import StoreSchema
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// A response before decoding: status code and proto3 JSON body.
public struct RawResponse: Sendable {
    /// The status code.
    public var code: StatusCode
    /// The response message on OK; an ErrorStatus otherwise.
    public var body: [UInt8]
    /// The frame after the body, when the answer has one (see ``InboundResponse/attachment``).
    public var attachment: HeldFrame?

    /// An answer with `code`, `body` and perhaps an attachment.
    public init(code: StatusCode, body: [UInt8], attachment: HeldFrame? = nil) {
        self.code = code
        self.body = body
        self.attachment = attachment
    }

    /// The error this response stands for, nil on OK.
    public var error: RPCError? {
        guard code != .ok else { return nil }
        if let status = try? JSONCodec.decode(Storebus_Common_V1_ErrorStatus.self, from: body) {
            var error = RPCError(status: status)
            error.code = code
            return error
        }
        return RPCError(code, "the server answered \(code.name) with an unreadable error body")
    }
}

/// A StoreBus RPC client: one DEALER per service instance on a reactor thread, many calls in flight.
///
/// Calls are matched to answers by request id. A call waits for a connected instance (never queuing
/// on one that is not connected) until its deadline; at the deadline it fails with DEADLINE_EXCEEDED
/// and the server is told to drop the work. Task cancellation does the same with CANCELLED. When an
/// instance disconnects or answers UNAVAILABLE, idempotent calls and calls with an idempotency key
/// are sent again elsewhere; others fail with UNAVAILABLE, since they may or may not have run.
public final class RPCClient: Sendable {
    /// The configuration in force.
    public let configuration: ClientConfiguration
    /// An executor on the client's own loop thread. A task that mostly makes calls (a load generator,
    /// a forwarder) can prefer it, `Task(executorPreference: client.executor)`: its requests are then
    /// sent and its answers taken without a thread hop either way. Such a task must not block or run
    /// long stretches of CPU work, since every call of this client waits while it runs.
    public let executor: any TaskExecutor

    private let reactor: Reactor
    /// Whether the reactor is the client's own (stopped by ``shutdown()``) or shared.
    private let ownsReactor: Bool
    private let loop: LoopBound<ClientLoop>
    private let nextID = Atomic<UInt64>(1)
    /// The context made by the client itself (terminated on shutdown), if no context was given.
    private let ownedContext: ZeroMQ.Context?
    private let contextTerminated = Atomic<Bool>(false)

    /// Creates a client on a loop thread of its own and starts connecting. With no `context`, the
    /// client makes its own and terminates it in ``shutdown()``.
    public convenience init(configuration: ClientConfiguration, context: ZeroMQ.Context? = nil, logger: Logger = Logger(label: "storebus.rpc.client")) throws {
        let ownedContext = context == nil ? try ZeroMQ.Context() : nil
        let reactor = Reactor(name: "sb-rpc-client", context: context ?? ownedContext!)
        try self.init(configuration: configuration, reactor: reactor, owned: true, ownedContext: ownedContext, logger: logger)
        reactor.start()
    }

    /// Creates a client whose sockets live on `reactor`, which another component owns and starts
    /// (a service host's, see ``ServiceHost/reactor``). A process that forwards calls (the gateway)
    /// or calls from its handlers then sends and receives on the thread its handlers run on: a call
    /// costs no thread hop either way. ``shutdown()`` closes the client's sockets and leaves the
    /// reactor running; when the reactor stops first, the client closes with it. A client on a
    /// reactor that is never started holds its sockets until the process ends. Throws
    /// ``StartupError`` when the reactor has already stopped.
    public convenience init(configuration: ClientConfiguration, reactor: Reactor, logger: Logger = Logger(label: "storebus.rpc.client")) throws {
        try self.init(configuration: configuration, reactor: reactor, owned: false, ownedContext: nil, logger: logger)
    }

    private init(configuration: ClientConfiguration, reactor: Reactor, owned: Bool, ownedContext: ZeroMQ.Context?, logger: Logger) throws {
        precondition(!configuration.endpoints.isEmpty, "an RPC client needs at least one endpoint")
        self.configuration = configuration
        self.ownedContext = ownedContext
        self.reactor = reactor
        ownsReactor = owned
        executor = ReactorExecutor(reactor: reactor)
        let state = try ClientLoop(configuration: configuration, reactor: reactor, shared: !owned, logger: logger)
        loop = LoopBound(state, on: reactor)
        guard reactor.execute({ [loop] in loop.value.attach() }) else {
            // No loop will ever own these sockets: close them here, where nothing else has them.
            state.closeUnattached()
            throw StartupError("cannot create an RPC client for \(configuration.endpoints.joined(separator: ", ")): its reactor has stopped")
        }
    }

    /// Calls a unary method and decodes its answer; throws ``RPCError`` for every failure.
    public func call<Request, Response>(
        _ method: MethodDescriptor<Request, Response>,
        _ request: Request,
        options: CallOptions = CallOptions()
    ) async throws(RPCError) -> Response {
        let body = try JSONCodec.encode(request)
        let response = try await callRaw(path: method.path, idempotent: method.idempotent, body: body, options: options)
        if let error = response.error { throw error }
        return try JSONCodec.decode(Response.self, from: response.body)
    }

    /// INVALID_ARGUMENT, before anything is sent, for a header a server would refuse as malformed:
    /// its answer would carry no request id (the header cannot be trusted to have named one), so the
    /// call would only end at its deadline, as if it might have run. Metadata keys must be valid, values
    /// hold no line break, and the header stay within ``WireProtocol/maxHeaderBytes``.
    static func checkHeader(path: String, metadata: Metadata) throws(RPCError) {
        var bytes = 64 + path.utf8.count // tag, request id, timeout and line breaks: at most 64
        for entry in metadata.entries {
            let (key, value) = (entry.key, entry.value)
            guard Metadata.isValidKey(key) else {
                throw RPCError.invalidArgument(field: "metadata", "\(path): \"\(key.prefix(64))\" is not a valid metadata key")
            }
            guard !Metadata.holdsLineBreak(value) else {
                throw RPCError.invalidArgument(field: "metadata", "\(path): the value of \(key) holds a line break")
            }
            bytes += key.utf8.count + value.utf8.count + 3
        }
        guard bytes <= WireProtocol.maxHeaderBytes else {
            throw RPCError.invalidArgument(field: "metadata", "\(path): the request's header would take about \(bytes) bytes, more than the \(WireProtocol.maxHeaderBytes) a server reads")
        }
    }

    /// Calls a method with an encoded body and returns the encoded answer, whatever its status.
    /// Throws only for failures of the call itself (deadline, cancellation, no server).
    public func callRaw(path: String, idempotent: Bool, body: [UInt8], options: CallOptions = CallOptions()) async throws(RPCError) -> RawResponse {
        // The server's MAXMSGSIZE would drop the connection, and every other call in flight on it.
        guard Int64(body.count) <= configuration.maxMessageBytes else {
            throw RPCError(.resourceExhausted, "\(path): the request (\(body.count) bytes) is larger than the message limit (\(configuration.maxMessageBytes) bytes)")
        }
        try Self.checkHeader(path: path, metadata: options.metadata)
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        // At most a day, as servers read it (`.seconds(.max)`, "no timeout", overflowed the arithmetic).
        let timeout = min(options.timeout ?? configuration.defaultTimeout, .milliseconds(Int64(WireProtocol.maxTimeoutMilliseconds)))
        let deadline = ContinuousClock.now + timeout
        let call = PendingCall(
            id: id, path: path, metadata: options.metadata, body: body,
            deadline: deadline, retryable: idempotent || options.idempotencyKey != nil
        )
        let result: Result<RawResponse, RPCError> = await withTaskCancellationHandler {
            // Unsafe rather than checked: a checked continuation allocates per call, and PendingCall.finish
            // already guarantees exactly one resume (it clears the continuation as it resumes).
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Result<RawResponse, RPCError>, Never>) in
                call.continuation = continuation
                let accepted = reactor.execute { [loop, call] in loop.value.start(call) }
                if !accepted {
                    call.finish(.failure(RPCError(.cancelled, "\(path): the client was shut down")))
                }
            }
        } onCancel: {
            // The flag covers a cancellation that runs before the start job reaches the loop.
            call.cancelRequested.store(true, ordering: .releasing)
            reactor.execute { [loop] in loop.value.cancel(id) }
        }
        return try result.get()
    }

    /// Fails every pending call with CANCELLED, closes the sockets and stops the reactor (a shared
    /// reactor keeps running).
    public func shutdown() async {
        guard ownsReactor else {
            _ = await reactor.perform { [loop] in loop.value.close() }
            return
        }
        reactor.stop()
        await reactor.join()
        // Only the first shutdown terminates the context.
        if let ownedContext, !contextTerminated.exchange(true, ordering: .acquiringAndReleasing) {
            ownedContext.shutdown()
            ownedContext.terminate()
        }
    }
}

/// Runs `body` with a client for `endpoints`, shut down on every path out.
public func withRPCClient<Result>(
    endpoints: [String],
    context: ZeroMQ.Context? = nil,
    configure: (inout ClientConfiguration) -> Void = { _ in },
    _ body: (RPCClient) async throws -> Result
) async throws -> Result {
    var configuration = ClientConfiguration(endpoints: endpoints)
    configure(&configuration)
    let client = try RPCClient(configuration: configuration, context: context)
    do {
        let result = try await body(client)
        await client.shutdown()
        return result
    } catch {
        await client.shutdown()
        throw error
    }
}

/// A call between ``RPCClient/callRaw(path:idempotent:body:options:)`` and its answer.
final class PendingCall: @unchecked Sendable {
    // Invariant for @unchecked Sendable: built by the calling task, which sets `continuation` before
    // handing the call to the reactor in a job; from then on every var is touched only on the loop.
    let id: UInt64
    let path: String
    let metadata: Metadata
    let body: [UInt8]
    let deadline: ContinuousClock.Instant
    let retryable: Bool
    var continuation: UnsafeContinuation<Result<RawResponse, RPCError>, Never>?
    /// Set by the caller's cancellation handler, from any thread.
    let cancelRequested = Atomic<Bool>(false)
    var attempts = 0
    var endpoint: Int?

    init(id: UInt64, path: String, metadata: Metadata, body: [UInt8], deadline: ContinuousClock.Instant, retryable: Bool) {
        self.id = id
        self.path = path
        self.metadata = metadata
        self.body = body
        self.deadline = deadline
        self.retryable = retryable
    }

    /// The request's frames for an attempt starting now: the timeout is what is left of the deadline,
    /// so a retried call never lets a server work past the caller's deadline.
    func frames(now: ContinuousClock.Instant) -> [[UInt8]] {
        Frames.request(
            requestID: Frames.decimal(id), method: path,
            timeoutMilliseconds: max(1, now.duration(to: deadline).wireMilliseconds),
            metadata: metadata, body: body
        )
    }

    func finish(_ result: Result<RawResponse, RPCError>) {
        continuation?.resume(returning: result)
        continuation = nil
    }
}
