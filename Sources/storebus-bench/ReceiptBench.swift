import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import ReceiptFormat
import StoreBus
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import SwiftASN1
import Synchronization
import X509

/// Receipt verification: a receipt of 100 in-app purchases, verified by the receipt service
/// (VerifyReceipt straight to its process, `window` calls in flight) and offline by the library
/// (`ReceiptVerifier`), beside its floor, the receipt's one signature verified by swift-crypto alone
/// (ECDSA P-256 over the signed attributes: what no verifier can skip).
struct ReceiptBench {
    let rounds: Int
    let catalogPath: String
    var window = 16
    var verbose = false
    /// In-app purchases in the receipt verified.
    static let entries = 100

    func run() async throws {
        try await StoreCluster(logLevel: "error", gatewayCount: 1, catalogPath: catalogPath, appKeyApps: []).running { cluster in
            try await measure(cluster)
        }
    }

    private func measure(_ cluster: StoreCluster) async throws {
        let queue = try RPCClient(configuration: ClientConfiguration(endpoints: [cluster.directory.ipcEndpoint("pq")]))
        let receipts = try RPCClient(configuration: ClientConfiguration(endpoints: [cluster.receiptEndpoint]))
        do {
            try await measure(queue: queue, receipts: receipts, http: "http://\(cluster.receiptHTTPAddress)/verifyReceipt")
            if let pid = cluster.receipt.pid { try await measureIssue(queue: queue, receipts: receipts, receiptPID: pid) }
        } catch {
            await queue.shutdown()
            await receipts.shutdown()
            throw error
        }
        await queue.shutdown()
        await receipts.shutdown()
    }

