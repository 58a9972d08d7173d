// swift-tools-version:6.1
import PackageDescription

let strictSwift6: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The libcurl functions FoundationNetworking calls, which FerryLazyLibcurl defines.
let lazyLibcurlFunctions = [
    "global_init", "easy_init", "easy_cleanup", "easy_setopt", "easy_getinfo", "easy_pause", "easy_strerror",
    "free", "multi_init", "multi_add_handle", "multi_assign", "multi_cleanup", "multi_info_read",
    "multi_remove_handle", "multi_setopt", "multi_socket_action", "slist_append", "slist_free_all", "url",
    "url_get", "url_set", "version", "version_info",
].map { "curl_" + $0 }

/// `Fuzz/run` sets FERRY_FUZZ=1 to build `ferry-fuzz` with libFuzzer and AddressSanitizer:
/// Ferry, whose hand-written parsers are the targets, and ferry-fuzz are instrumented, in the
/// same build folder as the tests, so no dependency is built again (instrumenting every
/// module took 5 min of CI, this takes one). Unset, as for everyone else, nothing changes.
let fuzzing = Context.environment["FERRY_FUZZ"] == "1"
let fuzzSanitizers: [SwiftSetting] = fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : []

let package = Package(
    name: "Ferry",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Ferry", targets: ["Ferry"]),
        .library(name: "FerryTestServer", targets: ["FerryTestServer"]),
        // A ClientTransport for swift-openapi-runtime: generated clients over a Session.
        .library(name: "FerryOpenAPI", targets: ["FerryOpenAPI"]),
        .executable(name: "ferry", targets: ["ferry"]),
        .executable(name: "ferry-testserver", targets: ["ferry-testserver"]),
    ],
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/vapor/multipart-kit", from: "4.7.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        // The tests' resumable-upload server: Apple's NIOResumableUpload speaks swift-http-types.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // AsyncHTTPClient's own dependency: Ferry names HTTP/2's errors (a stream reset).
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // A span per task and one per request, when the application bootstraps a tracer.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // Counters and timers of transfers, when the application bootstraps a backend.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // The daemon as a service: SIGTERM drains it (ServiceGroup), and Prometheus reads its
        // metrics on the web listener.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // FerryOpenAPI: the transport of clients swift-openapi-generator makes.
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        // `swift package generate-documentation`: the DocC catalog in Sources/Ferry/Ferry.docc.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        .target(
            name: "Ferry",
            dependencies: [
                "CFerrySystem",
                "CFerryCodecs",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOSOCKS", package: "swift-nio-extras"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift6 + fuzzSanitizers
        ),
        // A ClientTransport for swift-openapi-runtime over a Session (a product of its own, so
        // that Ferry's users who generate no client never build the runtime).
        .target(
            name: "FerryOpenAPI",
            dependencies: [
                "Ferry",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strictSwift6
        ),
        // System calls Swift's Glibc module leaves out (fstatfs).
        .target(name: "CFerrySystem"),
        // Brotli and Zstandard decoders from the system's libbrotlidec and libzstd, loaded on
        // first use: building needs neither, and a machine without one does not offer it.
        .target(name: "CFerryCodecs", linkerSettings: [.linkedLibrary("dl")]),
        // libcurl loaded on first use: Ferry's programs use URLRequest but never URLSession, so
        // linked "as needed" (scripts/build-release) they do not load libcurl at all.
        .target(name: "FerryLazyLibcurl", linkerSettings: [.linkedLibrary("dl")]),
        // Accepting connections for the servers of the package (the daemon, the test server).
        .target(
            name: "FerryServerSupport",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSwift6
        ),
        .target(
            name: "FerryTestServer",
            dependencies: [
                "FerryServerSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                // Certificates for the TLS tests, made at test time.
                .product(name: "X509", package: "swift-certificates"),
                // An independent multipart parser: the sink reads back what Ferry encodes.
                .product(name: "MultipartKit", package: "multipart-kit"),
            ],
            swiftSettings: strictSwift6
        ),
        // The background daemon: its store (SQLite through GRDB, WAL), its service, the socket
        // API's server and the client side of it.
        .target(
            name: "FerryBackground",
            dependencies: [
                "Ferry",
                "FerryServerSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                // The web page's Content-Security-Policy names its script by SHA-256.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "ferry",
            dependencies: [
                "Ferry",
                "FerryBackground",
                "FerryLazyLibcurl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "ferry-testserver",
            dependencies: [
                "FerryTestServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSwift6
        ),
        // A background session as a program uses it; the daemon tests run it as real processes.
        .executableTarget(
            name: "background-download",
            dependencies: ["Ferry"],
            path: "Examples/BackgroundDownload",
            swiftSettings: strictSwift6
        ),
        // AFNetworking snippets rewritten with Ferry; the tests run it against httpbin and nginx.
        .executableTarget(
            name: "afnetworking-migration",
            dependencies: ["Ferry"],
            path: "Examples/AFNetworkingMigration",
            swiftSettings: strictSwift6
        ),
        // The parsers Ferry wrote by hand as fuzz targets: Fuzz/run builds it with libFuzzer and
        // AddressSanitizer (FERRY_FUZZ=1, above); built plainly, it replays the seed corpora in
        // Fuzz/Corpus.
        .executableTarget(
            name: "ferry-fuzz",
            dependencies: ["Ferry", .product(name: "NIOCore", package: "swift-nio")],
            path: "Fuzz/FerryFuzz",
            swiftSettings: strictSwift6 + fuzzSanitizers
                + (fuzzing ? [.define("FUZZING"), .unsafeFlags(["-parse-as-library"])] : []),
            linkerSettings: fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : []
        ),
        // In-process clients for Benchmarks/run: Ferry and the peers it is measured against.
        .executableTarget(
            name: "bench-ferry",
            dependencies: ["Ferry", "FerryLazyLibcurl", .product(name: "Crypto", package: "swift-crypto")],
            path: "Benchmarks/Sources/bench-ferry",
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "bench-ahc",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Benchmarks/Sources/bench-ahc",
            swiftSettings: strictSwift6
        ),
        .executableTarget(
            name: "bench-urlsession",
            path: "Benchmarks/Sources/bench-urlsession",
            swiftSettings: strictSwift6
        ),
        // Apple's resumable-upload server (swift-nio-extras' NIOResumableUpload) for the tests.
        .executableTarget(
            name: "resumable-upload-server",
            dependencies: [
                .product(name: "NIOResumableUpload", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/ResumableUploadServer",
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "FerryTests",
            dependencies: ["Ferry", "FerryBackground"],
            swiftSettings: strictSwift6
        ),
        .testTarget(
            name: "FerryIntegrationTests",
            dependencies: [
                "Ferry", "FerryBackground", "FerryTestServer", "FerryLazyLibcurl", "FerryOpenAPI",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                // The observability tests read metrics and spans back.
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            // Support/form_echo.py: a Werkzeug form echo the upload tests start.
            exclude: ["Support"],
            swiftSettings: strictSwift6,
            // FerryLazyLibcurl's functions, exported so that they stand in for libcurl's in the
            // shared FoundationNetworking of a debug build: LazyLibcurlTests runs URLSession
            // through them.
            linkerSettings: [
                .unsafeFlags(
                    lazyLibcurlFunctions.flatMap { ["-Xlinker", "--export-dynamic-symbol=\($0)"] },
                    .when(platforms: [.linux])
                )
            ]
        ),
    ]
)
