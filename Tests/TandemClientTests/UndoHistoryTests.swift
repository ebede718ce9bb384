import Testing
import TandemClient
import TandemCore

/// ``UndoHistory`` case by case: what is recorded, what an undo or redo sends, what a
/// refusal does to the stacks.
@Suite struct UndoHistoryTests {
    static let a = Frame(x: 1, y: 1, width: 10, height: 10)
    static let b = Frame(x: 5, y: 5, width: 10, height: 10)

    static func sticker(_ id: String, _ frame: Frame = a, image: String = "a.png", owner: String? = nil) -> Sticker {
        Sticker(id: id, image: image, frame: frame, owner: owner, createdBy: "alice", updatedBy: "alice", updatedAt: 1)
    }

    static func edit(_ type: EditEvent.Kind, _ id: String, _ eventId: String, frame: Frame? = nil, image: String? = nil) -> EditEvent {
        EditEvent(eventId: eventId, type: type, stickerId: id, timestamp: 1, image: image, frame: frame)
    }

    /// `event` sent with `shown`, then its receipt.
    static func record(_ history: inout UndoHistory, _ event: EditEvent, shown: Sticker?, accepted: Bool = true) {
        history.sent(event, shown: shown)
        history.settled(event.eventId, accepted: accepted)
    }

    static func step(_ history: UndoHistory, _ direction: UndoHistory.Direction, shown: [Sticker], newId: String = "new") -> UndoHistory.Step? {
        history.nextStep(direction, eventId: "u", timestamp: 9, newStickerId: newId) { id in shown.first { $0.id == id } }
    }

    @Test func recordsOnlyAcceptedCreatesUpdatesAndDeletes() {
        var history = UndoHistory()
        Self.record(&history, Self.edit(.create, "s1", "e1", frame: Self.a, image: "a.png"), shown: nil)
        Self.record(&history, Self.edit(.acquire, "s1", "e2"), shown: Self.sticker("s1", owner: "alice"))
        Self.record(&history, Self.edit(.release, "s1", "e3"), shown: Self.sticker("s1", owner: "alice"))
        Self.record(&history, Self.edit(.update, "s1", "e4", frame: Self.a), shown: Self.sticker("s1"))  // changes nothing
        Self.record(&history, Self.edit(.update, "s1", "e5", frame: Self.b), shown: Self.sticker("s1"), accepted: false)
        Self.record(&history, Self.edit(.update, "s9", "e6", frame: Self.b), shown: nil)  // not shown: no "before"
        Self.record(&history, Self.edit(.delete, "s1", "e7"), shown: Self.sticker("s1"))
        history.settled("unknown", accepted: true)
        #expect(history.undoStack.map(\.kind) == [.create, .delete])
        #expect(history.undoStack.last?.before == UndoHistory.Look(image: "a.png", frame: Self.a))
        #expect(!history.canRedo)
    }

    @Test func undoingAMoveSendsTheFrameAndImageBackAndReleasesALockItTook() throws {
        var history = UndoHistory()
        Self.record(&history, Self.edit(.update, "s1", "e1", frame: Self.b, image: "b.png"), shown: Self.sticker("s1"))
        // Nobody holds it now: the update takes the lock, a release gives it back.
        let free = try #require(Self.step(history, .undo, shown: [Self.sticker("s1", Self.b, image: "b.png")]))
        #expect(free.event.type == .update && free.event.stickerId == "s1")
        #expect(free.event.frame == Self.a && free.event.image == "a.png")
        #expect(free.releaseAfter)
        #expect(free.label == "undo update s1")
        // Held by this person: it stays held.
        let held = try #require(Self.step(history, .undo, shown: [Self.sticker("s1", Self.b, owner: "alice")]))
        #expect(!held.releaseAfter)
        // Held by another: sent all the same, for the coordinator to refuse.
        let other = try #require(Self.step(history, .undo, shown: [Self.sticker("s1", Self.b, owner: "bob")]))
        #expect(other.event.type == .update && !other.releaseAfter)

        history.finish(free, .accepted)
        #expect(!history.canUndo && history.canRedo)
        let redo = try #require(Self.step(history, .redo, shown: [Self.sticker("s1")]))
        #expect(redo.event.type == .update && redo.event.frame == Self.b && redo.event.image == "b.png" && redo.releaseAfter)
    }

