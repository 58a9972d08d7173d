import AsyncHTTPClient
import Foundation
import Testing

@testable import Ferry

@Suite("FerryError")
struct FerryErrorTests {
    @Test func reasonsCompareByKindAndValue() {
        #expect(FerryError.Reason.cancelled == .cancelled)
        #expect(FerryError.Reason.cancelled != .cancelledByDelegate)
        #expect(FerryError.Reason.timedOut(.idle) == .timedOut(.idle))
        #expect(FerryError.Reason.timedOut(.idle) != .timedOut(.resource))
        #expect(FerryError.Reason.unacceptableStatusCode(404) != .unacceptableStatusCode(500))
        #expect(FerryError.Reason.bodyTooLarge(limit: 10) == .bodyTooLarge(limit: 10))
        #expect(Set<FerryError.Reason>([.network, .network, .fileSystem]).count == 2)
    }

    @Test func carriedValuesAreReadThroughTheirProperties() {
        #expect(FerryError.Reason.unacceptableStatusCode(418).statusCode == 418)
        #expect(FerryError.Reason.network.statusCode == nil)
        #expect(FerryError.Reason.unacceptableContentType("text/html").contentType == "text/html")
        #expect(FerryError.Reason.unacceptableContentType(nil).contentType == nil)
        #expect(FerryError.Reason.timedOut(.resource).timeout == .resource)
        #expect(FerryError.Reason.cancelled.timeout == nil)
        #expect(FerryError.Reason.bodyTooLarge(limit: 1024).limit == 1024)
        #expect(FerryError.Reason.fileSystem.limit == nil)
    }

    /// The rarely set fields live in a box shared by copies: changing one copy's field never
    /// shows in another, and clearing the last one empties the box.
    @Test func boxedFieldsKeepValueSemantics() throws {
        let url = try #require(URL(string: "https://example.com/file"))
        let resume = ResumeData(
            originalURL: url,
            currentURL: url,
            headers: [:],
            bytesOnDisk: 5,
            totalLength: 10,
            validator: .entityTag("\"a\""),
            partialFile: URL(fileURLWithPath: "/tmp/x.partial")
        )
        let original = FerryError(
            .unacceptableStatusCode(503),
            "HTTP 503",
            response: HTTPResponse(url: url, statusCode: 503),
            responseBodyPrefix: Data("busy".utf8),
            underlying: CancellationError()
        )
        var copy = original
        copy.resumeData = resume
        copy.response?.statusCode = 502
        copy.responseBodyPrefix = nil
        #expect(original.resumeData == nil)
        #expect(original.response?.statusCode == 503)
        #expect(original.responseBodyPrefix == Data("busy".utf8))
        #expect(original.underlying is CancellationError)
        #expect(copy.resumeData == resume)
        #expect(copy.response?.statusCode == 502)
        #expect(copy.responseBodyPrefix == nil)
        #expect(copy.underlying is CancellationError)

        var plain = FerryError(.cancelled, "stopped")
        #expect(plain.response == nil && plain.resumeData == nil && plain.uploadResumeData == nil)
        plain.resumeData = resume
        plain.resumeData = nil
        #expect(plain.resumeData == nil && plain.underlying == nil)
        #expect(MemoryLayout<FerryError>.size <= 64, "the error is held in every typed-throws frame")
    }

    /// A user's `switch` matches static values (with a `default`, so that later reasons do
    /// not break it).
    @Test func aSwitchMatchesStaticValues() {
        func verdict(_ reason: FerryError.Reason) -> String {
            switch reason {
            case .cancelled: "stop"
            case .timedOut(.idle): "retry"
            case .unacceptableStatusCode(404): "missing"
            default: "other"
            }
        }
        #expect(verdict(.cancelled) == "stop")
        #expect(verdict(.timedOut(.idle)) == "retry")
        #expect(verdict(.timedOut(.resource)) == "other")
        #expect(verdict(.unacceptableStatusCode(404)) == "missing")
        #expect(verdict(.unacceptableStatusCode(500)) == "other")
    }

    @Test func descriptionsAreTheSwiftNames() {
        #expect("\(FerryError.Reason.cancelled)" == "cancelled")
        #expect("\(FerryError.Reason.timedOut(.idle))" == "timedOut(idle)")
        #expect("\(FerryError.Reason.unacceptableStatusCode(404))" == "unacceptableStatusCode(404)")
        #expect("\(FerryError.Reason.unacceptableContentType(nil))" == "unacceptableContentType(none)")
        #expect("\(FerryError.Reason.bodyTooLarge(limit: 7))" == "bodyTooLarge(limit: 7)")
    }

    /// The lower layer's error is kept as a value the caller can inspect, not a string.
    @Test func theUnderlyingErrorIsKeptAsAValue() throws {
        let serializer = DecodableResponseSerializer([Int].self)
        let response = HTTPResponse(url: URL(string: "http://example.com/")!, statusCode: 200)
        do {
            _ = try serializer.serialize(Data("not json".utf8), response: response)
            Issue.record("the body was decoded")
        } catch let error as FerryError {
            #expect(error.reason == .serializationFailed)
            #expect(error.underlying is DecodingError)
            #expect(error.description.hasPrefix(error.message))
        }
        let mapped = FerryError.mapping(CocoaError(.fileNoSuchFile))
        #expect((mapped.underlying as? CocoaError)?.code == .fileNoSuchFile)
        #expect(FerryError.mapping(CancellationError()).reason == .cancelled)
    }

    /// Every way AsyncHTTPClient says a connection took too long is a timeout, not a
    /// failed transfer (its TLS handshake's came back as `.network` before).
    @Test func connectionTimeoutsAreTimeouts() {
        let timeouts: [HTTPClientError] = [
            .readTimeout, .connectTimeout, .tlsHandshakeTimeout, .socksHandshakeTimeout, .httpProxyHandshakeTimeout,
        ]
        for timeout in timeouts {
            #expect(FerryError.mapping(timeout).reason == .timedOut(.idle), "\(timeout)")
        }
    }
}
