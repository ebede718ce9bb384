/// The contract's rules for one edit against one sticker (CONTRACT "Rooms", "Rules"),
/// shared by the coordinator's `RoomState` and the agent's optimistic `RoomReplica` so
/// that both decide the same way.
enum StickerRules {
    /// What an event meets: no such sticker, a deleted one, or a live one and its owner.
    enum Subject {
        case absent
        case deleted
        case live(owner: String?)
    }

    /// nil when the event is accepted, else the rejection with the contract's code.
    static func check(_ event: EditEvent, against subject: Subject, from user: String) -> Rejection? {
        let id = event.stickerId
        switch (event.type, subject) {
        case (.invite, _), (.remove, _), (.role, _), (.leave, _):
            return .invalid("\(event.type.rawValue) is a membership event, not an edit of a sticker")
        case (.restore, _):
            return .invalid("restore changes the whole room, not one sticker")
        case (.create, .absent):
            guard event.image != nil else { return .invalid("image is required for create") }
            guard event.frame != nil else { return .invalid("frame is required for create") }
            return nil
        case (.create, .live):
            return Rejection(.alreadyExists, "sticker \(id) already exists")
        case (_, .deleted):
            return Rejection(.deleted, "sticker \(id) was deleted")
        case (_, .absent):
            return Rejection(.notFound, "no sticker \(id) in this room")
        case (.acquire, .live(let owner)), (.delete, .live(let owner)):
            if let owner, owner != user { return Rejection(.ownedByOther, "sticker \(id) is locked by \(owner)") }
            return nil
        case (.update, .live(let owner)):
            if let owner, owner != user { return Rejection(.ownedByOther, "sticker \(id) is locked by \(owner)") }
            guard event.frame != nil else { return .invalid("frame is required for update") }
            return nil
        case (.release, .live(let owner)):
            guard let owner else { return Rejection(.notOwner, "sticker \(id) is not locked") }
            guard owner == user else { return Rejection(.notOwner, "sticker \(id) is locked by \(owner), not \(user)") }
            return nil
        }
    }
}

extension Sticker {
    /// The sticker an accepted create makes: owned by its creator.
    init(creating event: EditEvent, by user: String) {
        self.init(
            id: event.stickerId,
            image: event.image ?? "",
            frame: event.frame ?? Frame(x: 0, y: 0, width: 1, height: 1),
            owner: user,
            createdBy: user,
            updatedBy: user,
            updatedAt: event.timestamp
        )
    }

    /// Applies an accepted acquire, update or release (create and delete do not change a
    /// sticker in place).
    mutating func apply(_ event: EditEvent, by user: String) {
        switch event.type {
        case .acquire:
            owner = user
        case .update:
            owner = user
            if let frame = event.frame { self.frame = frame }
            if let image = event.image { self.image = image }
        case .release:
            owner = nil
        case .create, .delete, .invite, .remove, .role, .leave, .restore:
            return
        }
        updatedBy = user
        updatedAt = event.timestamp
    }
}
