public import CoreMetrics
public import Foundation
public import Logging
public import Tracing

/// How a ``Session`` behaves: headers, timeouts, per-host limits, redirects, memory bounds and
/// where partial downloads live.
///
/// Start from ``default``, ``ephemeral`` or ``background(identifier:)`` and change what you
/// need; a session copies its configuration when it is created.
///
/// ```swift
/// var configuration = SessionConfiguration.default
/// configuration.httpAdditionalHeaders = ["User-Agent": "my-tool/1.0"]
/// configuration.httpMaximumConnectionsPerHost = 4
/// let session = try Session(configuration: configuration)
/// ```
public struct SessionConfiguration: Sendable {
    /// The kind of session.
    public enum Kind: Sendable, Equatable {
        /// Ordinary session; partial downloads in a directory under the system's temporary one.
        case `default`
        /// Keeps nothing on disk and shares nothing: cookies in a store of its own, in memory.
        case ephemeral
        /// Transfers handed to the per-user daemon (`ferry daemon`, started when none
        /// answers) so they outlive the process; a relaunched process with the same
        /// identifier gets their events (see ``SessionConfiguration/background(identifier:)``).
        case background(identifier: String)
    }

    /// The kind of session.
    public var kind: Kind

    /// Header fields added to every request unless the request sets the same name.
    public var httpAdditionalHeaders: [String: String] = [:]

    /// Seconds a task may go without moving a byte (connecting, sending, or receiving) before
    /// it fails with ``FerryError/Reason/timedOut(_:)`` `.idle`. A suspended task does not
    /// count down. A request's own `timeoutInterval` (other than Foundation's default of 60)
    /// replaces it for that request, its connection included. Default 60.
    public var timeoutIntervalForRequest: TimeInterval = 60

    /// Seconds a task may run in all, from its first `resume()` to its completion, before it
    /// fails with `.timedOut(.resource)`. Default 7 days.
    public var timeoutIntervalForResource: TimeInterval = 7 * 24 * 3600

    /// Most connections open at once to one origin (scheme, host, port). Tasks beyond it wait
    /// in the order they were resumed. Default 6.
    public var httpMaximumConnectionsPerHost: Int = 6

    /// Most HTTP/2 connections open at once to one origin, for the benchmarks' one-connection
    /// row (`Benchmarks/bench.py`, scenario 8c). `nil`, the default, allows
    /// ``httpMaximumConnectionsPerHost``: another connection opens only when the streams the
    /// server allows on the open ones are all in use.
    @_spi(Benchmarks) public var http2MaximumConnectionsPerHost: Int?

    /// What tasks do with redirects unless a task says otherwise. Default ``RedirectPolicy/follow``.
    public var redirectPolicy: RedirectPolicy = .follow

    /// Most redirects one task follows before it fails. Default 20.
    public var maximumRedirects: Int = 20

    /// Whether a redirect from `https` to plain `http` is followed. Off by default: it would
    /// send the rest of the exchange unencrypted, so it fails with
    /// ``FerryError/Reason/redirectFailed``.
    public var allowsInsecureRedirects = false

    /// Largest body a data or upload task keeps in memory; a larger one fails the task with
    /// ``FerryError/Reason/bodyTooLarge(limit:)``. Use a download task for large bodies.
    /// Default 64 MiB.
    public var maximumInMemoryBodySize: Int64 = 64 * 1024 * 1024

    /// Where partial downloads are written while they run. The session creates it (mode 0700).
    /// Default: `ferry-downloads-UID` in the system's temporary directory, one per user, which
    /// must be this user's, not a link, and closed to group and others; another directory,
    /// where everyone may create files (in `/tmp`), must be this user's and not writable by
    /// others. Otherwise the download fails with ``FerryError/Reason/fileSystem``. (Not
    /// `$XDG_RUNTIME_DIR`: a small memory file system, emptied at logout.)
    public var downloadsDirectory: URL {
        didSet { downloadsDirectoryPath = downloadsDirectory.path }
    }

    /// ``downloadsDirectory``'s path, worked out when it is set: each download makes its
    /// partial file there, and `URL.path` decodes the URL again each time it is asked.
    private(set) var downloadsDirectoryPath: String

    /// How failed downloads are retried (by resuming them). Default ``RetryPolicy/default``:
    /// five retries with capped exponential backoff. Tasks may override it.
    public var retryPolicy: RetryPolicy = .default

