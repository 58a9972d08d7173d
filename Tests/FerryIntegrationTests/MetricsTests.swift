import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Records metrics and completions in the order the delegate sees them.
final class MetricsDelegate: SessionDelegate {
    let seen = MutexBox<[String]>([])
    let metrics = MutexBox<[TaskMetrics]>([])
    /// Completions the delegate has seen: what the tests wait for.
    let completions = CallTally()

    func session(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) {
        seen.mutate { $0.append("metrics") }
        self.metrics.mutate { $0.append(metrics) }
    }

    func session(_ session: Session, task: SessionTask, didCompleteWithError error: FerryError?) {
        seen.mutate { $0.append("completed") }
        completions.record()
    }
}

@Suite("Metrics")
struct MetricsTests {
    func expectOrdered(_ transaction: TransactionMetrics, in metrics: TaskMetrics) throws {
        let start = try #require(transaction.requestStartDate)
        let sent = try #require(transaction.requestEndDate)
        let first = try #require(transaction.responseStartDate)
        let end = try #require(transaction.responseEndDate)
        #expect(metrics.taskInterval.start <= transaction.fetchStartDate)
        #expect(transaction.fetchStartDate <= start && start <= sent && sent <= first && first <= end)
        #expect(end <= metrics.taskInterval.end)
        #expect(transaction.networkProtocolName == "http/1.1")
    }

    @Test func aRedirectedRequestHasTwoOrderedTransactions() async throws {
        try await withServer { server in
            let delegate = MetricsDelegate()
            let session = try makeSession(delegate: delegate)
            let (data, _) = try await session.data(from: server.url("/redirect/1?to=/bytes/5000%3Fdelay=50"))
            #expect(data.count == 5000)
            #expect(await delegate.completions.ran(1, within: 60), "the delegate heard of every completion")
            #expect(delegate.seen.value == ["metrics", "completed"])
            let metrics = try #require(delegate.metrics.value.first)
            #expect(metrics.transactions.map(\.reason) == [.initial, .redirect])
            #expect(metrics.transactions.map { $0.response?.statusCode } == [302, 200])
            #expect(metrics.redirectCount == 1)
            #expect(metrics.transactions.last?.countOfResponseBodyBytesReceived == 5000)
            for transaction in metrics.transactions { try expectOrdered(transaction, in: metrics) }
            // The server waited 50 ms before the head: the first byte came at least that late.
            let last = try #require(metrics.transactions.last)
            let wait = try #require(last.responseStartDate).timeIntervalSince(try #require(last.requestStartDate))
            #expect(wait >= 0.045)
            #expect(metrics.transactions[0].fetchStartDate <= metrics.transactions[1].fetchStartDate)
        }
    }

    @Test func connectionsAreReportedWhenTheSessionCollectsThem() async throws {
        try await withServer { server in
            let delegate = MetricsDelegate()
            let session = try makeSession(delegate: delegate) { $0.collectsConnectionMetrics = true }
            // A redirect on the same origin: the second request reuses the first connection.
            let (data, _) = try await session.data(from: server.url("/redirect/1?to=/bytes/5000"))
            #expect(data.count == 5000)
            var upload = URLRequest(url: server.url("/sink"))
            upload.httpMethod = "POST"
            let (sunk, _) = try await session.upload(for: upload, from: TestContent.data(size: 100_000))
            #expect(try JSONDecoder().decode(SinkReport.self, from: sunk).bytes == 100_000)
            #expect(await delegate.completions.ran(2, within: 60), "the delegate heard of every completion")
            let all = delegate.metrics.value.flatMap(\.transactions)
            #expect(all.count == 3)
            let first = try #require(all.first)
            #expect(first.isReusedConnection == false)
            let connectStart = try #require(first.connectStartDate)
            let connectEnd = try #require(first.connectEndDate)
            #expect(first.fetchStartDate <= connectStart && connectStart <= connectEnd)
            #expect(connectEnd <= (try #require(first.requestStartDate)))
            #expect(first.secureConnectionStartDate == nil)
            #expect(first.remoteAddress == "127.0.0.1")
            #expect(all.dropFirst().allSatisfy { $0.isReusedConnection == true && $0.connectStartDate == nil })
            for metrics in delegate.metrics.value {
                for transaction in metrics.transactions { try expectOrdered(transaction, in: metrics) }
            }
            // The trace field that names the connection never reaches the server.
            #expect(server.requests.allSatisfy { $0.headers["ferry-trace"] == nil })
            // Without the option the fields are unknown, not invented.
            let plain = MetricsDelegate()
            let other = try makeSession(delegate: plain)
            _ = try await other.data(from: server.url("/bytes/10"))
            #expect(await plain.completions.ran(1, within: 60), "the delegate heard of every completion")
            let unknown = try #require(plain.metrics.value.first?.transactions.first)
            #expect(unknown.isReusedConnection == nil && unknown.connectStartDate == nil)
        }
    }

