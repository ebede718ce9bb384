import TandemCore

/// The streams of the public API as closures called on the client's actor: for a server
/// that holds a client per person (tandem-web) and merges what each says into an input
/// of its own (an ``Inbox``), with no task waiting on a stream for each. Each starts and
/// goes on as its stream does (the same first values, then every one), until the
/// ``Listening`` it returns is stopped; nothing marks the end a stream's finish would
/// (``close()``, a room the user left: its last update says so). `deliver` must return
/// at once.
extension TandemClient {
    /// ``roomUpdates(_:)``, each update handed to `deliver`.
    @discardableResult
    package func roomUpdates(_ id: String, deliver: @escaping @Sendable (RoomUpdate) -> Void) async throws -> Listening {
        try await watch(room: id)
        return rooms[id]!.updates.listen(first: initialUpdate(of: id), deliver: deliver)
    }

    /// ``cursors(room:)``, each cursor handed to `deliver`.
    @discardableResult
    package func cursors(room: String, deliver: @escaping @Sendable (RoomCursor) -> Void) async throws -> Listening {
        try await followCursors(room: room)
        return cursorWatches[room]!.listeners.listen(first: heldCursors(room: room), deliver: deliver)
    }

    /// ``receipts()``, each handed to `deliver`.
    @discardableResult
    package func receipts(deliver: @escaping @Sendable (ReceiptEvent) -> Void) -> Listening {
        receiptListeners.listen(first: [], deliver: deliver)
    }

    /// ``myRooms()``, each list handed to `deliver`.
    @discardableResult
    package func myRooms(deliver: @escaping @Sendable ([RoomMembership]) -> Void) async throws -> Listening {
        try await followMemberships()
        return membershipListeners!.listen(first: [memberships.values.sorted { $0.roomId < $1.roomId }], deliver: deliver)
    }

    /// ``onlineUsers(among:)``, each set handed to `deliver`.
    @discardableResult
    package func onlineUsers(among users: some Sequence<String>, deliver: @escaping @Sendable (Set<String>) -> Void) async throws -> Listening {
        preparePresence()
        let listening = presenceListeners!.listen(deliver: deliver)
        try await followPresence(of: users)
        return listening
    }

    /// ``conversations()``, each replica handed to `deliver`.
    @discardableResult
    package func conversations(deliver: @escaping @Sendable (ConversationReplica) -> Void) async throws -> Listening {
        try await followAllConversations()
        return allConversations!.listen(first: heldConversations, deliver: deliver)
    }

    /// ``allWorkoutSnapshots()``, each snapshot handed to `deliver`.
    @discardableResult
    package func allWorkoutSnapshots(deliver: @escaping @Sendable (WorkoutSnapshot) -> Void) async throws -> Listening {
        try await followAllWorkouts()
        return allWorkouts!.listen(first: latestWorkouts.values.sorted { $0.startedAt < $1.startedAt }, deliver: deliver)
    }
}
