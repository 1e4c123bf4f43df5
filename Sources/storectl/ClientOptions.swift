import ArgumentParser
import Foundation
import StoreBus
import StoreBusHost
import StoreBusSDK

/// Which gateways storectl talks to and how long one call may take: shared by the device commands
/// and the admin commands.
struct GatewayOptions: ParsableArguments {
    @Option(name: .customLong("gateway"), help: "Gateway RPC endpoint (repeatable). Default: STOREBUS_GATEWAY or tcp://127.0.0.1:7300.")
    var gateways: [String] = []

    @Option(
        name: .customLong("gateway-key"),
        help:
            "The gateway's CURVE public key: a .pub file or the 40-character key. Default: STOREBUS_GATEWAY_KEY, else data/keys/gateway.pub (what `make run` makes) when it exists and the gateway is the local default."
    )
    var gatewayKey: String?

    @Option(help: "Seconds to wait for each call.")
    var timeout: Double = 10

    func validate() throws {
        guard timeout.isFinite, timeout > 0, timeout <= 3600 else {
            throw ValidationError("--timeout must be a number of seconds from 0 to 3600")
        }
    }

    var endpoints: [String] {
        HostSettings.endpoints(flags: gateways, environmentVariable: "STOREBUS_GATEWAY", default: ["tcp://127.0.0.1:7300"])
    }

    /// The local deployment's gateway, and the public key file `make run` makes for it.
    static let localGateway = "tcp://127.0.0.1:7300"
    static let localGatewayKeyFile = "data/keys/gateway.pub"

    /// The gateway's CURVE public key: `--gateway-key`, else STOREBUS_GATEWAY_KEY, else `make
    /// run`'s key file when talking to the local default gateway from the checkout; nil for plain TCP.
    func gatewayPublicKey() throws -> String? {
        try Self.gatewayPublicKey(flag: gatewayKey, endpoints: endpoints)
    }

    /// The key `--gateway-key` gives (`flag`), else STOREBUS_GATEWAY_KEY, else `make run`'s for
    /// its gateway.
    static func gatewayPublicKey(flag: String?, endpoints: [String]) throws -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let value = flag ?? environment["STOREBUS_GATEWAY_KEY"], !value.isEmpty {
            do { return try CurveKeyFile.publicKey(fileOrKey: value) } catch { throw ValidationError("--gateway-key: \(error)") }
        }
        if endpoints == [localGateway], FileManager.default.fileExists(atPath: localGatewayKeyFile) {
            return try CurveKeyFile.readPublicKey(at: Self.localGatewayKeyFile)
        }
        return nil
    }

    /// A connection's configuration for a session with `key`, acting for the queue named.
    func configuration(key: String, app: String, account: String, device: String) throws -> StoreConfiguration {
        var configuration = StoreConfiguration(gatewayEndpoints: endpoints, apiKey: key, appBundleID: app, accountID: account, deviceID: device)
        configuration.gatewayPublicKey = try gatewayPublicKey()
        configuration.callTimeout = .milliseconds(Int64(timeout * 1000))
        configuration.observerHold = .seconds(5)
        return configuration
    }
}

/// Who storectl acts as, and through which gateways. Every option has an environment variable or a
/// default that matches the local deployment `make run` starts (deploy/local/gateway.json).
struct ClientOptions: ParsableArguments {
    /// The local deployment's demo app key (deploy/local/gateway.json); for local use only.
    static let localAppKey = "storebus-local-demo-app-key"

    @OptionGroup var gateway: GatewayOptions

    @Option(name: .customLong("api-key"), help: "The app's API key. Default: STOREBUS_API_KEY or the local demo key.")
    var apiKey: String?

    @Option(help: "The app's bundle identifier.")
    var app: String = "com.storebus.demo.puzzle"

    @Option(help: "The App Store account acting.")
    var account: String = "demo"

    @Option(help: "The device.")
    var device: String = "storectl"

    func configuration() throws -> StoreConfiguration {
        try gateway.configuration(
            key: apiKey ?? ProcessInfo.processInfo.environment["STOREBUS_API_KEY"] ?? Self.localAppKey,
            app: app, account: account, device: device
        )
    }

    /// A payment queue for the device, its session opened (so a wrong key fails here, clearly); its
    /// downloads go into `downloads` (the `--directory` given), else STOREBUS_DOWNLOAD_DIR, else
    /// ./storebus-downloads.
    func queue(downloads: String? = nil) async throws -> PaymentQueue {
        var configuration = try configuration()
        configuration.downloadDirectory = URL(fileURLWithPath: downloads ?? ProcessInfo.processInfo.environment["STOREBUS_DOWNLOAD_DIR"] ?? "storebus-downloads")
        let queue = try PaymentQueue(configuration: configuration)
        try await sentence { try await queue.connection.authenticate() }
        return queue
    }

