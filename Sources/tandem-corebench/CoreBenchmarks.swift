import TandemCore
import TandemEngine
import TandemCoordinator

/// The pure core's benchmarks. Each builds its inputs before the clock starts.
struct CoreBenchmarks {
    var events: Int
    var rooms: Int
    var stickers: Int
    var repeats: Int

    static let image = "https://example.com/stickers/some-sticker-image.png"

    /// A cycle acquire/update/release over `stickers` stickers, one user per sticker.
    func cycleEvents(count: Int, stickers: Int, idPrefix: String = "e") -> [(user: String, event: EditEvent)] {
        var out: [(String, EditEvent)] = []
        out.reserveCapacity(count)
        let kinds: [EditEvent.Kind] = [.acquire, .update, .release]
        for i in 0..<count {
            let cycle = i / 3
            let sticker = cycle % stickers
            let kind = kinds[i % 3]
            let frame = kind == .update ? Frame(x: Double(i % 500), y: 20.5, width: 120, height: 80) : nil
            out.append(("u\(sticker % 64)", EditEvent(eventId: "\(idPrefix)\(i)", type: kind, stickerId: "s\(sticker)", timestamp: 1_700_000_000_000 + Int64(i / 100), frame: frame)))
        }
        return out
    }

    func populatedRoom(_ roomId: String, stickers: Int) -> RoomState {
        var room = RoomState(roomId: roomId)
        for s in 0..<stickers {
            _ = room.apply(
                EditEvent(eventId: "c\(s)", type: .create, stickerId: "s\(s)", timestamp: 1, image: Self.image, frame: Frame(x: 1, y: 2, width: 3, height: 4)),
                from: "u\(s % 64)", now: 1, lease: 30_000)
            _ = room.apply(EditEvent(eventId: "r\(s)", type: .release, stickerId: "s\(s)", timestamp: 1), from: "u\(s % 64)", now: 1, lease: 30_000)
        }
        return room
    }

    func payload(_ event: EditEvent) -> [UInt8] { event.json().serialized() }

