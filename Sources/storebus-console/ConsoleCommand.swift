import ArgumentParser
import Console
import Foundation
import StoreBus
import StoreBusCommandLine
import StoreBusHost

/// `storebus-console`: the operators' web page, a transaction manager in the browser, acting
/// through the gateway with an admin key.
@main
struct ConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: ConsoleService.process,
        abstract: "Serve StoreBus's console: watch and steer the store from a browser, through the gateway."
    )

    @OptionGroup var host: HostOptions

    @OptionGroup var gateway: UpstreamEndpoints<Upstream.Gateway>

    @Option(name: .customLong("http-address"), help: "Where the pages are served, host:port. Also service.httpAddress. Default 127.0.0.1:7390.")
    var httpAddress: String?

    func run() async throws {
        let host = try self.host.resolve(defaults: ConsoleConfiguration.defaultHost)
        ServiceHost.bootstrap(host)
        var configuration = try host.serviceSettings(ConsoleConfiguration.self) ?? ConsoleConfiguration()
        if let endpoints = gateway.endpoints { configuration.gatewayEndpoints = endpoints }
        if let httpAddress { configuration.httpAddress = httpAddress }
        try configuration.validate()
        if self.host.checked(ConsoleService.process, host) { return }
        try await ConsoleService(host: host, configuration: configuration).run()
    }
}
