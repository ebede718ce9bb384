import Synchronization
import Testing
@testable import TandemMQTT

/// The topic matcher every delivered message goes through, held to libmosquitto's.
struct TopicMatchTests {
    static let filters = [
        "#", "+", "+/+", "a", "a/b", "a/+", "a/#", "a/+/c", "+/b", "+/b/#", "a/b/c", "/", "/#", "/+", "a/", "a//b", "a/+/+",
        "$SYS/#", "$SYS/+", "tandem/v1/rooms/+/changes", "tandem/v1/rooms/r1/state", "tandem/v1/users/alice/rooms/+",
        "tandem/v1/presence/+/+", "tandem/v1/rooms/r1/cursors/+", "tandem/v1/users/alice/#",
    ]
    static let topics = [
        "a", "a/b", "a/b/c", "a/c", "b", "/", "/b", "a/", "a//b", "a/b/c/d", "x/b", "x/b/c", "$SYS/x", "$SYS", "",
        "tandem/v1/rooms/r1/changes", "tandem/v1/rooms/r1/state", "tandem/v1/rooms/r12/changes", "tandem/v1/rooms/r1/changes/x",
        "tandem/v1/users/alice/rooms/r1", "tandem/v1/users/alice/rooms", "tandem/v1/users/alicia/rooms/r1",
        "tandem/v1/presence/bob/web-1", "tandem/v1/rooms/r1/cursors/bob", "tandem/v1/users/alice/receipts", "é/ü", "a/é",
    ]

    @Test(arguments: filters) func matchesAsLibmosquittoDoes(filter: String) {
        for topic in Self.topics {
            #expect(LibMosquitto.topicMatches(filter: filter, topic: topic) == LibMosquitto.libraryTopicMatches(filter: filter, topic: topic),
                    "filter \(filter.debugDescription), topic \(topic.debugDescription)")
        }
    }
}

/// `ClientCore.Routes`: the subscriptions a message reaches, found by its topic for a
/// filter without wildcards and by matching for the others, each subscription once.
struct RouteTests {
    @Test func eachMatchingSubscriptionOnceExactAndWildcardAlike() {
        let reached = LockedIds()
        func entry(_ id: Int, _ filters: [String]) -> ClientCore.SubscriptionEntry {
            ClientCore.SubscriptionEntry(filters: filters, qos: .atLeastOnce, target: .deliver { _ in reached.add(id) })
        }
        var routes = ClientCore.Routes([
            1: entry(1, ["tandem/v1/rooms/r1/state", "tandem/v1/rooms/r1/changes"]),
            2: entry(2, ["tandem/v1/rooms/+/changes"]),
            3: entry(3, ["tandem/v1/rooms/r1/changes", "tandem/v1/#"]),
            4: entry(4, ["tandem/v1/users/alice/rooms/+"]),
        ])
        func reach(_ topic: String) -> [Int] {
            reached.clear()
            for target in routes.targets(for: topic) {
                if case .deliver(let deliver) = target { deliver(MQTTMessage(topic: topic, payload: [], qos: .atLeastOnce, retain: false)) }
            }
            return reached.sorted
        }
        // Twice each: the second time from what the first found.
        for _ in 0..<2 {
            #expect(reach("tandem/v1/rooms/r1/changes") == [1, 2, 3])
            #expect(reach("tandem/v1/rooms/r1/state") == [1, 3])
            #expect(reach("tandem/v1/rooms/r2/changes") == [2, 3])
            #expect(reach("tandem/v1/users/alice/rooms/r1") == [3, 4])
            #expect(reach("elsewhere/x") == [])
        }
        // Past the limit of topics remembered, every topic still reaches what it matches.
        for n in 0...ClientCore.Routes.seenLimit {
            _ = routes.targets(for: "tandem/v1/rooms/n\(n)/changes")
        }
        #expect(reach("tandem/v1/rooms/r1/changes") == [1, 2, 3])
        #expect(reach("tandem/v1/users/alice/rooms/r1") == [3, 4])
    }
}

final class LockedIds: Sendable {
    private let ids = Mutex<[Int]>([])
    func add(_ id: Int) { ids.withLock { $0.append(id) } }
    func clear() { ids.withLock { $0.removeAll() } }
    var sorted: [Int] { ids.withLock { $0.sorted() } }
}
