#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization
import TandemCore
import TandemEngine

/// The coordinator's HTTP endpoint (`--metrics-port`): `GET /metrics` in the Prometheus
/// text format, `GET /healthz` (200 for the online leader or a ready standby, 503
/// otherwise, one JSON line saying which), 404 for anything else.
///
/// Two routes, a scrape every few seconds: served over plain sockets (``HTTPListener``),
/// one request per connection, rather than with SwiftNIO, which would be most of the
/// build of a coordinator without PostgreSQL (scripts/run's). It runs as a `Service`
/// beside the coordinator; listed before it in the `ServiceGroup`, it is shut down after
/// the coordinator has drained, so `/healthz` says `stopping` meanwhile.
public final class MetricsServer: Service {
    let listener: HTTPListener
    let logger: Logger
    /// The port it listens on (the one asked for, or the one given for port 0).
    public var port: Int { listener.port }

    /// Listens on `host:port` at once, so that a port in use or an unknown host is an
    /// error at start rather than later.
    public static func bind(
        host: String, port: Int, registry: PrometheusCollectorRegistry, health: HealthState,
        beforeScrape: @escaping @Sendable () -> Void = {}, logger: Logger
    ) async throws -> MetricsServer {
        let routes = Routes(registry: registry, health: health, beforeScrape: beforeScrape)
        let listener = try HTTPListener(host: host, port: port) { routes.respond(method: $0, uri: $1) }
        let server = MetricsServer(listener: listener, logger: logger)
        logger.info("serving /metrics and /healthz over HTTP", metadata: ["http.host": "\(host)", "http.port": "\(server.port)"])
        return server
    }

    init(listener: HTTPListener, logger: Logger) {
        self.listener = listener
        self.logger = logger
    }

    /// Serves until the service group shuts down (gracefully or by cancellation), then
    /// closes the listener.
    public func run() async throws {
        try? await gracefulShutdown()
        listener.close()
    }

    /// Closes the listener (when the service never ran: the coordinator failed first).
    public func close() async {
        listener.close()
    }

    /// What each request gets; no I/O here.
    struct Routes: Sendable {
        let registry: PrometheusCollectorRegistry
        let health: HealthState
        let beforeScrape: @Sendable () -> Void

        func respond(method: String, uri: String) -> HTTPListener.Response {
            let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
            switch (method, path) {
            case ("GET", "/metrics"), ("HEAD", "/metrics"):
                beforeScrape()
                return .init(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: registry.emitToBuffer())
            case ("GET", "/healthz"), ("HEAD", "/healthz"):
                let report = health.report
                return .init(status: report.healthy ? 200 : 503, contentType: "application/json", body: Array((report.body + "\n").utf8))
            default:
                return .init(status: 404, contentType: "text/plain; charset=utf-8", body: Array("not found: GET /metrics or /healthz\n".utf8))
            }
        }
    }
}

/// A small HTTP/1.1 server over POSIX sockets for a few GET routes: one thread accepts,
/// each connection is served on a thread of its own (at most ``maxConnections`` at once;
/// one more is answered 503), one request per connection (`Connection: close`). A
/// request head over 8 KiB or not read within 10 s, or one that is not HTTP, gets a 400;
/// a request body is never read.
final class HTTPListener: Sendable {
    struct Response: Sendable {
        var status: Int
        var contentType: String
        var body: [UInt8]
    }

    let port: Int
    static let maxConnections = 16
    static let maxHead = 8192
    static let timeoutSeconds = 10

    private let listening: Int32
    private let handler: @Sendable (String, String) -> Response
    private let closed = Atomic<Bool>(false)
    private let connections = Atomic<Int>(0)
    private let acceptLoopDone = DispatchSemaphore(value: 0)

    /// Binds and listens at once (errors name the address), then accepts on a thread of
    /// its own until ``close()``.
    init(host: String, port: Int, handler: @escaping @Sendable (_ method: String, _ uri: String) -> Response) throws {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var found: UnsafeMutablePointer<addrinfo>?
        let lookup = getaddrinfo(host, String(port), &hints, &found)
        guard lookup == 0, let first = found else {
            throw CoordinatorError("cannot resolve \(host): \(String(cString: gai_strerror(lookup)))")
        }
        defer { freeaddrinfo(found) }
        let fd = makeSocket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw CoordinatorError("socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bindSocket(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0, listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            closeDescriptor(fd)
            throw CoordinatorError("cannot listen on \(host):\(port): \(reason)")
        }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        var actualPort = port
        if bound == 0 {
            actualPort = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        }
        self.listening = fd
        self.port = actualPort
        self.handler = handler
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Stops accepting and closes the listening socket (connections being served finish).
    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        acceptLoopDone.wait()
        closeDescriptor(listening)
    }

