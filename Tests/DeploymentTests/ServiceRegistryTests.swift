import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

/// The files that list StoreBus's processes, held to ``ServiceRegistry``: adding a row there and
/// forgetting one of them fails here, naming the file.
@Suite("One registry of services")
struct ServiceRegistryTests {
    static let repository = deployDirectory.deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: repository.appendingPathComponent(path), encoding: .utf8)
    }

    @Test("every row names a process, contract services that exist, known upstreams, and ports of its own")
    func rowsAreConsistent() {
        let names = Set(ServiceRegistry.all.map(\.name))
        #expect(names.count == ServiceRegistry.all.count)
        let contract = Set(StoreBusContract.services.map(\.name))
        var ports = Set<Int>()
        for (index, entry) in ServiceRegistry.all.enumerated() {
            #expect(entry.process == "storebus-\(entry.name)", "\(entry.name)")
            // Every row serves contract services but the console's, which serves people over HTTP.
            #expect(entry.services.isEmpty == (entry.name == ServiceRegistry.console.name), "\(entry.name): \(entry.services)")
            #expect(entry.services.allSatisfy(contract.contains), "\(entry.name): \(entry.services)")
            // Each after those it calls: the order deployments start them in.
            for upstream in entry.upstreams {
                let position = ServiceRegistry.all.firstIndex { $0.name == upstream }
                #expect(position.map { $0 < index } == true, "\(entry.name) calls \(upstream), which must come before it")
            }
            if let follows = entry.follows {
                #expect(ServiceRegistry.named(follows)?.eventPort != nil, "\(entry.name) follows \(follows), which keeps no log")
            }
            for port in [entry.rpcPort] + (entry.eventPort.map { [$0] } ?? []) {
                #expect(ports.insert(port).inserted, "port \(port) is used twice")
            }
        }
        // Every client and admin service of the contract is served by some row (the test kit's
        // services are started by the tests that use them).
        let served = Set(ServiceRegistry.all.flatMap(\.services))
        for service in StoreBusContract.services where service.methods.contains(where: { $0.access != .internal }) && !service.name.hasPrefix("storebus.testkit.") {
            #expect(served.contains(service.name), "no registry row serves \(service.name)")
        }
    }

    @Test("make run starts, and make builds, every process, in the registry's order")
    func makeRunAndMakefile() throws {
        let lines = try Self.text("deploy/local/services").split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
        #expect(lines.map { String($0.split(separator: " ")[0]) } == ServiceRegistry.all.map(\.process), "deploy/local/services")
        for entry in ServiceRegistry.all {
            #expect(FileManager.default.fileExists(atPath: Self.repository.appendingPathComponent("deploy/local/\(entry.name).json").path), "deploy/local/\(entry.name).json")
        }
        let makefile = try Self.text("Makefile")
        for list in ["RUN_PRODUCTS", "TEST_PRODUCTS"] {
            let line = try #require(makefile.split(separator: "\n").first { $0.hasPrefix("\(list) ") }, "Makefile's \(list)")
            let products = Set(line.split(separator: " ").map(String.init))
            for entry in ServiceRegistry.all {
                #expect(products.contains(entry.process), "Makefile's \(list) lacks \(entry.process)")
            }
        }
    }

    @Test("systemd has a unit and a configuration for every process, and the target wants them all")
    func systemd() throws {
        let target = try Self.text("deploy/systemd/storebus.target")
        for entry in ServiceRegistry.all {
            let unit = try Self.text("deploy/systemd/\(entry.process).service")
            #expect(unit.contains("/\(entry.process)"), "\(entry.process).service runs it")
            #expect(target.contains("\(entry.process).service"), "storebus.target wants \(entry.process).service")
            let configuration = ["deploy/systemd/\(entry.name).json", "deploy/systemd/\(entry.name).json.in"]
            #expect(configuration.contains { FileManager.default.fileExists(atPath: Self.repository.appendingPathComponent($0).path) }, "deploy/systemd/\(entry.name).json")
            // A service starts after the services it calls.
            let after = unit.split(separator: "\n").first { $0.hasPrefix("After=") } ?? ""
            for upstream in entry.upstreams {
                let process = try #require(ServiceRegistry.named(upstream)).process
                #expect(after.contains("\(process).service"), "\(entry.process).service starts after \(process)")
            }
        }
    }

    @Test("each executable takes the endpoints of exactly the services its row calls, and the doorbells of the log it follows, under the names the registry gives")
    func upstreamFlags() async throws {
        let upstreamFlags = Set(ServiceRegistry.all.map { "--\($0.name)-endpoint" } + ServiceRegistry.all.map { "--\($0.name)-events" })
        for entry in ServiceRegistry.all {
            let help = try await runCommand(try Executables.url(entry.process).path, ["--help"])
            #expect(help.status == 0, "\(entry.process) --help: \(help.output)")
            let flags = Set(help.output.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," || $0 == "[" || $0 == "]" }).map(String.init).filter(upstreamFlags.contains))
            let expected = Set(entry.upstreams.map { "--\($0)-endpoint" } + (entry.follows.map { ["--\($0)-events"] } ?? []))
            #expect(flags == expected, "\(entry.process): \(flags.sorted()), its row says \(expected.sorted())")
            for upstream in entry.upstreams {
                let variable = "STOREBUS_\(try #require(ServiceRegistry.named(upstream)).environmentName)_ENDPOINTS"
                #expect(help.output.contains(variable), "\(entry.process) --help names \(variable)")
            }
        }
    }
}
