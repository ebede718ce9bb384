// libFuzzer entry point over TandemCore's payload decoders (built by scripts/fuzz with
// `swiftc -sanitize=fuzzer,address` together with the TandemCore sources, as one module,
// so nothing here needs to be public).
//
// Every input goes through every decoder the coordinator runs on untrusted bytes (and the
// binary room body reader), and through the topic parser as a topic. Besides "never crash, never hang, never read out
// of bounds" (what the sanitizer and libFuzzer catch), it checks two properties and
// traps when one fails, so libFuzzer saves the input:
//   - JSON written by `serialized()` parses back to the same value (numbers compared by
//     value: `-1e3` is read as a double and written as `-1000`, which reads as an integer);
//   - a decoded event, command or control re-encoded with `json()` decodes to itself;
//   - an id salvaged from the raw bytes (FieldSalvage, used when a payload is not valid
//     JSON) agrees with the parsed value whenever the bytes are JSON after all, and a
//     rejection's id is always "" or a valid identifier / `<kind>:<timestamp>`.

@_cdecl("LLVMFuzzerTestOneInput")
public func tandemFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes: [UInt8] = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))

    if let json = try? JSON.parse(bytes) {
        let written = json.serialized()
        guard let again = try? JSON.parse(written) else {
            fatalError("serialized JSON does not parse: \(String(decoding: written, as: UTF8.self))")
        }
        precondition(sameValue(again, json), "JSON round trip changed the value: \(json) -> \(again)")
    }
    if let event = try? EditEvent.decode(bytes) {
        let back = try? EditEvent.decode(event.json().serialized())
        precondition(back == event, "EditEvent round trip: \(event) -> \(String(describing: back))")
    }
    for key in ["eventId", "commandId"] {
        if let salvaged = FieldSalvage.string(bytes, key: key), let json = try? JSON.parse(bytes), case .object = json {
            precondition(json[key]?.stringValue == salvaged, "salvaged \(key) \(salvaged) differs from the parsed \(String(describing: json[key]))")
        }
    }
    if let salvaged = FieldSalvage.int64(bytes, key: "timestamp"), let json = try? JSON.parse(bytes), case .object = json {
        precondition(json["timestamp"]?.int64Value == salvaged, "salvaged timestamp \(salvaged) differs from the parsed one")
    }
    if let failure = DecodeFailure.of({ try EditEvent.decode(bytes) }) {
        precondition(failure.id.isEmpty || Identifier.isValid(failure.id), "rejection id \(failure.id) is not an identifier")
    }
    if let failure = DecodeFailure.of({ try FlightData.decode(bytes) }) {
        precondition(failure.id.isEmpty || failure.id.hasPrefix("flight:"), "rejection id \(failure.id)")
    }
    _ = try? DMCommand.decode(bytes)
    _ = try? WorkoutControl.decode(bytes)
    _ = try? FlightData.decode(bytes)
    _ = try? HealthData.decode(bytes)
    _ = try? ClientRequest.decode(bytes)
    _ = PresenceTracker.parse(bytes)

    // A room body as the store holds it: not a client's bytes, but a corrupt row must be
    // an error, never a crash, and what reads back must write the same bytes again.
    if let room = try? RoomState(persistedBytes: [0, 2] + bytes) {
        let body = room.persistedBytes()
        precondition((try? RoomState(persistedBytes: body))?.persistedBytes() == body, "room body round trip")
    }

    let topics = Topics()
    let text = String(decoding: bytes, as: UTF8.self)
    _ = topics.parseInbound(text)
    _ = topics.parseInbound(topics.root + "/" + text)
    return 0
}

/// JSON equality with numbers compared by value (an integer and a double that are equal
/// are the same number on the wire).
func sameValue(_ a: JSON, _ b: JSON) -> Bool {
    switch (a, b) {
    case (.int(let x), .int(let y)): return x == y
    case (.int, .double), (.double, .int), (.double, .double): return a.doubleValue == b.doubleValue
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { sameValue($0, $1) }
    case (.object(let x), .object(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && sameValue($0.value, $1.value) }
    default: return a == b
    }
}
