import AsyncHTTPClient
import Foundation
import NIOCore
import StoreBusTesting

/// A headless Chromium driven through Debian's chromedriver by the W3C WebDriver protocol (JSON over
/// HTTP): the few commands the console's tests need, each waiting for what it looks for, so that
/// no test depends on a page being quick.
final class WebDriver {
    let driver: ServiceProcess
    let base: String
    let http = HTTPClient(eventLoopGroupProvider: .singleton)
    private(set) var session = ""

    /// The key W3C WebDriver gives an element reference under.
    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Starts chromedriver on a free port (its log in `directory`) and opens a headless Chromium,
    /// with JavaScript turned off when `javascript` is false.
    init(directory: URL, javascript: Bool = true) async throws {
        let port = try unusedLoopbackPort()
        base = "http://127.0.0.1:\(port)"
        driver = ServiceProcess(
            name: Self.chromedriver, arguments: ["--port=\(port)", "--allowed-ips=127.0.0.1"], logFile: directory.appendingPathComponent("chromedriver.log"))
        // Chromium makes its scratch directories (org.chromium.Chromium.*) in TMPDIR and leaves
        // some behind: they go in the test's directory, which the test removes.
        let scratch = directory.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        try driver.start(environment: ["TMPDIR": scratch.path])
        var ready = false
        for _ in 0..<300 where !ready {
            if let status = try? await raw("GET", "/status", nil) as? [String: Any], (status["ready"] as? Bool) == true {
                ready = true
            } else {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        guard ready else { throw Failure(description: "chromedriver did not start: \(driver.output)") }
        let answer = try await raw(
            "POST", "/session",
            [
                "capabilities": [
                    "alwaysMatch": [
                        "browserName": "chrome",
                        "goog:chromeOptions": [
                            "prefs": ["profile.managed_default_content_settings.javascript": javascript ? 1 : 2],
                            "binary": Self.chromium,
                            "args": [
                                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1100",
                                "--user-data-dir=\(directory.appendingPathComponent(javascript ? "chromium-profile" : "chromium-profile-nojs").path)", "--no-first-run"
                            ]
                        ]
                    ]
                ]
            ])
        guard let value = answer as? [String: Any], let id = value["sessionId"] as? String else {
            throw Failure(description: "no WebDriver session: \(String(describing: answer))")
        }
        session = id
    }

    static var chromedriver: String { ProcessInfo.processInfo.environment["STOREBUS_CHROMEDRIVER"] ?? "/usr/bin/chromedriver" }
    static var chromium: String { ProcessInfo.processInfo.environment["STOREBUS_CHROMIUM"] ?? "/usr/bin/chromium" }

    /// Whether Debian's chromium and chromium-driver are installed (make test installs them).
    static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: chromedriver) && FileManager.default.isExecutableFile(atPath: chromium)
    }

    func close() async {
        if !session.isEmpty { _ = try? await raw("DELETE", "/session/\(session)", nil) }
        _ = await driver.stop(grace: .seconds(5))
        try? await http.shutdown()
    }

    /// One command: its answer's `value`.
    @discardableResult
    func raw(_ method: String, _ path: String, _ body: Any?) async throws -> Any? {
        var request = HTTPClientRequest(url: base + path)
        request.method = .init(rawValue: method)
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        }
        let response = try await http.execute(request, timeout: .seconds(120))
        let data = Data(buffer: try await response.body.collect(upTo: 64 << 20))
        let object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) as? [String: Any]
        let value = object?["value"]
        if let error = value as? [String: Any], let kind = error["error"] as? String {
            throw Failure(description: "WebDriver \(method) \(path): \(kind): \(error["message"] as? String ?? "")")
        }
        return value
    }

    func command(_ method: String, _ path: String, _ body: Any? = nil) async throws -> Any? {
        try await raw(method, "/session/\(session)\(path)", body ?? (method == "POST" ? [String: Any]() : nil))
    }

    func go(_ url: String) async throws {
        try await command("POST", "/url", ["url": url])
    }

    var url: String {
        get async throws { try await command("GET", "/url") as? String ?? "" }
    }

    /// The first element `css` selects, waiting up to `timeout` for one.
    func element(_ css: String, timeout: Duration = .seconds(30)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        var last = ""
        while true {
            do {
                if let found = try await command("POST", "/element", ["using": "css selector", "value": css]) as? [String: Any],
                    let id = found[Self.elementKey] as? String
                {
                    return id
                }
            } catch {
                last = "\(error)"
            }
            guard ContinuousClock.now < deadline else { throw Failure(description: "no element \(css) on \(try await url) within \(timeout): \(last)") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Whether `css` selects something now.
    func exists(_ css: String) async throws -> Bool {
        let found = try await command("POST", "/elements", ["using": "css selector", "value": css]) as? [Any]
        return !(found ?? []).isEmpty
    }

    func click(_ css: String) async throws {
        let id = try await element(css)
        try await command("POST", "/element/\(id)/click")
    }

    func type(_ css: String, _ text: String) async throws {
        let id = try await element(css)
        try await command("POST", "/element/\(id)/clear")
        try await command("POST", "/element/\(id)/value", ["text": text])
    }

    /// The text of the first element `css` selects, waiting up to `timeout` for one. A live page
    /// replaces its elements as events come: an element replaced between finding it and reading it
    /// ("stale element reference") is found again.
    func text(_ css: String, timeout: Duration = .seconds(30)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            let id = try await element(css, timeout: max(.zero, deadline - ContinuousClock.now))
            do {
                return try await command("GET", "/element/\(id)/text") as? String ?? ""
            } catch let error as Failure where error.description.contains("stale element") && ContinuousClock.now < deadline {
                continue
            }
        }
    }

    /// Waits until the text of `css` satisfies `condition`; the text last seen.
    @discardableResult
    func waitForText(_ css: String, timeout: Duration = .seconds(60), _ condition: (String) -> Bool) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        var last = ""
        while ContinuousClock.now < deadline {
            if let text = try? await text(css, timeout: .milliseconds(200)) {
                last = text
                if condition(text) { return text }
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw Failure(description: "the text of \(css) never came right; last \"\(last)\"")
    }

    /// Runs `script` in the page (its `arguments`), returning its value.
    func execute(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
        try await command("POST", "/execute/sync", ["script": script, "args": arguments])
    }

    /// Runs `script`, which calls its last argument with the result.
    func executeAsync(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
        try await command("POST", "/timeouts", ["script": 120_000])
        return try await command("POST", "/execute/async", ["script": script, "args": arguments])
    }

    /// The page as a PNG.
    func screenshot() async throws -> Data {
        guard let text = try await command("GET", "/screenshot") as? String, let data = Data(base64Encoded: text) else {
            throw Failure(description: "no screenshot")
        }
        return data
    }
}
