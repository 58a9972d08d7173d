import Ferry
import FerryTestServer
import Foundation
import Testing

/// Ferry's own HTTP/2 connections (`HTTP2Pool`) against nginx: more connections when the
/// server allows fewer streams than the transfers waiting, an origin that chooses HTTP/1.1
/// in ALPN, the connection fields of the metrics, and the failures a user meets first.
@Suite("Ferry's HTTP/2 connections against nginx", .serialized, .enabled(if: Nginx.enabled))
struct HTTP2ConnectionTests {
    /// nginx allows 8 streams a connection; 24 downloads at once, the per-host limit 32:
    /// once every one of them is receiving, they are spread over exactly three connections
    /// (AsyncHTTPClient would queue 16 of them behind one). Then 24 at full speed arrive
    /// byte-identical.
    @Test func streamsTheServerLimitsOpenMoreConnections() async throws {
        let root = try await makeHTTP2Root("h2-streams", mebibytes: 4)
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(
            root: root,
            server: "http2_max_concurrent_streams 8; location /slow/ { alias \(root.path)/; limit_rate 128k; }"
        )
        defer { origin.stop() }
        let session = try origin.session { $0.httpMaximumConnectionsPerHost = 32 }
        defer { session.invalidateAndCancel() }
        let count = 24
        let tasks = try (0..<count).map { index in
            session.downloadTask(
                with: try origin.url("/slow/file.bin"),
                to: .file(root.appendingPathComponent("out/slow-\(index)"))
            )
        }
        let streams = tasks.map(\.events)
        for task in tasks { task.resume() }
        // Every one receiving: 24 streams open at once.
        for events in streams {
            for await event in events { if case .wroteData = event { break } }
        }
        for task in tasks { task.cancel() }
        // nginx logs a stream when it ends (here, reset by the cancel).
        var lines: [String] = []
        for _ in 0..<1_000 {
            lines = try origin.logged()
            if lines.count >= count { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(lines.count == count, "\(lines)")
        #expect(lines.allSatisfy { $0.hasPrefix("HTTP/2.0 GET /slow/file.bin") })
        let connections = Set(lines.compactMap { $0.split(separator: " ").last })
        #expect(connections.count == 3, "\(lines)")

        let expected = try await sha256(of: root.appendingPathComponent("file.bin"))
        let targets = try await downloadAtOnce(
            count,
            of: try origin.url("/file.bin"),
            to: root.appendingPathComponent("out/fast"),
            in: session
        )
        for target in targets { #expect(try await sha256(of: target) == expected) }
    }

    /// A stream that ends is the pool's again before its reader hears of the end: with as
    /// many downloads at a time as the server allows streams (8), each finished download's
    /// slot starts the next one on the same connection, and 400 of them never open a second
    /// connection. (The pool once counted the stream free only after waking the reader, and
    /// a next download that got there first opened a connection nobody needed.)
    @Test func aFinishedStreamIsFreeBeforeTheNextDownloadAsks() async throws {
        let root = try await makeHTTP2Root("h2-refill", mebibytes: 0)
        defer { try? FileManager.default.removeItem(at: root) }
        let small = Data((0..<16_384).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try small.write(to: root.appendingPathComponent("small.bin"))
        let origin = try await HTTP2Origin(root: root, server: "http2_max_concurrent_streams 8;")
        defer { origin.stop() }
        let session = try origin.session { $0.httpMaximumConnectionsPerHost = 8 }
        defer { session.invalidateAndCancel() }
        let count = 400
        let targets = try await downloadAtOnce(
            count,
            of: try origin.url("/small.bin"),
            to: root.appendingPathComponent("out/small"),
            in: session
        )
        for target in targets { #expect(try Data(contentsOf: target) == small) }
        let lines = try origin.logged()
        #expect(lines.count == count)
        let connections = Set(lines.compactMap { $0.split(separator: " ").last })
        #expect(connections.count == 1, "\(connections.count) connections")
    }

    /// An origin whose TLS offers only `http/1.1` in ALPN: Ferry's HTTP/2 connection finds
    /// out once, closes, and every request goes over HTTP/1.1, whole.
    @Test func anOriginThatChoosesHTTP11IsAskedOnce() async throws {
        let root = try await makeHTTP2Root("h2-alpn", mebibytes: 1)
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(root: root, listen: "ssl")
        defer { origin.stop() }
        let session = try origin.session()
        defer { session.invalidateAndCancel() }
        let expected = try Data(contentsOf: root.appendingPathComponent("file.bin"))
        for _ in 0..<3 {
            let (data, response) = try await session.data(from: try origin.url("/file.bin"))
            #expect(response.statusCode == 200 && response.httpVersion == "HTTP/1.1")
            #expect(data == expected)
        }
        let lines = try origin.logged()
        #expect(lines.count == 3 && lines.allSatisfy { $0.hasPrefix("HTTP/1.1 GET /file.bin 200") }, "\(lines)")
    }

    /// The metrics of requests over Ferry's HTTP/2 connection name it: `h2`, when it was
    /// opened and its handshake done, its addresses, and reuse from the second request on.
    @Test func theMetricsNameTheConnection() async throws {
        let root = try await makeHTTP2Root("h2-metrics", mebibytes: 1)
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(root: root)
        defer { origin.stop() }
        let session = try origin.session()
        defer { session.invalidateAndCancel() }
        var transactions: [TransactionMetrics] = []
        for _ in 0..<2 {
            let task = session.dataTask(with: try origin.url("/file.bin"))
            let events = task.events
            task.resume()
            for await event in events {
                if case .finishedCollectingMetrics(let metrics) = event { transactions += metrics.transactions }
                if case .completed(let error) = event {
                    #expect(error == nil)
                    break
                }
            }
        }
        #expect(transactions.count == 2)
        #expect(transactions.map(\.networkProtocolName) == ["h2", "h2"])
        #expect(transactions.map(\.isReusedConnection) == [false, true])
        let first = try #require(transactions.first)
        let connectStart = try #require(first.connectStartDate)
        let secureEnd = try #require(first.secureConnectionEndDate)
        #expect(connectStart <= secureEnd && secureEnd <= (first.requestStartDate ?? .distantFuture))
        #expect(first.remoteAddress == "127.0.0.1")
    }

    /// The failures a user meets first, each a typed error in bounded time: a refused port,
    /// a certificate the session does not trust.
    @Test func refusedAndUntrustedConnectionsFailClearly() async throws {
        let root = try await makeHTTP2Root("h2-fail", mebibytes: 1)
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(root: root)
        defer { origin.stop() }
        let trusting = try origin.session { $0.timeoutIntervalForRequest = 10 }
        defer { trusting.invalidateAndCancel() }
        let closed = try #require(URL(string: "https://127.0.0.1:\(try closedPort())/file.bin"))
        await #expect {
            _ = try await trusting.data(from: closed)
        } throws: { ($0 as? FerryError)?.reason == .network }

        let untrusting = try Session(configuration: .ephemeral)
        defer { untrusting.invalidateAndCancel() }
        await #expect {
            _ = try await untrusting.data(from: try origin.url("/file.bin"))
        } throws: { ($0 as? FerryError)?.reason == .secureConnectionFailed }
        #expect(try origin.logged().isEmpty, "nothing reached nginx")
    }

    /// A server that accepts the connection and never answers the TLS handshake: the
    /// request that opens the connection and the two that wait for that opening all come
    /// back with `.timedOut` when the opening times out (the waiters fail with it, rather
    /// than each opening again in turn: they took three timeouts in all before).
    @Test func anOpeningThatNeverCompletesReleasesItsWaiters() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        var configuration = SessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 1
        let session = try Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let url = try #require(URL(string: "https://127.0.0.1:\(listener.port)/file.bin"))
        let reasons = await finishing(within: 60) {
            await withTaskGroup(of: FerryError.Reason?.self) { group in
                for _ in 0..<3 {
                    group.addTask {
                        do {
                            _ = try await session.data(from: url)
                            return nil
                        } catch {
                            return (error as? FerryError)?.reason
                        }
                    }
                }
                var reasons: [FerryError.Reason?] = []
                for await reason in group { reasons.append(reason) }
                return reasons
            }
        }
        #expect(reasons == [.timedOut(.idle), .timedOut(.idle), .timedOut(.idle)], "\(String(describing: reasons))")
    }

    /// A stream whose response head never comes (nginx waits on an upstream that accepts
    /// and never answers): the request comes back at the session's idle timeout, and the
    /// connection goes on serving the next request.
    @Test func aStreamWithoutAnAnswerEndsAtTheIdleTimeout() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let root = try await makeHTTP2Root("h2-silent", mebibytes: 1)
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(
            root: root,
            server: "location /silent/ { proxy_pass http://127.0.0.1:\(listener.port); proxy_read_timeout 300s; }"
        )
        defer { origin.stop() }
        let session = try origin.session { $0.timeoutIntervalForRequest = 1 }
        defer { session.invalidateAndCancel() }
        let silent = try origin.url("/silent/x")
        let reason = await finishing(within: 60) {
            do {
                _ = try await session.data(from: silent)
                return FerryError.Reason?.none
            } catch {
                return (error as? FerryError)?.reason
            }
        }
        #expect(reason == .timedOut(.idle), "\(String(describing: reason))")
        let (data, response) = try await session.data(from: try origin.url("/file.bin"))
        #expect(response.statusCode == 200 && response.httpVersion == "HTTP/2.0")
        #expect(data == (try Data(contentsOf: root.appendingPathComponent("file.bin"))))
    }
}

extension HTTP2ConnectionTests {
    /// Downloads `url` `count` times at once (as many at a time as the session lets), each to
    /// `prefix-INDEX`; every response is expected to be a 200 over HTTP/2.
    ///
    /// - Returns: the files, in index order.
    func downloadAtOnce(_ count: Int, of url: URL, to prefix: URL, in session: Session) async throws -> [URL] {
        let targets = (0..<count).map { URL(fileURLWithPath: "\(prefix.path)-\($0)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for target in targets {
                group.addTask {
                    let (_, response) = try await session.download(from: url, to: .file(target))
                    #expect(response.statusCode == 200 && response.httpVersion == "HTTP/2.0", "\(response)")
                }
            }
            try await group.waitForAll()
        }
        return targets
    }
}
