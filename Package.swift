// swift-tools-version:6.0
// churnwatch: a status-polling batch worker for App Store subscriptions, on PostgreSQL.
//
// Dependencies point one way (docs/architecture.md §2):
//   churnwatch → Polling → (AppStoreServerAPI, ChurnStore) → (ChurnModel, Postgres)
// churnwatch → ChurnReport (the report's page, pure, built from the store's ReportRows) → ChurnModel;
// ChurnStore and churnwatch → ChurnInput (reading files).
// ChurnModel → AppStoreModels (Apple's enums and milliseconds, one vocabulary); both import
// Foundation only otherwise. The simulator shares AppStoreModels
// with the client and nothing else; the churnwatch binary never links the simulator.
import PackageDescription

let package = Package(
    name: "churnwatch",
    // macOS 15 for the standard library's `Mutex` (Synchronization), the lock of every shared
    // state here (the run engine's, the HTTP client's, the CLI's signal and progress state); on
    // Linux every Swift 6 toolchain has it.
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "churnwatch", targets: ["churnwatch"]),
        .executable(name: "appstore-sim", targets: ["appstore-sim"]),
        .library(name: "AppStoreSimulator", targets: ["AppStoreSimulator"]),
    ],
    dependencies: [
        // CLI parsing for churnwatch (Apple).
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        // The logging API that libraries take instead of building their own (Apple).
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        // P-256 / ES256 signing and verification, SHA-256 (Apple). Never hand-rolled crypto.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        // X.509 parsing and RFC 5280 path validation for Apple's x5c chains (Apple).
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.3.0"),
        // Event loops and HTTP/1.1: churnwatch's HTTP client (through AsyncHTTPClient), its
        // `serve` door and the App Store simulator's server; churnwatch never links the simulator (Apple).
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.100.0"),
        // HTTP client for Apple's API on SwiftNIO: pooled keep-alive connections, TLS, HTTP/2,
        // deadlines, and no thread hop per request (SSWG).
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // TLS for that client (already under AsyncHTTPClient): extra trust roots for a server
        // behind a private CA (APPSTORE_TLS_ROOT_CERTS) and telling a certificate that is not
        // trusted from a network failure; and `churnwatch serve --tls-cert/--tls-key` (Apple).
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.27.0"),
        // serve's parts as one ServiceGroup: start order, graceful stop on SIGTERM/SIGINT bounded
        // by one grace (SSWG; resolved already through async-http-client).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
    ],
    targets: [
        // libpq, from Debian's libpq-dev.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // The only code that touches libpq.
        .target(
            name: "Postgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Pure domain: snapshot, change detection, segments, win-back decisions. Foundation and
        // Apple's vocabulary (AppStoreModels' enums and milliseconds, Foundation only) only.
        .target(name: "ChurnModel", dependencies: ["AppStoreModels"]),
        // Apple's wire types (JSON bodies, decoded JWS payloads). Foundation only; shared with
        // the simulator.
        .target(name: "AppStoreModels"),
        // Client for the App Store Server API: auth, endpoints, JWS verification, limits.
        .target(
            name: "AppStoreServerAPI",
            dependencies: [
                "AppStoreModels",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // `churnwatch report`: the report's figures and their HTML page, a pure function (no I/O).
        .target(name: "ChurnReport", dependencies: ["ChurnModel"]),
        // What churnwatch reads from files: the import (CSV or JSON lines) and lines of
        // notifications, in bounded memory. Foundation and Apple's vocabulary only.
        .target(name: "ChurnInput", dependencies: ["AppStoreModels"]),
        // All SQL for churnwatch's own tables, and nothing else.
        .target(
            name: "ChurnStore",
            dependencies: [
                "ChurnInput",
                "Postgres",
                "AppStoreModels",
                "ChurnModel",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),  // SHA-256 of an oversized quarantined payload
            ]
        ),
        // Scheduler, worker pool, batch writer. Reaches PostgreSQL only through ChurnStore.
        .target(
            name: "Polling",
            dependencies: [
                "AppStoreServerAPI",
                "ChurnStore",
                "ChurnModel",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `churnwatch serve`: the HTTP door (SwiftNIO, swift-nio-ssl), the notification receiver
        // and the inbox applier. Reaches PostgreSQL only through ChurnStore.
        .target(
            name: "ChurnServe",
            dependencies: [
                "Polling",
                "ChurnStore",
                "ChurnModel",
                "AppStoreServerAPI",
                .product(name: "Crypto", package: "swift-crypto"),  // the cancel page's holdout draw (SHA-256)
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),  // the webhook sender
            ]
        ),
        // Talks to PostgreSQL only through ChurnStore (no Postgres import).
        .executableTarget(
            name: "churnwatch",
            dependencies: [
                "Polling",
                "ChurnServe",
                "ChurnInput",
                "ChurnStore",
                "ChurnReport",
                "AppStoreServerAPI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),  // serve's TLS settings
            ]
        ),
        // A local App Store Server API (population, simulated clock, limits, faults, truth).
        // Shares AppStoreModels with the client and nothing else.
        .target(
            name: "AppStoreSimulator",
            dependencies: [
                "AppStoreModels",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),  // delivering notifications (--notification-url)
            ]
        ),
        .executableTarget(
            name: "appstore-sim",
            dependencies: [
                "AppStoreSimulator",
                "AppStoreModels",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // Benchmarks behind ops/bench (release builds): PostgreSQL, HTTP transport, JWS
        // verification (the certificates of its test chain need Crypto, X509 and SwiftASN1).
        .executableTarget(
            name: "churnwatch-bench",
            dependencies: [
                "Postgres",
                "AppStoreServerAPI",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),

        .testTarget(
            name: "PostgresTests",
            dependencies: ["Postgres", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "ChurnModelTests", dependencies: ["ChurnModel", "AppStoreModels"]),
        .testTarget(name: "ChurnReportTests", dependencies: ["ChurnReport", "ChurnModel"]),
        .testTarget(
            name: "AppStoreServerAPITests",
            dependencies: [
                "AppStoreServerAPI",
                "AppStoreModels",
                // SubscriptionPoller against a scripted Apple (history cursor, receipts): those tests
                // need the client's internal seams (transport, clock, jitter), which only a
                // `@testable import` from this target reaches.
                "Polling",
                "ChurnStore",
                "ChurnModel",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.copy("Fixtures")]
        ),
        // The simulator's tests also check its payloads with churnwatch's own verifier (tests only;
        // the simulator library never depends on the client).
        .testTarget(
            name: "AppStoreSimulatorTests",
            dependencies: [
                "AppStoreSimulator",
                "AppStoreModels",
                "AppStoreServerAPI",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),  // the client takes its logger from the caller
            ]
        ),
        .testTarget(name: "ChurnInputTests", dependencies: ["ChurnInput", "AppStoreModels"]),
        .testTarget(
            name: "ChurnStoreTests",
            dependencies: ["ChurnStore", "ChurnInput", "ChurnReport", "ChurnModel", "Postgres", .product(name: "Logging", package: "swift-log")]
        ),
        // The run engine's pure rules (no database, no clock).
        .testTarget(name: "PollingTests", dependencies: ["Polling", "ChurnStore", "ChurnModel", "AppStoreServerAPI", "AppStoreModels"]),
        // Runs the built churnwatch binary as operators do (exit codes, output).
        // Runs the built churnwatch and appstore-sim binaries as operators do (and the run
        // engine in-process on a test clock).
        .testTarget(
            name: "ChurnwatchCLITests",
            dependencies: ["churnwatch", "appstore-sim", "Polling", "ChurnStore", "ChurnServe", "AppStoreServerAPI", "AppStoreModels", "Postgres",
                           .product(name: "Logging", package: "swift-log")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
