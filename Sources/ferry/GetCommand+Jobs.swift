import Ferry
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `ferry get URL… -O` and `ferry get -i FILE`: several downloads, one after another, or at
/// once with `-Z` (at most `--parallel-max`, and `--max-per-host` to one host), each to its
/// own file, as curl and aria2c do.
///
/// Downloads whose configurations are equal (the same folder, connections, proxy, credential
/// and pins: ``JobSessions``) share one session and its connections, as curl's `-Z` does; each
/// URL still gets the credentials, proxy and pins a single `ferry get` would give it. The
/// command's cookies are one store. A download whose
/// sources are mirrors tries them in order: the next continues the bytes the one before kept
/// (Range with If-Range, under the same resume key), which a mirror serving another version
/// answers with the whole file, so versions are never mixed. The exit status follows curl
/// and aria2c (``ExitStatus/combining(_:parallel:inputFile:)``).
extension GetCommand {
    func runJobs() async -> Never {
        var jobs = urls.map { DownloadJob(urls: [$0]) }
        if let inputFile {
            let text: String
            if inputFile == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else if let data = FileManager.default.contents(atPath: inputFile) {
                text = String(decoding: data, as: UTF8.self)
            } else {
                fail(FerryError(.fileSystem, "Cannot read the input file '\(inputFile)'."))
            }
            do {
                jobs += try InputFile.jobs(in: text)
            } catch {
                fail(error)
            }
        }
        let all = jobs
        let report: WriteOut?
        do {
            report = try writeOut.map { format throws(FerryError) in try WriteOut(format) }
        } catch {
            fail(error)
        }
        let cookies = CookieStore()
        let sessions = JobSessions()
        let running = RunningDownloads()
        let context = JobContext(
            report: report,
            sessions: sessions,
            inputs: connection.inputs(),
            cookies: cookies,
            running: running,
            workingDirectory: FileManager.default.currentDirectoryPath
        )
        let interrupt = Interrupt.handle { running.interrupt() }
        defer { interrupt.cancel() }
        let gate = HostGate(limit: parallel ? maximumPerHost : 1)
        let limit = parallel ? parallelMax : 1
        let statuses = await withTaskGroup(of: (Int, Int32).self) { group in
            var statuses = [Int32](repeating: 0, count: all.count)
            var next = 0
            func start() {
                guard next < all.count else { return }
                let index = next
                next += 1
                let job = all[index]
                group.addTask {
                    let host = URL(string: job.urls.first ?? "")?.host ?? ""
                    await gate.enter(host)
                    let status = await self.run(job, in: context)
                    await gate.leave(host)
                    return (index, status)
                }
            }
            for _ in 0..<limit { start() }
            for await (index, status) in group {
                statuses[index] = status
                start()
            }
            return statuses
        }
        sessions.finish()
        connection.saveCookieJar(cookieConfiguration(cookies))
        if running.interrupted { Foundation.exit(ExitStatus.interrupted) }
        Foundation.exit(ExitStatus.combining(statuses, parallel: parallel, inputFile: inputFile != nil))
    }

    /// A configuration that names `cookies`, for `--cookie-jar`.
    private func cookieConfiguration(_ cookies: CookieStore) -> SessionConfiguration {
        var configuration = SessionConfiguration.default
        configuration.cookieStore = cookies
        return configuration
    }

    /// Runs one download, trying its sources in order; its exit status.
    private func run(_ job: DownloadJob, in context: JobContext) async -> Int32 {
        let (report, running) = (context.report, context.running)
        var failure = FerryError(.invalidURL, "No URL.")
        var source = job.urls.first ?? ""
        for (attempt, url) in job.urls.enumerated() {
            source = url
            do {
                guard
                    let task = try await prepare(
                        job,
                        source: url,
                        continuing: continueDownload || attempt > 0,
                        first: attempt == 0,
                        in: context
                    )
                else { return 0 }
                running.add(task)
                task.resume()
                await task.completed()
                running.remove(task)
                if let report {
                    let status = task.error.map { ExitStatus.code(for: $0) } ?? 0
                    report.write(
                        WriteOut.Report(
                            task: task,
                            given: url,
                            exitCode: status,
                            error: task.error,
                            filename: task.fileURL?.path
                        )
                    )
                }
                guard let error = task.error else {
                    if !noise.quiet, let file = task.fileURL {
                        FileHandle.standardError.write(Data("saved \(file.path)\n".utf8))
                    }
                    return 0
                }
                failure = error
            } catch let error as FerryError {
                failure = error
            } catch {
                failure = FerryError(.invalidRequest, "\(error)")
            }
            // Another mirror helps only with what the server or the network did.
            if running.interrupted || !failure.anotherSourceMayHelp { break }
        }
        let said = failure.description.contains(source) ? failure.description : "\(source): \(failure.description)"
        if !noise.hidesErrors { FileHandle.standardError.write(Data("ferry: \(said)\n".utf8)) }
        return running.interrupted ? ExitStatus.interrupted : ExitStatus.code(for: failure)
    }

