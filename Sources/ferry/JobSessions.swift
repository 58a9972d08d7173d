import Ferry
import Foundation
import Synchronization

/// The sessions a command's several downloads share (`ferry get -O URL URL…`, `-i FILE`,
/// `-Z`): one for each distinct configuration, so that downloads from one host reuse its
/// connections (and, over HTTPS, one TLS handshake) as curl's `-Z` does, instead of a session,
/// a connection pool and a handshake per file.
///
/// What differs between two jobs' configurations is what `ferry get` works out per URL or per
/// input line: the folder (and so the partial files' directory and the resume store), the
/// number of connections (`split=`), the proxy (`no_proxy` is per host), the credential a
/// challenge is answered with (`.netrc` is per host), and the TLS pins (per host). Two jobs
/// share a session only when all of those are equal; everything else comes from the
/// command's flags and is the same for every job.
///
/// `--limit-rate` stays a limit per transfer, as curl has it with `-Z`: each task carries it
/// (``SessionTask/maximumBytesPerSecond``), not the shared session.
///
/// Thread-safe: the jobs of `-Z` ask for their sessions from several tasks at once.
final class JobSessions: Sendable {
    /// The parts of a configuration that are hashable; TLS options, which are only
    /// equatable, are compared within a key's sessions.
    private struct Key: Hashable {
        let directory: String
        let connections: Int
        let proxy: Proxy?
        let credential: Credential?
    }

    private struct State {
        var sessions: [Key: [(tls: TLSOptions, session: Session)]] = [:]
        /// Each folder's standardized path, worked out once: a list's jobs mostly share one.
        var standardized: [URL: String] = [:]
    }

    private let state = Mutex(State())

    /// The session for `configuration`: the one made earlier for an equal configuration, or a
    /// new one.
    ///
    /// - Parameter configuration: a job's configuration, as `ferry get` built it for its URL.
    /// - Throws: ``FerryError`` when a session cannot be made of `configuration`.
    func session(for configuration: SessionConfiguration) throws -> Session {
        let folder = configuration.downloadsDirectory
        let directory = state.withLock { $0.standardized[folder] } ?? folder.standardizedFileURL.path
        return try state.withLock { state throws -> Session in
            state.standardized[folder] = directory
            let key = Key(
                directory: directory,
                connections: configuration.maximumConnectionsPerDownload,
                proxy: configuration.proxy,
                credential: configuration.credential
            )
            if let made = state.sessions[key]?.first(where: { $0.tls == configuration.tls }) { return made.session }
            let session = try Session(configuration: configuration)
            state.sessions[key, default: []].append((configuration.tls, session))
            return session
        }
    }

    /// Lets every session finish what it runs, then invalidates it.
    func finish() {
        let all = state.withLock { state in
            defer { state.sessions = [:] }
            return state.sessions.values.flatMap { $0.map(\.session) }
        }
        for session in all { session.finishTasksAndInvalidate() }
    }
}
