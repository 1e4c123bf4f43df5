import Foundation

/// The HTML report of a load run: one self-contained page (inline SVG charts and styles, no
/// scripts or fetched files) with throughput and latency over time, the latency distribution and
/// the tables.
extension LoadResults {
    func html() -> String {
        let seconds = secondFigures
        let throughput = Chart(
            title: "Throughput (flows completed each second; errors in red)", yUnit: "flows/s",
            series: [
                .init(name: "completed", color: "#1f77b4", points: seconds.map { (Double($0.second), Double($0.completed)) }),
                .init(name: "errors", color: "#d62728", points: seconds.map { (Double($0.second), Double($0.errors)) })
            ],
            xLabel: "seconds into the run"
        )
        let latency = Chart(
            title: "Latency over time (flows completed in each second, from scheduled start)", yUnit: "ms",
            series: [
                .init(name: "p50", color: "#2ca02c", points: seconds.filter { $0.completed > 0 }.map { (Double($0.second), $0.p50) }),
                .init(name: "p99", color: "#ff7f0e", points: seconds.filter { $0.completed > 0 }.map { (Double($0.second), $0.p99) })
            ],
            xLabel: "seconds into the run"
        )
        // Percentiles spread as 1/(1-p): 50, 90, 99, 99.9 equally spaced.
        let spread = distribution.filter { $0[0] < 100 }.map { (log10(1 / max(1e-5, 1 - $0[0] / 100)), $0[1]) }
        let distributionChart = Chart(
            title: "Latency distribution (every flow)", yUnit: "ms",
            series: [.init(name: "latency", color: "#9467bd", points: spread)],
            xLabel: "percentile", xTicks: [(0, "0"), (log10(2), "50"), (1, "90"), (2, "99"), (3, "99.9"), (4, "99.99")]
        )
        func rows(_ rows: [Row]) -> String {
            rows.map { row in
                "<tr><td>\(escape(row.name))</td><td>\(row.count)</td>" + [row.p50, row.p90, row.p99, row.p999, row.max].map { String(format: "<td>%.1f</td>", $0) }.joined() + "</tr>"
            }.joined(separator: "\n")
        }
        let header = "<tr><th></th><th>count</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th></tr>"
        let errors =
            errorsByCode.isEmpty
            ? "<p>No errors.</p>"
            : "<table><tr><th>count</th><th>status code (flow/step)</th></tr>" + errorsByCode.sorted { $0.value > $1.value }.map { "<tr><td>\($0.value)</td><td>\(escape($0.key))</td></tr>" }.joined()
                + "</table>"
        let processes =
            processFigures.isEmpty
            ? "<p>No local StoreBus process was found to meter.</p>"
            : "<table><tr><th>process</th><th>CPU s</th><th>CPU µs/flow</th><th>peak RSS MB</th><th>after warm-up MB (first, low–high)</th></tr>"
                + processFigures.map { process in
                    let soak =
                        process.soakFirstMB.map { String(format: "%.1f, %.1f–%.1f %@", $0, process.soakLowMB ?? 0, process.soakHighMB ?? 0, process.soakFlat == true ? "flat" : "NOT FLAT") } ?? ""
                    return String(
                        format: "<tr><td>%@ (%d)</td><td>%.2f</td><td>%.0f</td><td>%.1f</td><td>%@</td></tr>", escape(process.name), process.pid, process.cpuSeconds, process.cpuMicrosPerFlow,
                        process.peakResidentMB, soak)
                }.joined() + "</table>"
        let soak =
            soakVerdict.map { verdict in
                String(
                    format:
                        "<p class=\"verdict\">Soak: memory <b>%@</b> after %.0f s of warm-up (every process within 10%% of its first sample); median latency %.1f ms in the first third, %.1f ms in the last: <b>%@</b>.</p>",
                    verdict.flat ? "flat" : "NOT flat", verdict.warmUpSeconds, verdict.p50FirstThirdMs, verdict.p50LastThirdMs, verdict.drifted ? "drifted" : "no drift")
            } ?? ""
        let summary = String(
            format: "%d flows completed, %d failed in %.1f s: <b>%.1f flows/s</b> (%@, %d devices, mix %@, gateways %@).",
            recorder.completed, recorder.failed, elapsed, Double(recorder.completed) / max(elapsed, 0.001),
            offeredRate > 0 ? String(format: "offered %.1f/s", offeredRate) : "closed loop", devices, escape(mix), escape(gateways.joined(separator: ", ")))
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>StoreBus load report</title>
            <style>
            body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1000px; }
            h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
            table { border-collapse: collapse; margin: 8px 0; } td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
            td:first-child, th:first-child { text-align: left; } .verdict { background: #f4f4f4; padding: 8px; }
            svg text { font: 11px sans-serif; fill: #333; }
            </style></head><body>
            <h1>StoreBus load report</h1>
            <p>\(summary)</p>
            \(soak)
            <h2>Throughput</h2>
            \(throughput.svg())
            <h2>Latency over time</h2>
            \(latency.svg())
            <h2>Latency distribution</h2>
            \(distributionChart.svg())
            <h2>Flows</h2>
            <table>\(header)
            \(rows(flowRows))</table>
            <h2>Steps</h2>
            <table>\(header)
            \(rows(stepRows))</table>
            <h2>Errors</h2>
            \(errors)
            <h2>Processes</h2>
            \(processes)
            </body></html>
            """
    }
}

func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
}

/// A line chart drawn as inline SVG.
struct Chart {
    struct Series {
        var name: String
        var color: String
        var points: [(Double, Double)]
    }

    var title: String
    var yUnit: String
    var series: [Series]
    var xLabel: String
    var xTicks: [(Double, String)]? = nil

    func svg(width: Double = 900, height: Double = 260) -> String {
        let left = 60.0, right = 20.0, top = 24.0, bottom = 40.0
        let all = series.flatMap(\.points)
        let xMin = all.map(\.0).min() ?? 0, xMax = max((all.map(\.0).max() ?? 1), xMin + 1)
        let yMax = Self.niceCeiling((all.map(\.1).max() ?? 1) * 1.1)
        func x(_ value: Double) -> Double { left + (value - xMin) / (xMax - xMin) * (width - left - right) }
        func y(_ value: Double) -> Double { top + (1 - value / yMax) * (height - top - bottom) }
        var parts: [String] = []
        parts.append("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" role=\"img\" aria-label=\"\(escape(title))\">")
        parts.append("<text x=\"\(left)\" y=\"14\">\(escape(title))</text>")
        for step in 0...4 {
            let value = yMax * Double(step) / 4
            parts.append(String(format: "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>", left, y(value), width - right, y(value)))
            parts.append(String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%@</text>", left - 6, y(value) + 4, Self.format(value)))
        }
        let ticks =
            xTicks
            ?? (0...5).map { index -> (Double, String) in
                let value = xMin + (xMax - xMin) * Double(index) / 5
                return (value, Self.format(value))
            }
        for (value, label) in ticks {
            parts.append(String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%@</text>", x(value), height - bottom + 16, label))
        }
        parts.append(String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%@</text>", left + (width - left - right) / 2, height - 6, escape(xLabel)))
        parts.append(
            String(
                format: "<text x=\"12\" y=\"%.1f\" transform=\"rotate(-90 12 %.1f)\" text-anchor=\"middle\">%@</text>", top + (height - top - bottom) / 2, top + (height - top - bottom) / 2,
                escape(yUnit)))
        parts.append(String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#999\"/>", left, top, width - left - right, height - top - bottom))
        for (index, line) in series.enumerated() {
            if !line.points.isEmpty {
                let path = line.points.map { String(format: "%.1f,%.1f", x($0.0), y($0.1)) }.joined(separator: " ")
                parts.append("<polyline fill=\"none\" stroke=\"\(line.color)\" stroke-width=\"1.8\" points=\"\(path)\"/>")
            }
            let legendX = width - right - 110 - Double(index) * 110
            parts.append(String(format: "<rect x=\"%.1f\" y=\"6\" width=\"10\" height=\"10\" fill=\"%@\"/><text x=\"%.1f\" y=\"15\">%@</text>", legendX, line.color, legendX + 14, escape(line.name)))
        }
        parts.append("</svg>")
        return parts.joined(separator: "\n")
    }

    /// The smallest of 1, 2, 2.5, 5 times a power of ten at or above `value`.
    static func niceCeiling(_ value: Double) -> Double {
        guard value > 0 else { return 1 }
        let power = pow(10, floor(log10(value)))
        for step in [1.0, 2, 2.5, 5, 10] where step * power >= value { return step * power }
        return 10 * power
    }

    static func format(_ value: Double) -> String {
        value >= 100 ? String(format: "%.0f", value) : value >= 10 ? String(format: "%.0f", value) : String(format: "%.1f", value)
    }
}
