// AFNetworking code, rewritten with Ferry one snippet at a time. Each function starts with
// the Objective-C it replaces, then does the same job through Ferry and checks what the
// server saw. The tests run this program against httpbin (on gunicorn) and nginx.
//
//   afnetworking-migration HTTPBIN_URL NGINX_URL WORK_DIR
//
// HTTPBIN_URL: httpbin's root. NGINX_URL: an nginx that serves /files/big.bin (slowly,
// with ranges), takes PUT under /uploads/ (WebDAV) behind Basic auth (ada:pw).
// Prints one line per snippet, "ok NAME: DETAIL"; exits 1 at the first that fails.
import Ferry
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What httpbin echoes.
struct Echo: Decodable, Sendable {
    var args: [String: String]?
    var json: [String: String]?
    var form: [String: String]?
    var files: [String: String]?
    var headers: [String: String]
}

struct Failure: Error, CustomStringConvertible {
    var description: String
}

@main
struct AFNetworkingMigration {
    static func main() async {
        let arguments = CommandLine.arguments.dropFirst()
        guard arguments.count == 3, let httpbin = URL(string: arguments[arguments.startIndex]),
            let nginx = URL(string: arguments[arguments.startIndex + 1])
        else {
            FileHandle.standardError.write(Data("usage: afnetworking-migration HTTPBIN_URL NGINX_URL WORK_DIR\n".utf8))
            exit(64)
        }
        let work = URL(fileURLWithPath: arguments[arguments.startIndex + 2], isDirectory: true)
        let steps: [(String, () async throws -> String)] = [
            ("GET with parameters", { try await getWithParameters(httpbin) }),
            ("POST JSON", { try await postJSON(httpbin) }),
            ("multipart POST with progress", { try await multipartWithProgress(httpbin, work: work) }),
            ("PUT of a file with Basic auth", { try await putFileWithBasicAuth(nginx, work: work) }),
            ("download with destination and progress", { try await download(nginx, work: work) }),
            ("pause with resume data, then resume", { try await pauseAndResume(nginx, work: work) }),
        ]
        for (name, step) in steps {
            do {
                print("ok \(name): \(try await step())")
            } catch {
                print("FAILED \(name): \(error)")
                exit(1)
            }
        }
    }

    // AFHTTPSessionManager *manager = [[AFHTTPSessionManager alloc] initWithBaseURL:base];
    // [manager GET:@"get" parameters:@{@"q": @"swift nio", @"page": @"2"} headers:nil progress:nil
    //      success:^(NSURLSessionDataTask *task, id responseObject) { … }
    //      failure:^(NSURLSessionDataTask *task, NSError *error) { … }];
    static func getWithParameters(_ base: URL) async throws -> String {
        let manager = try HTTPSessionManager(baseURL: base, responseSerializer: .decodable(Echo.self))
        let (echo, _) = try await manager.get("get", parameters: ["q": "swift nio", "page": "2"])
        guard echo.args == ["q": "swift nio", "page": "2"] else { throw Failure(description: "args \(echo)") }
        return "httpbin saw q=swift nio, page=2"
    }

    // manager.requestSerializer = [AFJSONRequestSerializer serializer];
    // [manager POST:@"post" parameters:@{@"name": @"Ada"} headers:nil progress:nil success:… failure:…];
    static func postJSON(_ base: URL) async throws -> String {
        let manager = try HTTPSessionManager(baseURL: base, responseSerializer: .decodable(Echo.self))
        manager.bodyEncoder = JSONParameterEncoder.default
        let (echo, _) = try await manager.post("post", parameters: ["name": "Ada"])
        guard echo.json == ["name": "Ada"], echo.headers["Content-Type"] == "application/json" else {
            throw Failure(description: "json \(echo)")
        }
        return "httpbin parsed {\"name\": \"Ada\"} as JSON"
    }

    // [manager POST:@"post" parameters:@{@"title": @"report"} headers:nil
    //     constructingBodyWithBlock:^(id<AFMultipartFormData> formData) {
    //         [formData appendPartWithFileURL:fileURL name:@"file" error:nil];
    //     } progress:^(NSProgress *uploadProgress) { … }
    //     success:^(NSURLSessionDataTask *task, id responseObject) { … } failure:…];
    static func multipartWithProgress(_ base: URL, work: URL) async throws -> String {
        let file = work.appendingPathComponent("report.txt")
        try String(repeating: "a line of the report\n", count: 20_000).write(
            to: file,
            atomically: true,
            encoding: .utf8
        )
        let manager = try HTTPSessionManager(baseURL: base, responseSerializer: .decodable(Echo.self))
        let progress = ProgressLog()
        let echo: Echo = try await withCheckedThrowingContinuation { continuation in
            manager.post(
                "post",
                parameters: ["title": "report"],
                constructingBody: { form in try form.append(fileURL: file, name: "file") },
                progress: { progress.record($0) },
                success: { _, echo in continuation.resume(returning: echo) },
                failure: { _, error in continuation.resume(throwing: error) }
            )
        }
        let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int ?? 0
        guard echo.form == ["title": "report"], echo.files?["file"]?.count == size else {
            throw Failure(description: "form \(echo.form ?? [:]), file of \(echo.files?["file"]?.count ?? -1) bytes")
        }
        guard let last = progress.last, last.completedBytes == last.totalBytes else {
            throw Failure(description: "upload progress ended at \(String(describing: progress.last))")
        }
        return "httpbin got the field and a \(size)-byte file; upload progress ended at \(last.completedBytes) bytes"
    }