    func runAll() -> [Measurement] {
        var results: [Measurement] = []

        // 1. The room reducer alone.
        let events = cycleEvents(count: self.events, stickers: stickers)
        var room = populatedRoom("r0", stickers: stickers)
        let pristine = room
        results.append(measure("RoomState.apply (acquire/update/release, \(stickers) stickers)", repeats: repeats, setup: { room = pristine }) {
            var accepted = 0
            var now: Millis = 1_700_000_000_000
            for (i, (user, event)) in events.enumerated() {
                if i & 1023 == 0 { now += 1 }
                if room.apply(event, from: user, now: now, lease: 30_000).isAccepted { accepted += 1 }
            }
            precondition(accepted == events.count, "every cycle event should be accepted, got \(accepted)")
            return events.count
        })

        // 2. The reorder buffer: insert, and release once each batch's window has passed.
        let users = (0..<64).map { "u\($0)" }
        var buffer = ReorderBuffer<Int>(window: 30)
        results.append(measure("ReorderBuffer insert+release (batches of 100, 64 users)", repeats: repeats, setup: { buffer = ReorderBuffer<Int>(window: 30) }) {
            var released = 0
            var now: Millis = 1_700_000_000_000
            for i in 0..<self.events {
                // A timestamp a little in the past, jittered, as clients' clocks are.
                buffer.insert(i, timestamp: now - Millis(i % 7), userId: users[i & 63], arrival: now)
                if i % 100 == 99 {
                    now += 1
                    released += buffer.release(now: now - 30).count
                }
            }
            released += buffer.releaseAll().count
            precondition(released == self.events)
            return self.events
        })

        // 3. The DM transition function: messages and reads in an active conversation.
        let key = ConversationKey("alice", "bob")
        var active = Conversation(key: key)
        _ = active.apply(DMCommand(commandId: "q", type: .request, peer: "bob", timestamp: 1), from: "alice", now: 1)
        _ = active.apply(DMCommand(commandId: "a", type: .accept, peer: "alice", timestamp: 2), from: "bob", now: 2)
        let activeStart = active
        let dmCommands: [(String, DMCommand)] = (0..<self.events).map { i in
            let from = i & 1 == 0 ? "alice" : "bob"
            let peer = i & 1 == 0 ? "bob" : "alice"
            if i % 10 == 9 { return (from, DMCommand(commandId: "d\(i)", type: .read, peer: peer, timestamp: Millis(10 + i))) }
            return (from, DMCommand(commandId: "d\(i)", type: .message, peer: peer, timestamp: Millis(10 + i), text: "hello there, message number \(i)"))
        }
        var conversation = activeStart
        results.append(measure("Conversation.apply (90% message, 10% read)", repeats: repeats, setup: { conversation = activeStart }) {
            var accepted = 0
            for (i, (from, command)) in dmCommands.enumerated() where conversation.apply(command, from: from, now: Millis(10 + i)).isAccepted {
                accepted += 1
            }
            precondition(accepted == dmCommands.count)
            return dmCommands.count
        })

        // 4. Payloads.
        let payloads = events.prefix(min(events.count, 300_000)).map { payload($0.event) }
        let meanSize = payloads.reduce(0) { $0 + $1.count } / max(1, payloads.count)
        results.append(measure("EditEvent.decode (mean \(meanSize) B)", repeats: repeats) {
            var ok = 0
            for p in payloads { if (try? EditEvent.decode(p)) != nil { ok += 1 } }
            precondition(ok == payloads.count)
            return payloads.count
        })
        let editEvents = events.prefix(payloads.count).map(\.event)
        results.append(measure("EditEvent encode (json().serialized())", repeats: repeats) {
            var bytes = 0
            for e in editEvents { bytes &+= e.json().serialized().count }
            blackHole(bytes)
            return editEvents.count
        })
        let receipts = (0..<payloads.count).map { Receipt.accepted(id: "e\($0)", kind: .room, version: Int64($0)) }
        results.append(measure("Receipt encode", repeats: repeats) {
            var bytes = 0
            for r in receipts { bytes &+= r.json.serialized().count }
            blackHole(bytes)
            return receipts.count
        })
        let snapshotRoom = populatedRoom("r0", stickers: stickers)
        let snapshotSize = snapshotRoom.snapshot(epoch: "epoch-1").json().serialized().count
        results.append(measure("RoomSnapshot encode (\(stickers) stickers, \(snapshotSize) B)", repeats: repeats) {
            var bytes = 0
            let n = max(1000, 2_000_000 / max(1, snapshotSize) * 10)
            for _ in 0..<n { bytes &+= snapshotRoom.snapshot(epoch: "epoch-1").json().serialized().count }
            blackHole(bytes)
            return n
        })

        // The persisted body, written for every changed room in every batch and read
        // (or unpacked) at start: the binary format against the JSON one it replaced.
        let body = snapshotRoom.persistedBytes()
        let jsonBody = snapshotRoom.persisted().serialized()
        let bodies = max(1000, 2_000_000 / max(1, jsonBody.count) * 10)
        results.append(measure("Room body encode, binary (\(body.count) B; JSON \(jsonBody.count) B)", repeats: repeats) {
            var bytes = 0
            for _ in 0..<bodies { bytes &+= snapshotRoom.persistedBytes().count }
            blackHole(bytes)
            return bodies
        })
        results.append(measure("Room body encode, JSON (the format before)", repeats: repeats) {
            var bytes = 0
            for _ in 0..<bodies { bytes &+= snapshotRoom.persisted().serialized().count }
            blackHole(bytes)
            return bodies
        })
        results.append(measure("Room body read, binary", repeats: repeats) {
            var stickers = 0
            for _ in 0..<bodies { stickers &+= (try? RoomState(persistedBytes: body))?.stickerCount ?? 0 }
            blackHole(stickers)
            return bodies
        })
        results.append(measure("Room body read, JSON", repeats: repeats) {
            var stickers = 0
            for _ in 0..<bodies { stickers &+= (try? RoomState(persistedBytes: jsonBody))?.stickerCount ?? 0 }
            blackHole(stickers)
            return bodies
        })

        // 5. Decode + apply + encode the receipt: the per-event work of the coordinator.
        var room2 = pristine
        let users2 = events.prefix(payloads.count).map(\.user)
        results.append(measure("decode + apply + encode receipt", repeats: repeats, setup: { room2 = pristine }) {
            var bytes = 0
            for (i, p) in payloads.enumerated() {
                guard let event = try? EditEvent.decode(p) else { fatalError("decode") }
                let outcome = room2.apply(event, from: users2[i], now: 1_700_000_000_000, lease: 30_000)
                bytes &+= outcome.receipt(id: event.eventId).json.serialized().count
            }
            blackHole(bytes)
            return payloads.count
        })

        // 6. Through the Engine: topic parse, decode, dedup, reorder, apply, store rows,
        // one RoomChanges + snapshot per changed room per batch, receipts.
        results.append(contentsOf: engineBenchmarks())
        return results
    }

