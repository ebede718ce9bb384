import TandemCore

/// The ids the coordinator remembers to deduplicate resends (PROTOCOL.md: 48 hours), in
/// three tiers so that a million of them take about 8 MB instead of 100:
///
/// - `recent`: ids seen since the last fold, exactly (two strings and a 24-byte entry
///   each): the first copy may still wait in the reorder buffer, and a resend soon after
///   is answered from here with the first copy's outcome.
/// - `sealed`: what the last fold took out of `recent`, kept exactly until the step that
///   applied the last of them is committed (``committed(through:)``), so that the store
///   holds every id before only its digest is left here.
/// - `older`: everything else, including what a restart read, as ``IdDigests``: a hit
///   is confirmed by the store, off the pipeline (``Engine/IdCheck``).
///
/// A fold happens once `recent` holds `foldThreshold` ids: a few milliseconds of
/// sorting and merging every 65,536 ids. Ids older than the retention are forgotten
/// every ``pruneIntervalMs`` (the store forgets its copies a share with every batch:
/// `Engine.afterStep(now:batch:)`).
struct RememberedIds {
    var recent: [Engine.SeenKey: Engine.SeenEntry] = [:]
    var sealed: [Engine.SeenKey: Engine.SeenEntry] = [:]
    /// The step whose commit makes `sealed` safe to fold into `older`.
    var sealedAtStep = 0
    var older: IdDigests
    /// Steps applied so far (the last one's number), and the last one committed.
    var stepsApplied = 0
    var stepsCommitted = 0
    var lastPrune: Millis

    /// How many ids `recent` holds before a fold (tests lower it).
    var foldThreshold = 65_536
    static let pruneIntervalMs: Millis = 600_000

    init(older: IdDigests, now: Millis) {
        self.older = older
        lastPrune = now
    }

    enum Lookup {
        /// Remembered whole: the entry says what the first copy got, or that it waits.
        case exact(Engine.SeenEntry)
        /// Its digest is remembered: probably seen, the store says for sure.
        case digest
        case unseen
    }

    func lookup(_ key: Engine.SeenKey) -> Lookup {
        if let entry = recent[key] ?? sealed[key] { return .exact(entry) }
        return !older.isEmpty && older.contains(user: key.user, id: key.id) ? .digest : .unseen
    }

    var count: Int { recent.count + sealed.count + older.count }

    /// A new id whose first copy goes into the reorder buffer.
    mutating func admit(_ key: Engine.SeenKey, now: Millis) {
        recent[key] = Engine.SeenEntry(at: now, inBuffer: true)
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

    /// After each step: folds and prunes when due (every ``pruneIntervalMs`` of `now`, the
    /// tick; ids first seen before `wall` - `retentionMs` go). Returns the step's number
    /// and whether it pruned.
    mutating func stepApplied(now: Millis, wall: Millis, retentionMs: Millis) -> (number: Int, pruned: Bool) {
        stepsApplied += 1
        if !sealed.isEmpty, stepsCommitted >= sealedAtStep {
            older.merge(sealed.map { (IdDigests.digest(user: $0.key.user, id: $0.key.id), $0.value.at) })
            sealed = [:]
        }
        if sealed.isEmpty, recent.count >= foldThreshold {
            // Everything applied moves; what still waits in the buffer stays (few). `recent`
            // is given up before `sealed` is changed, so that nothing copies the dictionary.
            let waiting = recent.filter { $0.value.inBuffer }
            sealed = recent
            recent = waiting
            for key in waiting.keys { sealed[key] = nil }
            sealedAtStep = stepsApplied
        }
        guard now - lastPrune >= Self.pruneIntervalMs else { return (stepsApplied, false) }
        lastPrune = now
        let cutoff = wall - retentionMs
        recent = recent.filter { $0.value.at >= cutoff || $0.value.inBuffer }
        sealed = sealed.filter { $0.value.at >= cutoff }
        older.forget(before: cutoff)
        return (stepsApplied, true)
    }
}