    // [manager.requestSerializer setAuthorizationHeaderFieldWithUsername:@"ada" password:@"pw"];
    // NSMutableURLRequest *request = [manager.requestSerializer requestWithMethod:@"PUT"
    //     URLString:@"uploads/notes.txt" parameters:nil error:nil];
    // [[manager uploadTaskWithRequest:request fromFile:fileURL progress:nil completionHandler:…] resume];
    static func putFileWithBasicAuth(_ base: URL, work: URL) async throws -> String {
        let file = work.appendingPathComponent("notes.txt")
        try Data("notes for nginx\n".utf8).write(to: file)
        let manager = try HTTPSessionManager(baseURL: base, responseSerializer: .data)
        manager.setBasicAuthorization(user: "ada", password: "pw")
        let request = try manager.request(.put, "uploads/notes.txt")
        let (_, response) = try await manager.session.upload(for: request, fromFile: file)
        guard response.statusCode == 201 || response.statusCode == 204 else {
            throw Failure(description: "PUT answered \(response.statusCode)")
        }
        let (stored, _) = try await manager.get("uploads/notes.txt")
        guard stored == (try Data(contentsOf: file)) else { throw Failure(description: "nginx stored other bytes") }
        return "nginx stored the file (HTTP \(response.statusCode)) and serves it back"
    }

    // NSURLSessionDownloadTask *task = [manager downloadTaskWithRequest:request
    //     progress:^(NSProgress *downloadProgress) { … }
    //     destination:^NSURL *(NSURL *targetPath, NSURLResponse *response) {
    //         return [documents URLByAppendingPathComponent:[response suggestedFilename]];
    //     } completionHandler:^(NSURLResponse *response, NSURL *filePath, NSError *error) { … }];
    // [task resume];
    static func download(_ base: URL, work: URL) async throws -> String {
        let documents = work.appendingPathComponent("documents", isDirectory: true)
        let session = try Session(configuration: .ephemeral)
        let progress = ProgressLog()
        let file: URL = try await withCheckedThrowingContinuation { continuation in
            let task = session.downloadTask(
                with: URLRequest(url: base.appendingPathComponent("files/big.bin")),
                to: .directory(documents)
            ) { location, _, error in
                if let location {
                    continuation.resume(returning: location)
                } else {
                    continuation.resume(throwing: error ?? FerryError(.badServerResponse, "No file and no error."))
                }
            }
            _ = task.onDownloadProgress { progress.record($0) }
            task.resume()
        }
        let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int64 ?? 0
        guard file.deletingLastPathComponent().standardizedFileURL == documents.standardizedFileURL,
            file.lastPathComponent == "big.bin", let last = progress.last, last.completedBytes == size,
            last.totalBytes == size
        else { throw Failure(description: "\(file.path), progress \(String(describing: progress.last))") }
        return "\(size) bytes at documents/\(file.lastPathComponent); \(progress.count) progress calls"
    }

    // [downloadTask cancelByProducingResumeData:^(NSData *resumeData) { self.resumeData = resumeData; }];
    // … later …
    // [[manager downloadTaskWithResumeData:self.resumeData progress:nil destination:…
    //     completionHandler:…] resume];
    static func pauseAndResume(_ base: URL, work: URL) async throws -> String {
        let session = try Session(configuration: .ephemeral)
        let destination = work.appendingPathComponent("resumed.bin")
        let task = session.downloadTask(
            with: URLRequest(url: base.appendingPathComponent("files/big.bin")),
            to: .file(destination)
        )
        let events = task.events
        task.resume()
        // Pause once a quarter of the file is on disk.
        for await event in events {
            if case .wroteData(_, let total, let expected?) = event, total * 4 >= expected { break }
        }
        guard let resumeData = await task.cancelProducingResumeData() else {
            throw Failure(description: "no resume data")
        }
        let paused = resumeData.bytesOnDisk
        let resumed = session.downloadTask(withResumeData: resumeData, to: .file(destination))
        let resumedEvents = resumed.events
        resumed.resume()
        var offset: Int64?
        for await event in resumedEvents {
            if case .resumedAtOffset(let at, _) = event { offset = at }
        }
        if let error = resumed.error { throw error }
        // WORK_DIR/big.bin: the bytes nginx serves as /files/big.bin.
        let original = try Data(contentsOf: work.appendingPathComponent("big.bin"))
        guard let offset, offset > 0, offset == paused, try Data(contentsOf: destination) == original else {
            throw Failure(description: "resumed at \(String(describing: offset)) of paused \(paused)")
        }
        return "paused at byte \(paused), resumed there with a range, the file is identical"
    }
}

/// Progress calls, recorded from any thread.
final class ProgressLog: Sendable {
    private let calls = Mutex<[TransferProgress]>([])

    func record(_ progress: TransferProgress) {
        calls.withLock { $0.append(progress) }
    }

    var last: TransferProgress? { calls.withLock { $0.last } }
    var count: Int { calls.withLock { $0.count } }
}
