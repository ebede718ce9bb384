import Testing
import TandemAgent
import TandemCore

@Suite struct RenderingTests {
    /// A column without a heading (the pending marker) has no rule: a rule under nothing
    /// read as a column with no name.
    @Test func tableAlignsColumnsAndTrimsTrailingSpace() {
        let table = TextTable(headers: ["ID", "OWNER", ""], rows: [["s1", "alice", ""], ["sticker-2", "-", "(pending)"]])
        #expect(table.rendered() == """
            ID         OWNER
            ---------  -----
            s1         alice
            sticker-2  -      (pending)
            """)
    }

    @Test func roomTable() {
        let stickers = [
            Sticker(id: "s1", image: "star.png", frame: Frame(x: 10, y: 10.5, width: 50, height: 50), owner: "alice",
                    createdBy: "alice", updatedBy: "alice", updatedAt: 1),
            Sticker(id: "s2", image: "moon.png", frame: Frame(x: 0, y: 0, width: 5, height: 5), owner: nil,
                    createdBy: "bob", updatedBy: "bob", updatedAt: 2),
        ]
        let text = RoomTable.render(roomId: "r1", version: 7, stickers: stickers, pendingStickers: ["s1"])
        #expect(text == """
            room r1 · version 7 · 2 stickers · 1 pending
            ID  IMAGE     X   Y     W   H   OWNER  UPDATED BY
            --  --------  --  ----  --  --  -----  ----------
            s1  star.png  10  10.5  50  50  alice  alice       (pending)
            s2  moon.png  0   0     5   5   -      bob
            """)
        #expect(RoomTable.render(roomId: "r1", version: 0, stickers: [], pendingStickers: []) == "room r1 · version 0 · 0 stickers\n(no stickers)")
    }

    @Test func historyTable() {
        let t: Millis = 1_700_000_000_000
        let entries = [
            RoomHistoryAnswer.Entry(version: 5, eventId: "e5", userId: "bob", type: .restore, stickerId: nil, timestamp: t + 3_000),
            RoomHistoryAnswer.Entry(version: 4, eventId: nil, userId: nil, type: .expire, stickerId: "s1", timestamp: t + 2_000),
            RoomHistoryAnswer.Entry(version: 3, eventId: "e3", userId: "alice", type: .update, stickerId: "s1", timestamp: t),
        ]
        let answer = RoomHistoryAnswer(roomId: "r1", epoch: "ep", version: 5, oldest: 1, entries: entries)
        let text = RoomTable.history(answer, limit: 3) { "history \($0)" }
        #expect(text == """
            room r1 · version 5 · restorable back to version 1
            VERSION  CHANGE   STICKER  BY     TIME
            -------  -------  -------  -----  --------
            5        restore  -        bob    \(Format.time(t + 3_000))
            4        expire   s1       -      \(Format.time(t + 2_000))
            3        update   s1       alice  \(Format.time(t))
            … older changes: history 3
            """)
        // A page that is not full has nothing older to point at.
        #expect(!RoomTable.history(answer, limit: 20) { "history \($0)" }.contains("older"))
        let empty = RoomHistoryAnswer(roomId: "r1", epoch: "ep", version: 0, oldest: 0, entries: [])
        #expect(RoomTable.history(empty, limit: 20) { "history \($0)" } == "room r1 · version 0 · restorable back to version 0\n(no changes)")
        #expect(RoomTable.historyJSON(answer)["entries"]?.arrayValue?.count == 3)
    }

    @Test(arguments: [
        (0.0, "0:00"), (59.9, "0:59"), (61, "1:01"), (3_600, "1:00:00"), (3_725, "1:02:05"), (-3, "0:00"), (.nan, "0:00"),
    ])
    func durations(seconds: Double, text: String) {
        #expect(Format.duration(seconds) == text)
    }

    @Test(arguments: [(330.0, "5:30 /km"), (0, "--:-- /km"), (299.6, "5:00 /km"), (.infinity, "--:-- /km")])
    func paces(pace: Double, text: String) {
        #expect(Format.pace(pace) == text)
    }

    @Test func distances() {
        #expect(Format.distance(0) == "0.00 km")
        #expect(Format.distance(2_414) == "2.41 km")
        #expect(Format.distance(10_005) == "10.01 km")
    }

    @Test func workoutStatusLine() {
        let line = WorkoutStatusLine(device: .watch, startOrigin: .local, status: .running, elapsed: 754,
                                     distance: 2_414, pace: 312, alert: .caution, heartRate: 142.4)
        #expect(line.text == "watch local running  12:34  2.41 km  5:12 /km  caution  HR 142")
        let waiting = WorkoutStatusLine(device: .phone, startOrigin: .remote, status: nil, elapsed: 0,
                                        distance: 0, pace: nil, alert: .normal, heartRate: nil)
        #expect(waiting.text == "phone remote waiting  0:00  0.00 km  --:-- /km  normal  HR --")
        #expect(line.json["type"] == "status")
        #expect(line.json["gpwsStatus"] == "caution")
    }

    @Test func summaryText() {
        let s = WorkoutSummary(distance: 5_000, elapsedTime: 1_650, averagePace: 330, averageHeartRate: 150.4, maxHeartRate: 171)
        #expect(s.text == "5.00 km in 27:30, average pace 5:30 /km, heart rate 150 average, 171 max")
        let bare = WorkoutSummary(distance: 0, elapsedTime: 0, averagePace: nil, averageHeartRate: nil, maxHeartRate: nil)
        #expect(bare.text == "0.00 km in 0:00, average pace --:-- /km, no heart rate")
    }
}
