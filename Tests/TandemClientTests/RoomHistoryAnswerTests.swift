import Testing
import TandemClient
import TandemCore

/// The client reads exactly what the coordinator writes (`RoomHistory.response`).
@Suite struct RoomHistoryAnswerTests {
    @Test func readsTheCoordinatorsAnswer() throws {
        let rows = [
            RoomHistoryRow(roomId: "r", version: 3, eventId: "e3", userId: "bob", type: .delete, stickerId: "s1", timestamp: 30, loggedAt: 31),
            RoomHistoryRow(roomId: "r", version: 2, eventId: nil, userId: nil, type: .expire, stickerId: "s1", timestamp: 20, loggedAt: 21),
            RoomHistoryRow(roomId: "r", version: 1, eventId: "e1", userId: "alice", type: .invite, stickerId: nil, timestamp: 10, loggedAt: 11),
        ]
        let json = RoomHistory.response(requestId: "q1", roomId: "r", epoch: "ep", page: RoomHistoryPage(version: 4, oldestCheckpoint: 1, entries: rows))
        let answer = try RoomHistoryAnswer(json: try JSON.parse(json.serialized()))
        #expect(answer.roomId == "r" && answer.epoch == "ep" && answer.version == 4 && answer.oldest == 1)
        #expect(answer.entries == [
            RoomHistoryAnswer.Entry(version: 3, eventId: "e3", userId: "bob", type: .delete, stickerId: "s1", timestamp: 30),
            RoomHistoryAnswer.Entry(version: 2, eventId: nil, userId: nil, type: .expire, stickerId: "s1", timestamp: 20),
            RoomHistoryAnswer.Entry(version: 1, eventId: "e1", userId: "alice", type: .invite, stickerId: nil, timestamp: 10),
        ])
        #expect(answer.entries.map(\.json) == rows.map(\.entryJSON))
    }

    @Test func theRequestIsTheContracts() throws {
        let request = RoomHistoryAnswer.request(requestId: "q1", roomId: "r", before: 7, limit: 20)
        guard let decoded = try? ClientRequest.decode(request.serialized()) else {
            Issue.record("the coordinator cannot read it")
            return
        }
        #expect(decoded.kind == .roomHistory && decoded.roomId == "r" && decoded.before == 7 && decoded.limit == 20)
        let bare = RoomHistoryAnswer.request(requestId: "q2", roomId: "r", before: nil, limit: nil)
        #expect(bare.text == #"{"requestId":"q2","type":"roomHistory","roomId":"r"}"#)
    }
}
