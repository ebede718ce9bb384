import TandemCore

extension TandemClient {
    // MARK: Presence

    /// Who is online: the users with at least one client whose retained presence says
    /// `{"online":true}` (`presence/+/+`, readable by every user), the whole set after
    /// every change, starting with what is held. A user whose every client went offline
    /// or cleared its topic leaves the set. Ends at ``close()``.
    public func onlineUsers() async throws -> AsyncStream<Set<String>> {
        let listen = startPresence()
        if case .only = presenceFollowed {
            presenceFollowed = .everyone
            try await follow([topics.allPresence]) { client, message in
                client.receive(presence: message)
            }
        }
        return listen
    }

    /// Who is online among `users`, and among the users of every later
    /// ``followPresence(of:)``: as ``onlineUsers()``, but subscribed to
    /// `presence/{user}/+` for each user named rather than to everyone's. For a client
    /// that shows a few people (tandem-web: the members of the rooms its tabs show, and
    /// its chat peers): a process holding N people's clients then takes what their
    /// people do, not N × N presence messages (each sign-in would reach every session).
    public func onlineUsers(among users: some Sequence<String>) async throws -> AsyncStream<Set<String>> {
        let listen = startPresence()
        try await followPresence(of: users)
        return listen
    }

    /// Adds users to those whose presence ``onlineUsers(among:)`` follows (nothing to do
    /// for users already followed, or when everyone's is).
    public func followPresence(of users: some Sequence<String>) async throws {
        guard case .only(var followed) = presenceFollowed else { return }
        let new = Set(users).subtracting(followed)
        guard !new.isEmpty else { return }
        followed.formUnion(new)
        presenceFollowed = .only(followed)
        try await follow(new.sorted().map { topics.presence(user: $0, clientId: "+") }) { client, message in
            client.receive(presence: message)
        }
    }

    private func startPresence() -> AsyncStream<Set<String>> {
        preparePresence()
        return presenceListeners!.listen()
    }

    func preparePresence() {
        if presenceListeners == nil {
            presenceListeners = Broadcast(buffering: .bufferingNewest(16))
            presenceListeners!.send([])
        }
    }

    private func receive(presence message: TransportMessage) {
        guard case .presence(let user, let clientId)? = topics.parseInbound(message.topic),
              let online = PresenceTracker.parse(message.payload) else { return }
        var clients = presenceClients[user] ?? [:]
        clients[clientId] = online
        presenceClients[user] = clients.isEmpty ? nil : clients
        let now = Set(presenceClients.filter { $0.value.values.contains(true) }.keys)
        guard now != presenceListeners?.current else { return }
        presenceListeners?.send(now)
    }
}
