import ArgumentParser
import Ferry
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// `ferry get URL`: download a URL to a file or to standard output.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download a URL.",
        discussion: """
            The file named by -o (or chosen by -O) appears only when the download is complete:
            the body streams to a hidden partial file beside it and is renamed into place. An
            HTTP error body is never written to it, and an existing file is replaced only by a
            complete download. -O never replaces an existing file unless --clobber is given
            (the server chose that name, not you).

            Options may also come from curl-style config files: -K FILE (or -K - for standard \
            input), and first $XDG_CONFIG_HOME/ferry/config or ~/.ferryrc unless -q is the first \
            argument, as curl's -q skips .curlrc.

            Without -o or -O, or with -o -, the body streams to standard output as it arrives.
            An -o that is not a regular file (/dev/null, a FIFO, /dev/stdout, anything under
            /dev) is written the same way, in order, and never replaced. Those outputs cannot
            be continued with -c, and a failure is retried only before the first byte is
            written.

            A run that fails or is interrupted (Ctrl-C) keeps its partial file and resume data;
            the same command with -c continues it (Range + If-Range, so the bytes kept are used
            only if the server still has the same version). Without -c an earlier partial for
            the same output is discarded and the download starts over.
            """
    )

    @Argument(
        help: "The http or https URL to download; several, each to its own file with -O (as curl's --remote-name-all)."
    )
    var urls: [String] = []

    /// The one URL of a command that fetches one.
    var url: String { urls.first ?? "" }

    @Option(
        name: [.customShort("i"), .customLong("input-file")],
        help: ArgumentHelp(
            "Download what FILE lists, in aria2c's format: a line of URLs (TAB between mirrors of one file), then indented out=, dir=, checksum=TYPE=DIGEST, header=, split= lines.",
            valueName: "file"
        )
    )
    var inputFile: String?

    @Flag(
        name: [.customShort("Z"), .customLong("parallel")],
        help: "With several URLs or -i, download them at once (curl's -Z), up to --parallel-max."
    )
    var parallel = false

    @Option(name: .customLong("parallel-max"), help: "With -Z, at most N transfers at once (curl's; default 50).")
    var parallelMax = 50

    @Option(name: .customLong("max-per-host"), help: "With -Z, at most N transfers at once to one host (default 6).")
    var maximumPerHost = 6

    @Option(
        name: [.customShort("o"), .customLong("output")],
        help: "Write the body to FILE ('-': standard output)."
    )
    var output: String?

    @Flag(
        name: [.customShort("O"), .customLong("remote-name")],
        help: "Name the file as the server suggests (sanitized)."
    )
    var remoteName = false

    @Option(
        name: .customLong("dir"),
        help: "With -O, the directory to save into, created if missing (default: the current one)."
    )
    var directory: String?

    @Option(name: [.customShort("H"), .customLong("header")], help: "Add a request header, 'Name: value'.")
    var headers: [String] = []

    @Flag(
        name: .customLong("connection-metrics"),
        help:
            "With --json: time the connection and TLS handshake, and say whether it was reused (time_connect, time_appconnect)."
    )
    var connectionMetrics = false

    @Flag(
        name: .customLong("compressed"),
        help:
            "Ask for a gzip, deflate, br or zstd body (br and zstd where the system has libbrotli and libzstd) and write it decoded (curl's --compressed). A body that inflates more than 200-fold is refused (without --max-filesize, which is then the only limit). A coded download is never continued with a range: it starts over."
    )
    var compressed = false

    @Option(
        name: .customLong("max-filesize"),
        help:
            "Refuse a file larger than BYTES (suffixes k, M, G), received or decoded; exit 63, as curl."
    )
    var maximumFileSize: String?

    @Option(
        name: [.customShort("s"), .customLong("split")],
        help:
            "Download over up to N connections (aria2c's -s), in segments checked against the first response's validator: a file that changes starts over, never a mix."
    )
    var split = 1

    @Option(
        name: .customLong("min-split-size"),
        help: "The smallest segment with -s (aria2c's -k; suffixes k, M, G): default 20M."
    )
    var minimumSplitSize: String?

    @Flag(name: .customLong("clobber"), help: "With -O, replace a file of the chosen name (without it, exit 23).")
    var clobber = false

    @OptionGroup var connection: ConnectionOptions

    @Flag(
        name: [.customShort("c"), .customLong("continue")],
        help: "Continue an earlier interrupted or failed download of the same output."
    )
    var continueDownload = false

    @Option(
        name: .customLong("checksum"),
        help: "The file's expected digest, ALGORITHM=HEX (sha256, sha384, sha512, sha1, md5)."
    )
    var checksum: String?

    @Option(name: .customLong("retries"), help: "Retries of transient failures, each resuming the download (0: none).")
    var retries = 5

    @Flag(
        name: .customLong("retry-all-errors"),
        help:
            "Retry (up to --retries) after any error the server or the network caused, a 404 included, as curl's --retry-all-errors."
    )
    var retryAllErrors = false

    @OptionGroup var noise: NoiseOptions

    @Option(
        name: [.customShort("w"), .customLong("write-out")],
        help: ArgumentHelp(
            "Print FORMAT when the transfer ends, as curl does: %{http_code}, %{size_download}, %{time_total}, %{url_effective}, %{json}, %header{NAME}… (@FILE reads it from FILE).",
            valueName: "format"
        )
    )
    var writeOut: String?

    @Option(
        name: .customLong("etag-save"),
        help: "Save the response's ETag to FILE, as curl does (an empty file when it has none)."
    )
    var etagSave: String?

    @Option(
        name: .customLong("etag-compare"),
        help:
            "Send If-None-Match with the ETag in FILE, as curl does: a 304 (not modified) leaves the output alone and exits 0."
    )
    var etagCompare: String?

    @Flag(name: .customLong("json"), help: "Print one JSON event per line on standard output.")
    var json = false

    /// The body goes to standard output (no -o or -O, or -o -).
    var toStandardOutput: Bool { (output == nil && !remoteName && !fetchesSeveral) || output == "-" }

    /// Several downloads: several URLs, or an input file.
    var fetchesSeveral: Bool { urls.count > 1 || inputFile != nil }

    func validate() throws {
        if urls.isEmpty && inputFile == nil { throw ValidationError("ferry get needs a URL, or -i FILE.") }
        if fetchesSeveral {
            if output != nil {
                throw ValidationError("-o names one file: with several URLs or -i, -O saves each under its own name.")
            }
            if urls.count > 1 && !remoteName {
                throw ValidationError("With several URLs, -O saves each under its own name (curl's --remote-name-all).")
            }
            if checksum != nil {
                throw ValidationError("--checksum is one file's: give each its own in -i's checksum=.")
            }
            if json { throw ValidationError("--json follows one download.") }
        }
        if parallelMax < 1 || maximumPerHost < 1 {
            throw ValidationError("--parallel-max and --max-per-host take 1 or more.")
        }
        if output != nil && remoteName { throw ValidationError("Use -o FILE or -O, not both.") }
        if directory != nil && !remoteName && inputFile == nil { throw ValidationError("--dir goes with -O or -i.") }
        if continueDownload && toStandardOutput {
            throw ValidationError("-c continues a download to a file: name it with -o or -O.")
        }
        if let checksum {
            do {
                _ = try Checksum(parsing: checksum)
            } catch {
                throw ValidationError(error.message)
            }
            if toStandardOutput { throw ValidationError("--checksum needs a file: name it with -o or -O.") }
        }
        if retries < 0 { throw ValidationError("--retries takes a number of retries, 0 or more.") }
        if json && toStandardOutput {
            throw ValidationError("--json prints events on standard output; name a file with -o or -O.")
        }
        if let problem = CommandRequest.headerProblem(in: headers) { throw ValidationError(problem) }
        if let maximumFileSize, Int64(byteCount: maximumFileSize) == nil {
            throw ValidationError("--max-filesize takes a number of bytes, with k, M or G if you like (10M).")
        }
        if clobber && !remoteName && inputFile == nil {
            throw ValidationError("--clobber goes with -O or -i (-o always replaces its file).")
        }
        if split < 1 || split > 64 { throw ValidationError("-s takes a number of connections from 1 to 64.") }
        if let minimumSplitSize, (Int64(byteCount: minimumSplitSize) ?? 0) < 1 {
            throw ValidationError("--min-split-size takes a number of bytes, with k, M or G if you like (20M).")
        }
    }

    /// `error`, with the option that would let it pass, where there is one.
    private func hint(for error: FerryError) -> FerryError {
        var error = error
        if error.reason == .destinationExists { error.message += " Use --clobber to replace it." }
        return error
    }

    func run() async throws {
        // A write past a file-size limit, or to a reader that has gone (`| head`), is an
        // error to report, not a reason to die.
        signal(SIGXFSZ, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        if fetchesSeveral { await runJobs() }
        guard var request = CommandRequest.make(url: url, method: .get, headers: headers),
            let target = request.url
        else {
            fail(FerryError(.invalidURL, "'\(url)' is not an http or https URL."))
        }
        if let etagCompare {
            // curl's: the file's first line, `""` when it is empty; exit 26 when unreadable.
            guard let data = FileManager.default.contents(atPath: etagCompare) else {
                if !json && !noise.hidesErrors {
                    FileHandle.standardError.write(Data("ferry: cannot read the ETag file '\(etagCompare)'.\n".utf8))
                }
                Foundation.exit(ExitStatus.readError)
            }
            let tag = String(decoding: data, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
            let trimmed = tag.trimmingCharacters(in: .whitespaces)
            request.setValue(trimmed.isEmpty ? "\"\"" : trimmed, forHTTPHeaderField: "If-None-Match")
        }
        let report: WriteOut?
        do {
            report = try writeOut.map { format throws(FerryError) in try WriteOut(format) }
        } catch {
            fail(error)
        }
        var configuration = downloadConfiguration(connections: split, request: &request)
        configuration.collectsConnectionMetrics = connectionMetrics || report?.needsConnectionMetrics == true
        do {
            try connection.apply(to: &configuration, for: target, request: &request)
        } catch {
            ExitStatus.exit(with: error, json: json || noise.hidesErrors)
        }
        let destination = makeDestination(&configuration)
        if destination.isWrittenInOrder, let output, output != "-" {
            if checksum != nil {
                fail(FerryError(.invalidRequest, "--checksum needs a regular file; '\(output)' is not one."))
            }
            if continueDownload && !json && !noise.quiet {
                FileHandle.standardError.write(
                    Data("ferry: -c has no effect: '\(output)' is not a regular file; it is written in order.\n".utf8)
                )
            }
        }
        let key = output.map { URL(fileURLWithPath: $0).standardizedFileURL.path } ?? target.absoluteString
        // What -c continues: Ferry's own bytes, or a file another program left (checked).
        let earlier = continueDownload ? configuration.resumeStore?.resumeData(for: key) : nil
        if continueDownload, earlier == nil, !compressed, !destination.isWrittenInOrder, let output,
            await ForeignPartial.check(
                output,
                key: key,
                request: request,
                configuration: &configuration,
                speak: !json && !noise.quiet
            )
        {
            return
        }
        let session: Session
        do {
            session = try Session(configuration: configuration)
        } catch let error as FerryError {
            fail(error)
        }
        let showProgress = !noise.quiet && !json && isatty(STDERR_FILENO) == 1
        let json = self.json
        let verbose = connection.verbose
        let events = session.events
        let reporter = Task {
            var progress = ProgressLine()
            for await case .task(let task, let event) in events {
                if json { JSONEvents.emit(event) }
                if verbose, case .trailers(let fields) = event { VerboseLog.show(trailers: fields) }
                guard showProgress else { continue }
                switch event {
                case .wroteData(_, let total, let expected):
                    progress.update(bytes: total, total: expected)
                case .completed:
                    progress.update(
                        bytes: task.countOfBytesReceived,
                        total: task.countOfBytesExpectedToReceive,
                        finished: true
                    )
                default:
                    break
                }
            }
            if showProgress { progress.finish() }
        }

        let task = session.downloadTask(with: request, to: destination)
        task.resumeKey = key
        task.resumesFromStore = continueDownload && !destination.isWrittenInOrder
        task.checksum = checksum.flatMap { try? Checksum(parsing: $0) }
        let interrupted = InterruptFlag()
        let interrupt = Interrupt.handle {
            interrupted.set()
            Task { _ = await task.cancelProducingResumeData() }
        }
        defer { interrupt.cancel() }
        let taskEvents = task.events
        task.resume()
        var continuedAt: Int64?
        for await event in taskEvents {
            if case .resumedAtOffset(let offset, _) = event, continuedAt == nil { continuedAt = offset }
            if case .segments(1, let reason?) = event, split > 1, !json, !noise.quiet {
                FileHandle.standardError.write(Data("ferry: one connection: \(reason)\n".utf8))
            }
        }
        session.finishTasksAndInvalidate()
        await reporter.value
        connection.saveCookieJar(configuration)
        // With --etag-compare, a 304 is the answer asked for: the output is left as it is.
        let notModified = etagCompare != nil && task.error?.reason.statusCode == 304
        let failure = notModified ? nil : task.error
        if let etagSave { saveETag(of: task.response ?? task.error?.response, to: etagSave) }
        if let report {
            let status = failure.map { interrupted.isSet ? ExitStatus.interrupted : ExitStatus.code(for: $0) } ?? 0
            let filename = toStandardOutput ? nil : output ?? task.fileURL?.path
            report.write(WriteOut.Report(task: task, given: url, exitCode: status, error: failure, filename: filename))
        }
        let speak = !json && !noise.quiet
        if let error = failure {
            if let kept = error.resumeData?.bytesKept {
                if !json && !noise.hidesErrors {
                    let why = interrupted.isSet ? "interrupted" : error.description
                    FileHandle.standardError.write(
                        Data(
                            "ferry: \(why)\nferry: \(kept) bytes kept; run the same command with -c to continue.\n".utf8
                        )
                    )
                }
                Foundation.exit(interrupted.isSet ? ExitStatus.interrupted : ExitStatus.code(for: error))
            }
            fail(hint(for: error))
        }
        if speak, continueDownload, let continuedAt {
            let said =
                if continuedAt == 0, let earlier, earlier.bytesKept > 0 {
                    "ferry: started over from byte 0: \(ForeignPartial.whyStartedOver(earlier, answer: task.response)); the \(earlier.bytesKept) bytes kept were not used\n"
                } else {
                    "ferry: continued at byte \(continuedAt) (\(continuedAt) bytes kept)\n"
                }
            FileHandle.standardError.write(Data(said.utf8))
        }
        if speak, remoteName, let file = task.fileURL {
            FileHandle.standardError.write(Data("saved \(file.path)\n".utf8))
        }
    }

    /// The session's settings every download of the command shares: retries, connections,
    /// limits and decoding (`request` asks for a coded body with `--compressed`).
    func downloadConfiguration(connections: Int, request: inout URLRequest) -> SessionConfiguration {
        var configuration = SessionConfiguration.default
        configuration.retryPolicy = RetryPolicy(maximumRetries: retries)
        configuration.retryPolicy.retriesAllErrors = retryAllErrors
        configuration.maximumConnectionsPerDownload = connections
        configuration.httpMaximumConnectionsPerHost = max(configuration.httpMaximumConnectionsPerHost, connections)
        if let size = minimumSplitSize.flatMap(Int64.init(byteCount:)) { configuration.minimumSegmentSize = size }
        // An output written in order gets its body decoded as it streams; a file keeps the
        // coded bytes while they arrive and is decoded once complete, before the checksum.
        configuration.automaticDecompression = compressed
        configuration.maximumFileSize = maximumFileSize.flatMap(Int64.init(byteCount:))
        // The ratio guards against bombs when nothing else does; a size the user gave is the
        // limit they chose.
        if configuration.maximumFileSize != nil { configuration.maximumDecompressionRatio = nil }
        if compressed, request.value(forHTTPHeaderField: "Accept-Encoding") == nil {
            request.setValue(ContentDecoder.acceptEncoding, forHTTPHeaderField: "Accept-Encoding")
        }
        return configuration
    }

    /// Where the body goes, and where partial files and resume data live for it: beside a
    /// file output (so delivering it is a rename on one file system); nowhere for an output
    /// written in order.
    private func makeDestination(_ configuration: inout SessionConfiguration) -> DownloadDestination {
        if toStandardOutput { return .stream(to: .standardOutput) }
        if let output {
            let file = URL(fileURLWithPath: output)
            let destination = DownloadDestination.file(file, options: [.removePreviousFile])
            if destination.isWrittenInOrder { return destination }
            let parent = file.deletingLastPathComponent()
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: parent.path, isDirectory: &isDirectory), isDirectory.boolValue
            else {
                fail(FerryError(.fileSystem, "The directory '\(parent.path)' does not exist."))
            }
            configuration.downloadsDirectory = parent
            configuration.resumeStore = ResumeStore(directory: parent)
            return destination
        }
        let directory = URL(
            fileURLWithPath: directory ?? FileManager.default.currentDirectoryPath,
            isDirectory: true
        )
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            fail(FerryError(.fileSystem, "Cannot create the directory '\(directory.path)'.", underlying: error))
        }
        configuration.downloadsDirectory = directory
        configuration.resumeStore = ResumeStore(directory: directory)
        return .directory(directory, options: clobber ? [.removePreviousFile] : [])
    }

    func fail(_ error: FerryError) -> Never { ExitStatus.exit(with: error, json: json || noise.hidesErrors) }

    /// `--etag-save`: the response's `ETag` and a newline, or an empty file, as curl writes it.
    private func saveETag(of response: HTTPResponse?, to path: String) {
        let text = response?.headers["ETag"].map { $0 + "\n" } ?? ""
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            fail(FerryError(.fileSystem, "Cannot write the ETag to '\(path)'.", underlying: error))
        }
    }
}