    private func acceptLoop() {
        defer { acceptLoopDone.signal() }
        var waiting = pollfd(fd: listening, events: Int16(POLLIN), revents: 0)
        while !closed.load(ordering: .acquiring) {
            // Woken every 100 ms to see whether it was closed.
            guard poll(&waiting, 1, 100) > 0 else { continue }
            let connection = accept(listening, nil, nil)
            guard connection >= 0 else { continue }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            var timeout = timeval(tv_sec: Self.timeoutSeconds, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            if connections.add(1, ordering: .relaxed).newValue > Self.maxConnections {
                Self.send(Self.head(status: 503, contentType: "text/plain; charset=utf-8", length: 5) + Array("busy\n".utf8), to: connection)
                finish(connection)
                continue
            }
            Thread.detachNewThread { [self] in
                serve(connection)
                finish(connection)
            }
        }
    }

    private func finish(_ connection: Int32) {
        shutdown(connection, Int32(SHUT_WR))
        closeDescriptor(connection)
        connections.subtract(1, ordering: .relaxed)
    }

    /// Reads the request head, answers it, and returns (the caller closes).
    private func serve(_ connection: Int32) {
        var head: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 2048)
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while head.count <= Self.maxHead, !Self.contains(head, end) {
            let n = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                head += chunk[0..<n]
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                break  // closed, or silent past the timeout
            }
        }
        let requestLine = head.split(separator: UInt8(ascii: "\r"), maxSplits: 1).first.map { String(decoding: $0, as: UTF8.self) } ?? ""
        let parts = requestLine.split(separator: " ")
        guard Self.contains(head, end), parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/") else {
            let body = Array("bad request\n".utf8)
            Self.send(Self.head(status: 400, contentType: "text/plain; charset=utf-8", length: body.count) + body, to: connection)
            return
        }
        let method = String(parts[0])
        let response = handler(method, String(parts[1]))
        var bytes = Self.head(status: response.status, contentType: response.contentType, length: response.body.count)
        if method != "HEAD" { bytes += response.body }
        Self.send(bytes, to: connection)
    }

    private static func contains(_ bytes: [UInt8], _ needle: [UInt8]) -> Bool {
        guard bytes.count >= needle.count else { return false }
        return (0...(bytes.count - needle.count)).contains { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    static func head(status: Int, contentType: String, length: Int) -> [UInt8] {
        let reasons = [200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"]
        return Array(("HTTP/1.1 \(status) \(reasons[status] ?? "Status")\r\nContent-Type: \(contentType)\r\n"
            + "Content-Length: \(length)\r\nConnection: close\r\n\r\n").utf8)
    }

    private static func send(_ bytes: [UInt8], to connection: Int32) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { sendBytes(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return
            }
        }
    }
}

// The C calls whose names the listener's own members shadow.
private func makeSocket(_ domain: Int32, _ type: Int32, _ proto: Int32) -> Int32 { socket(domain, type, proto) }
private func bindSocket(_ fd: Int32, _ address: UnsafePointer<sockaddr>!, _ length: socklen_t) -> Int32 { bind(fd, address, length) }
private func closeDescriptor(_ fd: Int32) { _ = close(fd) }
private func sendBytes(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int { send(fd, bytes, count, flags) }

extension MetricsExporter {
    /// A swift-prometheus factory over `registry` with the coordinator's histogram
    /// buckets (``commitBuckets``, ``receiptBuckets(reorderWindowMs:)``, ``batchBuckets``).
    public static func prometheusFactory(registry: PrometheusCollectorRegistry, reorderWindowMs: Millis = EngineConfiguration().reorderWindowMs) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = [
            Name.commitSeconds: commitBuckets, Name.receiptSeconds: receiptBuckets(reorderWindowMs: reorderWindowMs),
        ]
        factory.valueHistogramBuckets = [Name.batchSize: batchBuckets]
        return factory
    }
}