    private func measure(queue: RPCClient, receipts: RPCClient, http url: String) async throws {
        // A receipt of 100 purchases: consumables left unfinished stay in it.
        let account = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = puzzle; $0.accountID = "receipt-bench"; $0.deviceID = "d"
        }
        for _ in 0..<Self.entries {
            _ = try await queue.call(
                Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
                .with {
                    $0.queue = account
                    $0.payment = .with { $0.productIdentifier = coins }
                })
        }
        var der: [UInt8] = []
        let filled = try await waitUntil(timeout: .seconds(60), interval: .milliseconds(20)) {
            let data = try await receipts.call(
                Storebus_Receipt_V1_Receipt.refreshReceipt,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = account.accountID; $0.deviceID = account.deviceID
                }
            ).receiptData
            der = Array(Data(base64Encoded: data) ?? Data())
            return (try? AppReceipt(der: ReceiptSignature.attachedPayload(of: der)).inApp.count) == Self.entries
        }
        guard filled else { throw ClusterFailure(description: "the bench's receipt never held \(Self.entries) purchases") }
        let root = try await receipts.call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init()).rootCertificatePem
        let verifier = try ReceiptVerifier(rootCertificatePEM: root)
        let floor = try SignatureFloor(cms: der)
        let request = Storebus_Receipt_V1_VerifyReceiptRequest.with { $0.receiptData = Data(der).base64EncodedString() }
        guard try await receipts.call(Storebus_Receipt_V1_Receipt.verifyReceipt, request).status == 0 else {
            throw ClusterFailure(description: "the bench's receipt does not verify")
        }

        // POST /verifyReceipt, `window` requests in flight on as many connections
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = window
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            try await measure(receipts: receipts, der: der, request: request, floor: floor, verifier: verifier, http: http, url: url)
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }

    private func measure(
        receipts: RPCClient, der: [UInt8], request: Storebus_Receipt_V1_VerifyReceiptRequest, floor: SignatureFloor, verifier: ReceiptVerifier,
        http: HTTPClient, url: String
    ) async throws {
        let receipt = der
        let body = try JSONSerialization.data(withJSONObject: ["receipt-data": Data(der).base64EncodedString()])
        @Sendable func post() async throws {
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
            let response = try await http.execute(request, timeout: .seconds(30))
            let answer = try await response.body.collect(upTo: 8 << 20)
            // `{"environment":…,"receipt":…,"status":0}`: the status is the last member
            guard response.status == .ok, String(buffer: answer).hasSuffix("\"status\":0}") else {
                throw ClusterFailure(description: "POST /verifyReceipt answered \(response.status): \(String(buffer: answer).suffix(200))")
            }
        }
        try await post()

        let method = Storebus_Receipt_V1_Receipt.verifyReceipt
        let verifyBody = try JSONCodec.encode(request)
        var bare: [Double] = [], offline: [Double] = [], service: [Double] = [], overHTTP: [Double] = []
        for round in 0..<rounds {
            bare.append(floor.verificationsPerSecond(count: 2_000))
            let offlineCount = 400
            offline.append(
                Double(offlineCount)
                    / (try await RunBenchmarks.concurrentSeconds(total: offlineCount, concurrency: 1, warmUp: true) {
                        _ = try await verifier.verify(receipt)
                    }))
            service.append(
                try await RunBenchmarks.concurrentRate(total: 1_000, concurrency: window) {
                    // The load generator reads the members it checks (a status of 0 is left out, as
                    // proto3 JSON leaves defaults out; the decoded receipt is there), not the whole
                    // answer: it shares the cores with the service it measures.
                    let answer = try await receipts.callRaw(path: method.path, idempotent: method.idempotent, body: verifyBody)
                    guard answer.code == .ok, JSONScanner.member("status", of: answer.body, in: answer.body.indices) == nil,
                        JSONScanner.member("receipt", of: answer.body, in: answer.body.indices) != nil
                    else { throw ClusterFailure(description: "VerifyReceipt answered \(answer.code): \(String(decoding: answer.body.prefix(200), as: UTF8.self))") }
                })
            overHTTP.append(try await RunBenchmarks.concurrentRate(total: 1_000, concurrency: window) { try await post() })
            if verbose {
                FileHandle.standardError.write(
                    "round \(round) receipts: bare \(Int(bare.last!))/s, offline \(Int(offline.last!))/s, service \(Int(service.last!))/s, HTTP \(Int(overHTTP.last!))/s\n"
                        .data(using: .utf8)!)
            }
        }
        report("bare_receipt_signature_verify_per_s", median(bare), "verifies/s")
        report("receipt_verify_offline_per_s", median(offline), "receipts/s")
        report("verify_receipts_per_s", median(service), "receipts/s")
        report("verify_receipts_over_bare_signature", median(zip(service, bare).map { $0 / $1 }), "ratio")
        report("verify_receipts_http_per_s", median(overHTTP), "receipts/s")
        report("verify_receipts_http_over_bus", median(zip(overHTTP, service).map { $0 / $1 }), "ratio")
        report("receipt_bytes_100_entries", Double(der.count), "bytes")
    }

    /// `receipt_issue_us_<n>`: the receipt process's CPU time per RefreshReceipt of an account with
    /// `n` purchases (10 and 1,000), one refresh at a time: what issuing costs as a history grows.
    private func measureIssue(queue: RPCClient, receipts: RPCClient, receiptPID: pid_t) async throws {
        var figures: [Int: [Double]] = [:]
        let sizes = [10, 1_000]
        var accounts: [Int: Storebus_PaymentQueue_V1_QueueRef] = [:]
        for size in sizes {
            let account = Storebus_PaymentQueue_V1_QueueRef.with {
                $0.appBundleID = puzzle; $0.accountID = "receipt-issue-\(size)"; $0.deviceID = "d"
            }
            accounts[size] = account
            _ = try await RunBenchmarks.concurrentSeconds(total: size, concurrency: 16, warmUp: false) {
                _ = try await queue.call(
                    Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
                    .with {
                        $0.queue = account
                        $0.payment = .with { $0.productIdentifier = coins }
                    })
            }
        }
        @Sendable func refresh(_ account: Storebus_PaymentQueue_V1_QueueRef) async throws -> Int {
            let data = try await receipts.call(
                Storebus_Receipt_V1_Receipt.refreshReceipt,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = account.accountID; $0.deviceID = account.deviceID
                }
            ).receiptData
            let der = Array(Data(base64Encoded: data) ?? Data())
            return (try? AppReceipt(der: ReceiptSignature.attachedPayload(of: der)).inApp.count) ?? -1
        }
        for size in sizes {
            let account = accounts[size]!
            guard try await waitUntil(timeout: .seconds(60), interval: .milliseconds(20), { try await refresh(account) == size }) else {
                throw ClusterFailure(description: "the bench's receipt never held \(size) purchases")
            }
        }
        for _ in 0..<rounds {
            for size in sizes {
                let account = accounts[size]!
                // About half a second of refreshes each, long beside /proc's 10 ms ticks.
                let count = size >= 1_000 ? 300 : 1_000
                // Only the refreshes counted: the service first done with what the set-up left it
                // (the purchases' notifications signed, their pages applied, a checkpoint).
                try await CPUMeter.settle(pid: receiptPID)
                guard let before = CPUMeter.seconds(pid: receiptPID) else { return }
                for _ in 0..<count {
                    _ = try await receipts.call(
                        Storebus_Receipt_V1_Receipt.refreshReceipt,
                        .with {
                            $0.appBundleID = puzzle; $0.accountID = account.accountID; $0.deviceID = account.deviceID
                        })
                }
                guard let after = CPUMeter.seconds(pid: receiptPID) else { return }
                figures[size, default: []].append((after - before) * 1e6 / Double(count))
            }
        }
        for size in sizes { report("receipt_issue_us_\(size)", median(figures[size] ?? []), "us") }
        report("receipt_issue_1000_over_10", median(figures[1_000] ?? []) / median(figures[10] ?? []), "ratio")
    }
}

