import TandemCore

/// Workouts: controls through the buffer; flight and health samples applied on arrival
/// (they do not wait); the snapshot at most once a second while running and at once on
/// every status change; the summary into the logbook on stop.
extension Engine {
    mutating func ingestWorkoutControl(user: String, workoutId: String, device: Device, payload: [UInt8], now: Millis) -> [Publication] {
        let key = WorkoutKey(user: user, workoutId: workoutId)
        do throws(DecodeFailure) {
            let control = try WorkoutControl.decode(payload)
            let item = Buffered(user: user, id: control.commandId, command: .workout(workoutId: workoutId, device: device, control: control), payload: payload)
            return admit(item, kind: .workout, timestamp: control.timestamp, currentVersion: workouts[key]?.version, now: now)
        } catch {
            return [receipt(.rejected(id: error.id, kind: .workout, error.rejection, version: workouts[key]?.version), to: user, arrivedAt: now, target: key.description)]
        }
    }

    mutating func ingestFlight(user: String, workoutId: String, device: Device, payload: [UInt8], now: Millis) -> [Publication] {
        ingestTelemetry({ () throws(DecodeFailure) in try FlightData.decode(payload) }, id: { FlightData.receiptId(timestamp: $0.timestamp) }, user: user, workoutId: workoutId, now: now) { flight, workout in
            WorkoutState.apply(flight: flight, from: device, to: &workout)
        }
    }

    mutating func ingestHealth(user: String, workoutId: String, device: Device, payload: [UInt8], now: Millis) -> [Publication] {
        ingestTelemetry({ () throws(DecodeFailure) in try HealthData.decode(payload) }, id: { HealthData.receiptId(timestamp: $0.timestamp) }, user: user, workoutId: workoutId, now: now) { health, workout in
            WorkoutState.apply(health: health, from: device, to: &workout)
        }
    }

    /// The one path of both kinds of telemetry: decoded, rate-limited, applied on arrival.
    mutating func ingestTelemetry<Sample>(
        _ decode: () throws(DecodeFailure) -> Sample, id: (Sample) -> String, user: String, workoutId: String, now: Millis,
        apply: (Sample, inout WorkoutState?) -> WorkoutOutcome
    ) -> [Publication] {
        let key = WorkoutKey(user: user, workoutId: workoutId)
        let sample: Sample
        do throws(DecodeFailure) {
            sample = try decode()
        } catch {
            return [receipt(.rejected(id: error.id, kind: .workout, error.rejection, version: workouts[key]?.version), to: user, arrivedAt: now, target: key.description)]
        }
        guard takeToken(for: user, now: now) else {
            return [receipt(.rejected(id: id(sample), kind: .workout, Self.rateLimited, version: workouts[key]?.version), to: user, arrivedAt: now, target: key.description)]
        }
        let outcome = apply(sample, &workouts[key])
        return telemetryOutcome(outcome, id: id(sample), key: key, now: now)
    }

    /// Telemetry gets a receipt only when rejected; accepted samples make the snapshot due.
    mutating func telemetryOutcome(_ outcome: WorkoutOutcome, id: String, key: WorkoutKey, now: Millis) -> [Publication] {
        guard outcome.isAccepted else {
            return [receipt(outcome.receipt(id: id), to: key.user, arrivedAt: now, target: key.description)]
        }
        metrics.telemetryAccepted += 1
        if workoutSnapshotDue[key] == nil {
            let last = workoutLastPublished[key] ?? 0
            workoutSnapshotDue[key] = max(now, last + configuration.workoutSnapshotIntervalMs)
        }
        return []
    }

    mutating func applyWorkoutControl(_ control: WorkoutControl, workoutId: String, device: Device, user: String, now: Millis, changes: inout BatchChanges, batch: inout StoreBatch) -> Receipt {
        let key = WorkoutKey(user: user, workoutId: workoutId)
        let outcome = WorkoutState.apply(control, from: device, to: &workouts[key], user: user, workoutId: workoutId)
        if outcome.isAccepted {
            changes.workouts.insert(key)
            if let workout = workouts[key], workout.status == .finished, let summary = workout.summary {
                batch.logbook.append(LogbookRow(
                    userId: user, workoutId: workoutId, startedAt: workout.startedAt, endedAt: workout.endedAt ?? wall,
                    origin: workout.origin.rawValue, mode: workout.mode.rawValue, distance: summary.distance,
                    elapsedTime: summary.elapsedTime, averagePace: summary.averagePace,
                    averageHeartRate: summary.averageHeartRate, maxHeartRate: summary.maxHeartRate))
            }
        }
        return outcome.receipt(id: control.commandId)
    }

    /// Throttled snapshots whose time has come join this step.
    mutating func collectWorkoutSnapshots(now: Millis, changes: inout BatchChanges) {
        for (key, due) in workoutSnapshotDue where due <= now {
            changes.workouts.insert(key)
        }
    }

    mutating func publishWorkouts(_ changed: Set<WorkoutKey>, now: Millis, into step: inout Step) {
        for key in changed.sorted(by: { ($0.user, $0.workoutId) < ($1.user, $1.workoutId) }) {
            guard let workout = workouts[key] else { continue }
            workoutSnapshotDue[key] = nil
            workoutLastPublished[key] = now
            step.batch.entities.append(EntityRow(
                kind: EntityKind.workout, key: key.description, version: workout.version,
                body: workout.persisted().serialized(), updatedAt: wall))
            step.publications.append(workoutSnapshot(workout))
        }
    }

    func workoutSnapshot(_ workout: WorkoutState) -> Publication {
        Publication(topic: topics.workoutState(user: workout.user, workout: workout.workoutId), payload: workout.snapshot(epoch: epoch).serialized(), retain: true)
    }
}
