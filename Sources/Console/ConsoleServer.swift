import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import NIOCore
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreBusSDK
import StoreSchema
import Synchronization

/// The console's HTTP face: pages for people, their forms' actions, and the live stream. Every page
/// but the login needs a login (the session cookie); every post must come from the console's own
/// pages (its origin, and the login's form token), so that another site cannot act in an
/// operator's name.
struct ConsoleServer: Sendable {
    static let cookie = "storebus_console"
    /// Seconds a connection may stay silent.
    static let idleSeconds: Int64 = 20
    /// Largest form body taken (a pasted receipt holds a few hundred kilobytes at most).
    static let maxForm = 2 << 20

    let pages: ConsolePages
    let sessions: ConsoleSessions
    let link: GatewayLink
    let library: MustacheLibrary
    let configuration: ConsoleConfiguration
    let stopping: ConsoleStopping
    let logger: Logger

    init(link: GatewayLink, configuration: ConsoleConfiguration, stopping: ConsoleStopping, logger: Logger) throws {
        self.link = link
        pages = ConsolePages(link: link)
        sessions = ConsoleSessions(idle: .seconds(configuration.sessionIdleSeconds), limit: configuration.maxSessions)
        var library = MustacheLibrary()
        for (name, text) in ConsoleTemplates.all { try library.register(text, named: name) }
        self.library = library
        self.configuration = configuration
        self.stopping = stopping
        self.logger = logger
    }

