import ArgumentParser
import Foundation
import ZeroMQ

/// `storebus-bench soak`: opens and closes many sockets and pushes many messages through the
/// ZeroMQ binding, printing how much resident memory grew after a warm-up. A process of its own, so
/// that nothing else moves the figure; ZeroMQTests runs it and checks the growth.
struct Soak: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check the ZeroMQ binding for leaks (prints RSS growth).")

    @Option(help: "Sockets to open and close after the warm-up.")
    var sockets = 10_000

    @Option(help: "Messages to send through a DEALER/ROUTER pair after the warm-up.")
    var messages = 1_000_000

    func run() throws {
        let context = try ZeroMQ.Context()
        defer { context.terminate() }

        // libzmq frees a closed socket later, on its reaper thread, and each live socket holds a
        // mailbox descriptor. Waiting for the descriptor count to come back to the baseline tells that
        // the reaper has caught up; the churn does so every 100 sockets, so that what is measured is
        // what stays allocated, not how far the reaper fell behind on a busy machine.
        let baselineDescriptors = openDescriptors()
        func settle() {
            let deadline = Date().addingTimeInterval(30)
            while openDescriptors() > baselineDescriptors + 8 && Date() < deadline {
                Thread.sleep(forTimeInterval: 0.001)
            }
        }
        func settledResidentBytes() -> Int {
            settle()
            return residentBytes()
        }
        func churn(_ count: Int, tag: String) throws {
            for index in 0..<count {
                let socket = try Socket(context: context, type: index % 2 == 0 ? .dealer : .router)
                try socket.set(.sendHighWaterMark(100))
                if index % 10 == 0 { try socket.bind("inproc://soak-\(tag)-\(index)") }
                socket.close()
                if index % 100 == 99 { settle() }
            }
        }
        try churn(sockets, tag: "warm")
        let beforeSockets = settledResidentBytes()
        try churn(sockets, tag: "measured")
        print("soak_sockets \(sockets)")
        print("soak_sockets_rss_growth_bytes \(settledResidentBytes() - beforeSockets)")

        let router = try Socket(context: context, type: .router)
        defer { router.close() }
        try router.bind("inproc://soak-messages")
        let dealer = try Socket(context: context, type: .dealer)
        defer { dealer.close() }
        try dealer.connect("inproc://soak-messages")
        let small = Array("ping".utf8)
        let large = [UInt8](repeating: 0x5A, count: 300)
        func pump(_ count: Int) throws {
            var done = 0
            while done < count {
                let batch = min(500, count - done)
                for index in 0..<batch { try dealer.send(frames: [index % 2 == 0 ? small : large]) }
                for _ in 0..<batch {
                    let message = try router.receive()
                    try router.send(frames: [message.frames[0], message.frames[1]])
                    _ = try dealer.receive()
                }
                done += batch
            }
        }
        try pump(max(messages / 10, 1_000))
        let beforeMessages = settledResidentBytes()
        try pump(messages)
        print("soak_messages \(messages)")
        print("soak_messages_rss_growth_bytes \(settledResidentBytes() - beforeMessages)")
    }
}

/// Resident set size of this process, from /proc/self/statm.
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Number of open file descriptors of this process.
func openDescriptors() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
}