    @Test func tlsHandshakesAreTimedToo() async throws {
        try await withTLSServer { server, ca in
            let delegate = MetricsDelegate()
            let session = try makeSession(delegate: delegate) {
                $0.collectsConnectionMetrics = true
                $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
            }
            _ = try await session.data(from: server.url("/bytes/100"))
            #expect(await delegate.completions.ran(1, within: 60), "the delegate heard of every completion")
            let transaction = try #require(delegate.metrics.value.first?.transactions.first)
            let connectStart = try #require(transaction.connectStartDate)
            let tlsStart = try #require(transaction.secureConnectionStartDate)
            let tlsEnd = try #require(transaction.secureConnectionEndDate)
            let connectEnd = try #require(transaction.connectEndDate)
            #expect(connectStart <= tlsStart && tlsStart <= tlsEnd && tlsEnd <= connectEnd)
            #expect(connectEnd <= (try #require(transaction.requestStartDate)))
            // Trust is still checked: a session without the CA is refused.
            let untrusted = try makeSession { $0.collectsConnectionMetrics = true }
            await #expect {
                try await untrusted.data(from: server.url("/bytes/1"))
            } throws: { error in
                (error as? FerryError)?.reason == .secureConnectionFailed
            }
        }
    }

    @Test func challengesAndUploadsAreTransactionsToo() async throws {
        try await withServer { server in
            let session = try makeSession { $0.credential = Credential(user: "ada", password: "secret") }
            let task = session.dataTask(with: server.url("/digest-auth/auth/ada/secret/SHA-256"))
            task.resume()
            for await _ in task.events {}
            let metrics = try #require(task.metrics)
            #expect(metrics.transactions.map(\.reason) == [.initial, .authentication])
            #expect(metrics.transactions.map { $0.response?.statusCode } == [401, 200])
            for transaction in metrics.transactions { try expectOrdered(transaction, in: metrics) }

            let upload = session.uploadTask(
                with: URLRequest(url: server.url("/sink"), method: .post),
                from: Data(repeating: 7, count: 100_000)
            )
            upload.resume()
            for await _ in upload.events {}
            let sent = try #require(upload.metrics?.transactions.first)
            #expect(sent.countOfRequestBodyBytesSent == 100_000)
            try expectOrdered(sent, in: try #require(upload.metrics))
        }
    }

    @Test func cliPrintsMetricsInJSON() async throws {
        try await withServer { server in
            let out = try makeTemporaryDirectory("metrics").appendingPathComponent("f")
            let result = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "--json", "-o", out.path, server.url("/redirect/1?to=/bytes/100").absoluteString]
            )
            #expect(result.status == 0)
            let events = result.stdoutText.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            let metrics = try #require(events.first { $0["event"] as? String == "metrics" })
            #expect(metrics["num_redirects"] as? Int == 1)
            #expect((metrics["time_total"] as? Double ?? -1) >= 0)
            #expect((metrics["requests"] as? [[String: Any]])?.count == 2)
            #expect(events.last?["event"] as? String == "completed")
            #expect(metrics["time_connect"] == nil)
            // With --connection-metrics: curl's time_connect, and the second request reused
            // the first one's connection.
            let timed = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "get", "--json", "--connection-metrics", "-o", out.path,
                    server.url("/redirect/1?to=/bytes/100").absoluteString,
                ]
            )
            #expect(timed.status == 0)
            let timedMetrics = try #require(
                timed.stdoutText.split(separator: "\n").compactMap {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }.first { $0["event"] as? String == "metrics" }
            )
            let connect = try #require(timedMetrics["time_connect"] as? Double)
            #expect(connect >= 0 && connect <= (timedMetrics["time_total"] as? Double ?? 0))
            let requests = try #require(timedMetrics["requests"] as? [[String: Any]])
            #expect(requests.map { $0["reusedConnection"] as? Bool } == [false, true])
        }
    }
}
