import ArgumentParser
import Foundation
import StoreBusSDK
import Synchronization

/// `storectl download`: hosted content of this device's transactions.
struct DownloadCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: "Download the hosted content of purchased or restored transactions, with a live progress bar.",
        subcommands: [DownloadStartCommand.self, DownloadResumeCommand.self, DownloadPauseCommand.self, DownloadCancelCommand.self],
        defaultSubcommand: DownloadStartCommand.self
    )
}

/// Where downloads go and which ones.
struct DownloadOptions: ParsableArguments {
    @Option(help: "Where content is put (a partial file while it downloads, then a folder holding Contents/). Default: STOREBUS_DOWNLOAD_DIR or ./storebus-downloads.")
    var directory: String?

    @Argument(help: "Transaction identifiers whose content to act on.")
    var transactions: [String]

    /// A launched queue writing into the folder, and the downloads of the transactions named.
    func open(_ client: ClientOptions, _ wait: WaitOptions) async throws -> (PaymentQueue, [Download]) {
        let queue = try await client.launchedQueue(wait, downloads: directory)
        var downloads: [Download] = []
        for id in transactions {
            guard let transaction = queue.transactions.first(where: { $0.transactionIdentifier == id }) else {
                await queue.close()
                throw Failure(description: "Transaction \(id) is not an unfinished transaction of account \(client.account) on device \(client.device).")
            }
            guard !transaction.downloads.isEmpty else {
                await queue.close()
                throw Failure(description: "Transaction \(id) (\(transaction.payment.productIdentifier)) has no hosted content.")
            }
            downloads += transaction.downloads
        }
        return (queue, downloads)
    }
}

/// `storectl download [start]`: starts downloads and shows their progress until they end.
struct DownloadStartCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "start", abstract: "Start downloads and show their progress until they end (Ctrl-C pauses them).")

    @OptionGroup var client: ClientOptions
    @OptionGroup var wait: WaitOptions
    @OptionGroup var downloads: DownloadOptions

    func run() async throws {
        let (queue, chosen) = try await downloads.open(client, wait)
        try await transfer(queue, chosen) { try await queue.startDownloads($0) }
    }
}

/// `storectl download resume`: resumes paused or failed downloads from the bytes kept.
struct DownloadResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "resume", abstract: "Resume paused or failed downloads from the bytes kept, showing their progress (Ctrl-C pauses them).")

    @OptionGroup var client: ClientOptions
    @OptionGroup var wait: WaitOptions
    @OptionGroup var downloads: DownloadOptions

    func run() async throws {
        let (queue, chosen) = try await downloads.open(client, wait)
        try await transfer(queue, chosen) { try await queue.resumeDownloads($0) }
    }
}

/// `storectl download pause`.
struct DownloadPauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Pause downloads; `download resume` continues them.")

    @OptionGroup var client: ClientOptions
    @OptionGroup var wait: WaitOptions
    @OptionGroup var downloads: DownloadOptions

    func run() async throws {
        let (queue, chosen) = try await downloads.open(client, wait)
        let paused = try await sentence { try await queue.pauseDownloads(chosen) }
        for download in paused { print("\(download.transactionIdentifier) \(download.contentIdentifier) \(download.state.rawValue), \(queue.bytesKept(of: download)) bytes kept") }
        await queue.close()
    }
}

/// `storectl download cancel`.
struct DownloadCancelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "cancel", abstract: "Cancel downloads and discard their partial data.")

    @OptionGroup var client: ClientOptions
    @OptionGroup var wait: WaitOptions
    @OptionGroup var downloads: DownloadOptions

    func run() async throws {
        let (queue, chosen) = try await downloads.open(client, wait)
        let cancelled = try await sentence { try await queue.cancelDownloads(chosen) }
        for download in cancelled { print("\(download.transactionIdentifier) \(download.contentIdentifier) \(download.state.rawValue)") }
        await queue.close()
    }
}

