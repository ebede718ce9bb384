import TandemCore

/// The leader's pipeline as a value: the service tells it what happened (a message came,
/// the commit in flight ended, the lease was renewed or lost, a deadline is due) and
/// carries out what it answers (commit this batch, publish these, ask the store this,
/// wake me then, stop). It owns the ``Engine`` and every decision the pipeline makes:
///
/// - **Group commit.** At most one batch commits at a time; the next step is taken when
///   that commit is done and takes everything due by then, so batches grow with load.
/// - **Publications behind their commit.** What a step produced is published only after
///   its own commit, in step order. An answer given at once (a duplicate's `original`, a
///   rejection's version, a confirmed digest) may describe the batch in flight, so while
///   one commits it is held and published right after it.
/// - **Commit metrics**: batches, commit time total and maximum, in the engine's metrics.
/// - **Around the engine**: which connection is a reconnect (say online again), when
///   the broker's room access is made to match the engine's, which partition publishes
///   the process's metrics.
/// - **The end of the term.** A shutdown drains (the commit in flight, then everything
///   still in the reorder window, committed and published); a lost lease stops at once
///   with nothing more committed or published; so does a failed commit. The lease's
///   deadline is checked against `now` with every input: a process that was frozen past
///   it decides it has lost the lease before it does anything else.
///
/// No I/O and no clock: `now` comes with every input. In the style of swift-nio's state
/// machines (an input in, actions out), so every path is a unit test
/// (LeaderLoopTests).
public struct LeaderLoop {
    public enum Input {
        /// An inbound MQTT message.
        case message(topic: String, payload: [UInt8])
        /// The batch in flight is in the store; `elapsed` from the commit action to now
        /// (the wait for the store's executor included).
        case committed(elapsed: Duration)
        /// The batch in flight could not be committed.
        case commitFailed
        /// The store's answer for an id remembered only as a digest (``Engine/IdCheck``):
        /// the first copy, or nil if it was never seen.
        case idChecked(Engine.IdCheck, firstCopy: SeenId?)
        /// The store could not answer: no receipt is sent, so the sender resends and
        /// the id is checked again.
        case idCheckFailed(Engine.IdCheck)
        /// A query could not be answered from the store.
        case queryFailed
        /// The store's answer to ``Action/loadRoom(_:)``.
        case roomLoaded(RoomVersionRequest, Engine.RoomLoad)
        /// The broker's users, read again (an invite of anyone else is `unknown_user`).
        case knownUsers(Set<String>)
        /// A deadline asked for with ``Action/wake(at:)`` may be due.
        case tick
        /// The lease was renewed by a request sent at `sentAt`: this process may lead
        /// until `until` (ticks). A renewal sent before the deadline it extends counts,
        /// however late it is taken in; one sent after it never revives the term.
        case leaseRenewed(sentAt: Millis, until: Millis)
        /// The lease is gone.
        case leaseLost(LeaseLoss)
        /// SIGTERM or SIGINT: drain, then stop.
        case shutdown
        /// The partition's MQTT session is up (a CONNACK). The first is the term's own
        /// connect; every later one is a reconnect.
        case sessionConnected
        /// The broker's admin connection came back, or the broker refused a step's access
        /// changes: its room access may differ from the engine's.
        case accessMayDiffer
        /// The metrics interval passed. `publisher`: the partition that publishes the
        /// process's metrics now (the lowest one this process runs).
        case metricsTick(publisher: Int)
    }

    public enum Action {
        /// Hand these to the broker, in this order.
        case publish([Publication])
        /// Commit this batch; answer `.committed` or `.commitFailed`. Never two at once.
        case commit(Commit)
        /// Answer this query from the store, off the pipeline (`.queryFailed` if it cannot).
        case query(Engine.Query)
        /// Ask the store for this id's first copy (`.idChecked` or `.idCheckFailed`).
        case checkId(Engine.IdCheck)
        /// Read this room at this version from the store's history (everything before it
        /// is committed): answer `.roomLoaded`. No step is taken meanwhile.
        case loadRoom(RoomVersionRequest)
        /// Send `.tick` at this tick, unless another input comes first.
        case wake(at: Millis)
        /// The term is over: carry out nothing more.
        case stop(Stop)
        /// The session is up: `reconnect` when it is not the term's first connection (a
        /// will may have said offline meanwhile: say online again).
        case sessionUp(reconnect: Bool)
        /// Make the broker's room access match these readers (this partition's rooms).
        case reconcileAccess([String: Set<String>])
        /// Publish the process's metrics (this partition is the one that does).
        case publishMetrics
    }

