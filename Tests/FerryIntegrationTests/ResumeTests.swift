import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A partial download of `/bytes/SIZE?seed=S` cut off by the server, and its resume data.
func makePartial(
    _ server: FerryTestServer,
    session: Session,
    size: Int64 = 200_000,
    seed: UInt64 = 1,
    extra: String = "",
    cutAfter: Int64 = 100_000
) async throws -> ResumeData {
    let url = server.url("/bytes/\(size)?seed=\(seed)&close-after=\(cutAfter)\(extra)")
    let task = session.downloadTask(with: url, to: .file(try makeTemporaryDirectory().appendingPathComponent("never")))
    task.retryPolicy = RetryPolicy.none
    let events = task.events
    task.resume()
    _ = await collectEvents(events)
    let resumeData = try #require(task.error?.resumeData, "no resume data: \(String(describing: task.error))")
    #expect(resumeData.bytesOnDisk > 0 && resumeData.bytesOnDisk <= cutAfter)
    return resumeData
}

/// Resumes `resumeData` against `path` and returns the events, the task and the file.
func resume(
    _ resumeData: ResumeData,
    at path: String?,
    server: FerryTestServer,
    session: Session,
    retry: RetryPolicy = .none
) async throws -> (events: [TaskEvent], task: DownloadTask, file: URL) {
    var resumeData = resumeData
    if let path { resumeData.currentURL = server.url(path) }
    let file = try makeTemporaryDirectory().appendingPathComponent("resumed.bin")
    let task = session.downloadTask(withResumeData: resumeData, to: .file(file))
    task.retryPolicy = retry
    let events = task.events
    task.resume()
    return (await collectEvents(events), task, file)
}

func offsets(_ events: [TaskEvent]) -> [Int64] {
    events.compactMap { if case .resumedAtOffset(let offset, _) = $0 { offset } else { nil } }
}

@Suite("Resume: every hard case")
struct ResumeTests {
    @Test func pauseAndResumeWithResumeData() async throws {
        try await withServer { server in
            let session = try makeSession()
            let target = try makeTemporaryDirectory().appendingPathComponent("p.bin")
            // The server sends 60,000 bytes and then nothing until the client leaves: the
            // task is cancelled in a known state, never after it completed on a fast machine
            // or before its bytes arrived on a loaded one. The resume asks from byte 60,000,
            // which the stall does not hold up.
            let task = session.downloadTask(
                with: server.url("/bytes/300000?seed=3&stall-at=60000"),
                to: .file(target)
            )
            let events = task.events
            task.resume()
            // Cancelled once bytes are on disk. (Progress events are coalesced: the last one
            // before the stall may be short of 60,000, so the first one is what is waited for.)
            for await event in events { if case .wroteData = event { break } }
            let resumeData = try #require(await task.cancelProducingResumeData())
            #expect(task.error?.reason == .cancelled)
            #expect(resumeData.bytesOnDisk > 0 && resumeData.bytesOnDisk <= 60_000)
            #expect(resumeData.validator == .entityTag("\"493e0-3\""))
            // The JSON form round-trips.
            let decoded = try ResumeData(decoding: resumeData.encoded())
            #expect(decoded == resumeData)
            let (file, _) = try await session.download(resumingWith: decoded, to: .file(target))
            #expect(try Data(contentsOf: file) == TestContent.data(size: 300_000, seed: 3))
            let resumed = server.requests.last
            #expect(resumed?.headers["range"] == "bytes=\(resumeData.bytesOnDisk)-")
            #expect(resumed?.headers["if-range"] == "\"493e0-3\"")
        }
    }

