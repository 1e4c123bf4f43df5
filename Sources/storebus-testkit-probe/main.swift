// storebus-testkit-probe: asks one endpoint for Health/Check, the way a process without StoreBus's
// keys would (the multi-host test runs it on the intruder's host).
//
//   storebus-testkit-probe ENDPOINT                    plain TCP
//   storebus-testkit-probe ENDPOINT --server-key KEY   CURVE, with a key pair made for the call
//   ... --key-file FILE                                CURVE, with that key pair (needs --server-key)
//   ... --timeout SECONDS                              default 3
//
// Prints "answered <STATUS> by <process>" and exits 0, or "no answer: <why>" and exits 3.
import Foundation
import StoreBus
import StoreSchema
import ZeroMQ

var arguments = Array(CommandLine.arguments.dropFirst())
@MainActor func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(index...(index + 1)) }
    return arguments[index + 1]
}
let serverKey = option("--server-key")
let keyFile = option("--key-file")
let timeout = option("--timeout").flatMap(Double.init) ?? 3
guard arguments.count == 1, keyFile == nil || serverKey != nil else {
    FileHandle.standardError.write(Data("usage: storebus-testkit-probe ENDPOINT [--server-key KEY [--key-file FILE]] [--timeout SECONDS]\n".utf8))
    exit(64)
}
let endpoint = arguments[0]

do {
    let security: TCPSecurity
    var configuration = ClientConfiguration(endpoints: [endpoint])
    if let keyFile, let serverKey {
        let pair = try CurveKeyFile.readKeyPair(at: keyFile)
        security = .curve(CurveLinks(keyPair: pair, serverKeys: [endpoint: try CurveKeyFile.publicKey(fileOrKey: serverKey)]))
    } else {
        security = .plain
        configuration.serverPublicKey = try serverKey.map(CurveKeyFile.publicKey(fileOrKey:))
    }
    let context = try ZeroMQ.Context(tcpSecurity: security)
    let client = try RPCClient(configuration: configuration, context: context)
    do {
        let answer = try await client.call(Storebus_Health_V1_Health.check, .init(), options: CallOptions(timeout: .milliseconds(Int64(timeout * 1000))))
        print("answered \(answer.status) by \(answer.process)")
        await client.shutdown()
        exit(0)
    } catch {
        print("no answer: \(error.message)")
        await client.shutdown()
        exit(3)
    }
} catch {
    print("no answer: \(error)")
    exit(3)
}
