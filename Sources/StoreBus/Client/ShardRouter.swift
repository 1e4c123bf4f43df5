import Logging
import StoreSchema
import Synchronization

/// Sends each account's calls to the instance that owns the account's shard: of the payment queue,
/// or of a follower whose instances split its shards (the download service).
///
/// Several payment-queue instances on PostgreSQL split the log's shards by leases (docs/storage.md):
/// a write for an account succeeds only at the owner of its shard; any other instance answers
/// UNAVAILABLE, reason NOT_OWNER, having written nothing. The router holds a client for each
/// configured instance endpoint and the shard map (PaymentQueueAdmin.GetShardMap), learns which
/// instance answers at which endpoint, and sends a call for an account to the owner of its shard.
/// Answered NOT_OWNER, or finding the owner unreachable (the call was never sent), it asks every
/// instance for the map again and retries at the owner it names, until the call's deadline: through
/// a takeover, until a surviving instance has taken the lapsed lease. Both retries are safe, since
/// neither call ran. Calls that name no account go to any instance; a NOT_OWNER answer names the
/// shard, and the retry goes to its owner.
///
/// With one endpoint (a single instance, SQLite's case) every call goes straight to it.
public final class ShardRouter: Sendable {
    /// The client of every instance: calls with no account, and the map's own calls.
    public let any: RPCClient
    /// One client for each configured endpoint, in the order configured (empty with one endpoint).
    private let instances: [RPCClient]
    private let map = Mutex(Routes())
    private let refreshing = Mutex<Task<Void, Never>?>(nil)
    private let logger: Logger
    /// The method that answers the shard map (each instance answers it for itself).
    private let mapMethod: MethodDescriptor<Storebus_PaymentQueue_V1_GetShardMapRequest, Storebus_PaymentQueue_V1_GetShardMapResponse>

    /// How old the map may grow before a call asks for it again (in the background).
    static let maxAge = Duration.seconds(2)
    /// First pause before a retry, doubled up to ``maxPause``.
    static let firstPause = Duration.milliseconds(25)
    static let maxPause = Duration.milliseconds(400)

    /// Which instance owns each shard, as last heard.
    struct Routes {
        var shardCount: UInt32 = 1
        /// The index in `instances` of each shard's owner; nil for a shard whose owner is unknown or
        /// whose lease has lapsed.
        var owners: [Int?] = []
        var loaded: ContinuousClock.Instant?
    }

    /// A router over `any`'s endpoints, its clients on `reactor` with `any`'s configuration, asking
    /// `map` for the shard map (the payment queue's by default).
    public init(
        any: RPCClient, reactor: Reactor,
        map: MethodDescriptor<Storebus_PaymentQueue_V1_GetShardMapRequest, Storebus_PaymentQueue_V1_GetShardMapResponse> =
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.getShardMap, logger: Logger
    ) throws {
        self.any = any
        self.logger = logger
        mapMethod = map
        let endpoints = any.configuration.endpoints
        instances =
            endpoints.count < 2
            ? []
            : try endpoints.map { endpoint in
                var configuration = any.configuration
                configuration.endpoints = [endpoint]
                return try RPCClient(configuration: configuration, reactor: reactor, logger: logger)
            }
        if !instances.isEmpty { refreshInBackground() }
    }

    /// Closes the instance clients (``any`` belongs to the caller).
    public func shutdown() async {
        for client in instances { await client.shutdown() }
    }

    /// The client of the instance that owns the shard of `app`'s `account` as last heard; ``any``
    /// while that is not known.
    public func client(app: String, account: String) -> RPCClient {
        client(shard: nil, app: app, account: account)
    }

    private func client(shard known: UInt32?, app: String?, account: String?) -> RPCClient {
        guard !instances.isEmpty else { return any }
        let (owner, stale) = map.withLock { routes -> (Int?, Bool) in
            let stale = routes.loaded.map { $0.duration(to: .now) > Self.maxAge } ?? true
            var shard = known
            if shard == nil, let app, let account { shard = ShardHash.shard(app: app, account: account, count: routes.shardCount) }
            guard let shard, Int(shard) < routes.owners.count else { return (nil, stale) }
            return (routes.owners[Int(shard)], stale)
        }
        if stale { refreshInBackground() }
        return owner.map { instances[$0] } ?? any
    }

