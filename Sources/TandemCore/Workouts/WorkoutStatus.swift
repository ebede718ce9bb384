/// Where a workout is in its life (CONTRACT "Workouts").
public enum WorkoutStatus: String, Sendable, CaseIterable {
    case running, paused, finished
}