    /// A payment queue whose launch replay has arrived (within `wait`), so that its `transactions`
    /// are complete; downloads as ``queue(downloads:)`` puts them.
    func launchedQueue(_ wait: WaitOptions, downloads: String? = nil) async throws -> PaymentQueue {
        let queue = try await queue(downloads: downloads)
        guard await follow(queue.callbacks, timeout: wait.duration, echo: false, until: { $0.event.isReplayEnd }) else {
            await queue.close()
            throw Failure(description: "The gateway did not send the queue's transactions within \(wait.text).")
        }
        return queue
    }
}

/// How long the commands that follow the observer stream wait for the store's callbacks.
struct WaitOptions: ParsableArguments {
    @Option(help: "Seconds to wait for the store's callbacks: a purchase to settle (a payment policy may delay it), a restore to end, the queue's transactions at launch.")
    var wait: Double = 30

    func validate() throws {
        guard wait.isFinite, wait > 0, wait <= 86_400 else {
            throw ValidationError("--wait must be a number of seconds from 0 to 86400")
        }
    }

    var duration: Duration { .milliseconds(Int64(wait * 1000)) }

    /// The wait in words, for messages ("30 seconds").
    var text: String {
        let seconds = wait == wait.rounded() ? String(Int(wait)) : String(wait)
        return "\(seconds) second\(wait == 1 ? "" : "s")"
    }
}

/// Runs `body`, turning StoreBus errors into sentences for the terminal.
@discardableResult
func sentence<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as StoreError {
        switch error.status {
        case .unauthenticated:
            throw Failure(description: "The gateway refused the credentials: \(error.message).")
        case .unavailable, .deadlineExceeded:
            throw Failure(description: "StoreBus did not answer (\(error.message)). Is it running? Start it with `make run`.")
        default:
            throw Failure(description: "\(error.message) (\(error.code)).")
        }
    }
}

/// One line per callback, for `watch`, `buy` and `demo`.
func describe(_ callback: PaymentQueueCallback) -> String {
    func list(_ transactions: [PaymentTransaction]) -> String {
        transactions.map { transaction in
            var text = "\(transaction.transactionIdentifier) \(transaction.payment.productIdentifier) \(transaction.transactionState.rawValue)"
            if let error = transaction.error { text += " (\(error.localizedDescription), \(error.code))" }
            if let original = transaction.originalTransactionIdentifier { text += " original \(original)" }
            return text
        }.joined(separator: "; ")
    }
    let body: String =
        switch callback.event {
        case .updatedTransactions(let transactions, let replayed):
            "updatedTransactions\(replayed ? " (unfinished at launch)" : ""): \(list(transactions))"
        case .removedTransactions(let transactions):
            "removedTransactions: \(list(transactions))"
        case .restoreCompletedTransactionsFinished(let id, let count):
            "restoreCompletedTransactionsFinished: restore \(id), \(count) restored"
        case .restoreCompletedTransactionsFailed(let id, let error):
            "restoreCompletedTransactionsFailedWithError: restore \(id): \(error.localizedDescription) (\(error.code))"
        case .updatedDownloads(let downloads):
            "updatedDownloads: " + downloads.map { "\($0.transactionIdentifier) \($0.contentIdentifier) \($0.state.rawValue) \(Int($0.progress * 100))%" }.joined(separator: "; ")
        case .didRevokeEntitlements(let products):
            "didRevokeEntitlementsForProductIdentifiers: \(products.joined(separator: ", "))"
        case .replayCompleted(let count):
            "replay complete: \(count) unfinished transaction\(count == 1 ? "" : "s"); live callbacks follow"
        case .unknown:
            "a callback this storectl does not know"
        }
    return "[\(callback.seq)] \(body)"
}

/// Waits for callbacks until `done` says so or `timeout` passes; prints each when `echo` is set.
/// Returns whether `done` held.
func follow(
    _ stream: PaymentQueueCallbacks, timeout: Duration, echo: Bool = true,
    until done: @escaping @Sendable (PaymentQueueCallback) -> Bool
) async -> Bool {
    await withTaskGroup(of: Bool.self) { group in
        group.addTask {
            for await callback in stream {
                if echo {
                    print(describe(callback))
                    // As it arrives, also when standard output is a pipe (block-buffered).
                    fflush(nil)
                }
                if done(callback) { return true }
            }
            return false
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return false
        }
        let result = await group.next() ?? false
        group.cancelAll()
        return result
    }
}
