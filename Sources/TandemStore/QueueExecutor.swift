import Dispatch

/// A serial executor on a dispatch queue of its own, for an actor whose every call is
/// blocking C work (SQLite). Swift's cooperative pool has one thread per core (two on
/// the machines Tandem is measured on): an actor on it that waits on the disk, a busy
/// lock or a checkpoint takes one of those threads from the pipeline. A serial dispatch
/// queue runs on a thread of libdispatch's own that may block without starving anyone.
final class QueueExecutor: SerialExecutor {
    let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}