/// A CMS receipt's one signature and what it covers, taken apart once, verified with swift-crypto
/// alone: SignedData's first SignerInfo, its signed attributes as the SET they are signed as, and the
/// first certificate's P-256 key.
struct SignatureFloor {
    let signedAttributes: [UInt8]
    let signature: P256.Signing.ECDSASignature
    let key: P256.Signing.PublicKey

    init(cms: [UInt8]) throws {
        let contentInfo = try DER.parse(cms)
        guard case .constructed(let outer) = contentInfo.content else { throw ClusterFailure(description: "not CMS") }
        var outerNodes = outer.makeIterator()
        _ = outerNodes.next()
        guard let wrapped = outerNodes.next(), case .constructed(let explicit) = wrapped.content,
            let signedData = explicit.first(where: { _ in true }), case .constructed(let fields) = signedData.content
        else { throw ClusterFailure(description: "no SignedData") }
        let children = Array(fields)
        guard let certificates = children.first(where: { $0.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) }),
            case .constructed(let certificateNodes) = certificates.content,
            let signerInfos = children.last, case .constructed(let infos) = signerInfos.content,
            let signerInfo = infos.first(where: { _ in true }), case .constructed(let infoFields) = signerInfo.content
        else { throw ClusterFailure(description: "no signer") }
        let info = Array(infoFields)
        guard let attributes = info.first(where: { $0.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) }),
            let signatureNode = info.last
        else { throw ClusterFailure(description: "no signed attributes") }
        // Signed as a SET OF (tag 0x31), carried as [0] IMPLICIT.
        var set = Array(attributes.encodedBytes)
        set[0] = 0x31
        signedAttributes = set
        let signature = try P256.Signing.ECDSASignature(derRepresentation: Array(try ASN1OctetString(derEncoded: signatureNode).bytes))
        self.signature = signature
        // The signer's key: the certificate (of the leaf and the intermediate carried) whose key the
        // signature verifies with.
        let keys = try certificateNodes.compactMap { P256.Signing.PublicKey(try Certificate(derEncoded: Array($0.encodedBytes)).publicKey) }
        guard let key = keys.first(where: { $0.isValidSignature(signature, for: Data(set)) }) else {
            throw ClusterFailure(description: "no certificate of the receipt verifies its signature")
        }
        self.key = key
    }

    /// Verifications a second, `count` of them on this thread.
    func verificationsPerSecond(count: Int) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        var valid = 0
        for _ in 0..<count where key.isValidSignature(signature, for: Data(signedAttributes)) { valid += 1 }
        precondition(valid == count)
        return Double(count) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
}

