import ArgumentParser
import CatalogFormat
import Foundation

/// `storectl catalog ...`
struct CatalogCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "catalog", abstract: "Work with catalog files.", subcommands: [ImportCommand.self])

    /// `storectl catalog import <file.storekit> --app <bundle-id> [-o FILE] [--force]`
    struct ImportCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Convert an Xcode StoreKit configuration (.storekit) into a StoreBus catalog file."
        )

        @Argument(help: "The .storekit file.")
        var file: String

        @Option(help: "The app's bundle id.")
        var app: String

        @Option(name: .shortAndLong, help: "Where to write the catalog (default: standard output).")
        var output: String?

        @Flag(help: "Write the catalog even when it will not load as it is, to finish it by hand.")
        var force = false

        func run() throws {
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: file))
            } catch {
                throw Failure(description: "cannot read \(file): \(error.localizedDescription)")
            }
            let result: StoreKitConfigurationImporter.Result
            do {
                result = try StoreKitConfigurationImporter.importConfiguration(data, bundleID: app)
            } catch {
                throw Failure(description: "\(file): \(error.description)")
            }
            // Check the result the way storebus-catalog will, so problems show now and not at load time;
            // without --force nothing is written, so a catalog that loads is never replaced by one
            // that does not.
            do {
                _ = try CatalogValidator.validate(result.catalog, fileName: output ?? "(imported catalog)")
            } catch {
                guard force else {
                    throw Failure(description: "the imported catalog will not load as it is, so it was not written (--force writes it anyway):\n\(error.description)")
                }
                FileHandle.standardError.write(Data("warning: the imported catalog will not load as it is:\n\(error.description)\n".utf8))
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let json = try encoder.encode(result.catalog)
            if let output {
                do {
                    try json.write(to: URL(fileURLWithPath: output), options: .atomic)
                } catch {
                    throw Failure(description: "cannot write \(output): \(error.localizedDescription)")
                }
            } else {
                FileHandle.standardOutput.write(json + Data("\n".utf8))
            }
            let products = result.catalog.apps?.first?.products?.count ?? 0
            FileHandle.standardError.write(Data("imported \(products) products for \(app)\n".utf8))
            for note in result.notCarriedOver {
                FileHandle.standardError.write(Data("not carried over: \(note)\n".utf8))
            }
        }
    }
}
