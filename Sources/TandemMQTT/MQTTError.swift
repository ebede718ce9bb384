import CMosquitto
import CMosquittoReads

/// Every failure of the client, with libmosquitto's own words where it gave any.
public struct MQTTError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A libmosquitto call failed (`mosquitto_strerror`).
        case library(code: Int32)
        /// The broker refused the connection (CONNACK reason).
        case connectionRefused(reason: Int32)
        /// The broker answered a publish or subscribe with a negative reason code
        /// (e.g. 0x87 not authorised).
        case refused(reason: Int32)
        /// The connection dropped while the operation waited.
        case disconnected
        /// No connection at the moment of the call.
        case notConnected
        /// The client is shut down.
        case shutDown
        /// The owner's gate is closed (a coordinator that lost its leader lease): the
        /// client neither connects nor hands anything to the broker any more.
        case fenced
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    /// Turns a libmosquitto return code into an error carrying `mosquitto_strerror`.
    static func check(_ rc: Int32, _ doing: @autoclosure () -> String) throws(MQTTError) {
        guard rc != MOSQ_ERR_SUCCESS.rawValue else { return }
        throw MQTTError(.library(code: rc), "\(doing()): \(LibMosquitto.errorString(rc))")
    }

    /// Whether `reason` is an MQTT v5 failure code (0x80 and above).
    static func isFailure(reason: Int32) -> Bool { reason >= 0x80 }

    /// `true` for refusals that retrying cannot fix (credentials, authorisation).
    var isPermanent: Bool {
        if case .connectionRefused(let reason) = kind {
            // 0x84 unsupported protocol, 0x85 bad client id, 0x86 bad credentials,
            // 0x87 not authorised, 0x8C bad auth method; v3 codes 1-5.
            return [0x84, 0x85, 0x86, 0x87, 0x8C, 1, 2, 4, 5].contains(reason)
        }
        return false
    }

    /// libmosquitto refused a packet larger than the broker's maximum (its CONNACK's
    /// maximum packet size: mosquitto's `max_packet_size`).
    public var isOversizePacket: Bool {
        if case .library(let code) = kind { return code == Int32(MOSQ_ERR_OVERSIZE_PACKET.rawValue) }
        return false
    }
}

/// libmosquitto's process-wide setup and strings.
enum LibMosquitto {
    /// `mosquitto_lib_init` runs once, before the first client (a global is lazily and
    /// atomically initialised).
    static let initialised: Bool = {
        mosquitto_lib_init()
        _ = buffersReads
        return true
    }()

    /// Whether libmosquitto's reads go through a buffer (`tandem_mosquitto_reads_install`,
    /// done once, before the first client): a socket's bytes are then taken up to 16 KiB
    /// a `read(2)`, not a few bytes a call, and whether more is left to read is asked of
    /// the buffer (``ClientCore/driveRead()``).
    static let buffersReads: Bool = tandem_mosquitto_reads_install() == 1

    /// Whether this libmosquitto's clients go without their wake-up socket pair
    /// (`tandem_mosquitto_close_wake_pair`, tried on a client made for the question): then
    /// a connected client holds one descriptor, its socket, and otherwise three.
    static let closesWakePair: Bool = {
        _ = initialised
        guard let handle = mosquitto_new(nil, true, nil) else { return false }
        defer { mosquitto_destroy(handle) }
        return tandem_mosquitto_close_wake_pair(handle) == 1
    }()

    /// A property list with MQTT v5's message expiry interval, or nil (none) without one.
    static func messageExpiry(_ seconds: UInt32?) -> OpaquePointer? {
        var props: OpaquePointer? = nil
        if let seconds {
            mosquitto_property_add_int32(&props, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), seconds)
        }
        return props
    }

    static func errorString(_ rc: Int32) -> String {
        String(cString: mosquitto_strerror(rc))
    }

    static func reasonString(_ reason: Int32) -> String {
        String(cString: mosquitto_reason_string(reason))
    }

    static func connackString(_ code: Int32) -> String {
        String(cString: mosquitto_connack_string(code))
    }

    /// Whether `topic` matches the subscription `filter`, by MQTT's rules (`+` one level,
    /// `#` the rest and the level above it, no wildcard at the first level matching a
    /// `$` topic). Every message is matched against every filter of its client (ten a
    /// tandem-web session), so this works on the strings' UTF-8 bytes in place:
    /// `mosquitto_topic_matches_sub` made C strings of both each time (7 % of tandem-web's
    /// CPU), and walking `String.UTF8View`'s indices still cost 6 %. The filters are
    /// valid (``ClientCore/subscribe(_:qos:deliver:)`` checks them).
    static func topicMatches(filter: String, topic: String) -> Bool {
        var filter = filter, topic = topic
        return topic.withUTF8 { t in filter.withUTF8 { f in topicMatches(filter: f, topic: t) } }
    }

    /// ``topicMatches(filter:topic:)`` on UTF-8 bytes.
    static func topicMatches(filter f: UnsafeBufferPointer<UInt8>, topic t: UnsafeBufferPointer<UInt8>) -> Bool {
        let slash = UInt8(ascii: "/"), plus = UInt8(ascii: "+"), hash = UInt8(ascii: "#")
        // An empty topic is no topic (libmosquitto refuses it).
        guard !t.isEmpty else { return false }
        if t[0] == UInt8(ascii: "$"), let first = f.first, first == plus || first == hash { return false }
        var fi = 0
        // The start of the topic's next level; nil once the topic has no more.
        var ti: Int? = 0
        while true {
            var fEnd = fi
            while fEnd < f.count, f[fEnd] != slash { fEnd += 1 }
            let oneByte = fEnd - fi == 1
            if oneByte, f[fi] == hash { return true }
            guard let tStart = ti else { return false }
            var tEnd = tStart
            while tEnd < t.count, t[tEnd] != slash { tEnd += 1 }
            if !(oneByte && f[fi] == plus) {
                guard fEnd - fi == tEnd - tStart else { return false }
                for k in 0..<(fEnd - fi) where f[fi + k] != t[tStart + k] { return false }
            }
            let topicDone = tEnd == t.count
            if fEnd == f.count { return topicDone }
            fi = fEnd + 1
            ti = topicDone ? nil : tEnd + 1
        }
    }

    /// libmosquitto's own answer, which ``topicMatches(filter:topic:)`` gives without it
    /// (the tests hold the two together).
    static func libraryTopicMatches(filter: String, topic: String) -> Bool {
        var result = false
        return mosquitto_topic_matches_sub(filter, topic, &result) == MOSQ_ERR_SUCCESS.rawValue && result
    }
}