    /// Whether upload tasks continue from the server's offset after a dropped connection, when
    /// the server speaks the resumable-upload protocol. Default ``ResumableUploadPolicy/automatic``.
    public var resumableUploads: ResumableUploadPolicy = .automatic

    /// Whether a download may continue a partial file that no strong validator ties to the
    /// server's current version. Off by default: without a validator, bytes on disk could
    /// belong to another version, so the download starts over.
    public var allowsUnvalidatedResume = false

    /// Where the session keeps downloads' resume data by key, so they can be continued after
    /// a failure, a cancel or a crash. Default `nil`: resume data only travels in errors and
    /// ``DownloadTask/cancelProducingResumeData()``.
    public var resumeStore: ResumeStore?

    /// A user name and password for HTTP authentication (Basic, RFC 7617, or Digest, RFC
    /// 7616, whichever the server offers; Digest SHA-256 first): when a response is `401`
    /// and the request carried no `Authorization` of its own, it is sent again with these
    /// credentials (its body produced again). Only ever sent to the origin of the task's
    /// original request, never to another origin a redirect leads to.
    public var credential: Credential?

    /// Whom to trust over `https` (system roots by default, validation always on), pins,
    /// and a client certificate.
    public var tls = TLSOptions()

    /// The proxy connections go through, or `nil` for direct connections. The environment's
    /// `http_proxy` and friends are not read by the library (``Proxy/fromEnvironment(_:for:)``
    /// does it when asked; the `ferry` command does).
    public var proxy: Proxy?

    /// Whether data and upload tasks ask for compressed responses (`Accept-Encoding: gzip,
    /// deflate, br, zstd`, unless the request says otherwise; `br` and `zstd` only where the
    /// system has libbrotlidec and libzstd, loaded on first use) and decode them, as
    /// URLSession does. The decoded body may not outgrow ``maximumInMemoryBodySize``: a "zip
    /// bomb" fails while it inflates. Off by default.
    ///
    /// Downloads fetch the bytes as stored (ranges refer to them; they ask for a coding only
    /// when the request says so). With this on, a download that received a `gzip`,
    /// `deflate`, `br` or `zstd` body (the last two where the system has libbrotlidec and
    /// libzstd; a zstd window up to 8 MiB, RFC 9659) decodes it once complete, before its ``SessionTask/checksum`` is
    /// checked and before it is moved: the file delivered is the decoded one. Its decoded
    /// size is capped by ``maximumDecompressionRatio`` and ``maximumFileSize``.
    public var automaticDecompression = false

    /// Most times a download's decoded body may outgrow its coded one (default 200: text
    /// compresses ten- to fifty-fold; a gzip of zeros a thousand-fold). A body that inflates
    /// more fails the task with ``FerryError/Reason/bodyTooLarge(limit:)`` while it inflates,
    /// and nothing reaches the destination. `nil`: only ``maximumFileSize`` caps it.
    public var maximumDecompressionRatio: Int? = 200

    /// Most bytes a download may write to its file, received or decoded (curl's
    /// `--max-filesize`). A response that announces more fails at once, one that sends more
    /// fails as it passes the limit, with ``FerryError/Reason/bodyTooLarge(limit:)``; nothing
    /// reaches the destination. Default `nil`: no limit.
    public var maximumFileSize: Int64?

    /// Most connections one download may use at once (aria2c's `--split`): 1 (the default)
    /// fetches the file over one connection. With more, a download whose first response
    /// has a strong validator, a length and `Accept-Ranges: bytes` is split into segments of
    /// at least ``minimumSegmentSize``, fetched with `Range` + `If-Range`, written at their
    /// offsets into the one partial file, and rebalanced as segments finish. Every `206` is
    /// checked against the first response's validator and length: a file that changes
    /// restarts from byte 0 with its new version, never a mix. Segments count against
    /// ``httpMaximumConnectionsPerHost``. A task's ``DownloadTask/maximumConnections``
    /// overrides it.
    public var maximumConnectionsPerDownload = 1

    /// Most bytes per second all of the session's transfers move together, each way
    /// (aria2c's `--max-overall-download-limit`; a task's own limit is
    /// ``SessionTask/maximumBytesPerSecond``). Downloads stop reading and uploads stop
    /// sending while over it, so the peers are slowed by TCP and no memory is spent. `nil`
    /// (the default): no limit.
    public var maximumBytesPerSecond: Int64?

