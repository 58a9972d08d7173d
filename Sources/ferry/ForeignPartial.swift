import Ferry
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `ferry get -c` over a file Ferry did not write (a partial left by a browser, wget or
/// curl): continued only once its last bytes are found to be the server's.
///
/// curl `-C -` and `wget -c` append whatever the server has now to whatever the file holds.
/// Here a range that overlaps the file's last bytes (up to 64 KiB) is asked for first; the
/// file is continued only when the server answers that range with the same bytes, from the
/// version its validator names (the continuation's `If-Range` holds the server to it).
/// Otherwise the download starts over, and says why: the bytes differ, the file is longer
/// than the server's, or the server ignored `Range`.
enum ForeignPartial {
    /// What the check found.
    enum Verdict {
        /// Continue from the file's end: `resume` describes it (now a partial file of
        /// Ferry's); `overlap` bytes were checked against the server's.
        case continues(ResumeData, overlap: Int64)
        /// The file is the server's whole file already: its length and its last `overlap`
        /// bytes match.
        case complete(bytes: Int64, overlap: Int64)
        /// The file cannot be continued, for this reason; the download starts over.
        case startsOver(String)
        /// Nothing was learned (the server failed, or answered an error): the download
        /// goes on as if the file were not there, and meets the same answer.
        case unknown
    }

    /// The most bytes compared.
    static let overlap: Int64 = 64 * 1024

    /// Checks `file` (`length` bytes) against `request`'s resource, over a session of
    /// `configuration`'s (its own: the continuation may need
    /// ``SessionConfiguration/allowsUnvalidatedResume``).
    static func examine(
        _ file: URL,
        length: Int64,
        request: URLRequest,
        configuration: SessionConfiguration
    ) async -> Verdict {
        let overlap = min(length, Self.overlap)
        var probe = request
        probe.setValue("bytes=\(length - overlap)-\(length - 1)", forHTTPHeaderField: "Range")
        probe.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        var probing = configuration
        probing.automaticDecompression = false
        guard let session = try? Session(configuration: probing) else { return .unknown }
        defer { session.invalidateAndCancel() }
        let bytes: ResponseBytes
        let head: HTTPResponse
        do {
            (bytes, head) = try await session.bytes(for: probe)
        } catch {
            return .unknown
        }
        defer { bytes.task.cancel() }
        switch head.statusCode {
        case 206:
            break
        case 200:
            return .startsOver("the server ignored Range (it answered 200 with the whole file)")
        case 416:
            return .startsOver("it is longer than the server's file")
        default:
            return .unknown
        }
        guard
            case .satisfied(let first, let last, let complete)? = head.headers["Content-Range"].flatMap(
                ContentRange.init
            )
        else { return .startsOver("the server answered 206 without a Content-Range that parses") }
        if let complete, complete < length { return .startsOver("it is longer than the server's file") }
        guard first == length - overlap, last == length - 1 else {
            return .startsOver("the server answered another range than the one asked for")
        }
        var theirs = Data()
        do {
            for try await chunk in bytes.chunks {
                theirs.append(contentsOf: chunk)
                if Int64(theirs.count) >= overlap { break }
            }
        } catch {
            return .unknown
        }
        guard Int64(theirs.count) >= overlap, let ours = tail(of: file, from: length - overlap, count: Int(overlap)),
            theirs.prefix(Int(overlap)) == ours
        else { return .startsOver("its last \(overlap) bytes are not the server's") }
        if complete == length { return .complete(bytes: length, overlap: overlap) }
        do {
            let resume = try ResumeData.adopting(
                file,
                bytes: length,
                request: request,
                response: head,
                totalLength: complete
            )
            return .continues(resume, overlap: overlap)
        } catch {
            return .startsOver(error.message)
        }
    }

    /// `count` bytes of `file` from `offset`, or `nil` when they cannot be read.
    private static func tail(of file: URL, from offset: Int64, count: Int) -> Data? {
        guard let handle = try? FileHandle(forReadingFrom: file) else { return nil }
        defer { try? handle.close() }
        guard (try? handle.seek(toOffset: UInt64(offset))) != nil, let data = try? handle.read(upToCount: count),
            data.count == count
        else { return nil }
        return data
    }
}

extension ForeignPartial {
    /// For `ferry get -c -o FILE` when Ferry has no resume data for FILE and FILE is a
    /// non-empty regular file: checks it, and when it continues, stores its resume data
    /// under `key` for the download to find (``SessionTask/resumesFromStore``) and lets
    /// the session resume without a validator when the server gave none (the overlap was
    /// the check). Says what it found unless `speak` is false.
    ///
    /// - Parameter replaces: whether the download may replace the file (`-o`, `--clobber`);
    ///   otherwise a file that cannot be continued is left as it is, and the download then
    ///   refuses to overwrite it.
    /// - Returns: `true` when the file is the server's whole file already (nothing to do).
    static func check(
        _ output: String,
        key: String,
        request: URLRequest,
        configuration: inout SessionConfiguration,
        replaces: Bool = true,
        speak: Bool
    ) async -> Bool {
        let file = URL(fileURLWithPath: output)
        guard let store = configuration.resumeStore, store.resumeData(for: key) == nil,
            let attributes = try? FileManager.default.attributesOfItem(atPath: output),
            attributes[.type] as? FileAttributeType == .typeRegular,
            let length = (attributes[.size] as? NSNumber)?.int64Value, length > 0
        else { return false }
        let said: String?
        switch await examine(file, length: length, request: request, configuration: configuration) {
        case .continues(let resume, let overlap):
            do {
                try store.save(resume, for: key)
            } catch {
                // Put back where it was: nothing is lost, and the download starts over.
                _ = rename(resume.partialFile.path, output)
                say(speak, "ferry: '\(output)' cannot be continued (\(error)); downloading it again from byte 0")
                return false
            }
            if resume.validator == nil { configuration.allowsUnvalidatedResume = true }
            said =
                "ferry: '\(output)' was not written by ferry; its last \(overlap) bytes are the server's: continuing it"
                + (resume.validator == nil ? " (the server names no version: the overlap is the only check)" : "")
        case .complete(let bytes, let overlap):
            say(speak, "ferry: '\(output)' is complete already (\(bytes) bytes, its last \(overlap) the server's)")
            return true
        case .startsOver(let reason):
            let then = replaces ? "downloading it again from byte 0" : "left as it is (--clobber downloads it again)"
            said = "ferry: '\(output)' was not written by ferry and cannot be continued: \(reason); \(then)"
        case .unknown:
            said = nil
        }
        if let said { say(speak, said) }
        return false
    }

    /// Why a download `-c` continued started over at byte 0 after all, given what it had
    /// kept (`earlier`) and the response that answered.
    static func whyStartedOver(_ earlier: ResumeData, answer: HTTPResponse?) -> String {
        guard let answer, answer.statusCode == 200 else { return "the bytes kept could not be used" }
        if let kept = earlier.validator, let now = Validator(response: answer), kept != now {
            return "the file changed on the server (\(kept) then, \(now) now)"
        }
        return "the server ignored Range (it answered 200 with the whole file)"
    }

    private static func say(_ speak: Bool, _ text: String) {
        if speak { FileHandle.standardError.write(Data((text + "\n").utf8)) }
    }
}
