import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// The console against real processes (a cluster, storectl, the console), in a real browser:
/// Debian's Chromium, headless, driven by chromedriver. What an operator does: log in, watch a
/// purchase arrive live, approve an Ask to Buy, refund, set a failing policy; what an attacker
/// tries: a wrong key, a post without a login, a form of another site. Each page is checked by
/// axe-core in the same browser.
@Suite("The console in a real browser", .serialized)
struct ConsoleBrowserTests {
    /// The console, started against the cluster's gateway, and its address.
    /// Its live streams last a second (`streamSeconds`), so that a test sees them end and resume.
    static func startConsole(_ cluster: StoreCluster) async throws -> (ServiceProcess, String) {
        let port = try unusedLoopbackPort()
        let config = cluster.directory.url.appendingPathComponent("console.json")
        try Data(#"{"service": {"streamSeconds": 1, "activityPollMilliseconds": 100}}"#.utf8).write(to: config)
        let console = ServiceProcess(
            name: "storebus-console",
            arguments: [
                "--config", config.path, "--rpc-endpoint", cluster.directory.ipcEndpoint("console"), "--gateway-endpoint", cluster.gatewayEndpoints[0],
                "--http-address", "127.0.0.1:\(port)", "--log-level", "info"
            ],
            logFile: cluster.directory.url.appendingPathComponent("console.log"))
        try console.start()
        try await console.waitUntilReady()
        let address = "http://127.0.0.1:\(port)"
        let up = await waitUntil(timeout: .seconds(30), interval: .milliseconds(100)) {
            (try? await runCommand("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(address)/login"]))?.output == "200"
        }
        guard up else { throw TestingError("the console never served \(address)/login:\n\(console.output)") }
        return (console, address)
    }

    /// Runs storectl against the cluster's first gateway.
    static func storectl(_ cluster: StoreCluster, _ arguments: [String], name: String) async throws -> (Int32?, String) {
        let process = ServiceProcess(
            name: "storectl", arguments: arguments + ["--gateway", cluster.gatewayEndpoints[0]], logFile: cluster.directory.url.appendingPathComponent("\(name).log"))
        try process.start(environment: ["STOREBUS_API_KEY": appKey, "STOREBUS_ADMIN_KEY": adminKey, "STOREBUS_DOWNLOAD_DIR": cluster.directory.path("storectl-downloads")])
        let status = await process.waitForExit(timeout: .seconds(120))
        return (status, process.output)
    }

    /// axe-core's script, from the PyPI package make test-deps installs (axe-core-python).
    static func axeScript() async throws -> String {
        let root = deployDirectory.deletingLastPathComponent()
        let python = root.appendingPathComponent(".build/python-tools/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "make test-deps installs axe-core-python into .build/python-tools")
        let found = try await runCommand(python, ["-c", "import axe_core_python, os; print(os.path.join(os.path.dirname(axe_core_python.__file__), 'axe.min.js'), end='')"])
        try #require(found.status == 0, "axe-core-python is not installed: \(found.output)")
        return try String(contentsOfFile: found.output, encoding: .utf8)
    }

    /// axe-core's violations of the page shown, with their impact.
    static func violations(_ browser: WebDriver, axe: String) async throws -> [(id: String, impact: String, help: String, nodes: Int)] {
        _ = try await browser.execute(axe + "\n;return typeof axe;")
        let answer = try await browser.executeAsync(
            """
            const done = arguments[arguments.length - 1];
            axe.run(document, { resultTypes: ["violations"] }).then(function (results) {
              done(results.violations.map(function (v) { return { id: v.id, impact: v.impact || "", help: v.help, nodes: v.nodes.length }; }));
            }, function (error) { done([{ id: "axe-error", impact: "critical", help: String(error), nodes: 0 }]); });
            """)
        guard let found = answer as? [[String: Any]] else { throw TestingError("axe-core gave no list of violations: \(String(describing: answer))") }
        return found.map {
            (id: $0["id"] as? String ?? "", impact: $0["impact"] as? String ?? "", help: $0["help"] as? String ?? "", nodes: $0["nodes"] as? Int ?? 0)
        }
    }

    /// The page's serious and critical accessibility problems, as sentences (none expected).
    static func accessibility(_ browser: WebDriver, axe: String, page: String) async throws -> [String] {
        try await violations(browser, axe: axe).filter { $0.impact == "serious" || $0.impact == "critical" }.map {
            "\(page): \($0.id) (\($0.impact), \($0.nodes) elements): \($0.help)"
        }
    }

    /// The screenshot of the page shown, kept in the test's directory and, when
    /// STOREBUS_CONSOLE_SCREENSHOTS names a folder (`make screenshots`), there too.
    static func screenshot(_ browser: WebDriver, _ name: String, in directory: URL) async throws {
        let png = try await browser.screenshot()
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "\(name) is a PNG")
        try png.write(to: directory.appendingPathComponent("\(name).png"))
        if let folder = ProcessInfo.processInfo.environment["STOREBUS_CONSOLE_SCREENSHOTS"], !folder.isEmpty {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try png.write(to: URL(fileURLWithPath: folder).appendingPathComponent("\(name).png"))
        }
    }