    /// The smallest segment a split download makes (aria2c's `--min-split-size`): 20 MiB by
    /// default, so a file under 40 MiB takes one connection.
    public var minimumSegmentSize: Int64 = 20 << 20

    /// Most header fields a response may have, and most bytes of them together: a server
    /// that sends more fails the task with ``FerryError/Reason/badServerResponse`` before any
    /// of it is used. (The HTTP parser also refuses a head over 80 KiB.)
    public var maximumResponseHeaderCount = 200
    /// Most bytes of a response's header fields together (see ``maximumResponseHeaderCount``).
    public var maximumResponseHeaderBytes = 64 * 1024

    /// Where data tasks' `GET` responses are kept and looked up (URLSession's `urlCache`),
    /// or `nil` for none, the default: a cache shared by everything a process fetches is a
    /// choice to make, not a surprise to find in a server. See ``ResponseCache``.
    public var responseCache: ResponseCache?

    /// Where cookies are kept and read from; `nil` sends and keeps none (URLSession's
    /// `httpCookieStorage`). `.default` uses ``CookieStore/shared``; `.ephemeral` a store of
    /// its own, in memory.
    public var cookieStore: CookieStore?

    /// Adapts every request before it is sent and decides retries after failures (see
    /// ``RequestInterceptor``; ``AuthenticationInterceptor`` for tokens that need refreshing).
    public var interceptor: (any RequestInterceptor)?

    /// Credentials by protection space, for challenges that neither the delegate nor
    /// ``credential`` answered (URLSession's `urlCredentialStorage`). `nil`: none.
    public var credentialStore: CredentialStore?

