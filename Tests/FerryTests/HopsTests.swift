import Foundation
import Testing

@testable import Ferry

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Hops between requests")
struct HopsTests {
    func request(_ path: String, _ method: HTTPMethod = .get) throws -> URLRequest {
        URLRequest(url: try #require(URL(string: "http://h\(path)")), method: method)
    }

    @Test func countsAndReasons() throws {
        var hops = Hops(request: try request("/a"), body: .data(Data("x".utf8)), reason: .initial)
        try hops.redirect(to: try request("/b"), keepsBody: true)
        #expect(hops.redirects == 1 && hops.reason == .redirect && hops.body != nil)
        hops.answerChallenge(with: try request("/b"))
        #expect(hops.challengesAnswered == 1 && hops.reason == .authentication)
        hops.retry(with: try request("/b"))
        #expect(hops.interceptorRetries == 1 && hops.challengesAnswered == 0 && hops.reason == .retry)
        try hops.redirect(to: try request("/c", .get), keepsBody: false)
        #expect(hops.body == nil && hops.request.url?.path == "/c")
    }

    @Test func theSameRequestAThirdTimeIsALoop() throws {
        var hops = Hops(request: try request("/a"), body: nil, reason: .initial)
        try hops.redirect(to: try request("/b"), keepsBody: false)
        try hops.redirect(to: try request("/a"), keepsBody: false)
        try hops.redirect(to: try request("/b"), keepsBody: false)
        // A different method is a different request.
        try hops.redirect(to: try request("/b", .head), keepsBody: false)
        #expect(throws: FerryError.self) { try hops.redirect(to: try request("/b"), keepsBody: false) }
    }
}