    /// Calls `path` at the owner of the shard of `app`'s `account` (at any instance when either is
    /// nil), answered as ``RPCClient/callRaw(path:idempotent:body:options:)`` answers, retried at
    /// the owner the map names while the instance called does not own the shard or cannot be
    /// reached, until the call's deadline.
    public func callRaw(
        path: String, idempotent: Bool, body: [UInt8], options: CallOptions = CallOptions(), app: String?, account: String?
    ) async throws(RPCError) -> RawResponse {
        guard !instances.isEmpty else { return try await any.callRaw(path: path, idempotent: idempotent, body: body, options: options) }
        let deadline = ContinuousClock.now + (options.timeout ?? any.configuration.defaultTimeout)
        var shard: UInt32?
        var pause = Self.firstPause
        while true {
            var attempt = options
            attempt.timeout = ContinuousClock.now.duration(to: deadline)
            let client = client(shard: shard, app: app, account: account)
            let refusal: RPCError
            do {
                let response = try await client.callRaw(path: path, idempotent: idempotent, body: body, options: attempt)
                guard response.code == .unavailable, let error = response.error, error.isNotOwner else { return response }
                shard = error.notOwnerShard ?? shard
                refusal = error
            } catch {
                guard error.isNotSent else { throw error }
                refusal = error
            }
            // Neither call ran: wait for the map to name another owner, and call again.
            guard ContinuousClock.now + pause < deadline else { throw refusal }
            do {
                try await Task.sleep(for: pause)
            } catch {
                throw RPCError(.cancelled, "\(path): cancelled while waiting for the owner of its shard")
            }
            pause = min(pause * 2, Self.maxPause)
            await refresh()
        }
    }

    /// ``callRaw(path:idempotent:body:options:app:account:)`` of a typed method.
    public func call<Request, Response>(
        _ method: MethodDescriptor<Request, Response>, _ request: Request, options: CallOptions = CallOptions(), app: String?, account: String?
    ) async throws(RPCError) -> Response {
        let response = try await callRaw(
            path: method.path, idempotent: method.idempotent, body: try JSONCodec.encode(request), options: options, app: app, account: account)
        if let error = response.error { throw error }
        return try JSONCodec.decode(Response.self, from: response.body)
    }

    /// Asks every instance for the map (one refresh at a time; a caller arriving during one waits
    /// for it).
    public func refresh() async {
        guard !instances.isEmpty else { return }
        let task = refreshing.withLock { running -> Task<Void, Never> in
            if let running { return running }
            let task = Task { [self] in
                await load()
                refreshing.withLock { $0 = nil }
            }
            running = task
            return task
        }
        await task.value
    }

    private func refreshInBackground() {
        guard refreshing.withLock({ $0 == nil }) else { return }
        Task { [self] in await refresh() }
    }

    /// Every instance's answer to GetShardMap: which instance it is, and (from the first to answer)
    /// the owners.
    private func load() async {
        let mapMethod = mapMethod
        let answers = await withTaskGroup(of: (Int, Storebus_PaymentQueue_V1_GetShardMapResponse?).self) { group in
            for (index, client) in instances.enumerated() {
                group.addTask {
                    (index, try? await client.call(mapMethod, .init(), options: CallOptions(timeout: .seconds(1))))
                }
            }
            var answers: [(Int, Storebus_PaymentQueue_V1_GetShardMapResponse)] = []
            for await (index, answer) in group {
                if let answer { answers.append((index, answer)) }
            }
            return answers
        }
        guard let first = answers.first?.1 else {
            logger.warning("Shard map: no instance answered; the last map stands meanwhile", metadata: ["rpc.method": "\(mapMethod.path)"])
            map.withLock { $0.loaded = .now }
            return
        }
        let named = Dictionary(answers.map { ($0.1.instance, $0.0) }, uniquingKeysWith: { first, _ in first })
        let owners = first.shards.sorted { $0.shard < $1.shard }.map { $0.leased ? named[$0.owner] : nil }
        map.withLock { routes in
            routes.shardCount = max(1, first.shardCount)
            routes.owners = owners
            routes.loaded = .now
        }
    }
}
