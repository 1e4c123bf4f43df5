import ArgumentParser
import StoreBus
import StoreBusCommandLine
import StoreBusHost
import StoreBusServer
import StoreSchema

/// `storebus-testkit-echo`: the smallest StoreBus service, a test fixture showing what a new service
/// is made of (proto-schemas/storebus/testkit/v1/echo.proto, this executable, a route): its handlers
/// conform to the generated protocol, and the gateway forwards its client method by the contract.
@main
struct EchoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storebus-testkit-echo",
        abstract: "Test fixture: a client service that answers what it is told."
    )

    @OptionGroup var host: HostOptions

    func run() async throws {
        let configuration = try host.resolve(defaults: HostConfiguration(rpcEndpoints: ["tcp://127.0.0.1:7392"]))
        ServiceHost.bootstrap(configuration)
        let host = try ServiceHost(process: "storebus-testkit-echo", configuration: configuration)
        var router = RPCRouter()
        router.register(EchoHandlers())
        try await host.serve(router: router, services: [Storebus_Testkit_V1_Echo.serviceName])
    }
}

/// The handlers of `storebus.testkit.v1.Echo`.
struct EchoHandlers: Storebus_Testkit_V1_Echo.Handlers {
    var loopSafe: LoopSafeMethods { .all(of: Storebus_Testkit_V1_Echo.self) }

    func say(_ request: Storebus_Testkit_V1_SayRequest, context: ServerContext) async throws -> Storebus_Testkit_V1_SayResponse {
        .with {
            $0.queue = request.queue
            $0.text = request.text
        }
    }
}
