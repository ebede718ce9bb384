/// Whether the other device mirrors the workout (`start`'s `mode`, default `standalone`).
public enum WorkoutMode: String, Sendable, CaseIterable {
    case standalone, mirrored
}