    @Test func aCreateIsUndoneByADeleteAndRedoneUnderANewId() throws {
        var history = UndoHistory()
        Self.record(&history, Self.edit(.create, "s1", "e1", frame: Self.a, image: "a.png"), shown: nil)
        let undo = try #require(Self.step(history, .undo, shown: [Self.sticker("s1", owner: "alice")]))
        #expect(undo.event.type == .delete && undo.event.stickerId == "s1" && !undo.releaseAfter)
        history.finish(undo, .accepted)
        let redo = try #require(Self.step(history, .redo, shown: [], newId: "s1-x"))
        #expect(redo.event.type == .create && redo.event.stickerId == "s1-x")
        #expect(redo.event.frame == Self.a && redo.event.image == "a.png" && redo.releaseAfter)
        history.finish(redo, .accepted)
        #expect(history.currentId(of: "s1") == "s1-x" && history.firstId(of: "s1-x") == "s1")
        // The next undo of it deletes the new id.
        let again = try #require(Self.step(history, .undo, shown: [Self.sticker("s1-x")]))
        #expect(again.event.type == .delete && again.event.stickerId == "s1-x")
    }

    /// A delete comes back under a new id, and the changes before it follow the sticker
    /// there; so does an edit made after, and redo.
    @Test func aDeleteIsUndoneUnderANewIdThatEarlierAndLaterChangesFollow() throws {
        var history = UndoHistory()
        Self.record(&history, Self.edit(.update, "s1", "e1", frame: Self.b), shown: Self.sticker("s1"))
        Self.record(&history, Self.edit(.delete, "s1", "e2"), shown: Self.sticker("s1", Self.b))
        let undoDelete = try #require(Self.step(history, .undo, shown: [], newId: "s1-2"))
        #expect(undoDelete.event.type == .create && undoDelete.event.stickerId == "s1-2" && undoDelete.event.frame == Self.b)
        #expect(undoDelete.releaseAfter)
        history.finish(undoDelete, .accepted)
        let undoMove = try #require(Self.step(history, .undo, shown: [Self.sticker("s1-2", Self.b)]))
        #expect(undoMove.event.stickerId == "s1-2" && undoMove.event.frame == Self.a)
        history.finish(undoMove, .accepted)
        #expect(history.redoStack.map(\.kind) == [.delete, .update])

        // An edit of the sticker under its new id belongs to the same sticker, and clears redo.
        Self.record(&history, Self.edit(.update, "s1-2", "e3", frame: Self.b), shown: Self.sticker("s1-2"))
        #expect(!history.canRedo)
        #expect(history.undoStack.last?.sticker == "s1")
        let undo = try #require(Self.step(history, .undo, shown: [Self.sticker("s1-2", Self.b)]))
        #expect(undo.event.stickerId == "s1-2")
    }

    @Test func aRefusalThatMayPassKeepsTheEntryAndOneThatCannotDropsIt() throws {
        var history = UndoHistory()
        Self.record(&history, Self.edit(.update, "s1", "e1", frame: Self.b), shown: Self.sticker("s1"))
        Self.record(&history, Self.edit(.update, "s2", "e2", frame: Self.b), shown: Self.sticker("s2"))
        let locked = try #require(Self.step(history, .undo, shown: [Self.sticker("s2", Self.b, owner: "bob")]))
        history.finish(locked, .rejected(.ownedByOther))
        #expect(history.undoStack.count == 2, "bob may let go: the undo can be tried again")
        history.finish(locked, .unanswered)
        #expect(history.undoStack.count == 2)
        history.finish(locked, .rejected(.deleted))
        #expect(history.undoStack.map(\.sticker) == ["s1"], "s2 is gone for good: the next undo is the change before")
        #expect(!history.canRedo)
        // A step already finished, or of a stack since cleared, changes nothing.
        history.finish(locked, .accepted)
        #expect(history.undoStack.map(\.sticker) == ["s1"] && !history.canRedo)
    }

    @Test func aNewChangeClearsRedoAndTheOldestGoBeyondTheLimit() throws {
        var history = UndoHistory(limit: 3)
        for n in 1...5 {
            Self.record(&history, Self.edit(.update, "s\(n)", "e\(n)", frame: Self.b), shown: Self.sticker("s\(n)"))
        }
        #expect(history.undoStack.map(\.sticker) == ["s3", "s4", "s5"])
        let undo = try #require(Self.step(history, .undo, shown: [Self.sticker("s5", Self.b)]))
        history.finish(undo, .accepted)
        #expect(history.canRedo)
        // Lock handling does not count as a change.
        Self.record(&history, Self.edit(.acquire, "s1", "e6"), shown: Self.sticker("s1"))
        #expect(history.canRedo)
        Self.record(&history, Self.edit(.create, "s6", "e7", frame: Self.a, image: "c.png"), shown: nil)
        #expect(!history.canRedo)
        history.clear()
        #expect(!history.canUndo && !history.canRedo)
        #expect(Self.step(history, .undo, shown: []) == nil)
    }
}