    /// Where the session says what it does (swift-log): each request and response head
    /// (credentials redacted), redirect, retry and resume decision at `debug`, checkpoints
    /// at `trace`, every message with the task's identifier as `ferry-task`. The default
    /// logs nothing.
    ///
    /// ```swift
    /// var logger = Logger(label: "my-app.ferry")
    /// logger.logLevel = .debug
    /// configuration.logger = logger
    /// ```
    public var logger = Logger(label: "ferry", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Where the session's metrics go (swift-metrics): `nil`, the default, means the factory
    /// the application bootstrapped with `MetricsSystem.bootstrap`, read when the session is
    /// made. Nothing is recorded while that is the no-op factory.
    ///
    /// Counters `ferry_requests_total` (dimensions `method`, `scheme`, `status_class`,
    /// `task_kind`), `ferry_request_body_bytes_total`, `ferry_response_body_bytes_total`,
    /// `ferry_redirects_total`, `ferry_retries_total`, `ferry_resumes_total`,
    /// `ferry_resumed_bytes_total` (bytes a resume kept), `ferry_tasks_total` (`task_kind`,
    /// `outcome`), `ferry_task_failures_total` (`task_kind`, `reason`); timers
    /// `ferry_request_time_to_first_byte_seconds` and `ferry_task_duration_seconds`. No
    /// dimension holds a URL, a host or a credential. See <doc:Observability>.
    public var metricsFactory: (any MetricsFactory)?

    /// The tracer of the session's spans (swift-distributed-tracing): `nil`, the default,
    /// means the one the application bootstrapped with `InstrumentationSystem.bootstrap`,
    /// read when the session is made. No span is made while that is the no-op tracer.
    ///
    /// Each task has a span whose parent is the `ServiceContext` of the code that called
    /// ``SessionTask/resume()`` (or `await`ed the task); each request it sends (a redirect's
    /// hop, a retry, a segment, a resume) a child span of kind `client` with OpenTelemetry's
    /// HTTP attributes, the URL's credentials and query redacted; the tracer's fields
    /// (`traceparent` with OpenTelemetry) go to the server in the request. See
    /// <doc:Observability>.
    public var tracer: (any Tracer)?

    /// Seconds an idle pooled connection is kept open. Default 60.
    public var connectionIdleTimeout: TimeInterval = 60

    init(kind: Kind) {
        self.kind = kind
        self.cookieStore = kind == .ephemeral ? CookieStore() : .shared
        let downloads = FileSystem.defaultPartials()
        self.downloadsDirectory = downloads.url
        self.downloadsDirectoryPath = downloads.path
    }

    /// The default configuration.
    public static var `default`: SessionConfiguration { SessionConfiguration(kind: .default) }

    /// A configuration that keeps nothing on disk and shares nothing with other sessions:
    /// its cookies live in a store of its own, in memory.
    public static var ephemeral: SessionConfiguration { SessionConfiguration(kind: .ephemeral) }

    /// A background configuration (URLSession's `background(withIdentifier:)`): its download
    /// tasks run in the user's `ferry daemon`, go on when this process exits or dies, and
    /// are picked up again by the next session made with the same `identifier` (see
    /// ``Session`` → Background sessions). Data tasks and uploads are refused.
    ///
    /// - Parameter identifier: 1 to 128 letters, digits, `.`, `_` or `-`.
    public static func background(identifier: String) -> SessionConfiguration {
        SessionConfiguration(kind: .background(identifier: identifier))
    }

    /// The daemon a background session uses: where it keeps its state and listens, whether
    /// the session may start it, and which `ferry` to start. Unset fields follow `ferry`'s
    /// rules (`FERRY_STATE_DIR`, `FERRY_SOCKET`, the XDG directories; `FERRY_EXECUTABLE`,
    /// a `ferry` beside the program, then `PATH`).
    public struct BackgroundDaemonOptions: Sendable, Equatable {
        /// The daemon's state directory; `nil` follows `ferry`'s rules.
        public var stateDirectory: URL?
        /// The daemon's socket; `nil` follows `ferry`'s rules.
        public var socket: URL?
        /// Start `ferry daemon` when none answers (a lock keeps it to one).
        public var startsDaemon = true
        /// The `ferry` to start; `nil` looks for it (`FERRY_EXECUTABLE`, beside the program, `PATH`).
        public var executable: String?

        /// Every field unset: `ferry`'s rules throughout.
        public init() {}
    }

    /// Report each transaction's connection in its metrics: when it was opened and its TLS
    /// handshake done, its addresses, and whether it was reused
    /// (``TransactionMetrics/isReusedConnection``). AsyncHTTPClient reports none of this,
    /// so the session's requests then go over connections Ferry makes itself (the same
    /// relay as public-key pins: one more hop inside the process, a few percent of CPU).
    /// Off: those fields are `nil`, except for requests over the HTTP/2 connections Ferry
    /// keeps itself (see ``TLSOptions/offersHTTP2``), which know them anyway.
    public var collectsConnectionMetrics = false

    /// For background configurations: how to reach the daemon.
    public var backgroundDaemon = BackgroundDaemonOptions()

    /// For background configurations: tasks run only when no other task waits (URLSession's
    /// `isDiscretionary`).
    public var isDiscretionary = false

    func validated() throws -> SessionConfiguration {
        if case .background(let identifier) = kind, !BackgroundAPI.isValidSession(identifier) {
            throw FerryError(
                .unsupportedConfiguration,
                "'\(identifier)' is not a background session identifier: 1 to 128 letters, digits, '.', '_' or '-'."
            )
        }
        guard (maximumBytesPerSecond ?? 1) >= 1 else {
            throw FerryError(.unsupportedConfiguration, "maximumBytesPerSecond must be at least 1.")
        }
        guard maximumConnectionsPerDownload >= 1, minimumSegmentSize >= 1 else {
            throw FerryError(
                .unsupportedConfiguration,
                "maximumConnectionsPerDownload and minimumSegmentSize must be at least 1."
            )
        }
        guard httpMaximumConnectionsPerHost >= 1 else {
            throw FerryError(.unsupportedConfiguration, "httpMaximumConnectionsPerHost must be at least 1.")
        }
        guard timeoutIntervalForRequest > 0, timeoutIntervalForResource > 0 else {
            throw FerryError(.unsupportedConfiguration, "Timeouts must be greater than zero.")
        }
        guard maximumRedirects >= 0, maximumInMemoryBodySize >= 0, (maximumFileSize ?? 0) >= 0,
            (maximumDecompressionRatio ?? 1) >= 1
        else {
            throw FerryError(.unsupportedConfiguration, "Limits must not be negative.")
        }
        if let proxy, proxy.kind == .https {
            throw FerryError(
                .unsupportedConfiguration,
                "The proxy https://\(proxy.host):\(proxy.port) is reached over TLS, which Ferry does not speak to proxies yet; it refuses rather than send the proxy's CONNECT and credentials in clear. Use http:// if the proxy takes plain connections."
            )
        }
        return self
    }
}
