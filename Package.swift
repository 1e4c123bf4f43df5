// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "StoreBus",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "StoreSchema", targets: ["StoreSchema"]),
        .library(name: "StoreBus", targets: ["StoreBus"]),
        .library(name: "StoreBusServer", targets: ["StoreBusServer"]),
        .library(name: "StoreBusHost", targets: ["StoreBusHost"]),
        .library(name: "StoreBusCommandLine", targets: ["StoreBusCommandLine"]),
        .library(name: "StoreBusStorage", targets: ["StoreBusStorage"]),
        .library(name: "StoreBusPostgres", targets: ["StoreBusPostgres"]),
        .library(name: "StoreBusTesting", targets: ["StoreBusTesting"]),
        .library(name: "CatalogFormat", targets: ["CatalogFormat"]),
        .library(name: "Catalog", targets: ["Catalog"]),
        .library(name: "PaymentQueue", targets: ["PaymentQueue"]),
        .library(name: "Gateway", targets: ["Gateway"]),
        .library(name: "ReceiptFormat", targets: ["ReceiptFormat"]),
        .library(name: "ContentPackage", targets: ["ContentPackage"]),
        .library(name: "Download", targets: ["Download"]),
        .library(name: "Receipt", targets: ["Receipt"]),
        .library(name: "Notifications", targets: ["Notifications"]),
        .library(name: "Console", targets: ["Console"]),
        .library(name: "StoreBusSDK", targets: ["StoreBusSDK"]),
        .library(name: "StoreBusSDKTesting", targets: ["StoreBusSDKTesting"]),
        .executable(name: "storebus-catalog", targets: ["storebus-catalog"]),
        .executable(name: "storebus-payment-queue", targets: ["storebus-payment-queue"]),
        .executable(name: "storebus-gateway", targets: ["storebus-gateway"]),
        .executable(name: "storebus-receipt", targets: ["storebus-receipt"]),
        .executable(name: "storebus-download", targets: ["storebus-download"]),
        .executable(name: "storebus-notifications", targets: ["storebus-notifications"]),
        .executable(name: "storebus-console", targets: ["storebus-console"]),
        .executable(name: "storectl", targets: ["storectl"]),
        .executable(name: "storebus-testkit-journal", targets: ["storebus-testkit-journal"]),
        .executable(name: "storebus-testkit-restrict-families", targets: ["storebus-testkit-restrict-families"]),
        .executable(name: "storebus-testkit-probe", targets: ["storebus-testkit-probe"]),
        .executable(name: "storebus-testkit-echo", targets: ["storebus-testkit-echo"]),
        .executable(name: "storebus-bench", targets: ["storebus-bench"]),
    ],
    dependencies: [
        // Exact, unlike the others: Sources/StoreSchema/Generated is committed as this version's
        // protoc-gen-swift writes it, and Package.resolved is not committed, so a fresh clone that
        // resolved a newer release would fail `make check-protos`. To upgrade, change the version,
        // run `make protos` and commit both.
        .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        // 3.12.3 up to 4.x: jwt-kit needs 4.1 or later.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // NIOThreadPool: the download service's file reads (blocking I/O) run on its threads.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        // The notification service's webhooks (outbound HTTP).
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // The App Store Server API's bearer tokens (ES256 JSON Web Tokens), checked by the
        // notification service.
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        // Base64 for the megabytes of download chunks in proto3 JSON (jwt-kit uses it too).
        .package(url: "https://github.com/swift-extras/swift-extras-base64", from: "1.2.0"),
        // The scale-out storage engine: services' databases on PostgreSQL.
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // The console's pages: HTML templates, and the names of the headers it reads and sets.
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        // libzmq from Debian's libzmq3-dev, found through pkg-config. SwiftPM warns that it drops the
        // `-isystem /usr/include/mit-krb5` that libzmq.pc pulls in from its private requirements;
        // that flag is not needed to compile against <zmq.h>.
        .systemLibrary(
            name: "CZeroMQ",
            pkgConfig: "libzmq",
            providers: [.apt(["libzmq3-dev"])]
        ),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ"]),
        // SQLite settings made through its variadic sqlite3_config, and the VFS shim that gathers
        // WAL writes (against Debian's libsqlite3-dev, which GRDB links to as well).
        .target(
            name: "CSQLiteSettings",
            linkerSettings: [.linkedLibrary("sqlite3")]
        ),
        // glibc's malloc thresholds (mallopt is in <malloc.h>, outside Glibc's module).
        .target(name: "CMallocTuning"),
        .target(
            name: "StoreSchema",
            dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
        // What a client of StoreBus needs: the wire format, status codes, the contract's id and
        // principal rules, the reactor and the RPC client. The SDK depends on this alone.
        .target(
            name: "StoreBus",
            dependencies: [
                "ZeroMQ", "StoreSchema",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
            ]
        ),
        // What a server needs besides: the RPC server and router, Health and Diagnostics, doorbells
        // and event followers, fail points.
        .target(
            name: "StoreBusServer",
            dependencies: [
                "StoreBus", "ZeroMQ", "StoreSchema",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Process hosting: ServiceHost (a service's process and its graceful shutdown) and host
        // configuration, resolved from settings, the environment and a config file.
        .target(
            name: "StoreBusHost",
            dependencies: [
                "StoreBus", "StoreBusServer", "ZeroMQ", "StoreSchema", "CMallocTuning",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        // The command-line half of the host: the options every executable shares (HostOptions) and
        // those naming the services it calls, written once from the service registry. Only
        // executables link it (and ArgumentParser).
        .target(
            name: "StoreBusCommandLine",
            dependencies: [
                "StoreBus", "StoreBusHost", "StoreBusStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(
            name: "StoreBusStorage",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                "StoreBus", "StoreBusServer", "StoreSchema", "CSQLiteSettings",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // The storage seam's PostgreSQL engine (postgres-nio): a service's database on a primary
        // found among several hosts, for several instances of each service.
        .target(
            name: "StoreBusPostgres",
            dependencies: [
                "StoreBus", "StoreBusHost", "StoreBusStorage", "StoreSchema",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Test support: real processes (one StoreCluster starts a whole system), temporary
        // directories, hostile inputs, a recorder of an SDK queue's callbacks.
        .target(
            name: "StoreBusTesting",
            dependencies: [
                "ContentPackage", "StoreBus", "StoreBusPostgres", "StoreBusServer", "StoreBusSDK", "StoreSchema", "ZeroMQ",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // The catalog's format: the file model, its validator, the answers it gives, the .storekit
        // importer. storectl uses it without the service.
        .target(
            name: "CatalogFormat",
            dependencies: ["ContentPackage", "StoreBus", "StoreSchema"]
        ),
        .target(
            name: "Catalog",
            dependencies: [
                "CatalogFormat", "ContentPackage", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreSchema",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "PaymentQueue",
            dependencies: [
                "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusStorage", "StoreBusPostgres", "StoreSchema",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Gateway",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                "StoreBus", "StoreBusServer", "StoreBusHost", "StoreSchema",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Hosted content as one package (a deterministic ustar archive): its length from the files'
        // lengths (the catalog announces it), writing it with its SHA-256 (the download service).
        .target(
            name: "ContentPackage",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")]
        ),
        // The download service: the content store (packages made and checked at start), receipt
        // checks, download states through the payment queue, chunked transfer.
        .target(
            name: "Download",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                "ContentPackage", "ReceiptFormat", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusStorage", "StoreBusPostgres", "StoreSchema", "ZeroMQ",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // App receipts (Apple's ASN.1 payload in CMS) and JWS signed data: reading, signing,
        // verifying. Shared by the receipt service and the SDK's offline verifier.
        .target(
            name: "ReceiptFormat",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        // Signed app receipts (CMS), signed transactions (JWS), verifyReceipt and entitlements, kept
        // from the payment queue's event log.
        .target(
            name: "Receipt",
            dependencies: [
                .product(name: "Metrics", package: "swift-metrics"),
                "ReceiptFormat", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusStorage", "StoreBusPostgres", "StoreSchema",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // App Store Server Notifications V2 for apps' backends, from the payment queue's log.
        .target(
            name: "Notifications",
            dependencies: [
                "ReceiptFormat", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusStorage", "StoreBusPostgres", "StoreSchema",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The Swift client SDK: StoreKit's original API over the gateway.
        .target(
            name: "StoreBusSDK",
            dependencies: [
                "StoreBus", "StoreSchema", "ReceiptFormat", "ContentPackage",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A store in memory for an app's unit tests: the SDK's PaymentQueue over it needs no services.
        .target(
            name: "StoreBusSDKTesting",
            dependencies: ["ContentPackage", "StoreBus", "StoreBusSDK", "StoreSchema", "ZeroMQ", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .executableTarget(
            name: "storebus-gateway",
            dependencies: [
                "Gateway", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusCommandLine", "StoreSchema",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "storebus-receipt",
            dependencies: [
                "Receipt", "ReceiptFormat", "StoreBus", "StoreBusHost", "StoreBusCommandLine", "StoreBusStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The operators' web page: HTML pages and their forms over Hummingbird, every action an
        // admin call through the gateway.
        .target(
            name: "Console",
            dependencies: [
                "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusSDK", "StoreSchema",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        .executableTarget(
            name: "storebus-console",
            dependencies: [
                "Console", "StoreBus", "StoreBusHost", "StoreBusCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "storebus-notifications",
            dependencies: [
                "Notifications", "StoreBus", "StoreBusHost", "StoreBusCommandLine", "StoreBusStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "storebus-download",
            dependencies: [
                "Download", "StoreBus", "StoreBusHost", "StoreBusCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "storebus-catalog",
            dependencies: [
                "Catalog", "CatalogFormat", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusCommandLine", "StoreSchema",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "storebus-payment-queue",
            dependencies: [
                "PaymentQueue", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusCommandLine", "StoreBusStorage", "StoreSchema",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "storectl",
            dependencies: [
                "CatalogFormat", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusSDK", "StoreSchema",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // protoc plugin writing typed method descriptors for every proto service (`make protos`).
        .executableTarget(
            name: "protoc-gen-storebus",
            dependencies: [
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "SwiftProtobufPluginLibrary", package: "swift-protobuf"),
            ]
        ),
        .executableTarget(
            name: "storebus-testkit-journal",
            dependencies: [
                "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusCommandLine", "StoreBusStorage", "StoreSchema",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // C: installs a seccomp filter, then runs the command it is given (see its main.c).
        .executableTarget(name: "storebus-testkit-restrict-families"),
        .executableTarget(name: "storebus-testkit-probe", dependencies: ["StoreBus", "StoreSchema", "ZeroMQ"]),
        // A client service in the test tree, made as a new service is made (echo.proto's comment).
        .executableTarget(
            name: "storebus-testkit-echo",
            dependencies: ["StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusCommandLine", "StoreSchema", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "storebus-bench",
            dependencies: [
                "Catalog", "CatalogFormat", "Notifications", "PaymentQueue", "Receipt", "ReceiptFormat", "StoreBus", "StoreBusSDK", "StoreBusServer", "StoreBusHost",
                "StoreBusStorage",
                "StoreBusPostgres", "StoreBusTesting", "StoreSchema", "ZeroMQ",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ", "StoreBusTesting"]),
        .testTarget(
            name: "PaymentQueueTests",
            dependencies: ["PaymentQueue", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusStorage", "StoreBusTesting", "StoreSchema"]
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                "Catalog", "CatalogFormat", "Gateway", "PaymentQueue", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusCommandLine", "StoreBusSDK", "StoreBusTesting", "StoreSchema",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "StoreBusSDKTests",
            dependencies: [
                "ContentPackage", "StoreBus", "StoreBusServer", "StoreBusSDK", "StoreBusSDKTesting", "StoreBusTesting", "StoreSchema", "ZeroMQ",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ReceiptTests",
            dependencies: [
                "Receipt", "ReceiptFormat", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusSDK", "StoreBusStorage", "StoreBusTesting", "StoreSchema",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(
            name: "NotificationsTests",
            dependencies: [
                "Notifications", "ReceiptFormat", "StoreBus", "StoreBusSDK", "StoreBusStorage", "StoreBusTesting", "StoreSchema",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        .testTarget(
            name: "DownloadTests",
            dependencies: [
                "ContentPackage", "Download", "StoreBus", "StoreBusSDK", "StoreBusTesting", "StoreSchema",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(name: "ContentPackageTests", dependencies: ["ContentPackage", "Download", "StoreBus", "StoreBusTesting"]),
        .testTarget(name: "StorectlTests", dependencies: ["StoreBus", "StoreBusPostgres", "StoreBusSDK", "StoreBusStorage", "StoreBusTesting", "StoreSchema"]),
        .testTarget(name: "DeploymentTests", dependencies: ["StoreBus", "StoreBusTesting", "ZeroMQ"]),
        .testTarget(
            name: "ConsoleTests",
            dependencies: [
                "Console", "StoreBus", "StoreBusSDK", "StoreBusTesting", "StoreSchema",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "CatalogTests",
            dependencies: ["Catalog", "CatalogFormat", "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusTesting", "StoreSchema"]
        ),
        .testTarget(
            name: "StoreBusTests",
            dependencies: [
                "StoreBus", "StoreBusServer", "StoreBusHost", "StoreBusCommandLine", "StoreBusStorage", "StoreBusPostgres", "StoreBusTesting", "StoreSchema", "ZeroMQ", "CSQLiteSettings",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
