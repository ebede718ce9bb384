/// How a device relates to a workout's origin: the origin device (`local`) computes and
/// publishes flight data; the other (`remote`) shows the origin's.
public enum StartOrigin: String, Sendable, CaseIterable {
    case local, remote

    public init(device: Device, origin: Device) {
        self = device == origin ? .local : .remote
    }
}
