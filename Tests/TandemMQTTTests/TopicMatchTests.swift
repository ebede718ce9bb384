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