    func engineBenchmarks() -> [Measurement] {
        let topics = Topics()
        let perRun = min(events, 300_000)
        let batch = 100
        let cycle = cycleEvents(count: perRun, stickers: stickers * rooms, idPrefix: "x")
        var inputs: [(topic: String, payload: [UInt8])] = []
        inputs.reserveCapacity(perRun)
        for (user, event) in cycle {
            let sticker = Int(event.stickerId.dropFirst())!
            let roomIndex = sticker % rooms
            var e = event
            e.stickerId = "s\(sticker / rooms)"
            inputs.append((topics.roomEvents(room: "room\(roomIndex)", user: user), payload(e)))
        }
        // A restart's million remembered ids, as digests: every new id is looked up there too.
        var remembered = IdDigests(since: 1_700_000_000_000 - 3_600_000)
        for i in 0..<1_000_000 { remembered.insert(digest: IdDigests.digest(user: "u\(i % 64)", id: "old\(i)"), seenAt: 1_699_999_000_000) }
        remembered.seal()
        func freshEngine(digests: IdDigests? = nil) -> Engine {
            var recovered = Engine.Recovered()
            if let digests { recovered.seenDigests = digests }
            var engine = try! Engine(configuration: EngineConfiguration(), epoch: "bench", recovered: recovered, now: 1_700_000_000_000)
            var n = 0
            for r in 0..<rooms {
                for s in 0..<stickers {
                    for kind in [EditEvent.Kind.create, .release] {
                        let e = EditEvent(eventId: "p\(n)", type: kind, stickerId: "s\(s)", timestamp: 1_700_000_000_000, image: Self.image, frame: Frame(x: 1, y: 2, width: 3, height: 4))
                        n += 1
                        _ = engine.ingest(topic: topics.roomEvents(room: "room\(r)", user: "u\(s % 64)"), payload: e.json().serialized(), now: 1_700_000_000_000)
                    }
                }
            }
            _ = engine.flush(now: 1_700_000_000_000)
            return engine
        }
        var engine = freshEngine()
        var publications = 0
        var snapshotBytes = 0
        func run() -> Int {
            var now: Millis = 1_700_000_000_100
            publications = 0
            snapshotBytes = 0
            for (i, input) in inputs.enumerated() {
                publications += engine.ingest(topic: input.topic, payload: input.payload, now: now).count
                if i % batch == batch - 1 {
                    now += 31
                    let step = engine.step(now: now)
                    for p in step.publications where p.retain { snapshotBytes += p.payload.count }
                    publications += step.publications.count
                }
            }
            publications += engine.flush(now: now + 31).publications.count
            return inputs.count
        }
        let name = "Engine ingest+step (\(rooms) rooms x \(stickers) stickers, batches of \(batch))"
        let m = measure(name, repeats: repeats, setup: { engine = freshEngine() }, run)
        print("  engine: \(publications) publications for \(inputs.count) events, \(snapshotBytes / max(1, inputs.count)) snapshot bytes per event (last run)")
        let withDigests = measure("  the same, 1,000,000 remembered ids as digests", repeats: repeats, setup: { engine = freshEngine(digests: remembered) }, run)
        return [m, withDigests]
    }
}
