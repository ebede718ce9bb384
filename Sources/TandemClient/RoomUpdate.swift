import TandemCore

/// One change of a room as a ``TandemClient`` sees it: the replica after it, and what
/// caused it, for an app that says more than it draws (a rejection, a lock that expired).
public struct RoomUpdate: Sendable {
    public enum Cause: Sendable {
        /// The room as held when this stream began (it was already watched).
        case initial
        /// A snapshot was taken: the first (the retained one), one that fills a gap, or
        /// one of a new epoch (`newEpoch`: everything held before was thrown away,
        /// this client's pending edits included; they are still resent until their
        /// receipts).
        case snapshot(RoomSnapshot, newEpoch: Bool)
        /// A RoomChanges arrived. `applied` is false when it did not follow the held
        /// version (a gap, or no snapshot yet: the next snapshot fills it; or changes
        /// already held): the replica did not change, but ``RoomUpdate/expiredLocks``
        /// still says whose locks went.
        case changes(RoomChanges, applied: Bool)
        /// One of this client's own edits, shown at once. `predicted` is the rejection
        /// the rules foresee on what is shown; the coordinator decides.
        case localEdit(EditEvent, predicted: Rejection?)
        /// The receipt of one of this client's edits (the first one: resends' receipts
        /// are not repeated); a rejected edit is rolled back in ``RoomUpdate/replica``.
        case receipt(Receipt, Outgoing)
        /// This user is no longer a member (removed, left, or the room closed), as its own
        /// room list says: the last update; both of the room's streams end after it.
        case noLongerMember(RoomMembershipEnd)
    }

    /// Why a room's streams ended.
    public enum RoomMembershipEnd: String, Sendable {
        /// The user's entry in its room list was cleared: removed by the owner, left,
        /// or the room closed.
        case removed
    }

    public let cause: Cause
    /// The room after this update.
    public let replica: RoomReplica
    /// This user's locks that the coordinator expired in this update (no edit within
    /// the lease, or offline past the grace period): `expire` changes of stickers
    /// this user owned.
    public let expiredLocks: [RoomChange]

    public init(cause: Cause, replica: RoomReplica, expiredLocks: [RoomChange] = []) {
        self.cause = cause
        self.replica = replica
        self.expiredLocks = expiredLocks
    }
}
