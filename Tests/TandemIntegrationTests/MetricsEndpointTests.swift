import Foundation
import Testing
import TandemCore
import TestSupport

/// Issue 13: the coordinator's HTTP endpoint (`--metrics-port`) and its JSON logs, from
/// the built binary, the way an operator's Prometheus and log shipper see them.
@Suite struct MetricsEndpointTests {
    @Test(.timeLimit(.minutes(1)))
    func countersMoveExactlyAsTheTrafficSays() async throws {
        try await withBroker(.open) { broker in
            let port = try freeTCPPort()
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--metrics-port", String(port)])
            let health = try await healthOnceLeader(port: port)
            #expect(health.status == 200)
            let report = try JSON.parse(Array(health.body.utf8))
            #expect(report["status"] == "leader", "\(health.body)")
            #expect(report["online"]?.boolValue == true, "\(health.body)")
            #expect(report["term"]?.int64Value == 0, "\(health.body)")
            #expect(report["instance"]?.stringValue?.isEmpty == false, "\(health.body)")
            #expect(health.body.hasSuffix("}\n") && health.body.filter { $0 == "\n" }.count == 1, "one line: \(health.body)")
            #expect(health.headers["content-type"] == "application/json")

            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            let bob = try await TestPeer.connect(broker: broker, user: "bob")
            let t = nowMillis()
            // Accepted (room), rejected with a code (room), a duplicate (room), accepted (dm).
            try await alice.edit(room: "scraped", .edit("m1", "create", sticker: "s1", at: t, image: "a.png", frame: (1, 1, 10, 10)))
            _ = try await alice.receipt("m1")
            try await bob.edit(room: "scraped", .edit("m2", "acquire", sticker: "s1", at: t + 1))
            #expect(try await bob.receipt("m2")["code"] == "not_member")
            try await alice.edit(room: "scraped", .edit("m1", "create", sticker: "s1", at: t, image: "a.png", frame: (1, 1, 10, 10)))
            #expect(try await alice.receipt("m1", count: 2)["status"] == "duplicate")
            try await alice.dm(.dm("m3", "request", peer: "bob", at: t + 2, text: "hi"))
            #expect(try await alice.receipt("m3")["status"] == "accepted")

            let scrape = try httpGet(port: port, path: "/metrics")
            #expect(scrape.status == 200)
            #expect(scrape.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            let samples = prometheusSamples(scrape.body)
            func value(_ series: String) -> Double? { samples[series] }
            #expect(value(#"tandem_events_total{kind="room",status="accepted"}"#) == 1, "\(scrape.body)")
            #expect(value(#"tandem_events_total{kind="room",status="rejected"}"#) == 1)
            #expect(value(#"tandem_events_total{kind="room",status="duplicate"}"#) == 1)
            #expect(value(#"tandem_events_total{kind="dm",status="accepted"}"#) == 1)
            #expect(value(#"tandem_events_total{kind="dm",status="rejected"}"#) == 0)
            #expect(value(#"tandem_events_total{kind="workout",status="accepted"}"#) == 0)
            #expect(value(#"tandem_rejections_total{code="not_member"}"#) == 1)
            #expect(value(#"tandem_rejections_total{code="invalid_payload"}"#) == 0)
            #expect(value(#"tandem_messages_received_total{kind="room"}"#) == 3)
            #expect(value(#"tandem_messages_received_total{kind="dm"}"#) == 1)
            #expect(value(#"tandem_messages_received_total{kind="dropped"}"#) == 0)
            // Every receipt timed once, by kind; the three applied events went through
            // batches (the duplicate was answered at once).
            #expect(value(#"tandem_receipt_seconds_count{kind="room"}"#) == 3)
            #expect(value(#"tandem_receipt_seconds_count{kind="dm"}"#) == 1)
            #expect(value("tandem_batch_size_sum") == 3)
            #expect((value("tandem_commit_seconds_count") ?? 0) >= 1)
            #expect(value("tandem_commit_seconds_count") == value("tandem_batch_size_count"))
            #expect(value("tandem_rooms") == 1)
            #expect(value("tandem_conversations") == 1)
            #expect(value("tandem_buffer_depth") == 0)
            #expect(value("tandem_mqtt_connected") == 1)
            #expect(value("tandem_mqtt_reconnects_total") == 0)
            #expect(value(#"tandem_store_errors_total{operation="commit"}"#) == 0)
            #expect(value("tandem_publish_errors_total") == 0)
            #expect((value("tandem_messages_published_total") ?? 0) >= 4)

            // A scrape counts nothing twice.
            let again = prometheusSamples(try httpGet(port: port, path: "/metrics").body)
            #expect(again[#"tandem_events_total{kind="room",status="accepted"}"#] == 1)

            #expect(try httpGet(port: port, path: "/").status == 404)
            #expect(try httpGet(port: port, path: "/metrics/extra").status == 404)
            // Garbage gets a 400 and a closed connection; the endpoint serves on.
            #expect(try exchange(port: port, Array("GARBAGE\r\n\r\n".utf8)).hasPrefix("HTTP/1.1 400"))
            #expect(try httpGet(port: port, path: "/healthz").status == 200)
            await alice.close()
            await bob.close()
            #expect(await coordinator.stop() == 0)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func jsonLogsAreOneObjectPerLineWithMetadata() async throws {
        try await withBroker(.open) { broker in
            let coordinator = try await CoordinatorProcess.start(broker: broker, arguments: ["--log-format", "json", "--log-level", "trace"])
            let alice = try await TestPeer.connect(broker: broker, user: "alice")
            try await alice.edit(room: "logged", .edit("j1", "acquire", sticker: "nowhere"))
            #expect(try await alice.receipt("j1")["code"] == "not_member")
            await alice.close()
            #expect(await coordinator.stop() == 0)

            let lines = coordinator.standardError.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            #expect(lines.count >= 4, "\(coordinator.standardError)")
            var records: [JSON] = []
            for line in lines {
                let record = try #require(try? JSON.parse(Array(line.utf8)), "not JSON: \(line)")
                #expect(record["ts"]?.stringValue?.hasSuffix("Z") == true, "\(line)")
                #expect(record["level"]?.stringValue != nil, "\(line)")
                #expect(record["label"]?.stringValue != nil, "\(line)")
                #expect(record["message"]?.stringValue != nil, "\(line)")
                records.append(record)
            }
            // The rejection, with who, where and which event as members of their own.
            let receipt = try #require(records.first { $0["message"] == "receipt" && $0["event.id"] == "j1" })
            #expect(receipt["user"] == "alice")
            #expect(receipt["room"] == "logged")
            #expect(receipt["status"] == "rejected")
            #expect(receipt["code"] == "not_member")
            #expect(records.contains { $0["message"] == "stopped cleanly" })
        }
    }

    @Test func aMetricsPortInUseStopsTheStartWithExitOne() async throws {
        try await withBroker(.open) { broker in
            // The broker's own port is taken for sure.
            let directory = try makeTemporaryDirectory(prefix: "metrics-port-")
            let result = try await ChildProcess.run(
                CoordinatorProcess.binary("tandem-coordinator"),
                ["--port", String(broker.port), "--database", directory + "/t.sqlite", "--metrics-port", String(broker.port)],
                timeout: .seconds(20))
            #expect(result.exitCode == 1, "\(result.standardError)")
            #expect(result.standardError.contains("cannot serve metrics"), "\(result.standardError)")
        }
    }

    /// `/healthz` right after the coordinator said online: the role is set just after
    /// the status is published, so the first answers may still say starting.
    func healthOnceLeader(port: Int) async throws -> HTTPResponse {
        var response = try httpGet(port: port, path: "/healthz")
        for _ in 0..<100 where response.status != 200 {
            #expect(response.status == 503)
            try await Task.sleep(for: .milliseconds(20))
            response = try httpGet(port: port, path: "/healthz")
        }
        return response
    }
}
