import ArgumentParser
import Ferry
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Options `ferry upload` and `ferry put` share with `ferry get`.
struct TransferOptions: ParsableArguments {
    @Option(name: [.customShort("H"), .customLong("header")], help: "Add a request header, 'Name: value'.")
    var headers: [String] = []

    @OptionGroup var connection: ConnectionOptions

    @Option(
        name: [.customShort("o"), .customLong("output")],
        help:
            "Write the server's response body to FILE (default, or '-': standard output). A device or FIFO is written into, never replaced."
    )
    var output: String?

    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "No progress line.")
    var quiet = false

    @Flag(
        name: .customLong("json"),
        help: "Print one JSON event per line on standard output (needs -o for the response body)."
    )
    var json = false

    @Option(
        name: .customLong("retries"),
        help:
            "Retries of transient failures, each continuing from the server's offset when it offers resumable uploads (0: none)."
    )
    var retries = 5

    func validate() throws {
        if retries < 0 { throw ValidationError("--retries takes a number of retries, 0 or more.") }
        if let problem = CommandRequest.headerProblem(in: headers) { throw ValidationError(problem) }
        if json && (output == nil || output == "-") {
            throw ValidationError("--json prints events on standard output; write the response body with -o.")
        }
    }

    func request(_ url: String, method: String) -> URLRequest? {
        CommandRequest.make(url: url, method: HTTPMethod(rawValue: method), headers: headers)
    }
}

/// Runs an upload task with the progress line, JSON events, and `ferry get`'s exit codes.
enum UploadRunner {
    /// Where an upload's resume data is kept for `-c`: beside its file, under a key naming
    /// the file and the target.
    struct Continuation {
        var store: ResumeStore
        var key: String
        /// `-c`: continue the kept upload.
        var continues: Bool
        /// `--tus`: a tus 1.0 upload with this metadata (the URL is the creation endpoint).
        var tusMetadata: [String: String]?
        /// `--no-resumable`: one ordinary request.
        var disabled = false
    }

    static func run(
        _ makeTask: (Session, URLRequest) -> UploadTask,
        request: URLRequest,
        options: TransferOptions,
        continuation: Continuation? = nil
    ) async -> Never {
        // A reader that has gone (`| head`) is an error to report, not a reason to die.
        signal(SIGPIPE, SIG_IGN)
        let session: Session
        var configuration = SessionConfiguration.default
        var request = request
        do {
            try options.connection.apply(
                to: &configuration,
                for: request.url ?? URL(fileURLWithPath: "/"),
                request: &request
            )
            configuration.retryPolicy = RetryPolicy(maximumRetries: options.retries)
            configuration.resumeStore = continuation?.store
            session = try Session(configuration: configuration)
        } catch {
            ExitStatus.exit(with: error)
        }
        let task = makeTask(session, request)
        if let continuation {
            task.resumeKey = continuation.key
            task.resumesFromStore = continuation.continues
            if let metadata = continuation.tusMetadata { task.resumableUploads = .tus(metadata: metadata) }
            if continuation.disabled { task.resumableUploads = .disabled }
        }
        let events = task.events
        let showProgress = !options.quiet && !options.json && isatty(STDERR_FILENO) == 1
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        let interrupted = InterruptFlag()
        interrupt.setEventHandler {
            interrupted.set()
            // An upload that can continue keeps its upload resource for `-c`.
            if continuation != nil { Task { _ = await task.cancelProducingResumeData() } } else { task.cancel() }
        }
        interrupt.resume()
        var progress = ProgressLine()
        var continuedAt: Int64?
        task.resume()
        for await event in events {
            if options.json { JSONEvents.emit(event) }
            if case .resumedAtOffset(let offset, _) = event, continuedAt == nil { continuedAt = offset }
            guard showProgress else { continue }
            switch event {
            case .sentBodyData(_, let total, let expected): progress.update(bytes: total, total: expected)
            case .response, .completed:
                progress.update(bytes: task.countOfBytesSent, total: task.countOfBytesExpectedToSend, finished: true)
            default: break
            }
        }
        if showProgress { progress.finish() }
        interrupt.cancel()
        session.finishTasksAndInvalidate()
        options.connection.saveCookieJar(configuration)
        let speak = !options.json && !options.quiet
        if let error = task.error {
            if let kept = error.uploadResumeData, continuation != nil {
                if !options.json {
                    let why = interrupted.isSet ? "interrupted" : error.description
                    FileHandle.standardError.write(
                        Data(
                            "ferry: \(why)\nferry: the server holds \(kept.bytesAcknowledged) bytes or more; run the same command with -c to continue.\n"
                                .utf8
                        )
                    )
                }
                Foundation.exit(interrupted.isSet ? ExitStatus.interrupted : ExitStatus.code(for: error))
            }
            ExitStatus.exit(with: error, json: options.json)
        }
        if speak, continuation?.continues == true, let continuedAt {
            FileHandle.standardError.write(Data("ferry: continued at byte \(continuedAt)\n".utf8))
        }
        if continuation?.tusMetadata != nil, let upload = task.uploadURL, !options.json {
            // tus answers with no body: the upload's URL is what there is to say.
            print(upload.absoluteString)
        }
        do {
            try ResponseOutput.write(task.receivedData ?? Data(), to: options.output)
        } catch {
            ExitStatus.exit(with: error, json: options.json)
        }
        if let response = task.response, !response.isSuccess {
            ExitStatus.exit(
                with: FerryError(
                    .unacceptableStatusCode(response.statusCode),
                    "\(response.url.absoluteString): HTTP \(response.statusCode) \(response.reasonPhrase)"
                ),
                json: options.json
            )
        }
        Foundation.exit(0)
    }
}