    @Test func case1_serverIgnoresRangeRestartsFromZero() async throws {
        try await withServer { server in
            let session = try makeSession()
            let partial = try await makePartial(server, session: session)
            let (events, task, file) = try await resume(
                partial,
                at: "/bytes/200000?seed=1&ignore-range=1",
                server: server,
                session: session
            )
            #expect(task.error == nil)
            #expect(offsets(events) == [0])
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 1))
        }
    }

    @Test func case2_rangeStartingBeforeTheOffsetIsSkippedNotAppended() async throws {
        try await withServer { server in
            let session = try makeSession()
            let partial = try await makePartial(server, session: session)
            let (events, task, file) = try await resume(
                partial,
                at: "/bytes/200000?seed=1&range-early=777",
                server: server,
                session: session
            )
            #expect(task.error == nil)
            #expect(offsets(events) == [partial.bytesOnDisk])
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 1))
        }
    }

    @Test func case2_contentRangeThatDoesNotParseIsAnError() async throws {
        try await withServer { server in
            let session = try makeSession()
            let partial = try await makePartial(server, session: session)
            let (_, task, file) = try await resume(
                partial,
                at: "/bytes/200000?seed=1&bad-content-range=1",
                server: server,
                session: session
            )
            #expect(task.error?.reason == .badServerResponse)
            #expect(!FileManager.default.fileExists(atPath: file.path))
            // The bytes already on disk are untouched and still resumable.
            #expect(task.error?.resumeData?.bytesOnDisk == partial.bytesOnDisk)
        }
    }

    @Test func case3_short206AsksAgainForTheRest() async throws {
        try await withServer { server in
            let session = try makeSession()
            let partial = try await makePartial(server, session: session)
            let before = server.requests.count
            let (_, task, file) = try await resume(
                partial,
                at: "/bytes/200000?seed=1&short206=30000",
                server: server,
                session: session
            )
            #expect(task.error == nil)
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 1))
            let ranges = server.requests.dropFirst(before).compactMap { $0.headers["range"] }
            #expect(ranges.count >= 2, "asked \(ranges)")
        }
    }

    @Test func case4_changedValidatorReplacesThePartial() async throws {
        try await withServer { server in
            let session = try makeSession()
            let partial = try await makePartial(server, session: session, seed: 1)
            // The same path now serves another version (another seed, so another ETag).
            let (events, task, file) = try await resume(
                partial,
                at: "/bytes/200000?seed=2",
                server: server,
                session: session
            )
            #expect(task.error == nil)
            #expect(offsets(events) == [0])
            #expect(server.requests.last?.headers["if-range"] == "\"30d40-1\"")
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 2))
        }
    }

    @Test(arguments: ["&etag=weak", "&etag=none&lastmod=recent"])
    func case5_weakValidatorsAreNeverUsedToResume(validators: String) async throws {
        try await withServer { server in
            let session = try makeSession { $0.retryPolicy = RetryPolicy(maximumRetries: 2, baseDelay: 0.01) }
            let target = try makeTemporaryDirectory().appendingPathComponent("w.bin")
            let url = server.url("/bytes/200000?seed=1&close-after=60000\(validators)")
            do {
                _ = try await session.download(from: url, to: .file(target))
                Issue.record("a download cut at 60000 bytes every time succeeded")
            } catch let error as FerryError {
                // Nothing safe to resume from: no resume data, no partial kept.
                #expect(error.resumeData == nil)
            }
            let sent = server.requests
            #expect(sent.count == 3)
            #expect(sent.allSatisfy { $0.headers["range"] == nil && $0.headers["if-range"] == nil })
            #expect(files(in: session.configuration.downloadsDirectory).isEmpty)
        }
    }

    @Test func case6_noValidatorRestartsUnlessUnvalidatedResumeIsAllowed() async throws {
        try await withServer { server in
            let strict = try makeSession { $0.retryPolicy = RetryPolicy(maximumRetries: 1, baseDelay: 0.01) }
            let target = try makeTemporaryDirectory().appendingPathComponent("n.bin")
            let url = server.url("/bytes/100000?seed=4&close-after=60000&etag=none&lastmod=none")
            await #expect(throws: FerryError.self) { try await strict.download(from: url, to: .file(target)) }
            #expect(server.requests.allSatisfy { $0.headers["range"] == nil })

            let lenient = try makeSession {
                $0.allowsUnvalidatedResume = true
                $0.retryPolicy = RetryPolicy(maximumRetries: 20, baseDelay: 0.01)
            }
            let (file, _) = try await lenient.download(from: url, to: .file(target))
            #expect(try Data(contentsOf: file) == TestContent.data(size: 100_000, seed: 4))
            let last = try #require(server.requests.last)
            #expect(last.headers["range"] != nil)
            #expect(last.headers["if-range"] == nil)
        }
    }

    @Test func case7_416ProvesCompletionOnlyWhenLengthAndValidatorMatch() async throws {
        try await withServer { server in
            let session = try makeSession()
            var partial = try await makePartial(server, session: session, size: 200_000)
            // Finish the partial file by hand, as a crash after the last write would leave it.
            let rest = TestContent.data(size: 200_000, seed: 1, range: partial.bytesOnDisk..<200_000)
            let handle = try FileHandle(forWritingTo: partial.partialFile)
            try handle.seekToEnd()
            try handle.write(contentsOf: rest)
            try handle.close()
            partial.bytesOnDisk = 200_000
            let (_, task, file) = try await resume(partial, at: nil, server: server, session: session)
            #expect(task.error == nil)
            #expect(server.requests.last?.headers["range"] == "bytes=200000-")
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 1))

            // The same 416 for another version (another validator) restarts instead.
            var other = try await makePartial(server, session: session, size: 200_000, seed: 5)
            other.bytesOnDisk = min(other.bytesOnDisk, 1000)
            other.currentURL = server.url("/bytes/1000?seed=5")
            let (events, otherTask, otherFile) = try await resume(other, at: nil, server: server, session: session)
            #expect(otherTask.error == nil)
            #expect(offsets(events) == [0])
            #expect(try Data(contentsOf: otherFile) == TestContent.data(size: 1000, seed: 5))
        }
    }

    @Test func case8_missingOrEditedPartialFileRestarts() async throws {
        try await withServer { server in
            let session = try makeSession()
            let removed = try await makePartial(server, session: session)
            try FileManager.default.removeItem(at: removed.partialFile)
            let (events, task, file) = try await resume(
                removed,
                at: "/bytes/200000?seed=1",
                server: server,
                session: session
            )
            #expect(task.error == nil)
            #expect(offsets(events) == [0])
            #expect(server.requests.last?.headers["range"] == nil)
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 1))

            let shortened = try await makePartial(server, session: session)
            try FileHandle(forWritingTo: shortened.partialFile).truncate(atOffset: UInt64(shortened.bytesOnDisk / 2))
            let (shortEvents, shortTask, shortFile) = try await resume(
                shortened,
                at: "/bytes/200000?seed=1",
                server: server,
                session: session
            )
            #expect(shortTask.error == nil)
            #expect(offsets(shortEvents) == [0])
            #expect(try Data(contentsOf: shortFile) == TestContent.data(size: 200_000, seed: 1))
        }
    }

    @Test func case9_truncationIsAnErrorWithResumeDataNeverSuccess() async throws {
        try await withServer { server in
            let session = try makeSession { $0.retryPolicy = .none }
            let target = try makeTemporaryDirectory().appendingPathComponent("t.bin")
            do {
                _ = try await session.download(from: server.url("/bytes/100000?lie-length=150000"), to: .file(target))
                Issue.record("a body shorter than its Content-Length was delivered")
            } catch let error as FerryError {
                #expect(error.resumeData != nil)
            }
            #expect(!FileManager.default.fileExists(atPath: target.path))
        }
    }

    @Test func case10_errorBodiesNeverEnterThePartial() async throws {
        try await withServer { server in
            let session = try makeSession()
            let partial = try await makePartial(server, session: session)
            let before = try Data(contentsOf: partial.partialFile)
            let (_, task, file) = try await resume(partial, at: "/status/500", server: server, session: session)
            #expect(task.error?.reason == .unacceptableStatusCode(500))
            #expect(task.error?.responseBodyPrefix == Data("status 500\n".utf8))
            #expect(try Data(contentsOf: partial.partialFile) == before)
            #expect(!FileManager.default.fileExists(atPath: file.path))

            // A 416 error page (no Content-Range proving anything): not data either.
            let other = try await makePartial(server, session: session, seed: 2)
            let (_, rangeTask, rangeFile) = try await resume(other, at: "/status/416", server: server, session: session)
            #expect(rangeTask.error?.reason == .unacceptableStatusCode(416))
            #expect(rangeTask.error?.responseBodyPrefix == Data("status 416\n".utf8))
            #expect(!FileManager.default.fileExists(atPath: rangeFile.path))
            let leftovers = files(in: session.configuration.downloadsDirectory)
                .filter { $0.hasSuffix(".partial") }
                .map { try? Data(contentsOf: session.configuration.downloadsDirectory.appendingPathComponent($0)) }
            #expect(!leftovers.contains(Data("status 416\n".utf8)))
        }
    }

    @Test func case11_identityEncodingAndNoRangesOverCodedBodies() async throws {
        try await withServer { server in
            let session = try makeSession()
            let partial = try await makePartial(server, session: session)
            let (events, task, file) = try await resume(
                partial,
                at: "/bytes/200000?seed=1&encoding=gzip",
                server: server,
                session: session
            )
            #expect(task.error == nil)
            // The coded 206 was not used: the download restarted with a full request.
            #expect(offsets(events) == [0])
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 1))
            #expect(server.requests.allSatisfy { $0.headers["accept-encoding"] == "identity" })
        }
    }

    @Test func case12_unknownLengthResumesWithAValidatorAndCompletesOnACleanEnd() async throws {
        try await withServer { server in
            let session = try makeSession()
            let partial = try await makePartial(server, session: session, extra: "&chunked=1")
            #expect(partial.totalLength == nil)
            let (_, task, file) = try await resume(
                partial,
                at: "/bytes/200000?seed=1&chunked=1",
                server: server,
                session: session
            )
            #expect(task.error == nil)
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 1))
        }
    }

    @Test func case13_rangeGoesToTheFinalURLAndAFreshURLCanReplaceIt() async throws {
        try await withServer { server in
            let session = try makeSession()
            let target = try makeTemporaryDirectory().appendingPathComponent("r.bin")
            let task = session.downloadTask(
                with: server.url("/redirect/2?to=/bytes/200000%3Fseed%3D1%26close-after%3D90000"),
                to: .file(target)
            )
            task.retryPolicy = RetryPolicy.none
            let events = task.events
            task.resume()
            _ = await collectEvents(events)
            let partial = try #require(task.error?.resumeData)
            #expect(partial.currentURL.path == "/bytes/200000")
            // Resuming goes straight to the final URL with the range (which still cuts the
            // body, so the task retries, resuming again).
            let before = server.requests.count
            let (_, resumed, file) = try await resume(
                partial,
                at: nil,
                server: server,
                session: session,
                retry: RetryPolicy(maximumRetries: 20, baseDelay: 0.01)
            )
            #expect(resumed.error == nil)
            #expect(server.requests[before].uri.hasPrefix("/bytes/200000"))
            #expect(server.requests[before].headers["range"] == "bytes=\(partial.bytesOnDisk)-")
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 1))

            // An expired URL replaced by a fresh one for the same content: the validator and
            // length identify the file, so the bytes on disk are kept.
            let again = try await makePartial(server, session: session)
            let (freshEvents, fresh, freshFile) = try await resume(
                again,
                at: "/bytes/200000?seed=1&signature=fresh",
                server: server,
                session: session
            )
            #expect(fresh.error == nil)
            #expect(offsets(freshEvents) == [again.bytesOnDisk])
            #expect(try Data(contentsOf: freshFile) == TestContent.data(size: 200_000, seed: 1))
        }
    }

    @Test func case14_transientFailuresAreRetriedByResuming() async throws {
        try await withServer { server in
            let session = try makeSession { $0.retryPolicy = RetryPolicy(maximumRetries: 20, baseDelay: 0.01) }
            let target = try makeTemporaryDirectory().appendingPathComponent("retry.bin")
            let task = session.downloadTask(
                with: server.url("/bytes/200000?seed=6&close-after=70000"),
                to: .file(target)
            )
            let events = task.events
            task.resume()
            let seen = await collectEvents(events)
            #expect(task.error == nil)
            #expect(seen.contains { $0.name == "willRetry" })
            #expect(offsets(seen).first ?? 0 > 0)
            #expect(try Data(contentsOf: target) == TestContent.data(size: 200_000, seed: 6))

            // 503 twice, then the body; Retry-After is honoured.
            let started = ContinuousClock.now
            let (file, _) = try await session.download(
                from: server.url("/bytes/1000?fail-first=2&retry-after=1"),
                to: .file(target)
            )
            #expect(ContinuousClock.now - started >= .seconds(2))
            #expect(try Data(contentsOf: file) == TestContent.data(size: 1000))

            // A 404 is final: one request.
            let before = server.requests.count
            await #expect(throws: FerryError.self) {
                try await session.download(from: server.url("/status/404"), to: .file(target))
            }
            #expect(server.requests.count == before + 1)
        }
    }

    @Test func invalidResumeDataIsATypedError() {
        for bytes in [Data(), Data("{}".utf8), Data("not json".utf8), Data(#"{"version": 99}"#.utf8)] {
            #expect(throws: FerryError.self) { try ResumeData(decoding: bytes) }
        }
    }

    @Test func resumeDataNeverTruncatesAFileThatIsNotAPartial() async throws {
        try await withServer { server in
            let session = try makeSession()
            var partial = try await makePartial(server, session: session)
            // Resume data from elsewhere names a file of the user's: it must not be touched.
            let victim = try makeTemporaryDirectory("victim").appendingPathComponent("important.txt")
            let precious = Data(String(repeating: "keep me ", count: 20_000).utf8)
            try precious.write(to: victim)
            partial.partialFile = victim
            partial.bytesOnDisk = 10
            let (events, task, file) = try await resume(
                partial,
                at: "/bytes/200000?seed=1",
                server: server,
                session: session
            )
            #expect(task.error == nil)
            #expect(offsets(events) == [0])
            #expect(try Data(contentsOf: victim) == precious)
            #expect(try Data(contentsOf: file) == TestContent.data(size: 200_000, seed: 1))
        }
    }
}