    /// A base64 receipt with one byte of its signature (near its end) changed.
    static func damaged(_ receipt: String) -> String {
        guard var bytes = Data(base64Encoded: receipt).map(Array.init), bytes.count > 64 else { return receipt }
        bytes[bytes.count - 20] ^= 0x01
        return Data(bytes).base64EncodedString()
    }

    /// The identifier of the first transaction storectl printed.
    static func transactionID(_ output: String) -> String? {
        output.split(separator: "\n").lazy.compactMap { line -> String? in
            guard let range = line.range(of: "updatedTransactions: ") else { return nil }
            return line[range.upperBound...].split(separator: " ").first.map(String.init)
        }.first
    }

    @Test(
        "an operator in headless Chromium: a wrong key and a post without a login are refused; logged in, a purchase from storectl appears live, an Ask to Buy approved on the page reaches the device, a refund shows in the decoded receipt, a failing policy fails the next storectl buy with paymentNotAllowed; a form of another site is refused; no page has a serious accessibility problem"
    )
    func operatorInTheBrowser() async throws {
        try #require(WebDriver.isInstalled, "make test-deps installs Debian's chromium and chromium-driver")
        let axe = try await Self.axeScript()
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let (console, address) = try await Self.startConsole(cluster)
            let shots = cluster.directory.url.appendingPathComponent("screenshots")
            try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
            let browser = try await WebDriver(directory: cluster.directory.url)
            var problems: [String] = []
            do {
                // The checker finds what it is there to find: an image without a text and a field
                // without a label are critical.
                try await browser.go("data:text/html,<!DOCTYPE html><html lang=en><head><title>t</title></head><body><main><img src=x.png><input></main></body></html>")
                let planted = try await Self.violations(browser, axe: axe)
                #expect(Set(planted.filter { $0.impact == "critical" }.map(\.id)).isSuperset(of: ["image-alt", "label"]), "\(planted)")

                // Not logged in: every page leads to the login; an app's key is not an admin's.
                try await browser.go("\(address)/apps/\(puzzle)")
                #expect(try await browser.url == "\(address)/login")
                problems += try await Self.accessibility(browser, axe: axe, page: "login")
                try await Self.screenshot(browser, "login", in: shots)
                try await browser.type("#admin-key", appKey)
                try await browser.click("form[action='/login'] button")
                #expect(try await browser.waitForText("#flash") { $0.contains("not an admin key") }.contains("not an admin key"))
                try await browser.go("\(address)/")
                #expect(try await browser.url == "\(address)/login")
                // No action without a login, whatever the form says.
                let anonymous = try await runCommand(
                    "/usr/bin/curl", ["-s", "-w", "\n%{http_code}", "-X", "POST", "-d", "confirm=yes&formToken=guess", "\(address)/actions/reset"])
                #expect(anonymous.output.hasSuffix("\n401") && anonymous.output.contains("Log in first"), "\(anonymous.output)")

                // Logged in: the store's page, following the log live.
                try await browser.type("#admin-key", adminKey)
                try await browser.click("form[action='/login'] button")
                // The login page has a heading too: read until the store's page has replaced it.
                #expect(try await browser.waitForText("h1") { $0 == "Store" } == "Store")
                try await browser.waitForText("[data-live-state]") { $0.hasPrefix("Live") }
                _ = try await browser.execute("window.storebusMarker = 42; return 1;")
                let (bought, buyOutput) = try await Self.storectl(cluster, ["buy", levelPack, "--account", "walt", "--device", "terminal"], name: "buy-walt")
                #expect(bought == 0, "\(buyOutput)")
                let walt = try #require(Self.transactionID(buyOutput), "\(buyOutput)")
                #expect(try await browser.waitForText("#tx-\(walt) .state") { $0 == "purchased" } == "purchased")
                // The row came by the stream: the page was not loaded again.
                #expect(try await browser.execute("return window.storebusMarker;") as? Int == 42)
                // Streams end every second here and the browser opens the next where the last
                // stopped: purchases made across those ends each arrive, once.
                func opens() async throws -> Int {
                    try await browser.execute("return Number(document.querySelector('[data-live-stream]').getAttribute('data-live-opens'));") as? Int ?? 0
                }
                var more: [String] = []
                for index in 0..<4 {
                    // Each after the stream was opened again.
                    let before = try await opens()
                    #expect(await waitUntil(timeout: .seconds(30), interval: .milliseconds(50)) { ((try? await opens()) ?? 0) > before }, "the stream opened again")
                    let (status, output) = try await Self.storectl(cluster, ["buy", levelPack, "--account", "walt\(index)", "--device", "terminal"], name: "buy-walt\(index)")
                    #expect(status == 0, "\(output)")
                    if let id = Self.transactionID(output) { more.append(id) }
                }
                for id in more { #expect(try await browser.waitForText("#tx-\(id) .state") { $0 == "purchased" } == "purchased") }
                let opened = try await opens()
                #expect(opened >= 5, "the stream was opened \(opened) times")
                let rows = try await browser.execute("return document.querySelectorAll('[data-live-transactions] tbody tr').length;") as? Int
                #expect(rows == 5, "one row each for 5 transactions: \(String(describing: rows))")
                #expect(try await browser.execute("return window.storebusMarker;") as? Int == 42)
                problems += try await Self.accessibility(browser, axe: axe, page: "store")
                try await Self.screenshot(browser, "store", in: shots)

                // Ask to Buy: the policy set on the account's page, a device's purchase deferred,
                // approved on its transaction's page; the device hears it purchased.
                try await browser.go("\(address)/apps/\(puzzle)/accounts/kid")
                try await browser.click("#policy-mode option[value='ask-to-buy']")
                try await browser.click("form[action='/actions/policy'] button[type='submit']")
                #expect(try await browser.waitForText("#flash") { $0.contains("ask to buy") }.contains("Payment policy set"))
                let phone = try PaymentQueue(configuration: cluster.configuration(account: "kid"))
                let recorder = Recorder(phone)
                #expect(await recorder.attached())
                let deferred = try await phone.addPayment(Payment(productIdentifier: levelPack))
                #expect(await recorder.wait(timeout: .seconds(30)) { $0.states(of: deferred.id).last == .deferred })
                try await browser.go("\(address)/apps/\(puzzle)/accounts/kid/transactions/\(deferred.id)")
                #expect(try await browser.text(".facts .state") == "deferred")
                problems += try await Self.accessibility(browser, axe: axe, page: "transaction")
                try await Self.screenshot(browser, "transaction-deferred", in: shots)
                try await browser.click("form[action='/actions/approve'] button")
                #expect(try await browser.waitForText("#flash") { $0.contains("Approved") }.contains("purchased"))
                #expect(await recorder.purchased(deferred.id), "the device heard its Ask to Buy approved")
                // Its hosted content downloaded: the account's page shows it served whole.
                let download = try #require(phone.transactions.first { $0.id == deferred.id }?.downloads.first)
                try await phone.startDownloads([download])
                #expect(await recorder.download(deferred.id, reaches: .finished))
                try await browser.go("\(address)/apps/\(puzzle)/accounts/kid")
                let served =
                    try await browser.execute(
                        """
                        const cells = document.querySelectorAll("#downloads tbody tr td");
                        return cells.length ? [cells[3].textContent, document.querySelector("#downloads progress").getAttribute("value")] : [];
                        """) as? [String]
                #expect(served == ["finished", "100"], "\(String(describing: served))")
                try await browser.go("\(address)/apps/\(puzzle)/accounts/kid/transactions/\(deferred.id)")

                // A refund from the page: the receipt the console decodes shows the cancellation.
                try await browser.click("#refund-confirm")
                try await browser.click("form[action='/actions/refund'] button")
                #expect(try await browser.waitForText("#flash") { $0.contains("Refunded") }.contains("Refunded transaction \(deferred.id)"))
                try await browser.go("\(address)/apps/\(puzzle)/accounts/kid/receipt")
                #expect(try await browser.text(".facts .state").hasPrefix("valid"))
                let cancelled =
                    try await browser.execute(
                        """
                        const id = arguments[0];
                        const row = Array.from(document.querySelectorAll("main table tbody tr")).find(function (r) { return r.cells[0].textContent === id; });
                        return row ? row.cells[6].textContent : "no row";
                        """, [deferred.id]) as? String
                #expect(cancelled.map { $0.hasPrefix("20") } == true, "the receipt's entry of \(deferred.id) says when it was cancelled: \(cancelled ?? "nothing")")
                problems += try await Self.accessibility(browser, axe: axe, page: "receipt")
                try await Self.screenshot(browser, "receipt", in: shots)
                // The same receipt pasted into the receipts page decodes the same; one byte of its
                // signature changed does not verify.
                let receiptData = try await browser.execute("return document.querySelector('.receipt-data').textContent;") as? String ?? ""
                #expect(receiptData.count > 100)
                for (data, verdict) in [(receiptData, "valid"), (Self.damaged(receiptData), "the signature is not authentic")] {
                    try await browser.go("\(address)/receipts")
                    _ = try await browser.execute("document.getElementById('receipt-data').value = arguments[0]; return 1;", [data])
                    try await browser.click("form[action='/receipts'] button")
                    #expect(try await browser.text(".facts .state").hasPrefix(verdict), "\(verdict)")
                }
                try await browser.go("\(address)/apps/\(puzzle)/accounts/kid")
                problems += try await Self.accessibility(browser, axe: axe, page: "account")
                try await Self.screenshot(browser, "account", in: shots)
                await phone.close()

                // A failing policy set on the page fails the next storectl buy with its error.
                try await browser.go("\(address)/apps/\(puzzle)/accounts/lena")
                try await browser.click("#policy-mode option[value='fail']")
                try await browser.click("#policy-error option[value='paymentNotAllowed']")
                try await browser.click("form[action='/actions/policy'] button[type='submit']")
                #expect(try await browser.waitForText("#flash") { $0.contains("paymentNotAllowed") }.contains("fail with paymentNotAllowed"))
                let (failed, failedOutput) = try await Self.storectl(cluster, ["buy", levelPack, "--account", "lena"], name: "buy-lena")
                #expect(failed != 0 && failedOutput.contains("paymentNotAllowed"), "\(failedOutput)")

                // A subscription's controls, one of them a device's own call (auto-renew).
                let subscriber = try PaymentQueue(configuration: cluster.configuration(account: "sub"))
                let subscriberLog = Recorder(subscriber)
                #expect(await subscriberLog.attached())
                let monthly = try await subscriber.addPayment(Payment(productIdentifier: "com.storebus.demo.puzzle.premium.monthly"))
                #expect(await subscriberLog.purchased(monthly.id))
                try await browser.go("\(address)/apps/\(puzzle)/accounts/sub")
                #expect(try await browser.text("section[aria-labelledby='subscriptions-heading'] .card .state") == "active")
                try await browser.click("form[action='/actions/renew-now'] button")
                #expect(try await browser.waitForText("#flash") { $0.contains("Renewed") }.contains("active"))
                try await browser.click("form[action='/actions/auto-renew'] button")
                #expect(try await browser.waitForText("#flash") { $0.contains("Auto-renew") }.contains("is off"))
                #expect(try await browser.execute("return document.body.textContent.includes('Turn auto-renew on');") as? Bool == true)
                await subscriber.close()

                // The sandbox's own controls.
                try await browser.go("\(address)/sandbox")
                try await browser.click("form[action='/actions/rotate-key'] button")
                #expect(try await browser.waitForText("#flash") { $0.contains("signing key") }.contains("A new signing key signs"))
                try await browser.click("#reload-dry")
                try await browser.click("form[action='/actions/reload-catalog'] button")
                #expect(try await browser.waitForText("#flash") { $0.contains("catalog") }.contains("checked and can be loaded"))

                // The other pages, for the accessibility check and the screenshots.
                for (name, path) in [("app", "/apps/\(puzzle)"), ("sandbox", "/sandbox"), ("receipts", "/receipts")] {
                    try await browser.go("\(address)\(path)")
                    _ = try await browser.element("footer")
                    problems += try await Self.accessibility(browser, axe: axe, page: name)
                    try await Self.screenshot(browser, name, in: shots)
                }

                // A page of another site posts a form to the console (the operator still logged
                // in): refused, and nothing is reset.
                let evil = cluster.directory.url.appendingPathComponent("evil")
                try FileManager.default.createDirectory(at: evil, withIntermediateDirectories: true)
                try """
                <!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Win a prize</title></head><body>
                <form id="f" method="post" action="\(address)/actions/reset"><input name="confirm" value="yes"><input name="formToken" value="guess"><input name="back" value="/"></form>
                <script>document.getElementById("f").submit();</script></body></html>
                """.write(to: evil.appendingPathComponent("evil.html"), atomically: true, encoding: .utf8)
                let evilPort = try unusedLoopbackPort()
                let site = ServiceProcess(
                    name: "/usr/bin/python3", arguments: ["-m", "http.server", String(evilPort), "--bind", "127.0.0.1", "--directory", evil.path],
                    logFile: cluster.directory.url.appendingPathComponent("evil-site.log"))
                try site.start()
                _ = await waitUntil(timeout: .seconds(30), interval: .milliseconds(100)) {
                    (try? await runCommand("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(evilPort)/evil.html"]))?.output == "200"
                }
                try await browser.go("http://127.0.0.1:\(evilPort)/evil.html")
                let refusal = try await browser.waitForText("main") { $0.contains("Refused") || $0.contains("Log in") }
                #expect(refusal.contains("another site"), "\(refusal)")
                _ = await site.stop()
                let admin = try cluster.admin()
                let kept = try await admin.call(
                    Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
                    .with {
                        $0.appBundleID = puzzle
                        $0.accountID = "walt"
                        $0.includeFinished = true
                    })
                #expect(kept.transactions.map(\.transactionIdentifier) == [walt], "nothing was reset")
                // The operator's own reset, confirmed, does.
                try await browser.go("\(address)/sandbox")
                try await browser.click("#reset-confirm")
                try await browser.click("form[action='/actions/reset'] button")
                #expect(try await browser.waitForText("#flash") { $0.contains("reset") }.contains("The sandbox was reset"))
                let after = try await admin.call(
                    Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
                    .with {
                        $0.appBundleID = puzzle
                        $0.accountID = "walt"
                        $0.includeFinished = true
                    })
                #expect(after.transactions.isEmpty, "\(after.transactions.map(\.transactionIdentifier))")
                await admin.close()
            } catch {
                Issue.record("the browser session failed: \(error)\nconsole log:\n\(console.output)")
            }
            #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
            await browser.close()

            // Without JavaScript every action still works (forms and redirects); the live line
            // says to reload.
            let plain = try await WebDriver(directory: cluster.directory.url, javascript: false)
            do {
                try await plain.go("\(address)/login")
                try await plain.type("#admin-key", adminKey)
                try await plain.click("form[action='/login'] button")
                // Logged in once the store's page is there (the login's redirect lands before the
                // next page is asked for).
                try await plain.waitForText("h1") { $0 == "Store" }
                try await plain.go("\(address)/apps/\(puzzle)/accounts/nojs")
                // With the script, the line would say "Live" well within this.
                try await Task.sleep(for: .seconds(2))
                #expect(try await plain.text("[data-live-state]").hasPrefix("Reload the page"))
                try await plain.click("#policy-mode option[value='interrupt']")
                try await plain.click("form[action='/actions/policy'] button[type='submit']")
                #expect(try await plain.waitForText("#flash") { $0.contains("Payment policy set") }.contains("interrupt"))
                #expect(try await plain.text("main strong") == "interrupt")
            } catch {
                Issue.record("the browser without JavaScript failed: \(error)\nconsole log:\n\(console.output)")
            }
            await plain.close()
            _ = await console.stop()
        }
    }
}
