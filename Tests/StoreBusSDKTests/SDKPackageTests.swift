import Foundation
import StoreBusTesting
import Testing

/// docs/sdk.md as a new user follows it: a package of their own, depending on StoreBus the way the
/// guide says, running the guide's example.
struct SDKPackageTests {
    /// The text of the first ```swift block after the heading `heading` in `markdown`.
    static func swiftBlock(after heading: String, in markdown: String) throws -> String {
        let start = try #require(markdown.range(of: "\n\(heading)\n"), "docs/sdk.md has the heading \(heading)")
        let rest = markdown[start.upperBound...]
        let open = try #require(rest.range(of: "```swift\n"))
        let close = try #require(rest[open.upperBound...].range(of: "\n```"))
        return String(rest[open.upperBound..<close.lowerBound])
    }

    @Test("a separate package depending on StoreBus by path, with the guide's dependency lines, builds and runs the guide's complete example against real processes")
    func guideExample() async throws {
        let root = deployDirectory.deletingLastPathComponent()
        let guide = try String(contentsOf: root.appendingPathComponent("docs/sdk.md"), encoding: .utf8)
        let manifestLines = try Self.swiftBlock(after: "## Installing", in: guide)
        // The guide's own lines: the path form (commented out beside the URL one) and the product.
        let pathLine = try #require(manifestLines.split(separator: "\n").first { $0.contains(".package(path:") })
            .replacingOccurrences(of: "//", with: "").trimmingCharacters(in: .whitespaces)
        let productLine = try #require(manifestLines.split(separator: "\n").first { $0.contains(".product(name: \"StoreBusSDK\"") })
            .trimmingCharacters(in: .whitespaces)
        let example = try Self.swiftBlock(after: "## A complete example", in: guide)

        let directory = try TemporaryDirectory(prefix: "sdkpkg")
        defer { directory.remove() }
        // Beside the new package, StoreBus under the folder name the guide uses.
        try FileManager.default.createSymbolicLink(at: directory.url.appendingPathComponent("storebus"), withDestinationURL: root)
        let package = directory.url.appendingPathComponent("shop")
        try FileManager.default.createDirectory(at: package.appendingPathComponent("Sources/Shop"), withIntermediateDirectories: true)
        try """
        // swift-tools-version: 6.1
        import PackageDescription

        let package = Package(
            name: "shop",
            platforms: [.macOS(.v15)],
            dependencies: [
                \(pathLine)
            ],
            targets: [
                .executableTarget(name: "Shop", dependencies: [
                    \(productLine)
                ]),
            ]
        )
        """.write(to: package.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)

        try await StoreCluster(gatewayCount: 1, gatewaysOnTCP: true, gatewayKeys: true).running { cluster in
            // The guide's example as it is, but for the deployment it is run against: this cluster's
            // gateway, its key and the app key instead of `make run`'s.
            let source =
                example
                .replacingOccurrences(of: "tcp://127.0.0.1:7300", with: cluster.gatewayEndpoints[0])
                .replacingOccurrences(of: "../storebus/data/keys/gateway.pub", with: cluster.gatewayPublicKeyFile!)
                .replacingOccurrences(of: "storebus-local-demo-app-key", with: appKey)
            try source.write(to: package.appendingPathComponent("Sources/Shop/Shop.swift"), atomically: true, encoding: .utf8)
            // Built in a scratch folder of StoreBus's own build directory, so a second run is quick.
            let scratch = root.appendingPathComponent(".build/sdk-example").path
            let build = try await runCommand(
                "/bin/sh", ["-c", #"cd "$0" && exec swift build -debug-info-format none --scratch-path "$1" --product Shop"#, package.path, scratch],
                log: directory.path("build.log"))
            try #require(build.status == 0, "the example package does not build:\n\(build.output.suffix(4000))")
            let run = try await runCommand("\(scratch)/debug/Shop", [], log: directory.path("run.log"))
            #expect(run.status == 0, "\(run.output)")
            #expect(run.output.contains("invalid: [\"com.storebus.demo.puzzle.gone\"]"), "\(run.output)")
            #expect(run.output.contains("buying ") && run.output.contains("granting 1 x com.storebus.demo.puzzle.coins100"), "\(run.output)")
            #expect(source.contains(cluster.gatewayPublicKeyFile!), "the example reads the gateway's key")
        }
    }
}
