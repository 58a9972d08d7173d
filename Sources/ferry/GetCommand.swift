import ArgumentParser
import Ferry
import Foundation

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
            the body streams to a partial file and is renamed into place. An HTTP error body is
            never written to it, and an existing file is replaced only by a complete download.
            Without -o or -O the body goes to standard output.
            """
    )

    @Argument(help: "The http or https URL to download.")
    var url: String

    @Option(name: [.customShort("o"), .customLong("output")], help: "Write the body to FILE.")
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

    @Option(name: [.customShort("u"), .customLong("user")], help: "Basic authentication, 'user:password'.")
    var user: String?

    @Option(name: .customLong("retries"), help: "Retries of transient failures, each resuming the download (0: none).")
    var retries = 5

    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "No progress line.")
    var quiet = false

    @Flag(name: .customLong("json"), help: "Print one JSON event per line on standard output.")
    var json = false

    func validate() throws {
        if output != nil && remoteName { throw ValidationError("Use -o FILE or -O, not both.") }
        if directory != nil && !remoteName { throw ValidationError("--dir goes with -O.") }
        if retries < 0 { throw ValidationError("--retries takes a number of retries, 0 or more.") }
        if json && output == nil && !remoteName {
            throw ValidationError("--json prints events on standard output; name a file with -o or -O.")
        }
        for header in headers where Self.parseHeader(header) == nil {
            throw ValidationError("'\(header)' is not a header: use 'Name: value'.")
        }
    }

    func run() async throws {
        guard let target = URL(string: url), let scheme = target.scheme?.lowercased(),
            scheme == "http" || scheme == "https", target.host?.isEmpty == false
        else {
            fail(FerryError(.invalidURL, "'\(url)' is not an http or https URL."))
        }
        var request = URLRequest(url: target)
        for header in headers {
            if let (name, value) = Self.parseHeader(header) { request.addValue(value, forHTTPHeaderField: name) }
        }
        if let user {
            let (name, password) = BasicAuthentication.parseUserPassword(user)
            request.setBasicAuthorization(username: name, password: password)
        }
        // The partial file lives beside the output (hidden), so delivering it is a rename on
        // one file system: atomic, and no copy.
        var configuration = SessionConfiguration.default
        configuration.retryPolicy = RetryPolicy(maximumRetries: retries)
        let toStdout = output == nil && !remoteName
        let destination: DownloadDestination?
        if let output {
            let file = URL(fileURLWithPath: output)
            let parent = file.deletingLastPathComponent()
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: parent.path, isDirectory: &isDirectory), isDirectory.boolValue
            else {
                fail(FerryError(.fileSystem, "The directory '\(parent.path)' does not exist."))
            }
            configuration.downloadsDirectory = parent
            destination = .file(file, options: [.removePreviousFile])
        } else if remoteName {
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
            destination = .directory(directory, options: [.removePreviousFile])
        } else {
            destination = nil
        }
        let session: Session
        do {
            session = try Session(configuration: configuration)
        } catch let error as FerryError {
            fail(error)
        }
        let showProgress = !quiet && !json && isatty(STDERR_FILENO) == 1
        let json = self.json
        let events = session.events
        let reporter = Task {
            var progress = ProgressLine()
            for await case .task(let task, let event) in events {
                if json { JSONEvents.emit(event) }
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
        let transfer = Task { try await session.download(for: request, to: destination) }
        let interrupt = Self.cancelOnInterrupt(transfer)
        defer { interrupt.cancel() }
        let result = await transfer.result
        session.finishTasksAndInvalidate()
        await reporter.value
        let file: URL
        switch result {
        case .success(let (location, _)):
            file = location
        case .failure(let error):
            fail(error as? FerryError ?? FerryError(.network, "The download failed.", underlying: error))
        }
        if toStdout {
            defer { unlink(file.path) }
            do {
                try Self.copyToStandardOutput(file)
            } catch let error as FerryError {
                fail(error)
            }
        } else if !json && !quiet && remoteName {
            FileHandle.standardError.write(Data("saved \(file.path)\n".utf8))
        }
    }

    private func fail(_ error: FerryError) -> Never {
        if !json { FileHandle.standardError.write(Data("ferry: \(error.description)\n".utf8)) }
        Foundation.exit(ExitStatus.code(for: error))
    }

    static func parseHeader(_ header: String) -> (String, String)? {
        guard let colon = header.firstIndex(of: ":") else { return nil }
        let name = header[..<colon].trimmingCharacters(in: .whitespaces)
        let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, !name.contains(" "), !header.contains("\r"), !header.contains("\n") else { return nil }
        return (name, value)
    }

    /// Cancels `transfer` on SIGINT so its partial file is removed; the exit status is then 130.
    static func cancelOnInterrupt<Success>(_ transfer: Task<Success, any Error>) -> any DispatchSourceSignal {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { transfer.cancel() }
        source.resume()
        return source
    }

    static func copyToStandardOutput(_ file: URL) throws {
        let input = open(file.path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw FerryError(.fileSystem, "Cannot read the downloaded file.") }
        defer { close(input) }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(input, buffer, size)
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw FerryError(.fileSystem, "Cannot read the downloaded file.") }
            if count == 0 { return }
            var offset = 0
            while offset < count {
                let written = write(STDOUT_FILENO, buffer + offset, count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { throw FerryError(.fileSystem, "Cannot write to standard output.") }
                offset += written
            }
        }
    }
}
