import TandemCore

// What an app needs beside the client itself comes with `import TandemClient`, type by
// type (as Hummingbird's Exports.swift does): the values it sends and receives, the
// replicas it shows, and the receipts. The coordinator's insides (its room state and
// rules engine, the reorder buffer, the store's rows and protocol, the simulators the
// agent drives) live in TandemCore too and are not re-exported: an app never sees them.

// Time and identifiers.
@_exported import typealias TandemCore.Millis
@_exported import enum TandemCore.WallClock
// Rooms.
@_exported import struct TandemCore.Frame
@_exported import struct TandemCore.Sticker
@_exported import struct TandemCore.EditEvent
@_exported import struct TandemCore.RoomReplica
@_exported import struct TandemCore.RoomSnapshot
@_exported import struct TandemCore.RoomChange
@_exported import struct TandemCore.RoomChanges
@_exported import struct TandemCore.RoomMember
@_exported import enum TandemCore.MemberRole
@_exported import struct TandemCore.RoomMembership
// Direct messages.
@_exported import struct TandemCore.DMCommand
@_exported import struct TandemCore.DirectMessage
@_exported import struct TandemCore.ConversationReplica
@_exported import enum TandemCore.ConversationStatus
@_exported import struct TandemCore.ConversationChange
@_exported import struct TandemCore.ConversationChanges
@_exported import struct TandemCore.ConversationSnapshot
// Workouts.
@_exported import enum TandemCore.Device
@_exported import enum TandemCore.StartOrigin
@_exported import struct TandemCore.WorkoutControl
@_exported import enum TandemCore.WorkoutMode
@_exported import enum TandemCore.WorkoutStatus
@_exported import struct TandemCore.WorkoutSnapshot
@_exported import struct TandemCore.WorkoutSummary
@_exported import struct TandemCore.FlightData
@_exported import struct TandemCore.HealthData
// Receipts and refusals.
@_exported import struct TandemCore.Receipt
@_exported import enum TandemCore.ReceiptCode
@_exported import struct TandemCore.Rejection
// The topic names (an app that also speaks MQTT itself), and JSON (the queries' raw answers).
@_exported import struct TandemCore.Topics
@_exported import enum TandemCore.JSON
// TLS settings for the initialiser that builds its own libmosquitto transport.
@_exported import struct TandemMQTT.MQTTTLS
