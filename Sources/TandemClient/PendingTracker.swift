import TandemCore

/// One event or command published and not yet acknowledged: where it went and the exact
/// bytes, so a resend is the same message under the same id.
public struct Outgoing: Sendable, Equatable {
    public var id: String
    public var topic: String
    public var payload: [UInt8]
    /// What it was, for people ("move s1", "send bob").
    public var label: String

    public init(id: String, topic: String, payload: [UInt8], label: String) {
        self.id = id
        self.topic = topic
        self.payload = payload
        self.label = label
    }
}

/// The bookkeeping of at-least-once delivery, without I/O: what is pending, what is due
/// for a resend, what the receipts settled. The agent publishes what this returns.
///
/// - Every item stays pending until a receipt with its id: `accepted` or `duplicate`
///   acknowledges it, `rejected` settles it as rejected (counted).
/// - An item with no receipt `resendAfter` ms after it was last sent is due again.
/// - After a reconnect every pending item is sent again, in the order first sent.
/// - Receipts for ids it never sent (another agent of the same user) are not its business.
package struct PendingTracker: Sendable {
    package struct Entry: Sendable, Equatable {
        package var outgoing: Outgoing
        package var firstSentAt: Millis
        package var lastSentAt: Millis
        package var attempts: Int
    }

    /// What a receipt did to the bookkeeping.
    package enum Settlement: Sendable, Equatable {
        case acknowledged(Outgoing)
        case rejected(Outgoing)
        /// Not one of ours, or already settled.
        case unknown
    }

    package let resendAfter: Millis
    private var entries: [String: Entry] = [:]
    private var order: [String] = []
    package private(set) var acknowledgedCount = 0
    package private(set) var rejectedCount = 0

    package init(resendAfter: Millis = 5_000) {
        self.resendAfter = resendAfter
    }

    package var isEmpty: Bool { entries.isEmpty }
    package var count: Int { entries.count }
    package var pendingIds: [String] { order }
    package func entry(_ id: String) -> Entry? { entries[id] }

    /// Records a first send at `now`. Sending the same id again is a resend.
    package mutating func sent(_ outgoing: Outgoing, at now: Millis) {
        if var existing = entries[outgoing.id] {
            existing.lastSentAt = now
            existing.attempts += 1
            entries[outgoing.id] = existing
            return
        }
        entries[outgoing.id] = Entry(outgoing: outgoing, firstSentAt: now, lastSentAt: now, attempts: 1)
        order.append(outgoing.id)
    }

    /// Settles the item a receipt answers.
    package mutating func receipt(_ receipt: Receipt) -> Settlement {
        guard let entry = entries.removeValue(forKey: receipt.id) else { return .unknown }
        order.removeAll { $0 == receipt.id }
        if receipt.isAcknowledgement {
            acknowledgedCount += 1
            return .acknowledged(entry.outgoing)
        }
        rejectedCount += 1
        return .rejected(entry.outgoing)
    }

    /// Items without a receipt `resendAfter` ms after their last send, marked as sent
    /// again at `now`.
    package mutating func dueForResend(at now: Millis) -> [Outgoing] {
        var due: [Outgoing] = []
        for id in order {
            guard var entry = entries[id], now - entry.lastSentAt >= resendAfter else { continue }
            entry.lastSentAt = now
            entry.attempts += 1
            entries[id] = entry
            due.append(entry.outgoing)
        }
        return due
    }

    /// Every pending item, in the order first sent, marked as sent again at `now` (after
    /// a reconnect).
    package mutating func resendAll(at now: Millis) -> [Outgoing] {
        order.compactMap { id in
            guard var entry = entries[id] else { return nil }
            entry.lastSentAt = now
            entry.attempts += 1
            entries[id] = entry
            return entry.outgoing
        }
    }

    /// Gives up on everything still pending; returns what was given up.
    package mutating func abandonAll() -> [Outgoing] {
        defer {
            entries.removeAll()
            order.removeAll()
        }
        return order.compactMap { entries[$0]?.outgoing }
    }
}
