// swift-tools-version:6.2
import PackageDescription

let package = Package(
    name: "tandem",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "TandemClient", targets: ["TandemClient"]),
        .executable(name: "tandem-coordinator", targets: ["tandem-coordinator"]),
        .executable(name: "tandem-agent", targets: ["tandem-agent"]),
        .executable(name: "tandem-bench", targets: ["tandem-bench"]),
        .executable(name: "tandem-corebench", targets: ["tandem-corebench"]),
        .executable(name: "tandem-web", targets: ["tandem-web"]),
    ],
    // PostgreSQL (leader lease, standbys) is a default trait: `swift build` and `swift
    // test` have it. scripts/run leaves it out (`--disable-default-traits`) when the
    // database is a SQLite file: postgres-nio brings swift-nio-ssl and swift-crypto, two
    // copies of BoringSSL, most of a first release build's ten minutes.
    traits: [
        .trait(name: "PostgreSQL", description: "PostgreSQL storage with a leader lease and standbys (--database postgres://...)"),
        .default(enabledTraits: ["PostgreSQL"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        // PostgreSQL for coordinators that take over from each other (TandemPostgres).
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // Observability: counters and histograms through swift-metrics, exported in the
        // Prometheus text format; /metrics and /healthz are served over plain sockets
        // (MetricsServer), so a coordinator without PostgreSQL builds no SwiftNIO.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The browser front end (tandem-web): HTTP, static files and one WebSocket per tab.
        // No traits: swift-configuration is not needed (flags go through TandemCommandLine).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
    ],
    targets: [
        // C libraries, through pkg-config (Debian: libmosquitto-dev, libsqlite3-dev).
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // libmosquitto's socket reads through a buffer: one read(2) for up to 16 KiB, not
        // three or more a packet (its entries for read and close pointed here, nothing else's).
        .target(name: "CMosquittoReads"),
        // glibc's mallopt (the coordinator caps its malloc arenas).
        .systemLibrary(name: "CMalloc"),
        // glibc's ppoll (PollLoop's timers to the microsecond).
        .systemLibrary(name: "CPoll"),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // A VFS over SQLite's default that writes a commit's WAL frames in one call.
        .target(name: "CSQLiteWAL", dependencies: ["CSQLite"]),

        // The pure domain: rules, ordering, state machines, wire payloads. No I/O.
        .target(name: "TandemCore"),

        // An async MQTT v5 client over libmosquitto. Knows nothing of Tandem.
        .target(
            name: "TandemMQTT",
            dependencies: [
                "CMosquitto", "CMosquittoReads", "CPoll",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // SQLite: one actor per connection, migrations, Tandem's schema.
        .target(
            name: "TandemStore",
            dependencies: ["CSQLite", "CSQLiteWAL", "TandemCore"]
        ),

        // PostgreSQL: the same schema meaning as SQLiteStore, plus the leader lease
        // (a term that fences every commit) for coordinators that take over.
        .target(
            name: "TandemPostgres",
            dependencies: [
                "TandemCore", "TandemStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // Log handlers the executables bootstrap (`--log-format json`). Only swift-log.
        .target(
            name: "TandemLogging",
            dependencies: [.product(name: "Logging", package: "swift-log")]
        ),

        // The coordinator's pure core: the engine (rooms, conversations, workouts, remembered
        // ids, metrics counters, publications) and the leader's loop, a state machine that
        // answers inputs with actions. No I/O, no clock, no dependency but TandemCore.
        .target(
            name: "TandemEngine",
            dependencies: ["TandemCore"]
        ),

        // The coordinator service: topic -> decode -> order -> apply -> persist -> publish.
        // Its metrics go out through swift-metrics; MetricsServer serves them (and
        // /healthz) over plain sockets: no SwiftNIO unless PostgreSQL brings it.
        .target(
            name: "TandemCoordinator",
            dependencies: [
                "TandemCore", "TandemEngine", "TandemMQTT", "TandemStore",
                .target(name: "TandemPostgres", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),

        // The client library apps import: presence, replicas, receipts and resends over a
        // small transport protocol (libmosquitto's adapter in MosquittoTransport.swift).
        .target(
            name: "TandemClient",
            dependencies: [
                "TandemCore", "TandemMQTT",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // What a peer runs: room member, DM user, workout device. Built on TandemClient.
        .target(
            name: "TandemAgent",
            dependencies: [
                "TandemClient", "TandemCore", "TandemMQTT",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The flags every binary shares (broker, account), and the one way a flag, its
        // environment variable and its default are declared and resolved.
        .target(
            name: "TandemCommandLine",
            dependencies: [
                "TandemCore", "TandemMQTT", "TandemLogging",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        .executableTarget(
            name: "tandem-coordinator",
            dependencies: [
                "CMalloc", "TandemCoordinator", "TandemMQTT", "TandemLogging", "TandemCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "tandem-agent",
            dependencies: [
                "TandemAgent", "TandemMQTT", "TandemCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The browser front end: sign-in, sessions (one TandemClient per signed-in user),
        // the page's frames validated and paced, the page itself as resources.
        .target(
            name: "TandemWeb",
            dependencies: [
                "TandemClient", "TandemCore", "TandemMQTT",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                // WebSocketFrame: a room frame written from the buffer RoomFrames keeps.
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            resources: [.copy("Public")]
        ),
        .executableTarget(
            name: "tandem-web",
            dependencies: [
                "CMalloc", "TandemWeb", "TandemCore", "TandemCommandLine", "TandemLogging",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "tandem-bench",
            dependencies: [
                "TandemCore", "TandemMQTT",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            linkerSettings: [.linkedLibrary("m")]
        ),
        // In-process benchmarks of the pure core and the Engine (no broker, no store).
        .executableTarget(
            name: "tandem-corebench",
            dependencies: [
                "TandemCore", "TandemEngine", "TandemCoordinator", "TandemStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            linkerSettings: [.linkedLibrary("m")]
        ),

        // Test helpers: a real mosquitto on a free loopback port, child processes.
        .target(
            name: "TestSupport",
            dependencies: ["TandemMQTT", "TandemCore"],
            path: "Tests/TestSupport"
        ),
        .testTarget(name: "TandemCoreTests", dependencies: ["TandemCore"]),
        // The engine and the leader's loop, driven with no broker, store or clock.
        .testTarget(name: "TandemEngineTests", dependencies: ["TandemEngine", "TandemCore"]),
        .testTarget(name: "TandemStoreTests", dependencies: ["TandemStore", "TandemPostgres", "TandemCore", "TestSupport"]),
        .testTarget(
            name: "TandemCoordinatorTests",
            dependencies: [
                "TandemCoordinator", "TandemEngine", "TandemCore", "TandemMQTT", "TandemStore", "TestSupport",
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(name: "TandemLoggingTests", dependencies: ["TandemLogging", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "TandemMQTTTests", dependencies: ["TandemMQTT", "TestSupport"]),
        .testTarget(name: "TandemAgentTests", dependencies: ["TandemAgent", "TandemCore"]),
        // The client library's pure parts (undo and redo, the cursor's pace, payloads),
        // with no broker: the rules engine of TandemCore stands in for the coordinator.
        .testTarget(name: "TandemClientTests", dependencies: ["TandemClient", "TandemCore"]),
        .testTarget(
            name: "TandemWebTests",
            // A real broker and coordinator behind the web server (TestSupport starts them).
            dependencies: [
                "TandemWeb", "TandemClient", "TandemCore", "TandemMQTT", "TestSupport", "tandem-coordinator",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSTesting", package: "hummingbird-websocket"),
            ]
        ),
        .testTarget(
            name: "TandemIntegrationTests",
            // The binaries are dependencies so that `swift test` builds them: the tests
            // run them the way a person does.
            dependencies: [
                "TandemClient", "TandemCore", "TandemMQTT", "TandemStore", "TandemPostgres", "TestSupport", "tandem-coordinator",
                "tandem-agent",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
