// The agent is built on the client library: at-least-once delivery, the wall clock and
// the transport come from TandemClient, and whoever imports the agent sees them too.
@_exported import TandemClient