/// `ferry upload URL -F …`: a multipart/form-data upload with curl's -F syntax.
struct UploadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Upload a multipart/form-data form (curl's -F syntax).",
        discussion: """
            -F 'name=value' adds a text field; -F 'name=@path' a file part (its MIME type
            from the extension, or ;type=…; its name from the path, or ;filename=…);
            -F 'name=<path' a text field read from a file. Quote a value with semicolons:
            -F 'name="a;b"'. The form streams from disk with an exact Content-Length.
            The server's response body goes to standard output or -o FILE; an HTTP error
            status exits 22.
            """
    )

    @Argument(help: "The http or https URL to upload to.")
    var url: String

    @Option(
        name: [.customShort("F"), .customLong("form")],
        help: "A form part: name=value, name=@file[;type=…][;filename=…], name=<file."
    )
    var form: [String] = []

    @Option(name: [.customShort("X"), .customLong("request")], help: "The method (default POST).")
    var method = "POST"

    @OptionGroup var options: TransferOptions

    func validate() throws {
        if form.isEmpty { throw ValidationError("Give at least one -F part.") }
        for part in form {
            do {
                _ = try FormArgument(parsing: part)
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    func run() async throws {
        guard let request = options.request(url, method: method) else {
            ExitStatus.exit(with: FerryError(.invalidURL, "'\(url)' is not an http or https URL."))
        }
        var multipart = MultipartFormData()
        do {
            for part in form { try FormArgument(parsing: part).add(to: &multipart) }
        } catch {
            ExitStatus.exit(with: error)
        }
        let body = multipart
        await UploadRunner.run(
            { $0.uploadTask(with: $1, multipartFormData: body) },
            request: request,
            options: options
        )
    }
}

/// `ferry put FILE URL`: the raw file as the body, like `curl -T`.
struct PutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Upload a file as the raw request body (like curl -T).",
        discussion: """
            The file streams from disk with an exact Content-Length and a Content-Type from
            its extension (unless -H sets one). The server's response body goes to standard
            output or -o FILE; an HTTP error status exits 22.

            When the server offers resumable uploads (draft-ietf-httpbis-resumable-upload),
            a dropped connection continues from the server's offset (--retries), and an
            interrupted or failed upload keeps its upload resource beside the file
            (.ferry-upload-*.json, private to you): run the same command with -c to continue.
            With --tus, URL is a tus 1.0 server's creation endpoint; the upload's URL is
            printed when it completes.
            """
    )

    @Argument(help: "The file to upload.")
    var file: String

    @Argument(help: "The http or https URL to upload to.")
    var url: String

    @Option(
        name: [.customShort("X"), .customLong("request")],
        help: "The method (default PUT; POST and PATCH work too)."
    )
    var method = "PUT"

    @Flag(
        name: [.customShort("c"), .customLong("continue")],
        help: "Continue an earlier interrupted or failed upload of the same file to the same URL."
    )
    var continueUpload = false

    @Flag(
        name: .customLong("no-resumable"),
        help: "Send one ordinary request: do not ask whether the server offers resumable uploads."
    )
    var noResumable = false

    @Flag(
        name: .customLong("tus"),
        help: "Upload with tus 1.0: URL is the creation endpoint; prints the upload's URL."
    )
    var tus = false

    @OptionGroup var options: TransferOptions

    func validate() throws {
        if tus && noResumable { throw ValidationError("--tus and --no-resumable cannot go together.") }
        if continueUpload && noResumable {
            throw ValidationError("-c continues a resumable upload; drop --no-resumable.")
        }
    }

    func run() async throws {
        guard var request = options.request(url, method: tus ? "POST" : method) else {
            ExitStatus.exit(with: FerryError(.invalidURL, "'\(url)' is not an http or https URL."))
        }
        let type = Session.mimeType(forFileNamed: file)
        if request.value(forHTTPHeaderField: "Content-Type") == nil, !tus {
            request.setValue(type, forHTTPHeaderField: "Content-Type")
        }
        let fileURL = URL(fileURLWithPath: file).standardizedFileURL
        let continuation = UploadRunner.Continuation(
            store: ResumeStore(directory: fileURL.deletingLastPathComponent()),
            key: "put \(tus ? "tus " : "")\(fileURL.path) \(request.url?.absoluteString ?? url)",
            continues: continueUpload,
            tusMetadata: tus ? ["filename": fileURL.lastPathComponent, "filetype": type] : nil,
            disabled: noResumable
        )
        await UploadRunner.run(
            { $0.uploadTask(with: $1, fromFile: fileURL) },
            request: request,
            options: options,
            continuation: continuation
        )
    }
}

