import StoreBus

extension ServiceEntry {
    /// Where and how the process serves by default: RPC on its registry port, doorbells on its event
    /// port when it keeps a log, data in `data/<name>` when it keeps data.
    public var defaultHost: HostConfiguration {
        HostConfiguration(rpcEndpoints: [rpcEndpoint], eventEndpoints: eventEndpoint.map { [$0] } ?? [], dataDirectory: dataDirectory)
    }
}
