import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import TandemClient
import TandemCore

/// The HTTP side of tandem-web: the page's files, sign-in and sign-out, the session
/// check, `/healthz`, and `/ws`, one WebSocket per tab.
///
/// | route | answer |
/// |---|---|
/// | `GET /` and the page's files | the page (resources of this module) |
/// | `POST /api/sign-in` `{"username","password"}` | 200 `{"user"}` and the session cookie; 401 refused; 400 malformed; 503 broker away |
/// | `GET /api/session` | 200 `{"user"}` with a live session, else 401 |
/// | `POST /api/sign-out` | ends the session, clears the cookie; 200 |
/// | `GET /ws` | the tab's WebSocket with a live session, else 401 |
/// | `GET /healthz` | 200 `{"status":"ok","sessions":N}` |
/// | `GET /metrics` | the Prometheus text format (``WebMetrics``) |
public enum WebServer {
    /// The session cookie's name.
    public static let cookieName = "tandem_session"
    /// The largest sign-in body read.
    static let maxSignInBytes = 4096

    /// The send buffer a page's socket is given (`SO_SNDBUF`; the kernel doubles it for
    /// its bookkeeping). A page on a slow link, or one that stopped reading, holds that
    /// and SwiftNIO's 64 KiB before the tab's writer waits; without it Linux lets a
    /// socket's buffer grow to `tcp_wmem`'s largest, 4 MB, which a few thousand stalled
    /// pages would take from the kernel. A room frame of a hundred stickers is 16 KB.
    public static let pageSendBufferBytes = 64 << 10

    /// The page's folder among this module's resources.
    public static var pageDirectory: String {
        Bundle.module.resourceURL!.appendingPathComponent("Public").path
    }

