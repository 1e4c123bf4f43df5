import Foundation
import Logging
import Synchronization

/// A swift-log handler writing one JSON object a line on standard error, for log shippers:
///
/// ```json
/// {"time":"2026-11-27T19:40:01.123Z","level":"info","label":"storebus-catalog","message":"Serving","source":"StoreBusHost","metadata":{"rpc.endpoints":"tcp://127.0.0.1:7301"}}
/// ```
///
/// Each line is written whole with one `write(2)`, so lines of several threads never interleave.
public struct JSONLogHandler: LogHandler {
    public let label: String
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    /// A handler for `label`.
    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = self.metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        var object: [String: Any] = [
            "time": Self.timestamp(), "level": event.level.rawValue, "label": label, "message": event.message.description, "source": event.source
        ]
        if !merged.isEmpty { object["metadata"] = merged.mapValues(Self.plain) }
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        data.append(0x0A)
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 { if errno == EINTR { continue } else { return } }
                offset += written
            }
        }
    }

    /// A metadata value as JSON: strings as they are, lists and dictionaries as arrays and objects.
    static func plain(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let convertible): return convertible.description
        case .array(let items): return items.map(plain)
        case .dictionary(let entries): return entries.mapValues(plain)
        }
    }

    /// Now in ISO 8601 with milliseconds, UTC.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var time = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &time)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", time.tm_year + 1900, time.tm_mon + 1, time.tm_mday,
            time.tm_hour, time.tm_min, time.tm_sec, now.tv_nsec / 1_000_000
        )
    }
}
