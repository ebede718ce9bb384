import Logging
import TandemMQTT

/// Whether this process reaches the broker now, as the leader lease needs to know
/// (PostgreSQL only): a leader that cannot reach the broker answers nobody, so it gives
/// its partitions up once the broker has been silent for ``silenceLimit``, and a standby
/// takes a lease only while its own link is up. Without this, a leader cut from the broker
/// but not from PostgreSQL kept renewing its lease while a healthy standby waited.
///
/// Read from the instance connection (``InstanceAnnouncer``), which every process has,
/// leader or standby: it asks the broker for an answer (``MQTTClient/probe(_:)``, an
/// UNSUBSCRIBE that changes nothing) every ``probeEvery``, and anything the broker sends
/// counts as heard. A cut link shows as silence within the limit, where TCP and
/// libmosquitto's keepalive would take tens of seconds.
final class BrokerLink: Sendable {
    let client: MQTTClient
    let probeFilter: String
    let silenceLimit: Duration
    let probeEvery: Duration

    /// What the link looks like at one moment: whether a connection is up, and how long
    /// the broker has said nothing (nil: never heard).
    struct Reading: Equatable, Sendable {
        var connected: Bool
        var quiet: Duration?

        /// A leader keeps its partitions while the broker was heard within `limit`,
        /// connected or not: a broker restart shorter than the limit ends no term.
        func leaderKeeps(limit: Duration) -> Bool {
            quiet.map { $0 < limit } ?? false
        }

        /// A standby takes a lease only while connected and heard within `limit`.
        func standbyMayLead(limit: Duration) -> Bool {
            connected && leaderKeeps(limit: limit)
        }
    }

    /// `silenceLimit`: `--broker-silence-seconds`. Probes six times per limit (at most
    /// every second, at least every 100 ms), so one lost probe never ends a term.
    init(client: MQTTClient, instanceTopic: String, silenceLimit: Duration) {
        self.client = client
        probeFilter = "\(instanceTopic)/probe"
        self.silenceLimit = silenceLimit
        probeEvery = max(.milliseconds(100), min(.seconds(1), silenceLimit / 6))
    }

    var reading: Reading {
        Reading(connected: client.isConnected, quiet: client.lastHeardFromBroker.map { .now - $0 })
    }

    var mayLead: Bool { reading.standbyMayLead(limit: silenceLimit) }

    /// Probes until cancelled (the process's life).
    func run() async {
        while !Task.isCancelled {
            client.probe(probeFilter)
            try? await Task.sleep(for: probeEvery)
        }
    }

    /// Returns how long the broker had been silent once that reaches the limit, or nil
    /// when cancelled: a leader's term watches this beside its lease.
    func waitForSilence() async -> Duration? {
        while !Task.isCancelled {
            let now = reading
            if !now.leaderKeeps(limit: silenceLimit) { return now.quiet ?? silenceLimit }
            try? await Task.sleep(for: probeEvery / 2)
        }
        return nil
    }
}

extension BrokerLink.Reading: CustomStringConvertible {
    var description: String {
        let heard = quiet.map { "last heard \($0.roundedMillis) ms ago" } ?? "never heard"
        return "\(connected ? "connected" : "not connected"), \(heard)"
    }
}