    /// The router: everything above, around `store`.
    public static func router(store: SessionStore, pageDirectory: String = WebServer.pageDirectory) -> Router<WebRequestContext> {
        let router = Router(context: WebRequestContext.self)
        router.middlewares.add(FileMiddleware(pageDirectory, searchForIndexHtml: true))

        router.get("/healthz") { _, _ in
            let sessions = await store.count
            return json(.ok, .obj(["status": "ok", "sessions": .int(Int64(sessions))]))
        }

        router.get("/metrics") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: store.metrics.registry.emitToBuffer())))
        }

        router.post("/api/sign-in") { request, _ in
            try await signIn(request, store: store)
        }

        router.get("/api/session") { request, _ in
            guard let session = await store.session(token: request.cookies[cookieName]?.value) else {
                return json(.unauthorized, .obj(["error": "not signed in"]))
            }
            return json(.ok, .obj(["user": .string(session.user)]))
        }

        router.post("/api/sign-out") { request, _ in
            let ended = await store.signOut(token: request.cookies[cookieName]?.value)
            var response = json(.ok, .obj(["signedOut": .bool(ended)]))
            response.setCookie(Cookie(name: cookieName, value: "", maxAge: 0, path: "/", httpOnly: true, sameSite: .strict))
            return response
        }

        router.ws("/ws") { request, _ in
            guard sameOrigin(request) else {
                throw HTTPError(.forbidden, message: "a WebSocket from another site")
            }
            guard let session = await store.session(token: request.cookies[cookieName]?.value) else {
                throw HTTPError(.unauthorized, message: "not signed in")
            }
            guard await session.tabCount < store.settings.maxTabsPerSession else {
                throw HTTPError(.tooManyRequests, message: "too many tabs open in this session")
            }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            // A page that stops reading holds at most this much of the kernel's memory
            // (the default grows to 4 MB a socket); past it the tab's writer waits and
            // the page gets the latest room, not every one.
            do {
                try await context.requestContext.channel.setOption(
                    ChannelOptions.socketOption(.so_sndbuf), value: SocketOptionValue(pageSendBufferBytes)).get()
            } catch {
                context.logger.debug("the page's socket keeps its send buffer", metadata: ["error": "\(error)"])
            }
            guard let session = await store.session(token: context.request.cookies[cookieName]?.value) else {
                try await outbound.write(.text(PageJSON.signedOut.text))
                return
            }
            try await Tab.run(session: session, inbound: inbound, outbound: outbound, metrics: store.metrics, logger: context.logger)
        }
        return router
    }

    /// The application: HTTP/1 with WebSocket upgrades, on `host:port`.
    public static func application(
        store: SessionStore, host: String, port: Int, pageDirectory: String = WebServer.pageDirectory, logger: Logger
    ) -> some ApplicationProtocol {
        let router = router(store: store, pageDirectory: pageDirectory)
        return Application(
            router: router,
            server: .http1WebSocketUpgrade(
                webSocketRouter: router,
                // One WebSocket frame up to 64 KiB is read (and refused with an error
                // frame past PageFrame.maxBytes); a larger one closes the socket (1009).
                configuration: .init(ws: .init(maxFrameSize: 1 << 16))),
            configuration: .init(address: .hostname(host, port: port), serverName: "tandem-web"),
            services: [store],
            onServerRunning: { channel in
                // What scripts/run waits for and prints: the address, once it answers.
                logger.notice("tandem-web is serving http://\(host):\(channel.localAddress?.port ?? port)")
            },
            logger: logger)
    }

    private static func signIn(_ request: Request, store: SessionStore) async throws -> Response {
        let response = try await signInResponse(request, store: store)
        let result: WebMetrics.SignInResult = switch response.status {
        case .ok: .ok
        case .unauthorized: .refused
        case .serviceUnavailable: .unreachable
        default: .malformed
        }
        store.metrics.signIn(result)
        return response
    }

    private static func signInResponse(_ request: Request, store: SessionStore) async throws -> Response {
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: maxSignInBytes)
        } catch {
            return json(.contentTooLarge, .obj(["error": .string("the sign-in is larger than \(maxSignInBytes) bytes")]))
        }
        let form: JSON
        do {
            form = try JSON.parse(body.readableBytesView)
        } catch {
            return json(.badRequest, .obj(["error": .string("the sign-in must be JSON {\"username\",\"password\"}: \(error)")]))
        }
        guard let username = form["username"]?.stringValue, let password = form["password"]?.stringValue else {
            return json(.badRequest, .obj(["error": "the sign-in needs a username and a password (strings)"]))
        }
        guard Identifier.isValid(username) else {
            return json(.badRequest, .obj(["error": "the username must be 1-64 characters of A-Z a-z 0-9 _ . -"]))
        }
        guard !password.isEmpty else {
            return json(.badRequest, .obj(["error": "the password is empty"]))
        }
        let session: WebSession
        do {
            session = try await store.signIn(username: username, password: password)
        } catch .refused {
            return json(.unauthorized, .obj(["error": "wrong username or password: the broker refused them"]))
        } catch .unreachable(let reason) {
            return json(.serviceUnavailable, .obj(["error": .string(reason)]))
        }
        // A sign-in over an older session of this browser ends that one.
        if let old = request.cookies[cookieName]?.value { await store.signOut(token: old) }
        var response = json(.ok, .obj(["user": .string(session.user)]))
        response.setCookie(Cookie(name: cookieName, value: session.token, path: "/", httpOnly: true, sameSite: .strict))
        return response
    }

    /// A WebSocket opened by a page of this server, or by a client that is no browser
    /// (no origin, or a `ws:`/`wss:` one, which browsers never send: WebSocket clients
    /// such as swift-websocket's do): another site's page may not ride the cookie, and an
    /// opaque origin (`null`: a sandboxed frame, a file) is refused too.
    static func sameOrigin(_ request: Request) -> Bool {
        sameOrigin(origin: request.headers[.origin], authority: request.head.authority)
    }

    static func sameOrigin(origin: String?, authority: String?) -> Bool {
        guard let origin else { return true }
        if origin.hasPrefix("ws://") || origin.hasPrefix("wss://") { return true }
        guard let authority else { return false }
        return origin == "http://\(authority)" || origin == "https://\(authority)"
    }

    static func json(_ status: HTTPResponse.Status, _ body: JSON) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body.serialized())))
    }
}

/// The request context of tandem-web's routes: hummingbird-websocket's, and the
/// connection's channel, so that a tab can set its socket's send buffer
/// (``WebServer/pageSendBufferBytes``).
public struct WebRequestContext: RequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let webSocket: WebSocketHandlerReference<Self>
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }
}
