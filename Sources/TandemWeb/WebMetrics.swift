import Prometheus

/// tandem-web's metrics, served on its own `/metrics` in the Prometheus text format, on
/// the coordinator's conventions: `tandem_` names, `_total` counters, `_seconds`
/// histograms, one registry per process (a test makes its own).
///
/// The two latencies are what tandem-web adds, not what the broker or the coordinator
/// take: from a page's message read off its socket (after its pacing wait) to the edit
/// handed to the MQTT client's queue, and from a room update taken off the client's stream
/// to its frame written to the socket.
public final class WebMetrics: Sendable {
    /// Metric names, as Prometheus shows them.
    public enum Name {
        public static let sessions = "tandem_web_sessions"
        public static let tabs = "tandem_web_tabs"
        public static let signIns = "tandem_web_sign_ins_total"
        public static let framesReceived = "tandem_web_frames_received_total"
        public static let framesSent = "tandem_web_frames_sent_total"
        public static let frameErrors = "tandem_web_frame_errors_total"
        public static let framesPaced = "tandem_web_frames_paced_total"
        public static let frameToPublish = "tandem_web_frame_to_publish_seconds"
        public static let updateToFrame = "tandem_web_update_to_frame_seconds"
        public static let editToUpdate = "tandem_web_edit_to_update_seconds"
        public static let roomFrames = "tandem_web_room_frames_total"
    }

    /// How a sign-in ended (`tandem_web_sign_ins_total{result}`).
    public enum SignInResult: String, Sendable, CaseIterable {
        case ok, refused, unreachable, malformed
    }

    /// From 25 µs to a second: the work is a decode and a queue hand-off, so most of it is
    /// in the lowest buckets unless the machine is busy.
    public static let latencyBuckets: [Duration] = [
        .microseconds(25), .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1),
    ]

    /// Around the coordinator's reorder window (30 ms by default), where an edit's way
    /// back to the tabs ends.
    public static let roundTripBuckets: [Duration] = [
        .milliseconds(10), .milliseconds(25), .milliseconds(30), .milliseconds(32), .milliseconds(35), .milliseconds(40),
        .milliseconds(50), .milliseconds(75), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
    ]

    public let registry: PrometheusCollectorRegistry
    let sessions: Gauge
    let tabs: Gauge
    let signIns: [SignInResult: Counter]
    let received: [String: Counter]
    let sent: Counter
    let errors: [PageFrame.Problem.Code: Counter]
    let paced: Counter
    let frameToPublish: DurationHistogram
    let updateToFrame: DurationHistogram
    /// From a sticker update's timestamp to its change taken by a tab that shows the room.
    let editToUpdate: DurationHistogram
    /// `room` frames whose room part was written for them, and those that copied the
    /// part another tab wrote for the same version (``RoomFrames``).
    let roomFramesWritten: Counter
    let roomFramesShared: Counter

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        sessions = registry.makeGauge(descriptor: Self.describe(Name.sessions, "Signed-in sessions (one MQTT session each)"))
        tabs = registry.makeGauge(descriptor: Self.describe(Name.tabs, "Open WebSockets (browser tabs)"))
        signIns = Dictionary(uniqueKeysWithValues: SignInResult.allCases.map { result in
            (result, registry.makeCounter(descriptor: Self.describe(Name.signIns, "Sign-ins by result"), labels: [("result", result.rawValue)]))
        })
        // Every frame type, and "invalid" for a frame that did not decode.
        received = Dictionary(uniqueKeysWithValues: (PageFrame.types + ["invalid"]).map { type in
            (type, registry.makeCounter(descriptor: Self.describe(Name.framesReceived, "Frames read from pages, by type"), labels: [("type", type)]))
        })
        sent = registry.makeCounter(descriptor: Self.describe(Name.framesSent, "Frames written to pages"))
        errors = Dictionary(uniqueKeysWithValues: PageFrame.Problem.Code.allCases.map { code in
            (code, registry.makeCounter(descriptor: Self.describe(Name.frameErrors, "Error frames sent, by code"), labels: [("code", code.rawValue)]))
        })
        paced = registry.makeCounter(descriptor: Self.describe(Name.framesPaced, "Frames that waited because their session sent too fast"))
        frameToPublish = registry.makeDurationHistogram(
            descriptor: Self.describe(Name.frameToPublish, "From a page's frame read to its event handed to the MQTT client"), buckets: Self.latencyBuckets)
        updateToFrame = registry.makeDurationHistogram(
            descriptor: Self.describe(Name.updateToFrame, "From a room update taken from the MQTT client to its frame written to the page"), buckets: Self.latencyBuckets)
        editToUpdate = registry.makeDurationHistogram(
            descriptor: Self.describe(
                Name.editToUpdate,
                "From a sticker update's timestamp (its editor's clock: this process's for its people's edits) to its change taken from the MQTT client by a tab showing the room"),
            buckets: Self.roundTripBuckets)
        let roomFrames = Self.describe(Name.roomFrames, "Room frames by how their room part was had: written, or shared with another tab's")
        roomFramesWritten = registry.makeCounter(descriptor: roomFrames, labels: [("part", "written")])
        roomFramesShared = registry.makeCounter(descriptor: roomFrames, labels: [("part", "shared")])
    }

    /// A whole name as the coordinator writes them (the unit is in the name).
    static func describe(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    func signIn(_ result: SignInResult) { signIns[result]?.increment() }
    func frameReceived(_ type: String) { received[type]?.increment() }
    func frameError(_ code: PageFrame.Problem.Code) { errors[code]?.increment() }
}