/// Begins `chosen` with `begin`, shows a progress bar until each is finished, failed or cancelled,
/// and pauses them on Ctrl-C; closes the queue after, unless `close` is false. Throws when one did
/// not finish.
func transfer(_ queue: PaymentQueue, _ chosen: [Download], close: Bool = true, begin: ([Download]) async throws -> [Download]) async throws {
    let callbacks = queue.callbacks
    let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
    signal(SIGINT, SIG_IGN)
    let interrupted = Atomic<Bool>(false)
    interrupt.setEventHandler { interrupted.store(true, ordering: .relaxed) }
    interrupt.resume()
    defer { interrupt.cancel() }

    let started = try await sentence { try await begin(chosen) }
    let bar = ProgressBar(names: started.map { "\($0.transactionIdentifier) \($0.contentIdentifier)" })
    let key: @Sendable (Download) -> String = { "\($0.transactionIdentifier)|\($0.contentIdentifier)" }
    let done: @Sendable (Download) -> Bool = { [.finished, .failed, .cancelled].contains($0.state) }
    let board = DownloadBoard(Dictionary(uniqueKeysWithValues: started.map { (key($0), $0) }))
    let consumer = Task {
        for await callback in callbacks {
            guard case .updatedDownloads(let changed) = callback.event else { continue }
            board.states.withLock { states in
                for download in changed {
                    guard let known = states[key(download)], !done(known) else { continue }
                    // A tick of this queue says active; a state change from the store wins over it.
                    if callback.seq == 0 && download.state == .active && known.state != .active { continue }
                    states[key(download)] = download
                }
            }
        }
    }
    var latest = board.states.withLock { $0 }
    while !latest.values.allSatisfy(done) {
        if interrupted.load(ordering: .relaxed) {
            consumer.cancel()
            bar.end()
            let stopped = try await sentence { try await queue.pauseDownloads(chosen) }
            for download in stopped {
                print(
                    "paused \(download.transactionIdentifier) \(download.contentIdentifier): \(queue.bytesKept(of: download)) bytes kept; `storectl download resume \(download.transactionIdentifier)` continues"
                )
            }
            await queue.close()
            throw ExitCode(130)
        }
        bar.show(started.map { latest[key($0)]! })
        try? await Task.sleep(for: .milliseconds(250))
        latest = board.states.withLock { $0 }
    }
    consumer.cancel()
    bar.end()
    for download in latest.values.sorted(by: { $0.transactionIdentifier < $1.transactionIdentifier }) {
        switch download.state {
        case .finished: print("finished \(download.transactionIdentifier) \(download.contentIdentifier): \(download.contentURL?.path ?? "")")
        case .failed:
            print("failed \(download.transactionIdentifier) \(download.contentIdentifier): \(download.error?.localizedDescription ?? "no reason given"); \(queue.bytesKept(of: download)) bytes kept")
        default: print("\(download.state.rawValue) \(download.transactionIdentifier) \(download.contentIdentifier)")
        }
    }
    if close || !latest.values.allSatisfy({ $0.state == .finished }) { await queue.close() }
    if !latest.values.allSatisfy({ $0.state == .finished }) {
        throw Failure(description: "Not every download finished; `storectl download resume` continues a failed one from the bytes kept.")
    }
}

/// The downloads' latest states, as the callbacks tell them.
final class DownloadBoard: Sendable {
    let states: Mutex<[String: Download]>

    init(_ states: [String: Download]) { self.states = Mutex(states) }
}

/// One line per download, redrawn in place on a terminal and once a second otherwise.
final class ProgressBar: @unchecked Sendable {
    private let names: [String]
    private let terminal = isatty(STDOUT_FILENO) != 0
    private var lastLine = ContinuousClock.now - .seconds(2)
    private var drawn = 0
    private var start = ContinuousClock.now
    private var firstBytes: [Int64]?

    init(names: [String]) { self.names = names }

    func show(_ downloads: [Download]) {
        let now = ContinuousClock.now
        guard terminal || now - lastLine >= .seconds(1) else { return }
        lastLine = now
        let bytes = downloads.map { Int64($0.progress * Double($0.contentLength)) }
        if firstBytes == nil {
            firstBytes = bytes
            start = now
        }
        let elapsed = Double((now - start).components.seconds) + Double((now - start).components.attoseconds) / 1e18
        var lines: [String] = []
        for (index, download) in downloads.enumerated() {
            let width = 30
            let filled = Int((download.progress * Double(width)).rounded(.down))
            let speed = elapsed > 0.5 ? Double(bytes[index] - (firstBytes?[index] ?? 0)) / elapsed : 0
            let left = download.timeRemaining >= 0 ? "\(Int(download.timeRemaining.rounded(.up))) s left" : "time left unknown"
            lines.append(
                String(
                    format: "%@ [%@%@] %3d%% %@ %@ %@", names[index],
                    String(repeating: "#", count: min(filled, width)), String(repeating: ".", count: max(0, width - filled)),
                    Int(download.progress * 100), Self.rate(speed), left, download.state.rawValue))
        }
        if terminal {
            if drawn > 0 { print("\u{1B}[\(drawn)A", terminator: "") }
            for line in lines { print("\u{1B}[2K" + line) }
            drawn = lines.count
        } else {
            for line in lines { print(line) }
        }
        fflush(nil)
    }

    func end() { drawn = 0 }

    static func rate(_ bytesPerSecond: Double) -> String {
        bytesPerSecond >= 1_048_576 ? String(format: "%.1f MB/s", bytesPerSecond / Double(1 << 20)) : String(format: "%.0f KB/s", bytesPerSecond / 1024)
    }
}
