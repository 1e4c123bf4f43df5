import ArgumentParser
import StoreBusStorage

/// `--durability full|normal`, for every executable that keeps a database.
extension Durability: ExpressibleByArgument {}