    public struct Commit {
        /// The step's number (``Engine/Step/number``).
        public var number: Int
        public var batch: StoreBatch
        /// Read rights that change with this batch: applied at the broker after the
        /// commit and before its publications (an invitee can read the snapshot that
        /// shows it).
        public var access: [RoomAccessChange]
    }

    public enum Stop: Equatable, Sendable {
        /// Drained: everything taken was committed and published.
        case shutdown
        /// Nothing after the loss was committed or published; what waits in the reorder
        /// window was never acknowledged by a receipt, so its senders resend it to the
        /// next leader.
        case leaseLost(LeaseLoss)
        /// A commit failed: nothing it produced was published. The process stops.
        case commitFailed
    }

    enum Phase: Equatable {
        case leading
        /// A shutdown came: no new input is taken; the commit in flight, then the flush.
        case draining
        case stopped(Stop)
    }

    struct InFlight {
        var number: Int
        var publications: [Publication]
        var events: Int
        /// The drain's last batch: after it, the term stops.
        var isFinal: Bool
    }

    /// The service counts what it hands the broker (`messagesOut`, `publishErrors`) here.
    public package(set) var engine: Engine
    private(set) var phase = Phase.leading
    private(set) var inFlight: InFlight?
    /// Answers given at once that wait for the batch in flight.
    private(set) var held: [Publication] = []
    /// A ``Action/loadRoom(_:)`` is out: no step until it is answered.
    private(set) var isLoadingRoom = false
    /// Until when the lease lets this process lead (a tick); nil: a term that never ends
    /// (the SQLite file's owner).
    private(set) var leaseDeadline: Millis?
    /// The session's connections this term (the first is the term's own connect).
    private(set) var connections = 0

    public init(engine: Engine, leaseDeadline: Millis? = nil) {
        self.engine = engine
        self.leaseDeadline = leaseDeadline
    }

    public var isCommitting: Bool { inFlight != nil }

    /// The stop, once the term is over.
    public var stopped: Stop? {
        if case .stopped(let stop) = phase { return stop }
        return nil
    }

    /// Work due before any input (the republishing after a start, leases that ran out
    /// while nobody led): the first actions of a term.
    public mutating func start(at now: Engine.Now) -> [Action] {
        var actions: [Action] = []
        advance(at: now, into: &actions)
        return actions
    }

    public mutating func receive(_ input: Input, at now: Engine.Now) -> [Action] {
        guard stopped == nil else { return [] }
        switch input {
        case .leaseLost(let loss):
            return stop(.leaseLost(loss))
        case .leaseRenewed(let sentAt, let until):
            if let deadline = leaseDeadline, sentAt < deadline { leaseDeadline = max(deadline, until) }
        default:
            break
        }
        if let deadline = leaseDeadline, now.tick >= deadline {
            return stop(.leaseLost(.deadlinePassed(byMs: now.tick - deadline)))
        }
        var actions: [Action] = []
        switch input {
        case .committed(let elapsed):
            guard let done = inFlight else { break }
            inFlight = nil
            countCommit(elapsed: elapsed, events: done.events, number: done.number)
            actions.append(.publish(done.publications + held))
            held = []
            if done.isFinal { return actions + stop(.shutdown) }
        case .commitFailed:
            guard inFlight != nil else { break }
            inFlight = nil
            held = []
            return stop(.commitFailed)
        case .shutdown:
            if phase == .leading { phase = .draining }
        case .leaseLost, .leaseRenewed:
            break  // taken in above
        case .roomLoaded(let request, let load):
            // Taken while draining too: the drain waits for it.
            isLoadingRoom = false
            engine.roomLoaded(request, load)
        case .sessionConnected:
            // Draining too: what the drain publishes needs the status online.
            connections += 1
            actions.append(.sessionUp(reconnect: connections > 1))
        case .accessMayDiffer:
            actions.append(.reconcileAccess(engine.roomAccess))
        case .metricsTick(let publisher):
            if publisher == engine.configuration.partition { actions.append(.publishMetrics) }
        case .message, .idChecked, .idCheckFailed, .queryFailed, .knownUsers, .tick:
            // Draining: nothing new is taken (no receipt was sent for it; it is resent).
            guard phase == .leading else { break }
            feedEngine(input, at: now, into: &actions)
        }
        advance(at: now, into: &actions)
        return actions
    }

    /// An input that the engine takes while leading.
    private mutating func feedEngine(_ input: Input, at now: Engine.Now, into actions: inout [Action]) {
        switch input {
        case .message(let topic, let payload):
            answerAtOnce(engine.ingest(topic: topic, payload: payload, at: now), into: &actions)
            actions += engine.takeQueries().map(Action.query)
            actions += engine.takeIdChecks().map(Action.checkId)
        case .idChecked(let check, let firstCopy):
            answerAtOnce(engine.resolve(check, firstCopy: firstCopy, at: now), into: &actions)
        case .idCheckFailed, .queryFailed:
            engine.metrics.errors += 1
        case .knownUsers(let users):
            engine.setKnownUsers(users)
        case .tick, .committed, .commitFailed, .leaseRenewed, .leaseLost, .shutdown, .roomLoaded,
             .sessionConnected, .accessMayDiffer, .metricsTick:
            break
        }
    }

