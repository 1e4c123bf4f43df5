import GRDB
import StoreBus
import StoreSchema

/// Serves `storebus.eventlog.v1.EventLog` from a service's database.
public enum EventLogService {
    /// Largest page a reader may ask for.
    public static let maxPageSize: UInt32 = 1000
    /// Page size when the reader asks for 0.
    public static let defaultPageSize: UInt32 = 256

    /// A router answering ReadEvents. The response is assembled from the stored JSON of each event,
    /// without decoding it.
    public static func router(database: StoreDatabase) -> RPCRouter {
        var router = RPCRouter()
        router.registerRaw(path: Storebus_Eventlog_V1_EventLog.readEvents.path) { body, _ in
            let request = try JSONCodec.decode(Storebus_Eventlog_V1_ReadEventsRequest.self, from: body)
            guard request.limit <= maxPageSize else {
                throw RPCError.invalidArgument(field: "limit", "must be at most \(maxPageSize)")
            }
            let limit = Int(request.limit == 0 ? defaultPageSize : request.limit)
            let (events, head) = try await database.pool.read { db in
                (try EventLog.read(db, key: request.key, after: request.afterSeq, limit: limit), try EventLog.head(db, key: request.key))
            }
            var json = "{\"events\":["
            json.reserveCapacity(events.reduce(64) { $0 + $1.json.utf8.count + 1 })
            for (index, event) in events.enumerated() {
                if index > 0 { json += "," }
                json += event.json
            }
            json += "],\"headSeq\":\"\(head)\"}"
            return Array(json.utf8)
        }
        return router
    }
}
