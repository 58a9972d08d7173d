// A background session from a program's point of view: hand a download to the daemon and
// exit, then, in a later run, pick up what happened meanwhile. The daemon tests drive it as
// real processes; it doubles as the example of the API.
//
//   background-download add URL --identifier ID [--description TEXT] [--stay]
//   background-download attach --identifier ID --move-to DIR
//
// Both take --state-dir DIR and --socket PATH (else FERRY_STATE_DIR, FERRY_SOCKET, ...).
// Every delegate call is printed as one JSON line on standard output.

import Ferry
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Prints each delegate call; moves finished files into a directory.
final class Reporter: SessionDelegate {
    let moveTo: URL?
    let allDelivered = Mutex<Bool>(false)

    init(moveTo: URL?) { self.moveTo = moveTo }

    static func emit(_ fields: [String: String]) {
        guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    func session(_ session: Session, downloadTask: DownloadTask, didFinishDownloadingTo location: URL) {
        var fields = ["event": "didFinishDownloadingTo", "location": location.path]
        fields["description"] = downloadTask.taskDescription
        if let moveTo {
            // The file is ours only during this call: move it now.
            let target = moveTo.appendingPathComponent(downloadTask.taskDescription ?? UUID().uuidString)
            do {
                try FileManager.default.moveItem(at: location, to: target)
                fields["movedTo"] = target.path
            } catch {
                fields["moveError"] = "\(error)"
            }
        }
        Self.emit(fields)
    }

    func session(_ session: Session, task: SessionTask, didCompleteWithError error: FerryError?) {
        var fields = ["event": "didComplete", "error": error?.description ?? ""]
        fields["description"] = task.taskDescription
        Self.emit(fields)
    }

    func sessionDidFinishEvents(forBackgroundSession session: Session) {
        allDelivered.withLock { $0 = true }
        Self.emit(["event": "didFinishEventsForBackgroundSession"])
    }
}

func value(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func configuration(_ arguments: [String]) -> SessionConfiguration? {
    guard let identifier = value("--identifier", in: arguments) else { return nil }
    var configuration = SessionConfiguration.background(identifier: identifier)
    configuration.backgroundDaemon.stateDirectory = value("--state-dir", in: arguments).map {
        URL(fileURLWithPath: $0, isDirectory: true)
    }
    configuration.backgroundDaemon.socket = value("--socket", in: arguments).map { URL(fileURLWithPath: $0) }
    return configuration
}

func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("background-download: \(message)\n".utf8))
    exit(status)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first, let configuration = configuration(arguments) else {
    fail("usage: background-download add URL --identifier ID | attach --identifier ID --move-to DIR", status: 64)
}

switch command {
case "add":
    guard arguments.count > 1, let url = URL(string: arguments[1]) else { fail("add needs a URL", status: 64) }
    let session: Session
    do {
        session = try Session(configuration: configuration)
    } catch {
        fail("\(error)", status: 2)
    }
    let task = session.downloadTask(with: url)
    task.taskDescription = value("--description", in: arguments)
    task.resume()
    do {
        try await task.waitUntilInDaemon()
    } catch {
        fail("\(error)")
    }
    Reporter.emit(["event": "handedOver", "description": task.taskDescription ?? ""])
    if arguments.contains("--stay") {
        // Killed here by the tests: the daemon has the download.
        while true { try? await Task.sleep(for: .seconds(60)) }
    }
case "attach":
    let reporter = Reporter(
        moveTo: value("--move-to", in: arguments).map { URL(fileURLWithPath: $0, isDirectory: true) }
    )
    let session: Session
    do {
        session = try Session(configuration: configuration, delegate: reporter)
    } catch {
        fail("\(error)", status: 2)
    }
    let tasks = await session.getAllTasks()
    Reporter.emit([
        "event": "attached",
        "tasks": tasks.map { $0.taskDescription ?? "" }.sorted().joined(separator: ","),
    ])
    // Until the kept events are delivered and the reattached tasks have completed.
    while !(reporter.allDelivered.withLock { $0 } && session.allTasks.isEmpty) {
        try? await Task.sleep(for: .milliseconds(50))
    }
    session.finishTasksAndInvalidate()
    try? await Task.sleep(for: .milliseconds(100))
default:
    fail("unknown command '\(command)'", status: 64)
}
