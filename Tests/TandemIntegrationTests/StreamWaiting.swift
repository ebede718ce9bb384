/// The first element of `stream` that meets `condition`, waiting at most `timeout`:
/// how the tests of `TandemClient` wait for a replica to reach a state.
func first<Element: Sendable>(
    _ stream: AsyncStream<Element>, timeout: Duration = .seconds(30), where condition: @escaping @Sendable (Element) -> Bool
) async throws -> Element {
    try await withThrowingTaskGroup(of: Element?.self) { group in
        group.addTask {
            for await element in stream where condition(element) { return element }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let found = try await group.next() ?? nil else { throw WaitError() }
        return found
    }
}

struct WaitError: Error, CustomStringConvertible {
    var description: String { "the awaited state did not come" }
}