/// Where `ferry upload` and `ferry put` write the server's response body.
enum ResponseOutput {
    /// Writes `body` to standard output (`nil` or `-`), into a device, FIFO or anything under
    /// /dev (in order, never replaced), or to a file (replaced in one step: temporary file
    /// and rename).
    static func write(_ body: Data, to output: String?) throws(FerryError) {
        guard let output, output != "-" else {
            try write(body, into: STDOUT_FILENO, named: "standard output")
            return
        }
        let file = URL(fileURLWithPath: output)
        guard DownloadDestination.file(file).isWrittenInOrder else {
            do {
                try body.write(to: file, options: .atomic)
            } catch {
                throw FerryError(.fileSystem, "Cannot write '\(output)'.", underlying: error)
            }
            return
        }
        let descriptor = open(output, O_WRONLY | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else {
            throw FerryError(.fileSystem, "Cannot open '\(output)': \(String(cString: strerror(errno))).")
        }
        defer { close(descriptor) }
        try write(body, into: descriptor, named: output)
    }

    private static func write(_ body: Data, into descriptor: Int32, named name: String) throws(FerryError) {
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: false)
        do {
            try handle.write(contentsOf: body)
        } catch {
            throw FerryError(.fileSystem, "Cannot write to \(name).", underlying: error)
        }
    }
}