/// The receipt service's lag behind the payment queue under load: a purchase every `interval`
/// straight to the payment queue (approved in the commit that adds it), then the device's receipt
/// refreshed once, asking the service to answer only when it has applied the log as far as its
/// head after the purchase (`min_seq`), as a device asks with the position of the callback it saw;
/// the lag is from the AddPayment answer (the commit is durable by then) to that receipt, which
/// must hold the purchase. (Polling for it, a refresh every 2 ms, charged the flow benchmark's CPU
/// per flow for hundreds of receipts a second that no purchase flow asks for.)
final class ReceiptLagProbe: Sendable {
    let queue: RPCClient
    let receipts: RPCClient
    let interval: Duration
    private let lags = Mutex<[Double]>([])
    static let probeQueue = Storebus_PaymentQueue_V1_QueueRef.with {
        $0.appBundleID = puzzle; $0.accountID = "lag-probe"; $0.deviceID = "p"
    }

    init(cluster: StoreCluster, interval: Duration = .milliseconds(20)) throws {
        queue = try RPCClient(configuration: ClientConfiguration(endpoints: [cluster.directory.ipcEndpoint("pq")]))
        receipts = try RPCClient(configuration: ClientConfiguration(endpoints: [cluster.receiptEndpoint]))
        self.interval = interval
    }

    /// Probes until the task is cancelled.
    func run() async {
        while !Task.isCancelled {
            do {
                try await probe()
            } catch {
                if Task.isCancelled { return }
            }
            try? await Task.sleep(for: interval)
        }
    }

    private func probe() async throws {
        let added = try await queue.call(
            Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
            .with {
                $0.queue = Self.probeQueue
                $0.payment = .with { $0.productIdentifier = coins }
            }
        ).transaction
        let answered = ContinuousClock.now
        let id = added.transactionIdentifier
        // The log's head now is at or past the purchase's event (the bench's log has one shard).
        let head = try await LogHead(client: queue).newest(timeout: .seconds(30))
        let data = try await receipts.call(
            Storebus_Receipt_V1_Receipt.refreshReceipt,
            .with {
                $0.appBundleID = puzzle; $0.accountID = Self.probeQueue.accountID; $0.deviceID = Self.probeQueue.deviceID
                $0.minSeq = head
            },
            options: CallOptions(timeout: .seconds(30))
        ).receiptData
        let lag = ContinuousClock.now - answered
        let receipt = try AppReceipt(der: ReceiptSignature.attachedPayload(of: Array(Data(base64Encoded: data) ?? Data())))
        guard receipt.inApp.contains(where: { $0.transactionID == id }) else {
            throw ClusterFailure(description: "the receipt as of position \(head) lacks \(id)")
        }
        lags.withLock { $0.append(Double(lag.components.seconds) * 1000 + Double(lag.components.attoseconds) / 1e15) }
        // Finished, it leaves the receipt: the probe's receipt stays small.
        _ = try await queue.call(
            Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
            .with {
                $0.queue = Self.probeQueue; $0.transactionIdentifier = id
            })
    }

    /// The lags measured so far, in milliseconds, sorted.
    var sortedLags: [Double] { lags.withLock { $0.sorted() } }

    func shutdown() async {
        await queue.shutdown()
        await receipts.shutdown()
    }
}
