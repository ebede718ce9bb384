import TandemCore

/// The ids the coordinator remembers to deduplicate resends (PROTOCOL.md: 48 hours). The
/// store holds every one of them for the whole retention; memory holds only the last
/// minutes (`--id-memory`, five by default), which is all the pipeline needs at speed,
/// so that memory is bounded by the rate times those minutes and not by a day's history.
/// In three tiers:
///
/// - `recent`: ids seen since the last fold, exactly (two strings and a 24-byte entry
///   each): the first copy may still wait in the reorder buffer, and a resend soon after
///   is answered from here with the first copy's outcome.
/// - `sealed`: what the last fold took out of `recent`, kept exactly until the step that
///   applied the last of them is committed (``committed(through:)``), so that the store
///   holds every id before only its digest is left here.
/// - `older`: the rest of the memory window, including what a restart read, as
///   ``IdDigests`` (8 bytes an id): a hit is confirmed by the store, off the pipeline
///   (``Engine/IdCheck``).
///
/// **Which ids the store must judge.** Each id has a *horizon*: when it was first seen, or
/// its event's own timestamp if that is later (a clock ahead of ours; capped at the
/// retention ahead). Every id whose horizon is at or after ``heldSince`` is held here.
/// A resend carries the first copy's timestamp, which is never after its horizon; so an
/// id whose timestamp is at or after ``heldSince`` and that is not held here was never
/// seen (``Lookup/unseen``), and only one with an older timestamp (a resend from minutes
/// ago, or a client whose clock is behind) needs the store (``Lookup/unsure``). Going by
/// the horizon rather than the arrival is what keeps a client whose clock runs ahead from
/// slipping a resend past the window. Stepping our own wall clock back keeps more in
/// memory; stepping it forward makes more resends go to the store: neither lets one through.
///
/// **The window follows the events, not only the clock.** It ends at the *frontier*, the
/// latest timestamp admitted (clamped), when that is behind the wall clock: a coordinator
/// that falls minutes behind (a backlog after an outage, an overloaded machine) still
/// judges the events it is catching up on from memory, instead of sending every one of
/// them to the store just when it has least time for it. A restart reads back the window
/// that ends at the store's latest remembered id for the same reason. The frontier counts at most
/// ``maxLagMs`` behind the clock, so that memory stays bounded by time whatever the
/// clients' clocks say.
///
/// A fold happens once `recent` holds `foldThreshold` ids (a few milliseconds of
/// sorting and merging every 65,536 ids) and with each forgetting pass. Digests older
/// than the memory window are forgotten every ``forgetIntervalMs(memoryMs:)``; exact
/// entries past the retention every ``pruneIntervalMs`` (the store forgets its copies a
/// share with every batch: `Engine.afterStep(now:batch:)`).
package struct RememberedIds {
    var recent: [Engine.SeenKey: Engine.SeenEntry] = [:]
    var sealed: [Engine.SeenKey: Engine.SeenEntry] = [:]
    /// The step whose commit makes `sealed` safe to fold into `older`.
    var sealedAtStep = 0
    var older: IdDigests
    /// Every id whose horizon is at or after this is held here (exactly or as a digest).
    private(set) var heldSince: Millis
    /// The latest timestamp admitted (after the clamp); `.min` before the first.
    private(set) var frontier: Millis = .min
    /// How far behind the wall clock the frontier may hold the window back.
    static let maxLagMs: Millis = 3_600_000
    /// Steps applied so far (the last one's number), and the last one committed.
    var stepsApplied = 0
    var stepsCommitted = 0
    var lastPrune: Millis
    var lastForget: Millis

    /// How many ids `recent` holds before a fold (tests lower it).
    var foldThreshold = 65_536
    static let pruneIntervalMs: Millis = 600_000

    /// How often digests past the memory window are forgotten: a quarter of the window
    /// (memory holds at most 1.25 windows), between a second and ``pruneIntervalMs``.
    static func forgetIntervalMs(memoryMs: Millis) -> Millis {
        min(pruneIntervalMs, max(1_000, memoryMs / 4))
    }

    /// `heldSince`: the ids of `older` are every id whose horizon is at or after it
    /// (a restart reads the store's since then; `.min`: all there ever were). The
    /// frontier starts unknown: the first events admitted set it.
    init(older: IdDigests, heldSince: Millis = .min, now: Millis) {
        self.older = older
        self.heldSince = heldSince
        lastPrune = now
        lastForget = now
    }

    /// Where the memory window ends: the wall clock, or the frontier when that is behind
    /// it (by at most ``maxLagMs``).
    package static func windowEnd(wall: Millis, frontier: Millis) -> Millis {
        min(wall, max(frontier, wall - maxLagMs))
    }

    /// An item was admitted with this timestamp (after the clamp).
    mutating func advanceFrontier(to timestamp: Millis) {
        if timestamp > frontier { frontier = timestamp }
    }

    /// An id's horizon (see the type's comment): `timestamp` is the event's own, as sent.
    static func horizon(timestamp: Millis, wall: Millis, retentionMs: Millis) -> Millis {
        max(wall, min(timestamp, wall &+ retentionMs))
    }

    enum Lookup {
        /// Remembered whole: the entry says what the first copy got, or that it waits.
        case exact(Engine.SeenEntry)
        /// Memory cannot say; the store does: its digest is remembered (probably seen), or
        /// it is not held here and its timestamp is before what memory holds.
        case unsure
        case unseen
    }

    /// `timestamp`: the event's own, as sent (a resend carries the first copy's).
    func lookup(_ key: Engine.SeenKey, timestamp: Millis) -> Lookup {
        if let entry = recent[key] ?? sealed[key] { return .exact(entry) }
        if !older.isEmpty, older.contains(user: key.user, id: key.id) { return .unsure }
        return timestamp >= heldSince ? .unseen : .unsure
    }

    var count: Int { recent.count + sealed.count + older.count }

    /// A new id whose first copy goes into the reorder buffer; `horizon`: see
    /// ``horizon(timestamp:wall:retentionMs:)``.
    mutating func admit(_ key: Engine.SeenKey, horizon: Millis) {
        recent[key] = Engine.SeenEntry(at: horizon, inBuffer: true)
    }

    /// Another copy arrived while the first waits in the buffer: answered when it is applied.
    mutating func addWaitingCopy(_ key: Engine.SeenKey) {
        guard let copies = recent[key]?.waitingCopies, copies < .max else { return }
        recent[key]!.waitingCopies = copies + 1
    }

    /// The first copy was applied with `original`: returns when the id was first seen
    /// and how many copies waited for that.
    mutating func applied(_ key: Engine.SeenKey, original: Receipt.Original, now: Millis) -> (at: Millis, waitingCopies: Int) {
        var entry = recent[key] ?? Engine.SeenEntry(at: now)
        entry.original = original
        entry.inBuffer = false
        let copies = Int(entry.waitingCopies)
        entry.waitingCopies = 0
        recent[key] = entry
        return (entry.at, copies)
    }

    /// The store holds everything applied up to step `number` (steps commit in order).
    mutating func committed(through number: Int) {
        stepsCommitted = max(stepsCommitted, number)
    }

    /// After each step: folds, forgets and prunes when due (`now` is the tick). Digests
    /// whose horizon is before the window's end (``windowEnd(wall:frontier:)``) less
    /// `memoryMs` (at most `retentionMs`: ``EngineConfiguration/seenIdWindowMs``) go
    /// every ``forgetIntervalMs(memoryMs:)``;
    /// exact entries whose horizon is before `wall` - `retentionMs`, every
    /// ``pruneIntervalMs``. Returns the step's number and whether it pruned.
    mutating func stepApplied(now: Millis, wall: Millis, retentionMs: Millis, memoryMs: Millis) -> (number: Int, pruned: Bool) {
        stepsApplied += 1
        let forgetDue = now - lastForget >= Self.forgetIntervalMs(memoryMs: memoryMs)
        if !sealed.isEmpty, stepsCommitted >= sealedAtStep {
            older.merge(sealed.map { (IdDigests.digest(user: $0.key.user, id: $0.key.id), $0.value.at) })
            sealed = [:]
        }
        // A fold when `recent` is full, and with each forgetting pass, so that on a quiet
        // system too exact entries become digests and leave with the window.
        if sealed.isEmpty, recent.count >= foldThreshold || (forgetDue && !recent.isEmpty) {
            // Everything applied moves; what still waits in the buffer stays (few). `recent`
            // is given up before `sealed` is changed, so that nothing copies the dictionary.
            let waiting = recent.filter { $0.value.inBuffer }
            sealed = recent
            recent = waiting
            for key in waiting.keys { sealed[key] = nil }
            sealedAtStep = stepsApplied
        }
        if forgetDue {
            lastForget = now
            let cutoff = Self.windowEnd(wall: wall, frontier: frontier) - memoryMs
            if cutoff > heldSince {
                // Keeps every id whose horizon is at or after the cutoff (and a little more).
                older.forget(before: cutoff)
                heldSince = cutoff
            }
        }
        guard now - lastPrune >= Self.pruneIntervalMs else { return (stepsApplied, false) }
        lastPrune = now
        let cutoff = wall - retentionMs
        recent = recent.filter { $0.value.at >= cutoff || $0.value.inBuffer }
        sealed = sealed.filter { $0.value.at >= cutoff }
        return (stepsApplied, true)
    }
}
