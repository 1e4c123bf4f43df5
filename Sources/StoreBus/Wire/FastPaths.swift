import Synchronization

/// The one switch of StoreBus's hand-written shortcuts (docs/performance.md lists them): each sits
/// behind a seam with the plain implementation beside it (swift-protobuf's JSON, GRDB's statements,
/// SQLite's default VFS, `zmq_poll`), and takes the plain one while this is off.
///
/// A process sets it once, before its first socket, database or message: ``ServiceHost`` from the
/// host configuration (`STOREBUS_FAST_PATHS=off` in the environment of a service's executable), a
/// test or a benchmark directly. Both ways give the same answers, byte for byte; only the work
/// differs, which `make bench` measures (`purchase_flow_cpu_us` and `purchase_flow_cpu_us_reference`).
public enum FastPaths {
    private static let on = Atomic<Bool>(true)

    /// Whether the shortcuts are taken. Default true.
    public static var enabled: Bool {
        get { on.load(ordering: .relaxed) }
        set { on.store(newValue, ordering: .relaxed) }
    }

    /// The value of `STOREBUS_FAST_PATHS`: `off` (or `0`, `false`, `no`) turns them off, anything
    /// else or nothing leaves them on.
    public static func enabled(environmentValue value: String?) -> Bool {
        guard let value else { return true }
        return !["off", "0", "false", "no"].contains(value.lowercased())
    }
}
