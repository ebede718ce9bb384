import ArgumentParser
import Foundation
import TandemCore

@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tandem-bench",
        abstract: "Load generator for Tandem: real clients against a running broker and coordinator.",
        discussion: """
        Scenarios: relay (the broker's own two-hop QoS 1 path, no coordinator), rooms, \
        contended, dm, telemetry, all. Every Tandem scenario also runs relay in the same \
        invocation (unless --no-relay), so each figure has the broker's beside it. chat \
        is apart: the broker bytes per message of one conversation, in a burst and at a \
        person's pace (--message-bytes, default 100; --history, default 200). The \
        broker must allow these client ids and topics: run it with an open config \
        (scripts/bench does; see docs/PERFORMANCE.md).
        """
    )

    enum ScenarioName: String, ExpressibleByArgument, CaseIterable {
        case relay, rooms, contended, dm, telemetry, all, chat
    }

    @Argument(help: "relay, rooms, contended, dm, telemetry, all, or chat.") var scenario: ScenarioName
    @Option(help: "Broker host.") var host = "127.0.0.1"
    @Option(help: "Broker port.") var port = 1883
    @Option(help: "MQTT username (default: anonymous).") var username: String?
    @Option(help: "MQTT password.") var password: String?
    @Option(name: .customLong("as"), help: ArgumentHelp(
        "USER:PASSWORD, repeatable: clients act as these users in turn (needed with the shipped ACL, e.g. --as alice:alice-demo --as bob:bob-demo).",
        valueName: "user:password"))
    var identities: [String] = []
    @Option(help: "Seconds of load per run.") var duration = 10.0
    @Option(help: "Offered events/s (the first step with --find-max).") var rate = 2000.0
    @Option(help: "Client connections (telemetry: workouts).") var clients = 20
    @Option(help: "Rooms (rooms scenario).") var rooms = 50
    @Option(help: "Stickers per room (contended: the shared stickers, default 4).") var stickers: Int?
    @Option(help: "Image characters on updates (rooms, relay; 0: none) or DM text bytes.") var messageBytes = 0
    @Option(help: "Setup messages per second (creates, requests, starts).") var setupRate = 3000.0
    @Option(help: "Seconds to wait for the last receipts after a run.") var drainTimeout = 30.0
    @Option(help: "The coordinator's pid, for its CPU and RSS.") var coordinatorPid: Int32?
    @Option(help: "The broker's pid, for its CPU and RSS.") var brokerPid: Int32?
    @Flag(help: "Raise the offered rate step by step until p99 or loss passes the limit.") var findMax = false
    @Option(help: "--find-max: factor between steps.") var stepFactor = 1.3
    @Option(help: "--find-max: most steps.") var maxSteps = 12
    @Option(help: "Sustainable means p99 event-to-receipt at most this (ms), no unanswered event, achieved >= 95% of offered.") var p99LimitMs = 100.0
    @Flag(help: "Skip the relay run.") var noRelay = false
    @Flag(help: "JSON on stdout instead of the table.") var json = false
    @Flag(help: "No progress line on stderr.") var quiet = false
    @Option(help: ArgumentHelp("Soak samples: a tab-separated line every --sample-seconds of each measured run (rates, unanswered, receipt p99 and max, coordinator RSS and CPU, --watch sizes).", valueName: "file"))
    var samples: String?
    @Option(help: "Seconds between soak samples.") var sampleSeconds = 10.0
    @Option(help: "chat: messages the conversation holds before the measured ones.") var history = 200
    @Option(help: "chat: seconds the conversation is left quiet before and after the measured messages (the coordinator's snapshot pacing, 10 s, plus one).") var settleSeconds = 11.0
    @Option(help: ArgumentHelp("NAME=PATH, repeatable: a file or directory whose size each soak sample reports.", valueName: "name=path"))
    var watch: [String] = []

    func validate() throws {
        guard duration > 0, rate > 0, clients > 0, rooms > 0, setupRate > 0 else {
            throw ValidationError("--duration, --rate, --clients, --rooms and --setup-rate must be positive")
        }
        if let stickers, stickers <= 0 { throw ValidationError("--stickers must be positive") }
        guard sampleSeconds > 0 else { throw ValidationError("--sample-seconds must be positive") }
        guard history >= 0, settleSeconds >= 0 else { throw ValidationError("--history and --settle-seconds must not be negative") }
        for text in watch {
            let parts = text.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw ValidationError("--watch takes NAME=PATH, not \(text)")
            }
        }
        if samples == nil, !watch.isEmpty { throw ValidationError("--watch needs --samples") }
        guard stepFactor > 1 else { throw ValidationError("--step-factor must be above 1") }
        for text in identities {
            let user = text.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            guard text.contains(":"), Identifier.isValid(user) else {
                throw ValidationError("--as takes USER:PASSWORD with a valid user id, not \(text)")
            }
        }
        if scenario == .dm || scenario == .all || scenario == .relay, identities.count == 1 {
            throw ValidationError("--as: dm and relay need two identities (a pair of users)")
        }
    }

    func run() async throws {
        let nonce = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        var broker = BrokerAddress(host: host, port: port, username: username, password: password)
        broker.identities = identities.map { text in
            let parts = text.split(separator: ":", maxSplits: 1)
            return BrokerAddress.Identity(user: String(parts[0]), password: parts.count > 1 ? String(parts[1]) : "")
        }
        if scenario == .chat {
            let textBytes = messageBytes > 0 ? messageBytes : 100
            let chat = ChatBytes(broker: broker, topics: Topics(), nonce: nonce, textBytes: textBytes, history: history,
                                 settleSeconds: settleSeconds, progress: !quiet)
            let results = try await chat.run()
            print(json ? ChatBytes.json(results, textBytes: textBytes, history: history) : ChatBytes.table(results, textBytes: textBytes, history: history),
                  terminator: json ? "\n" : "")
            return
        }
        let runner = Runner(
            durationSeconds: duration, drainTimeoutSeconds: drainTimeout, setupRate: setupRate,
            p99LimitMicros: UInt64(p99LimitMs * 1000), coordinatorPid: coordinatorPid, brokerPid: brokerPid, showProgress: !quiet)

        var names: [ScenarioName] = scenario == .all ? [.rooms, .contended, .dm, .telemetry] : [scenario]
        if !noRelay || scenario == .relay { names.insert(.relay, at: 0) }
        if scenario == .relay { names = [.relay] }

        let sampler = try samples.map {
            try Sampler(path: $0, intervalSeconds: sampleSeconds, watch: watch, coordinatorPid: coordinatorPid)
        }
        var runs: [RunReport] = []
        var acceptsAll: Set<String> = []
        var findMaxResults: [String: BenchReport.FindMaxResult] = [:]
        var best: [String: RunReport] = [:]
        for name in names {
            let options = ScenarioOptions(
                broker: broker, clients: clients, rooms: rooms,
                stickers: stickers ?? (name == .contended ? 4 : 10),
                messageBytes: name == .dm ? max(messageBytes, 64) : messageBytes,
                // Ids and workout ids are new in every invocation and scenario (the
                // coordinator remembers ids for 48 h and runs a workout id once).
                nonce: "\(nonce)\(name.rawValue.prefix(2))")
            let s: any Scenario = switch name {
            case .relay: RelayScenario(options: options)
            case .rooms: RoomsScenario(name: "rooms", options: options, layout: .owned)
            case .contended: makeContendedScenario(options: options)
            case .dm: DMScenario(options: options)
            case .telemetry, .all, .chat: TelemetryScenario(options: options)
            }
            if s.everyEventAccepted { acceptsAll.insert(s.name) }
            let tracker = Tracker()
            try await s.connect(tracker: tracker)
            let refused = await runner.unmeasured(s.setup(), scenario: s, tracker: tracker, label: "setup")
            guard refused.isEmpty else {
                FileHandleOutput.warn(setupRefusal(refused, scenario: s.name))
                await s.close()
                throw ExitCode(2)
            }
            var seq = 0
            if findMax && s.fixedRate == nil {
                var steps: [RunReport] = []
                var offered = rate
                var highest: RunReport?
                for _ in 0..<maxSteps {
                    let r = await runner.run(s, tracker: tracker, rate: offered, seq: &seq)
                    steps.append(r)
                    if !quiet { FileHandleOutput.warn("\(s.name) at \(Int(offered))/s: achieved \(Int(r.achievedPerSecond))/s, p99 \(Double(r.receiptLatencyMicros.p99) / 1000) ms, unanswered \(r.unanswered)\(r.sustainable ? "" : " -- not sustainable")") }
                    guard r.sustainable else { break }
                    highest = r
                    offered *= stepFactor
                }
                findMaxResults[s.name] = .init(highestSustainablePerSecond: highest?.offeredPerSecond, steps: steps)
                if let highest { runs.append(highest); best[s.name] = highest } else if let first = steps.first { runs.append(first); best[s.name] = first }
            } else {
                let r = await runner.run(s, tracker: tracker, rate: s.fixedRate ?? rate, seq: &seq, sampler: s.name == "relay" ? nil : sampler)
                runs.append(r)
                best[s.name] = r
            }
            await runner.unmeasured([s.teardown()], scenario: s, tracker: tracker, label: "teardown")
            if let relay = s as? RelayScenario { await relay.closeRelay() }
            await s.close()
        }

        var ratios: [String: BenchReport.Ratio] = [:]
        if let relay = best["relay"] {
            for (name, r) in best where name != "relay" && name != "telemetry" {
                ratios[name] = .init(
                    achievedRateOverRelay: r.achievedPerSecond / relay.achievedPerSecond,
                    receiptP50OverRelayMicros: Int64(r.receiptLatencyMicros.p50) - Int64(relay.receiptLatencyMicros.p50),
                    receiptP99OverRelayMicros: Int64(r.receiptLatencyMicros.p99) - Int64(relay.receiptLatencyMicros.p99))
            }
        }
        let report = BenchReport(machine: BenchReport.machine(), runs: runs, findMax: findMax ? findMaxResults : nil, ratios: ratios)
        print(json ? report.json() : report.table(), terminator: json ? "\n" : "")
        if runs.contains(where: { $0.unanswered > 0 }) { throw ExitCode(2) }
        // A scenario whose every event should be accepted, with refusals: its figures
        // describe a smaller load than the one it offered.
        for r in runs where acceptsAll.contains(r.scenario) && r.rejected > 0 {
            FileHandleOutput.warn("\(r.scenario): \(r.rejected) events refused (\(r.rejectionCodes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))) where every one should be accepted: the figures above do not describe the load offered")
            throw ExitCode(2)
        }
    }
}
