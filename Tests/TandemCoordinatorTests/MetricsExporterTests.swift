import Prometheus
import Synchronization
import Testing
import TandemCore
import TandemEngine
import TestSupport
@testable import TandemCoordinator

/// The engine's counters as Prometheus sees them, the receipt annotations the service
/// times, the HTTP routes and `/healthz`, all without a socket.
@Suite struct MetricsExporterTests {
    static let t0: Millis = 1_800_000_000_000
    static let room = "tandem/v1/rooms/r1/events/"

    func create(_ id: String, sticker: String) -> [UInt8] {
        Array(#"{"eventId":"\#(id)","type":"create","stickerId":"\#(sticker)","timestamp":\#(Self.t0),"image":"a.png","frame":{"x":1,"y":2,"width":3,"height":4}}"#.utf8)
    }

    /// A fresh registry per test: no global bootstrap.
    func exporter() -> (MetricsExporter, PrometheusCollectorRegistry) {
        let registry = PrometheusCollectorRegistry()
        return (MetricsExporter(factory: MetricsExporter.prometheusFactory(registry: registry)), registry)
    }

    func samples(_ registry: PrometheusCollectorRegistry) -> [String: Double] {
        prometheusSamples(registry.emitToString())
    }

    @Test func countersAreMirroredOnceAsDeltas() {
        let (exporter, registry) = exporter()
        var engine = Engine(configuration: EngineConfiguration(), epoch: "e0", now: Self.t0)
        _ = engine.ingest(topic: Self.room + "alice", payload: create("e1", sticker: "s1"), now: Self.t0)
        _ = engine.ingest(topic: Self.room + "bob", payload: create("e2", sticker: "s1"), now: Self.t0 + 1)
        _ = engine.ingest(topic: Self.room + "alice", payload: Array("{".utf8), now: Self.t0 + 2)
        _ = engine.ingest(topic: "tandem/v1/nowhere", payload: [], now: Self.t0 + 2)
        _ = engine.step(now: Self.t0 + 100)
        _ = engine.ingest(topic: Self.room + "alice", payload: create("e1", sticker: "s1"), now: Self.t0 + 200)

        // Nothing reaches Prometheus before a mirror.
        exporter.observe(engine)
        #expect(samples(registry)[#"tandem_events_total{kind="room",status="accepted"}"#] == 0)
        exporter.mirror()
        exporter.mirror()
        var s = samples(registry)
        #expect(s[#"tandem_events_total{kind="room",status="accepted"}"#] == 1)
        #expect(s[#"tandem_events_total{kind="room",status="rejected"}"#] == 2)
        #expect(s[#"tandem_events_total{kind="room",status="duplicate"}"#] == 1)
        #expect(s[#"tandem_rejections_total{code="not_member"}"#] == 1, "bob is not a member of alice's room")
        #expect(s[#"tandem_rejections_total{code="invalid_payload"}"#] == 1)
        #expect(s[#"tandem_messages_received_total{kind="room"}"#] == 4)
        #expect(s[#"tandem_messages_received_total{kind="dropped"}"#] == 1)
        #expect(s["tandem_rooms"] == 1)
        #expect(s["tandem_buffer_depth"] == 0)

        // Later counts add only what is new.
        _ = engine.ingest(topic: Self.room + "carol", payload: create("e3", sticker: "s3"), now: Self.t0 + 300)
        exporter.observe(engine)
        exporter.mirror()
        s = samples(registry)
        #expect(s[#"tandem_messages_received_total{kind="room"}"#] == 5)
        #expect(s[#"tandem_events_total{kind="room",status="accepted"}"#] == 1)
        #expect(s["tandem_buffer_depth"] == 1)
    }

    @Test func timingsAndConnectionGoStraightToTheirMetrics() {
        let (exporter, registry) = exporter()
        exporter.committed(after: .milliseconds(2), events: 7)
        exporter.receiptSent(kind: .dm, afterMilliseconds: 31)
        exporter.receiptSent(kind: .dm, afterMilliseconds: -5)  // a clock step back counts as 0
        exporter.storeFailed(.commit)
        exporter.connection(up: true)
        exporter.connection(up: false)
        exporter.connection(up: true, reconnect: true)
        let s = samples(registry)
        #expect(s["tandem_batch_size_sum"] == 7)
        #expect(s[#"tandem_batch_size_bucket{le="10.0"}"#] == 1)
        #expect(s["tandem_commit_seconds_count"] == 1)
        #expect(s[#"tandem_commit_seconds_bucket{le="0.0025"}"#] == 1)
        #expect(s[#"tandem_commit_seconds_bucket{le="0.001"}"#] == 0)
        #expect(s[#"tandem_receipt_seconds_count{kind="dm"}"#] == 2)
        #expect(s[#"tandem_receipt_seconds_bucket{kind="dm",le="0.035"}"#] == 2)
        #expect(s[#"tandem_receipt_seconds_bucket{kind="dm",le="0.025"}"#] == 1)
        // Buckets bracket the 30 ms window: 31 ms is 1 ms above it.
        #expect(s[#"tandem_receipt_seconds_bucket{kind="dm",le="0.03"}"#] == 1)
        #expect(s[#"tandem_receipt_seconds_bucket{kind="dm",le="0.031"}"#] == 2)
        #expect(s[#"tandem_store_errors_total{operation="commit"}"#] == 1)
        #expect(s[#"tandem_store_errors_total{operation="query"}"#] == 0)
        #expect(s["tandem_mqtt_reconnects_total"] == 1)
        #expect(s["tandem_mqtt_connected"] == 1)
    }

    @Test func sharedPartitionsCountEachTermAndShowTheSumOfThoseLed() {
        let (exporter, registry) = exporter()
        // Partition 0 at term 3, then partition 2 at term 4: two terms, the gauge the sum.
        exporter.termStarted()
        exporter.leads(termSum: 3)
        exporter.termStarted()
        exporter.leads(termSum: 7)
        // Partition 0's lease is lost: one term lost, the gauge what is still led.
        exporter.termLost()
        exporter.leads(termSum: 4)
        let s = samples(registry)
        #expect(s["tandem_terms_started_total"] == 2)
        #expect(s["tandem_leases_lost_total"] == 1)
        #expect(s["tandem_leader_term"] == 4)
        #expect(s["tandem_leader"] == 1)
        exporter.stoppedLeading(lost: false)
        #expect(samples(registry)["tandem_leader"] == 0)
        #expect(samples(registry)["tandem_leases_lost_total"] == 1)
    }

    @Test func receiptBucketsFollowTheReorderWindow() {
        #expect(MetricsExporter.receiptBuckets(reorderWindowMs: 30).map { $0 / .milliseconds(1) } == [
            1, 5, 10, 25, 30, 31, 32, 33, 35, 40, 50, 75, 100, 250, 500, 1_000, 2_500, 5_000, 10_000,
        ])
        let wide = MetricsExporter.receiptBuckets(reorderWindowMs: 100).map { $0 / .milliseconds(1) }
        #expect(wide.contains(100) && wide.contains(101) && wide.contains(105) && wide.contains(110))
        #expect(wide == wide.sorted() && Set(wide).count == wide.count)
        // No window: the coarse buckets alone.
        #expect(MetricsExporter.receiptBuckets(reorderWindowMs: 0).count == 14)
    }

    @Test func everyReceiptSaysWhatItAnswersAndWhenThatArrived() {
        var engine = Engine(configuration: EngineConfiguration(), epoch: "e0", now: Self.t0)
        let bad = engine.ingest(topic: Self.room + "alice", payload: Array("{".utf8), now: Self.t0 + 5)
        #expect(bad.first?.answers?.arrivedAt == Self.t0 + 5)
        #expect(bad.first?.answers?.target == "r1")
        _ = engine.ingest(topic: Self.room + "alice", payload: create("e1", sticker: "s1"), now: Self.t0 + 10)
        let step = engine.step(now: Self.t0 + 100)
        let answered = step.publications.compactMap(\.answers)
        #expect(answered.count == 1)
        #expect(answered.first?.arrivedAt == Self.t0 + 10)
        #expect(answered.first?.user == "alice")
        #expect(answered.first?.receipt.status == .accepted)
        #expect(answered.first?.logMetadata["room"] == "r1")
        #expect(answered.first?.logMetadata["event.id"] == "e1")
        // Snapshots and changes answer nothing.
        #expect(step.publications.filter { $0.answers == nil }.count == step.publications.count - 1)
    }

    @Test func routesAnswerMetricsHealthOrNotFound() {
        let (exporter, registry) = exporter()
        let health = HealthState(instanceId: "box-7")
        let routes = MetricsServer.Routes(registry: registry, health: health, beforeScrape: { exporter.mirror() })

        var healthz = routes.respond(method: "GET", uri: "/healthz")
        #expect(healthz.status == 503)
        #expect(String(decoding: healthz.body, as: UTF8.self) == #"{"status":"starting","instance":"box-7"}"# + "\n")
        health.role = .leader(term: 3, online: true)
        healthz = routes.respond(method: "GET", uri: "/healthz?verbose=1")
        #expect(healthz.status == 200)
        #expect(String(decoding: healthz.body, as: UTF8.self) == #"{"status":"leader","online":true,"instance":"box-7","term":3}"# + "\n")
        health.setOnline(false)
        #expect(routes.respond(method: "GET", uri: "/healthz").status == 503)
        health.role = .standby
        #expect(routes.respond(method: "GET", uri: "/healthz").status == 200)
        health.role = .stopping
        #expect(routes.respond(method: "GET", uri: "/healthz").status == 503)

        let metrics = routes.respond(method: "GET", uri: "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.contentType.hasPrefix("text/plain; version=0.0.4"))
        #expect(String(decoding: metrics.body, as: UTF8.self).contains("# TYPE tandem_events_total counter"))

        for (method, uri) in [("GET", "/"), ("GET", "/metricsx"), ("POST", "/metrics"), ("GET", ""), ("DELETE", "/healthz")] {
            #expect(routes.respond(method: method, uri: uri).status == 404, "\(method) \(uri)")
        }
    }

    @Test(arguments: [
        ("box", 12, "box-12"),
        ("my host!.local", 7, "my-host-.local-7"),
        ("", 1, "coordinator-1"),
        (String(repeating: "h", count: 100), 123_456, String(repeating: "h", count: 57) + "-123456"),
    ])
    func theDefaultInstanceIdIsAValidIdentifier(host: String, pid: Int, expected: String) {
        let id = HealthState.instanceId(host: host, pid: pid)
        #expect(id == expected)
        #expect(Identifier.isValid(id))
    }
}

