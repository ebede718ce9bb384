import Testing
@testable import TandemCore

@Suite struct PresenceTrackerTests {
    @Test func graceStartsWhenTheLastClientGoesOffline() {
        var p = PresenceTracker(grace: 5000)
        p.update(user: "alice", clientId: "phone", online: true, now: 0)
        p.update(user: "alice", clientId: "laptop", online: true, now: 0)
        p.update(user: "alice", clientId: "phone", online: false, now: 1000)
        #expect(p.nextDeadline == nil)
        #expect(p.isOnline("alice") == true)
        p.update(user: "alice", clientId: "laptop", online: false, now: 2000)
        #expect(p.nextDeadline == 7000)
        #expect(p.takeExpired(now: 6999).isEmpty)
        #expect(p.takeExpired(now: 7000) == ["alice"])
        #expect(p.takeExpired(now: 9000).isEmpty)
    }

    @Test func comingBackWithinTheGraceKeepsTheLock() {
        var p = PresenceTracker(grace: 5000)
        p.update(user: "bob", clientId: "c", online: false, now: 0)
        p.update(user: "bob", clientId: "c", online: true, now: 3000)
        #expect(p.nextDeadline == nil)
        #expect(p.takeExpired(now: 10_000).isEmpty)
    }

    @Test func unknownUsersAreNeitherOnlineNorOffline() {
        let p = PresenceTracker(grace: 5000)
        #expect(p.isOnline("carol") == nil)
    }

    @Test func parsesPayloads() {
        #expect(PresenceTracker.parse(Array(#"{"online":true}"#.utf8)) == .some(true))
        #expect(PresenceTracker.parse(Array(#"{"online":false}"#.utf8)) == .some(false))
        #expect(PresenceTracker.parse([]) == .some(nil))
        #expect(PresenceTracker.parse(Array("garbage".utf8)) == nil)
    }
}