    /// The download task for `job` from `source`, in the session of the context's sessions
    /// that its configuration calls for; `nil` when `-c` finds the job's named file (`out=`)
    /// complete already. With `-c`, a file of that name another program left is checked
    /// first (``ForeignPartial``), before the `first` source.
    private func prepare(
        _ job: DownloadJob,
        source: String,
        continuing: Bool,
        first: Bool,
        in context: JobContext
    ) async throws -> DownloadTask? {
        guard var request = CommandRequest.make(url: source, method: .get, headers: headers + job.headers),
            let target = request.url
        else {
            throw FerryError(.invalidURL, "'\(source)' is not an http or https URL.")
        }
        if let problem = CommandRequest.headerProblem(in: job.headers) { throw FerryError(.invalidRequest, problem) }
        let connections = job.split ?? split
        var configuration = downloadConfiguration(connections: connections, request: &request)
        try connection.apply(
            to: &configuration,
            for: target,
            request: &request,
            cookies: context.cookies,
            inputs: context.inputs
        )
        // The session's limits must not hold back what --max-per-host (and each job's
        // connections) allow: the host gate decides how many run.
        let perHost = (parallel ? maximumPerHost : 1) * connections
        configuration.httpMaximumConnectionsPerHost = max(configuration.httpMaximumConnectionsPerHost, perHost)
        configuration.collectsConnectionMetrics = context.report?.needsConnectionMetrics == true
        // --limit-rate is each transfer's, as curl's is with -Z: on the task, not the shared session.
        let rate = configuration.maximumBytesPerSecond
        configuration.maximumBytesPerSecond = nil
        let path = job.directory ?? directory ?? context.workingDirectory
        // One `stat` when the folder is there, as it is for every job of a list but the first.
        try FileSystem.createDirectory(atPath: path, mode: 0o777)
        let folder = URL(fileURLWithPath: path, isDirectory: true)
        configuration.downloadsDirectory = folder
        configuration.resumeStore = ResumeStore(directory: folder)
        let replacing: DownloadDestination.Options = clobber ? [.removePreviousFile] : []
        let named = job.output.map { folder.appendingPathComponent($0, isDirectory: false) }
        let destination: DownloadDestination =
            named.map { .file($0, options: replacing) } ?? .directory(folder, options: replacing)
        // One key for every mirror of the file: the next continues what the last kept.
        let key = named?.standardizedFileURL.path ?? job.urls[0]
        if continueDownload, first, !compressed, let named,
            await ForeignPartial.check(
                named.path,
                key: key,
                request: request,
                configuration: &configuration,
                replaces: clobber,
                speak: !noise.quiet
            )
        {
            return nil
        }
        let task = try context.sessions.session(for: configuration).downloadTask(with: request, to: destination)
        task.maximumBytesPerSecond = rate
        task.resumeKey = key
        task.resumesFromStore = continuing
        task.checksum = try job.checksum.map { text throws(FerryError) in try Checksum(parsing: text) }
        return task
    }
}

/// What every job of one `ferry get` shares, worked out once for the command.
private struct JobContext: Sendable {
    let report: WriteOut?
    let sessions: JobSessions
    let inputs: ConnectionOptions.Inputs
    let cookies: CookieStore
    let running: RunningDownloads
    /// The folder of jobs that name none (`--output-dir`, `dir=`).
    let workingDirectory: String
}

/// The downloads running now, for Ctrl-C: each is stopped keeping its bytes for `-c`.
final class RunningDownloads: Sendable {
    private let state = Mutex<(tasks: [ObjectIdentifier: DownloadTask], interrupted: Bool)>(([:], false))

    func add(_ task: DownloadTask) {
        let stop = state.withLock { state in
            state.tasks[ObjectIdentifier(task)] = task
            return state.interrupted
        }
        if stop { Task { _ = await task.cancelProducingResumeData() } }
    }

    func remove(_ task: DownloadTask) { state.withLock { _ = $0.tasks.removeValue(forKey: ObjectIdentifier(task)) } }

    func interrupt() {
        let tasks = state.withLock { state in
            state.interrupted = true
            return Array(state.tasks.values)
        }
        for task in tasks { Task { _ = await task.cancelProducingResumeData() } }
    }

    var interrupted: Bool { state.withLock { $0.interrupted } }
}

/// At most `limit` downloads at once to one host.
actor HostGate {
    private let limit: Int
    private var running: [String: Int] = [:]
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]

    init(limit: Int) { self.limit = max(1, limit) }

    func enter(_ host: String) async {
        if running[host, default: 0] < limit {
            running[host, default: 0] += 1
            return
        }
        await withCheckedContinuation { waiting[host, default: []].append($0) }
    }

    func leave(_ host: String) {
        if var queue = waiting[host], !queue.isEmpty {
            // The slot passes to the next waiter as it is.
            let next = queue.removeFirst()
            waiting[host] = queue
            next.resume()
        } else {
            running[host, default: 1] -= 1
        }
    }
}