/// Issue 21: a partition that moves to another process and back keeps every counter
/// growing (its last counts stay in the sums), and its levels and own entry go with it.
@Suite struct PartitionMoveMetricsTests {
    @Test func aPartitionThatLeavesAndComesBackNeverTakesACounterBack() {
        let registry = PrometheusCollectorRegistry()
        let exporter = MetricsExporter(factory: MetricsExporter.prometheusFactory(registry: registry))
        func counts(_ published: Int) -> Metrics {
            var metrics = Metrics()
            metrics.messagesOut = published
            return metrics
        }
        var gauges = Metrics.Gauges()
        gauges.rooms = 3
        exporter.observe(metrics: counts(5), gauges: gauges, partition: 0)
        exporter.observe(metrics: counts(7), gauges: gauges, partition: 1)
        exporter.mirror()
        #expect(prometheusSamples(registry.emitToString())["tandem_messages_published_total"] == 12)
        #expect(prometheusSamples(registry.emitToString())["tandem_rooms"] == 6)

        // Partition 1 is handed over: its 7 stay counted, its rooms go.
        exporter.forget(partition: 1)
        exporter.mirror()
        #expect(exporter.partitions().map(\.partition) == [0])
        #expect(prometheusSamples(registry.emitToString())["tandem_messages_published_total"] == 12)
        #expect(prometheusSamples(registry.emitToString())["tandem_rooms"] == 3)

        // It comes back under a new term, counting from zero: 2 more, not 5 less.
        exporter.observe(metrics: counts(2), gauges: gauges, partition: 1)
        exporter.mirror()
        #expect(prometheusSamples(registry.emitToString())["tandem_messages_published_total"] == 14)
    }
}

/// Issue 21: the lease's fence tells a pipeline of every renewal that moved its deadline
/// (a pipeline with no input for longer than the lease must still hear of them), and of
/// none once the fence is lost.
@Suite struct LeaseFenceTests {
    @Test func everyRenewalThatMovesTheDeadlineIsToldAndNoneAfterTheLoss() {
        let start = ContinuousClock.now
        let fence = LeaseFence(term: 3, leaseMs: 2_000, acquireSentAt: start)
        let told = Mutex(0)
        fence.whenRenewed { told.withLock { $0 += 1 } }
        fence.renewed(sentAt: start + .milliseconds(500))
        fence.renewed(sentAt: start + .milliseconds(400))  // older than the last: the deadline stays
        #expect(told.withLock { $0 } == 1)
        #expect(fence.renewal.sentAt == start + .milliseconds(500))
        fence.lose(.takenOver(term: 4, instance: "c2"))
        fence.renewed(sentAt: .now)
        #expect(told.withLock { $0 } == 1)
        #expect(!fence.holds)
    }
}