    private mutating func answerAtOnce(_ publications: [Publication], into actions: inout [Action]) {
        guard !publications.isEmpty else { return }
        if isCommitting {
            held += publications
        } else {
            actions.append(.publish(publications))
        }
    }

    /// With no commit in flight: the next step if one is due (the whole flush when
    /// draining), and the next wake.
    private mutating func advance(at now: Engine.Now, into actions: inout [Action]) {
        guard !isCommitting, !isLoadingRoom else { return }
        switch phase {
        case .leading:
            if engine.pendingRoomLoad == nil, let deadline = engine.nextDeadline, deadline <= now.tick {
                carryOut(engine.step(at: now), isFinal: false, into: &actions)
            }
            // A restore waits for its room at a version: read once the step before it is
            // committed (so the history holds every version up to it).
            if requestRoomLoad(into: &actions) { return }
            // While a batch commits, its completion wakes the next step: a wake for a
            // deadline already due would only spin.
            if !isCommitting, let deadline = engine.nextDeadline {
                actions.append(.wake(at: deadline))
            }
        case .draining:
            if requestRoomLoad(into: &actions) { return }
            let step = engine.flush(at: now)
            carryOut(step, isFinal: engine.pendingRoomLoad == nil, into: &actions)
            _ = requestRoomLoad(into: &actions)
        case .stopped:
            break
        }
    }

    /// With nothing committing: asks for the room a held restore needs. True when it did
    /// (or one is out already).
    private mutating func requestRoomLoad(into actions: inout [Action]) -> Bool {
        guard !isCommitting, let request = engine.pendingRoomLoad else { return isLoadingRoom }
        if !isLoadingRoom {
            isLoadingRoom = true
            actions.append(.loadRoom(request))
        }
        return true
    }

    private mutating func carryOut(_ step: Engine.Step, isFinal: Bool, into actions: inout [Action]) {
        if step.batch.isEmpty {
            // Nothing to persist (paced snapshots, a republished chunk): every state they
            // show is committed already.
            countCommit(elapsed: nil, events: 0, number: step.number)
            if !step.publications.isEmpty { actions.append(.publish(step.publications)) }
            if isFinal { actions += stop(.shutdown) }
        } else {
            inFlight = InFlight(number: step.number, publications: step.publications, events: step.batch.events.count, isFinal: isFinal)
            actions.append(.commit(Commit(number: step.number, batch: step.batch, access: step.access)))
        }
    }

    /// Step `number` is in the store (or had nothing to store): its ids may be kept as
    /// digests only, and the commit is counted.
    private mutating func countCommit(elapsed: Duration?, events: Int, number: Int) {
        engine.committed(through: number)
        guard let elapsed else { return }
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        engine.metrics.batches += 1
        engine.metrics.commitMillisTotal += ms
        engine.metrics.commitMillisMax = max(engine.metrics.commitMillisMax, ms)
    }

    private mutating func stop(_ stop: Stop) -> [Action] {
        phase = .stopped(stop)
        return [.stop(stop)]
    }
}

/// Why a leader's term ended without a shutdown.
public enum LeaseLoss: Equatable, Sendable, CustomStringConvertible {
    /// No renewal came in time: this process's deadline passed `byMs` ago (frozen,
    /// starved of CPU, or cut off from the database).
    case deadlinePassed(byMs: Millis)
    /// The database's lease names another term: another coordinator took over.
    case takenOver(term: Int64?, instance: String?)
    /// The database refused a commit under this term (its fence).
    case commitRefused(String)
    /// The broker said nothing for this long (`--broker-silence-seconds` or more): this
    /// process cannot reach it, so it answers nobody; a standby that can takes over.
    case brokerSilent(forMs: Millis)

    public var description: String {
        switch self {
        case .deadlinePassed(let ms):
            "the lease was not renewed in time: this process's deadline passed \(ms) ms ago (frozen, starved of CPU, or cut off from the database)"
        case .takenOver(let term?, let instance?):
            "the database's lease now names term \(term), held by instance \(instance) (another coordinator took over)"
        case .takenOver:
            "the database's lease now names another term (another coordinator took over)"
        case .commitRefused(let message):
            "the database refused a commit under this term: \(message)"
        case .brokerSilent(let ms):
            "the broker has not answered for \(ms) ms (this process cannot reach it; a standby that can takes over)"
        }
    }
}
