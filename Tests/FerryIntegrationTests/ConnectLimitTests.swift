import Ferry
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A request's own `timeoutInterval` bounds its wait for a connection too, as URLSession's
/// does: a request that may wait longer than its session may also take longer to connect,
/// on each way a request connects; and a request cancelled while its connection opens comes
/// back at once, whatever the opening's limit.
@Suite("Connecting within the request's own timeout")
struct ConnectLimitTests {
    /// How the session reaches the origin.
    enum Route: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Ferry's own HTTP/2 connections (``HTTP2Pool``).
        case http2
        /// AsyncHTTPClient's pool over HTTP/1.1 (the session offers no HTTP/2).
        case http1
        /// The TLS bridge (a pinned public key).
        case bridged

        var testDescription: String { rawValue }
    }

    /// nginx over TLS behind a relay that holds each connection 2 s before passing it on, so
    /// every TLS handshake takes over 2 s. The session allows half a second: a request that
    /// keeps the session's limit times out (so the hold does outlast it), and one that asks
    /// for 30 s of its own gets the file, over the route's protocol.
    ///
    /// Before, the session's limit cut the connection of a request that asked for longer
    /// (HTTPClientError.connectTimeout at half a second on every route).
    @Test(arguments: Route.allCases)
    func aRequestThatMayWaitLongerMayTakeLongerToConnect(route: Route) async throws {
        let root = try await makeHTTP2Root("connect-limit-\(route)", mebibytes: 1)
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(root: root)
        defer { origin.stop() }
        let relay = try await ServerProcess(
            "/usr/bin/env",
            ["python3", ResumableUploadServer.relay.path, "PORT", "\(origin.nginx.port)", "\(1 << 60)", "hold=2"]
        )
        defer { relay.stop() }
        let session = try origin.session {
            $0.timeoutIntervalForRequest = 0.5
            switch route {
            case .http2: break
            case .http1: $0.tls.offersHTTP2 = false
            case .bridged: $0.tls.pinnedPublicKeys["127.0.0.1"] = [origin.ca.publicKeyPin]
            }
        }
        defer { session.invalidateAndCancel() }
        let url = try #require(URL(string: "https://127.0.0.1:\(relay.port)/file.bin"))
        await #expect {
            _ = try await session.data(from: url)
        } throws: { error in
            (error as? FerryError)?.reason == .timedOut(.idle)
        }
        var patient = URLRequest(url: url)
        patient.timeoutInterval = 30
        let (data, response) = try await session.data(for: patient)
        #expect(response.statusCode == 200)
        #expect(response.httpVersion == (route == .http2 ? "HTTP/2.0" : "HTTP/1.1"))
        #expect(data == (try Data(contentsOf: root.appendingPathComponent("file.bin"))))
    }

    /// A server whose listener takes connections and never answers the TLS handshake, and a
    /// session that would wait an hour for its HTTP/2 connection to open:
    /// - a request that waits for that opening, with 2 s of its own, times out at its own
    ///   2 s (it stops waiting: the opening's limit is the session's hour);
    /// - the request opening it, cancelled, comes back cancelled (it stops opening);
    /// - a request that waited with it is not failed by that cancel: it opens a connection
    ///   of its own (the listener's second), and ends when it is cancelled in turn.
    ///
    /// Before, each of them waited for the opening's limit, an hour here.
    @Test func requestsStopWaitingForAConnectionWhenTheyAreCancelledOrTimeOut() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        var configuration = SessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 3600
        let session = try Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let url = try #require(URL(string: "https://127.0.0.1:\(listener.port)/file.bin"))
        let outcome = await finishing(within: 120) {
            let opener = session.dataTask(with: url)
            let openerEnd = Task { await completion(of: opener)?.reason }
            opener.resume()
            // Its connection is in the backlog: it is the one opening.
            await poll { listener.pendingConnections() >= 1 }
            var brief = URLRequest(url: url)
            brief.timeoutInterval = 2
            let briefEnd = (await thrownError { _ = try await session.data(for: brief) } as? FerryError)?.reason
            let patient = session.dataTask(with: url)
            let patientEnd = Task { await completion(of: patient)?.reason }
            patient.resume()
            opener.cancel()
            let openerReason = await openerEnd.value
            var opened = false
            while !opened && patient.state == .running && !Task.isCancelled {
                opened = listener.pendingConnections() >= 2
                try? await Task.sleep(for: .milliseconds(5))
            }
            patient.cancel()
            return (briefEnd, openerReason, opened, await patientEnd.value)
        }
        let ends: (FerryError.Reason?, FerryError.Reason?, Bool, FerryError.Reason?)? = outcome
        let (brief, opener, patientOpened, patient) = try #require(ends, "a request did not come back in 2 minutes")
        #expect(brief == .timedOut(.idle))
        #expect(opener == .cancelled)
        #expect(patientOpened, "the request that waited with the cancelled one opened a connection")
        #expect(patient == .cancelled)
    }
}
