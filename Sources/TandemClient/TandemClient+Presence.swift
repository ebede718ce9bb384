import TandemCore

extension TandemClient {
    // MARK: Presence

    /// Who is online: the users with at least one client whose retained presence says
    /// `{"online":true}` (`presence/+/+`, readable by every user), the whole set after
    /// every change, starting with what is held. A user whose every client went offline
    /// or cleared its topic leaves the set. Ends at ``close()``.
    public func onlineUsers() async throws -> AsyncStream<Set<String>> {
        if presenceListeners == nil {
            presenceListeners = Broadcast(buffering: .bufferingNewest(16))
            presenceListeners!.send([])
            try await follow([topics.allPresence]) { client, message in
                client.take(presence: message)
            }
        }
        return presenceListeners!.listen()
    }

    private func take(presence message: TransportMessage) {
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