    /// The console's HTTP server on `address`, as a service of the process; `bound` is called once it
    /// listens (``Listeners/expect()``: the process's ready line waits for it).
    func application(address: HTTPAddress, bound: @escaping @Sendable () -> Void) -> some Service {
        let router = Router()
        router.add(middleware: SecurityHeaders())
        let server = self
        router.get("/static/console.css") { _, _ in Self.asset(ConsoleAssets.css, type: "text/css; charset=utf-8") }
        router.get("/static/console.js") { _, _ in Self.asset(ConsoleAssets.javascript, type: "text/javascript; charset=utf-8") }
        router.get("/login") { request, _ in
            if server.login(request) != nil { return Self.redirect("/") }
            return server.render("login", LoginPage(chrome: server.chrome("Log in", nil, path: "/login")))
        }
        router.post("/login") { request, _ in await server.logIn(request) }
        router.post("/logout") { request, _ in await server.logOut(request) }
        router.get("/") { request, _ in
            await server.page(request, "store", title: "Store") { key, chrome in try await server.pages.store(key, chrome: chrome) }
        }
        router.get("/apps/:app") { request, context in
            let app = Self.parameter(context, "app")
            return await server.page(request, "app", title: app, trail: [Crumb(name: "Store", url: "/")]) { key, chrome in
                try await server.pages.app(key, app: app, accountsToken: request.uri.queryParameters.get("accounts") ?? "", chrome: chrome)
            }
        }
        router.get("/apps/:app/account") { request, context in
            let app = Self.parameter(context, "app")
            let account = request.uri.queryParameters.get("account") ?? ""
            return Self.redirect(account.isEmpty ? ConsoleNames.appURL(app) : ConsoleNames.accountURL(app, account))
        }
        router.get("/apps/:app/accounts/:account") { request, context in
            let app = Self.parameter(context, "app")
            let account = Self.parameter(context, "account")
            return await server.page(
                request, "account", title: "Account \(account)", trail: [Crumb(name: "Store", url: "/"), Crumb(name: app, url: ConsoleNames.appURL(app))]
            ) { key, chrome in
                try await server.pages.account(key, app: app, account: account, chrome: chrome)
            }
        }
        router.get("/apps/:app/accounts/:account/transactions/:id") { request, context in
            let app = Self.parameter(context, "app")
            let account = Self.parameter(context, "account")
            let id = Self.parameter(context, "id")
            let trail = [Crumb(name: "Store", url: "/"), Crumb(name: app, url: ConsoleNames.appURL(app)), Crumb(name: account, url: ConsoleNames.accountURL(app, account))]
            return await server.page(request, "transaction", title: "Transaction \(id)", trail: trail) { key, chrome in
                try await server.pages.transaction(key, app: app, account: account, id: id, chrome: chrome)
            }
        }
        router.get("/apps/:app/accounts/:account/receipt") { request, context in
            let app = Self.parameter(context, "app")
            let account = Self.parameter(context, "account")
            let trail = [Crumb(name: "Store", url: "/"), Crumb(name: app, url: ConsoleNames.appURL(app)), Crumb(name: account, url: ConsoleNames.accountURL(app, account))]
            return await server.page(request, "receipt", title: "Receipt of \(account)", trail: trail) { key, chrome in
                try await server.pages.receipt(key, app: app, account: account, chrome: chrome)
            }
        }
        router.get("/receipts") { request, _ in
            await server.page(request, "receipts", title: "Verify a receipt") { key, chrome in try await server.pages.receipts(key, chrome: chrome) }
        }
        router.post("/receipts") { request, _ in await server.verifyReceipt(request) }
        router.get("/sandbox") { request, _ in
            await server.page(request, "sandbox", title: "Sandbox") { key, chrome in try await server.pages.sandbox(key, chrome: chrome) }
        }
        router.post("/actions/:action") { request, context in
            await server.act(request, action: Self.parameter(context, "action"))
        }
        router.get("/events") { request, _ in server.events(request) }
        logger.info("Serving the console over HTTP", metadata: ["http.address": "\(address.host):\(address.port)"])
        return Application(
            router: router,
            // A connection that sends nothing for this long is closed (one that never ends its
            // request's headers among them); a live stream writes at least every 15 s.
            server: .http1(configuration: .init(idleTimeout: .seconds(Self.idleSeconds))),
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "storebus-console"),
            onServerRunning: { _ in bound() },
            logger: logger
        )
    }

    /// A part of the path, its percent-encoding undone (the router leaves it as sent).
    static func parameter(_ context: some RequestContext, _ name: String) -> String {
        let raw = context.parameters.get(name) ?? ""
        return raw.removingPercentEncoding ?? raw
    }

    // MARK: Pages

    func login(_ request: Request) -> ConsoleSessions.Login? {
        sessions.login(request.cookies[Self.cookie]?.value)
    }

    func chrome(_ title: String, _ login: ConsoleSessions.Login?, path: String, trail: [Crumb] = []) -> Chrome {
        Chrome(
            title: title, loggedIn: login != nil, formToken: login?.formToken ?? "", path: path,
            flash: login.flatMap { sessions.takeFlash($0.token) }.map(FlashView.init), trail: trail)
    }

    /// A page for a logged-in person (the login page otherwise): `build` makes its view with the
    /// login's admin key; a failure shows the error's sentence.
    func page<View>(
        _ request: Request, _ template: String, title: String, trail: [Crumb] = [], build: (String, Chrome) async throws -> View
    ) async -> Response {
        guard let login = login(request) else { return Self.redirect("/login") }
        let path = request.uri.path + (request.uri.query.map { "?\($0)" } ?? "")
        let chrome = chrome(title, login, path: path, trail: trail)
        do {
            return render(template, try await build(login.adminKey, chrome))
        } catch {
            return problem(error, login: login, chrome: chrome)
        }
    }

    func render(_ template: String, _ view: Any, status: HTTPResponse.Status = .ok) -> Response {
        let html = library.render(view, withTemplate: template) ?? "<!DOCTYPE html><title>StoreBus console</title><p>The page \(template) is missing."
        return Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// The error's sentence as a page, with the status that fits it; a key the gateway no longer
    /// takes ends the login.
    func problem(_ error: any Error, login: ConsoleSessions.Login, chrome: Chrome) -> Response {
        let (status, message) = Self.sentence(error)
        if let error = error as? StoreError, error.status == .unauthenticated {
            sessions.close(login.token)
            link.forget(login.adminKey)
            return Self.redirect("/login")
        }
        return render("problem", ProblemPage(chrome: chrome, message: message), status: status)
    }

    /// What a person reads of `error`, and the HTTP status of a page that failed with it.
    static func sentence(_ error: any Error) -> (HTTPResponse.Status, String) {
        switch error as? ConsoleProblem {
        case .notFound(let text)?: return (.notFound, text)
        case .refused(let text)?: return (.badRequest, text)
        case nil: break
        }
        guard let error = error as? StoreError else { return (.internalServerError, "\(error)") }
        let status: HTTPResponse.Status =
            switch error.status {
            case .notFound: .notFound
            case .permissionDenied: .forbidden
            case .invalidArgument, .failedPrecondition, .outOfRange: .badRequest
            case .unavailable, .deadlineExceeded: .serviceUnavailable
            default: .badGateway
            }
        return (status, "\(error.message) (\(error.code))")
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }

    static func asset(_ text: String, type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: "max-age=300"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// A refusal's page: the problem template (its sentence escaped like every value), no login's
    /// controls on it.
    func refused(_ status: HTTPResponse.Status, _ text: String) -> Response {
        render("problem", ProblemPage(chrome: Chrome(title: "Refused", loggedIn: false, formToken: "", path: "/", flash: nil), message: text), status: status)
    }

    // MARK: Posts

    /// nil when the request may be a post of the console's own pages: not marked cross-site by the
    /// browser, and from the console's origin when it names one. Otherwise the refusal.
    func crossSite(_ request: Request) -> Response? {
        if let site = request.headers[.secFetchSite], site != "same-origin", site != "none" {
            return refused(.forbidden, "A form of another site cannot act here (Sec-Fetch-Site: \(site)).")
        }
        if let origin = request.headers[.origin] {
            let host = request.head.authority ?? ""
            guard let url = URL(string: origin), let originHost = url.host, !host.isEmpty,
                originHost.lowercased() + (url.port.map { ":\($0)" } ?? "") == host.lowercased()
            else {
                return refused(.forbidden, "A form of another site cannot act here (its origin \(origin) is not this console's).")
            }
        }
        return nil
    }

    /// The form of a post, its fields by name (the last one of a name wins).
    static func form(_ request: Request) async -> [String: String]? {
        guard let body = try? await request.body.collect(upTo: maxForm) else { return nil }
        let text = String(buffer: body)
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (part: Substring) in String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = decode(parts[0]), let value = parts.count > 1 ? decode(parts[1]) : "" else { return nil }
            fields[name] = value
        }
        return fields
    }

    /// The login and form of a post of the console's own pages, or the refusal.
    func checkedPost(_ request: Request) async -> Result<(ConsoleSessions.Login, [String: String]), RefusedPost> {
        if let refusal = crossSite(request) { return .failure(RefusedPost(response: refusal)) }
        guard let login = login(request) else {
            return .failure(RefusedPost(response: refused(.unauthorized, "Log in first: this console acts for logged-in operators only.")))
        }
        guard let form = await Self.form(request) else { return .failure(RefusedPost(response: refused(.badRequest, "The form could not be read."))) }
        guard ConsoleSessions.matches(form["formToken"] ?? "", login.formToken) else {
            return .failure(RefusedPost(response: refused(.forbidden, "The form is not one of this login's pages (its form token is missing or stale): reload the page and try again.")))
        }
        return .success((login, form))
    }

    struct RefusedPost: Error {
        let response: Response
    }

    func logIn(_ request: Request) async -> Response {
        if let refusal = crossSite(request) { return refusal }
        let key = (await Self.form(request))?["adminKey"] ?? ""
        let admitted: Bool
        do {
            admitted = !key.isEmpty && key.utf8.count <= 1024 ? try await link.isAdminKey(key) : false
        } catch {
            var chrome = chrome("Log in", nil, path: "/login")
            chrome.flash = FlashView(.init(text: "The gateway could not be asked: \(Self.sentence(error).1)", isError: true))
            return render("login", LoginPage(chrome: chrome), status: .serviceUnavailable)
        }
        guard admitted else {
            logger.info("Console login refused")
            // A wrong key costs its sender a second.
            try? await Task.sleep(for: .seconds(1))
            var chrome = chrome("Log in", nil, path: "/login")
            chrome.flash = FlashView(.init(text: "That is not an admin key of this store's gateway.", isError: true))
            return render("login", LoginPage(chrome: chrome), status: .unauthorized)
        }
        let login = sessions.open(adminKey: key)
        logger.info("Console login opened")
        var response = Self.redirect("/")
        response.setCookie(
            Cookie(name: Self.cookie, value: login.token, path: "/", secure: configuration.secureCookies, httpOnly: true, sameSite: .strict))
        return response
    }

    func logOut(_ request: Request) async -> Response {
        switch await checkedPost(request) {
        case .failure(let refusal): return refusal.response
        case .success(let (login, _)):
            sessions.close(login.token)
            var response = Self.redirect("/login")
            response.setCookie(
                Cookie(name: Self.cookie, value: "", maxAge: 0, path: "/", secure: configuration.secureCookies, httpOnly: true, sameSite: .strict))
            return response
        }
    }

    func act(_ request: Request, action: String) async -> Response {
        switch await checkedPost(request) {
        case .failure(let refusal): return refusal.response
        case .success(let (login, form)):
            let back = Self.localPath(form["back"])
            do {
                let said = try await ConsoleActions(link: link, key: login.adminKey).perform(action, form)
                logger.info("Console action", metadata: ["action": "\(action)"])
                sessions.say(.init(text: said, isError: false), to: login.token)
            } catch {
                sessions.say(.init(text: "\(ConsoleActions.title(action)) failed: \(Self.sentence(error).1)", isError: true), to: login.token)
            }
            return Self.redirect(back)
        }
    }

    /// `path` when it is a path of this console, else the store page.
    static func localPath(_ path: String?) -> String {
        guard let path, path.hasPrefix("/"), !path.hasPrefix("//"), !path.contains("\\"), path.utf8.count <= 2048,
            !path.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { return "/" }
        return path
    }

    func verifyReceipt(_ request: Request) async -> Response {
        switch await checkedPost(request) {
        case .failure(let refusal): return refusal.response
        case .success(let (login, form)):
            let receipt = (form["receipt"] ?? "").filter { !$0.isWhitespace }
            let chrome = chrome("Receipt", login, path: "/receipts", trail: [Crumb(name: "Verify a receipt", url: "/receipts")])
            do {
                return render("receipt", try await pages.verify(login.adminKey, app: form["app"] ?? "", receipt: receipt, password: form["password"], chrome: chrome))
            } catch {
                return problem(error, login: login, chrome: chrome)
            }
        }
    }

    // MARK: The live stream

    /// Server-sent events of the payment queue's log after the page's cursor (or the browser's
    /// Last-Event-ID), within the page's app or account: `transaction` events carry a row,
    /// `activity` events a list item, each with the cursor after it as its id. A stream ends after
    /// `streamSeconds` (the browser opens the next one where it stopped) or when the login ends.
    func events(_ request: Request) -> Response {
        guard let login = login(request) else { return refused(.unauthorized, "Log in first.") }
        let text: String = request.headers[.lastEventID] ?? request.uri.queryParameters.get("cursor").map { String($0) } ?? ""
        guard let start = Activity.Cursor(text) else { return refused(.badRequest, "The stream needs the cursor its page gave.") }
        let scope = Activity.Scope(
            app: request.uri.queryParameters.get("app").map { String($0) } ?? "", account: request.uri.queryParameters.get("account").map { String($0) } ?? "")
        let admin = link.connection(login.adminKey)
        let poll = Duration.milliseconds(configuration.activityPollMilliseconds)
        let server = self
        let body = ResponseBody { writer in
            try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
            var cursor = start
            let ends = ContinuousClock.now + .seconds(server.configuration.streamSeconds)
            var quiet = ContinuousClock.now
            while !Task.isCancelled, !server.stopping.isStopping, ContinuousClock.now < ends, server.sessions.login(login.token) != nil {
                var read = false
                do {
                    for shard in cursor.positions.indices {
                        let page = try await Activity.read(admin, shard: UInt32(shard), after: cursor.positions[shard], limit: 200)
                        if Int(page.shardCount) > cursor.positions.count {
                            cursor.positions += [UInt64](repeating: 0, count: Int(page.shardCount) - cursor.positions.count)
                        }
                        var out = ""
                        for record in page.events {
                            cursor.positions[shard] = max(cursor.positions[shard], record.seq)
                            for item in Activity.items(record, scope: scope) { out += server.message(item, id: cursor.text) }
                        }
                        cursor.positions[shard] = max(cursor.positions[shard], page.throughSeq)
                        if !page.events.isEmpty { read = true }
                        if !out.isEmpty {
                            try await writer.write(ByteBuffer(string: out))
                            quiet = .now
                        }
                    }
                } catch let error as StoreError where error.status == .unauthenticated {
                    break
                } catch {
                    server.logger.debug("Reading the payment queue's log for a live page failed", metadata: ["error": "\(error)"])
                }
                if !read {
                    if quiet.duration(to: .now) > .seconds(15) {
                        // An event without data: it moves the browser's last event id to where
                        // the stream has read (events of other queues included), and keeps the
                        // connection busy.
                        try await writer.write(ByteBuffer(string: "id: \(cursor.text)\n\n"))
                        quiet = .now
                    }
                    try? await Task.sleep(for: poll)
                }
            }
            try? await writer.write(ByteBuffer(string: "id: \(cursor.text)\n\n"))
            try await writer.finish(nil)
        }
        return Response(
            status: .ok, headers: [.contentType: "text/event-stream; charset=utf-8", .cacheControl: "no-store", .init("X-Accel-Buffering")!: "no"], body: body)
    }

    /// One server-sent event for `item`: its HTML as data lines, `id` the cursor after it.
    func message(_ item: Activity.Item, id: String) -> String {
        let (event, html): (String, String) =
            switch item {
            case .transaction(let row): ("transaction", library.render(row, withTemplate: "transaction-row") ?? "")
            case .other(let view): ("activity", library.render(view, withTemplate: "activity-item") ?? "")
            }
        let lines = html.split(separator: "\n", omittingEmptySubsequences: false).map { "data: \($0)" }.joined(separator: "\n")
        return "event: \(event)\nid: \(id)\n\(lines)\n\n"
    }
}

/// Set once graceful shutdown starts: live streams end, so that the server's shutdown does not wait
/// for them.
final class ConsoleStopping: Sendable {
    private let stopping = Atomic<Bool>(false)
    var isStopping: Bool { stopping.load(ordering: .acquiring) }
    func stop() { stopping.store(true, ordering: .releasing) }
}

/// Headers every answer carries: no framing by other sites, no script or style from elsewhere, no
/// guessing of types, no referrer leaving the console.
struct SecurityHeaders<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.contentSecurityPolicy] =
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[.init("Referrer-Policy")!] = "same-origin"
        response.headers[.init("X-Frame-Options")!] = "DENY"
        return response
    }
}

extension HTTPField.Name {
    static let secFetchSite = Self("Sec-Fetch-Site")!
    static let lastEventID = Self("Last-Event-ID")!
}
