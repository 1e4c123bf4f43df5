import ArgumentParser
import Foundation

/// `storebus-bench`: StoreBus's benchmarks, printed as `<metric> <value> <unit>` lines, each beside
/// the bare floor (plain libzmq, plain SQLite) measured in the same run.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storebus-bench",
        abstract: "Measure StoreBus against the bare libzmq and SQLite floors.",
        subcommands: [RunBenchmarks.self, LoadCommand.self, Soak.self, FlowFloorPart.self],
        defaultSubcommand: RunBenchmarks.self
    )
}

/// Prints one result line.
func report(_ metric: String, _ value: Double, _ unit: String) {
    let text = value >= 100 ? String(format: "%.0f", value) : String(format: "%.2f", value)
    print("\(metric) \(text) \(unit)")
    fflush(nil)
}
