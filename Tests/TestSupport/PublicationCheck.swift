import TandemCore

/// What a subscriber saw the coordinators publish for one room, checked against what a
/// single authoritative leader may publish, whoever led when: a checker that reads the
/// publications, not what a test hoped.
///
/// Fed every `rooms/{roomId}/state` (RoomSnapshot) and `rooms/{roomId}/changes`
/// (RoomChanges) in the order they arrived (one subscriber, one connection, QoS 1: the
/// broker keeps each publisher's order):
/// - **no repeat**: no version is in two published changes (an event applied twice,
///   or an old leader publishing again what the new one published);
/// - **no gap**: every version from the first seen to the last is in a change or in the
///   state whole, a snapshot at it or above it published before the next change (a
///   takeover publishes the state whole instead of the changes the old leader committed
///   but never sent; clients take the snapshot on a gap);
/// - **no going back**: no snapshot older than one already seen (what a leader that
///   kept publishing after losing its term would do), and no change that starts below
///   a snapshot unless it is the change that snapshot followed;
/// - **each event once**: no event id in two changes.
public struct PublicationCheck: Sendable {
    public private(set) var problems: [String] = []
    /// The newest version a snapshot or change brought the room to.
    public private(set) var version: Int64?
    var inChanges: Set<Int64> = []
    var steppedOver: [ClosedRange<Int64>] = []
    var first: Int64?
    public private(set) var eventIds: [String: Int] = [:]
    public private(set) var snapshots = 0
    public private(set) var changes = 0

    public init() {}

    public mutating func snapshot(version v: Int64) {
        snapshots += 1
        if first == nil { first = v }
        if let current = version {
            if v < current {
                problems.append("snapshot version \(v) after version \(current): older state published after newer")
                return
            }
            // The state whole at v stands for every version after the last one seen.
            if v > current { steppedOver.append((current + 1)...v) }
        }
        version = max(version ?? v, v)
    }

    public mutating func change(from: Int64, to: Int64, versions: [Int64], eventIds ids: [String]) {
        changes += 1
        if first == nil { first = from }
        for v in versions {
            if !inChanges.insert(v).inserted { problems.append("version \(v) in two published changes") }
        }
        for id in ids {
            eventIds[id, default: 0] += 1
            if eventIds[id] == 2 { problems.append("event \(id) in two published changes") }
        }
        version = max(version ?? to, to)
    }

    /// Reads one message (a snapshot or changes of any room: `room` picks one).
    public mutating func read(topic: String, payload: JSON, room: String, topics: Topics = Topics()) {
        if topic == topics.roomState(room: room), let v = payload["version"]?.int64Value {
            snapshot(version: v)
        } else if topic == topics.roomChanges(room: room),
                  let from = payload["fromVersion"]?.int64Value, let to = payload["toVersion"]?.int64Value {
            let entries = payload["changes"]?.arrayValue ?? []
            change(from: from, to: to, versions: entries.compactMap { $0["version"]?.int64Value },
                   eventIds: entries.compactMap { $0["eventId"]?.stringValue })
        }
    }

    /// Versions between the first and the newest that neither a change nor a snapshot's
    /// step covered.
    public var uncovered: [Int64] {
        guard let first, let version, version > first else { return [] }
        return ((first + 1)...version).filter { v in !inChanges.contains(v) && !steppedOver.contains { $0.contains(v) } }
    }

    /// Every problem, the versions never published included.
    public var allProblems: [String] {
        problems + (uncovered.isEmpty ? [] : ["versions in no change and stepped over by no snapshot: \(uncovered.prefix(20))"])
    }
}
