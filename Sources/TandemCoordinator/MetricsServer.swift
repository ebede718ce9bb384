import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle

/// The coordinator's HTTP endpoint (`--metrics-port`): `GET /metrics` in the Prometheus
/// text format, `GET /healthz` (200 for the online leader or a ready standby, 503
/// otherwise, one JSON line saying which), 404 for anything else.
///
/// Served with SwiftNIO's HTTP/1 codec directly, on NIO's shared event loops: two routes
/// need no web framework, SwiftNIO comes with postgres-nio anyway, and Hummingbird would
/// add minutes to every clean build. It runs as a `Service`
/// beside the coordinator; listed before it in the `ServiceGroup`, it is shut down after
/// the coordinator has drained, so `/healthz` says `stopping` meanwhile.
public final class MetricsServer: Service {
    let channel: any Channel
    let logger: Logger
    /// The port it listens on (the one asked for).
    public let port: Int

    /// Listens on `host:port` at once, so that a port in use or an unknown host is an
    /// error at start rather than later.
    public static func bind(
        host: String, port: Int, registry: PrometheusCollectorRegistry, health: HealthState,
        beforeScrape: @escaping @Sendable () -> Void = {}, logger: Logger
    ) async throws -> MetricsServer {
        let routes = Routes(registry: registry, health: health, beforeScrape: beforeScrape)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.backlog, value: 64)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // A connection silent for a minute is closed (a scraper reconnects).
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: .seconds(60)))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(HTTPHandler(routes: routes))
                }
            }
            .bind(host: host, port: port)
            .get()
        let server = MetricsServer(channel: channel, port: channel.localAddress?.port ?? port, logger: logger)
        logger.info("serving /metrics and /healthz over HTTP", metadata: ["http.host": "\(host)", "http.port": "\(server.port)"])
        return server
    }

    init(channel: any Channel, port: Int, logger: Logger) {
        self.channel = channel
        self.port = port
        self.logger = logger
    }

    /// Serves until the service group shuts down (gracefully or by cancellation), then
    /// closes the listener.
    public func run() async throws {
        try? await gracefulShutdown()
        try? await channel.close()
    }

    /// Closes the listener (when the service never ran: the coordinator failed first).
    public func close() async {
        try? await channel.close()
    }

    /// What each request gets; no I/O here.
    struct Routes: Sendable {
        let registry: PrometheusCollectorRegistry
        let health: HealthState
        let beforeScrape: @Sendable () -> Void

        struct Response {
            var status: HTTPResponseStatus
            var contentType: String
            var body: [UInt8]
        }

        func respond(method: HTTPMethod, uri: String) -> Response {
            let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? uri
            switch (method, path) {
            case (.GET, "/metrics"):
                beforeScrape()
                return Response(status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: registry.emitToBuffer())
            case (.GET, "/healthz"):
                let report = health.report
                return Response(
                    status: report.healthy ? .ok : .serviceUnavailable, contentType: "application/json",
                    body: Array((report.body + "\n").utf8))
            default:
                return Response(status: .notFound, contentType: "text/plain; charset=utf-8", body: Array("not found: GET /metrics or /healthz\n".utf8))
            }
        }
    }

    /// One request at a time per connection (NIO's pipelining handler queues the rest);
    /// the body of a request is ignored; a malformed request gets NIO's 400, then the
    /// connection is closed here, as is one idle for too long.
    final class HTTPHandler: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        let routes: Routes
        var head: HTTPRequestHead?

        init(routes: Routes) {
            self.routes = routes
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
            case .body:
                break
            case .end:
                guard let request = head else { return }
                head = nil
                respond(to: request, context: context)
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is IdleStateHandler.IdleStateEvent {
                context.close(promise: nil)
            } else {
                context.fireUserInboundEventTriggered(event)
            }
        }

        func respond(to request: HTTPRequestHead, context: ChannelHandlerContext) {
            let response = routes.respond(method: request.method, uri: request.uri)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: response.contentType)
            headers.add(name: "Content-Length", value: String(response.body.count))
            let keepAlive = request.isKeepAlive
            if !keepAlive { headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: response.status, headers: headers))), promise: nil)
            if request.method != .HEAD {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
            }
            let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            }
        }
    }
}

extension MetricsExporter {
    /// A swift-prometheus factory over `registry` with the coordinator's histogram
    /// buckets (``commitBuckets``, ``receiptBuckets``, ``batchBuckets``).
    public static func prometheusFactory(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = [Name.commitSeconds: commitBuckets, Name.receiptSeconds: receiptBuckets]
        factory.valueHistogramBuckets = [Name.batchSize: batchBuckets]
        return factory
    }
}
