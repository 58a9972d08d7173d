import Foundation
import NIOHPACK
import NIOHTTP1
import Testing

@testable import Ferry

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Requests and responses")
struct RequestAndResponseTests {
    let url = URL(string: "http://h.test/path?a=1")!

    struct Login: Encodable {
        var user: String
        var remember: Bool
        var tags: [String]
        var nickname: String?
    }

    @Test func queryEncoderAppendsSortedEscapedPairs() throws {
        let request = try URLEncodedFormParameterEncoder.query.encode(
            ["q": "swift nio", "amp": "a&b=c", "ü": "ß"],
            into: URLRequest(url: url)
        )
        #expect(request.url?.absoluteString == "http://h.test/path?a=1&amp=a%26b%3Dc&q=swift+nio&%C3%BC=%C3%9F")
    }

    @Test func formEncoderFlattensStructs() throws {
        let request = try URLEncodedFormParameterEncoder.form.encode(
            Login(user: "ada", remember: true, tags: ["x", "y"], nickname: nil),
            into: URLRequest(url: url, method: .post)
        )
        #expect(String(decoding: request.httpBody ?? Data(), as: UTF8.self) == "remember=true&tags=x&tags=y&user=ada")
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/x-www-form-urlencoded; charset=utf-8")
    }

    /// AFNetworking writes arrays with empty brackets; the manager does the same, the
    /// encoders repeat the name unless asked.
    @Test func arraysAsRepeatedNamesOrWithBrackets() throws {
        let login = Login(user: "ada", remember: true, tags: ["x", "y"], nickname: nil)
        let brackets = URLEncodedFormParameterEncoder(destination: .body, arrayEncoding: .brackets)
        let body = try brackets.encode(login, into: URLRequest(url: url, method: .post)).httpBody ?? Data()
        #expect(String(decoding: body, as: UTF8.self) == "remember=true&tags%5B%5D=x&tags%5B%5D=y&user=ada")
        struct Nested: Encodable { var filter: [String: [Int]] }
        let query = URLEncodedFormParameterEncoder(destination: .query, arrayEncoding: .brackets)
        let nested = try query.encode(Nested(filter: ["id": [1, 2]]), into: URLRequest(url: url))
        #expect(nested.url?.query == "a=1&filter%5Bid%5D%5B%5D=1&filter%5Bid%5D%5B%5D=2")
        let manager = HTTPSessionManager(baseURL: url, session: try Session())
        let get = try manager.request(.get, "items", parameters: ["tag": ["a", "b"]])
        #expect(get.url?.query == "tag%5B%5D=a&tag%5B%5D=b")
        manager.queryArrayEncoding = .repeatedName
        #expect(try manager.request(.get, "items", parameters: ["tag": ["a", "b"]]).url?.query == "tag=a&tag=b")
        let post = try manager.request(.post, "items", parameters: ["tag": ["a", "b"]])
        #expect(String(decoding: post.httpBody ?? Data(), as: UTF8.self) == "tag%5B%5D=a&tag%5B%5D=b")
    }

    @Test func formEncoderRejectsNonKeyedValues() {
        #expect(throws: FerryError.self) {
            try URLEncodedFormParameterEncoder.form.encode(["a", "b"], into: URLRequest(url: url))
        }
    }

    @Test func jsonEncoderSetsBodyAndType() throws {
        let request = try JSONParameterEncoder.default.encode(
            Login(user: "ada", remember: false, tags: [], nickname: "a"),
            into: URLRequest(url: url, method: .post)
        )
        #expect(
            String(decoding: request.httpBody ?? Data(), as: UTF8.self)
                == #"{"nickname":"a","remember":false,"tags":[],"user":"ada"}"#
        )
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/json")
    }

    /// The request target as sent (RFC 9112 §3.2.1): the path and query still
    /// percent-encoded, `/` for none, no fragment; a URL relative to a base sends the path
    /// it resolves to.
    @Test(arguments: [
        ("https://h.test", "/"),
        ("https://h.test/", "/"),
        ("https://h.test?q", "/?q"),
        ("https://h.test/p?", "/p?"),
        ("https://h.test/a%20b/c?x=1&y=%2F#frag", "/a%20b/c?x=1&y=%2F"),
        ("https://h.test//double//slash", "//double//slash"),
        ("https://user:secret@h.test/x", "/x"),
        ("http://[::1]:8080/%7Euser/", "/%7Euser/"),
    ])
    func requestTargetIsTheOriginForm(url: String, target: String) throws {
        #expect(try #require(URL(string: url)).requestTarget == target)
    }

    /// A host as an authority writes it (RFC 3986 §3.2.2): an IPv6 literal in brackets, once.
    @Test func authorityHosts() {
        #expect(URL.authorityHost("h.test") == "h.test")
        #expect(URL.authorityHost("127.0.0.1") == "127.0.0.1")
        #expect(URL.authorityHost("::1") == "[::1]")
        #expect(URL.authorityHost("[::1]") == "[::1]")
        #expect(URL.authorityHost("") == "")
    }

    /// An HTTP/2 request's header block (RFC 9113 §8.3.1): the pseudo-header fields first,
    /// an IPv6 literal bracketed in `:authority` (or the request's own `Host`), names in
    /// lower case, the connection-specific fields left out (§8.2.2), credentials never
    /// indexed (RFC 7541 §7.1.3).
    @Test func http2HeaderBlock() throws {
        var fields = HTTPHeaders()
        fields.add(name: "Accept", value: "*/*")
        fields.add(name: "Connection", value: "keep-alive")
        fields.add(name: "TE", value: "gzip")
        fields.add(name: "Authorization", value: "Bearer t")
        let url = try #require(URL(string: "https://[::1]:8443/a%20b?c=1"))
        let block = HTTP2Connection.headerBlock(method: .GET, url: url, fields: fields)
        #expect(
            block.map { "\($0.name): \($0.value)" } == [
                ":method: GET", ":scheme: https", ":authority: [::1]:8443", ":path: /a%20b?c=1", "accept: */*",
                "authorization: Bearer t",
            ]
        )
        #expect(block.first { $0.name == "authorization" }?.indexable == .neverIndexed)
        fields.add(name: "Host", value: "example.org")
        let named = HTTP2Connection.headerBlock(
            method: .HEAD,
            url: try #require(URL(string: "http://127.0.0.1/")),
            fields: fields
        )
        #expect(named.first(name: ":authority") == "example.org")
        #expect(named.first(name: ":scheme") == "http")
        #expect(named.first(name: "host") == nil)
    }

    @Test func aRelativeURLsTargetIsTheResolvedPath() throws {
        let base = try #require(URL(string: "https://h.test/v1/"))
        let url = try #require(URL(string: "users?page=2", relativeTo: base))
        #expect(url.requestTarget == "/v1/users?page=2")
        #expect(url.requestPath == "/v1/users")
    }

    @Test func basicAuthorization() {
        var request = URLRequest(url: url)
        request.setBasicAuthorization(username: "user", password: "pä:ss")
        #expect(request.value(forHTTPHeaderField: "Authorization") == "Basic dXNlcjpww6Q6c3M=")
        #expect(BasicAuthentication.parseUserPassword("a:b:c") == ("a", "b:c"))
        #expect(BasicAuthentication.parseUserPassword("a") == ("a", ""))
    }

    @Test func headerFieldsAreOrderedAndCaseInsensitive() {
        var fields: HeaderFields = ["Set-Cookie": "a=1", "Content-Type": "text/plain"]
        fields.add(name: "set-cookie", value: "b=2")
        #expect(fields["SET-COOKIE"] == "a=1")
        #expect(fields.values(for: "Set-Cookie") == ["a=1", "b=2"])
        fields["set-cookie"] = "c=3"
        #expect(fields.values(for: "Set-Cookie") == ["c=3"])
        #expect(fields.fields.first?.value == "c=3")
        fields["Content-Type"] = nil
        #expect(!fields.contains("content-type"))
    }

    @Test func responseMetadata() {
        let response = HTTPResponse(
            url: url,
            statusCode: 200,
            headers: ["Content-Type": "Text/HTML; Charset=\"ISO-8859-1\"", "Content-Length": " 42 "]
        )
        #expect(response.mimeType == "text/html")
        #expect(response.textEncodingName == "iso-8859-1")
        #expect(response.expectedContentLength == 42)
        #expect(HTTPResponse(url: url, statusCode: 200, headers: ["Content-Length": "-1"]).expectedContentLength == nil)
    }

    @Test func contentLengthIsDigitsWithBlanksAround() {
        func length(_ value: String) -> Int64? {
            HTTPResponse(url: url, statusCode: 200, headers: ["Content-Length": value]).expectedContentLength
        }
        #expect(length("0") == 0)
        #expect(length("\t7 ") == 7)
        #expect(length("007") == 7)
        #expect(length("9223372036854775807") == Int64.max)
        for bad in ["", " ", "4 2", "+42", "-0", "42a", "0x10", "9223372036854775808", "١٢"] {
            #expect(length(bad) == nil, "'\(bad)'")
        }
        #expect(HTTPResponse(url: url, statusCode: 200, headers: [:]).expectedContentLength == nil)
    }

    @Test func validation() throws {
        let ok = HTTPResponse(url: url, statusCode: 200, headers: ["Content-Type": "application/json; charset=utf-8"])
        try ResponseValidation.successful.accepting(contentTypes: ["application/*"]).validate(ok)
        #expect(throws: FerryError.self) {
            try ResponseValidation.successful.accepting(contentTypes: ["text/html"]).validate(ok)
        }
        let missing = HTTPResponse(url: url, statusCode: 404)
        do {
            try ResponseValidation.successful.validate(missing, body: Data("nope".utf8))
            Issue.record("a 404 passed validation")
        } catch let error as FerryError {
            #expect(error.reason == .unacceptableStatusCode(404))
            #expect(error.responseBodyPrefix == Data("nope".utf8))
        }
    }

    @Test func stringSerializerUsesTheCharset() throws {
        let latin1 = HTTPResponse(
            url: url,
            statusCode: 200,
            headers: ["Content-Type": "text/plain; charset=iso-8859-1"]
        )
        #expect(try StringResponseSerializer().serialize(Data([0x63, 0x61, 0x66, 0xE9]), response: latin1) == "café")
        let none = HTTPResponse(url: url, statusCode: 200)
        #expect(try StringResponseSerializer().serialize(Data("naïve".utf8), response: none) == "naïve")
        #expect(try StringResponseSerializer().serialize(Data([0xE9]), response: none) == "é")
        let utf8 = HTTPResponse(url: url, statusCode: 200, headers: ["Content-Type": "text/plain; charset=utf-8"])
        #expect(throws: FerryError.self) {
            try StringResponseSerializer().serialize(Data([0xFF, 0xFE, 0xE9]), response: utf8)
        }
    }

    @Test func decodableSerializer() throws {
        struct User: Decodable, Sendable, Equatable { var name: String }
        let response = HTTPResponse(url: url, statusCode: 200)
        #expect(
            try DecodableResponseSerializer(User.self).serialize(Data(#"{"name":"ada"}"#.utf8), response: response)
                == User(name: "ada")
        )
        #expect(throws: FerryError.self) {
            try DecodableResponseSerializer(User.self).serialize(Data("[".utf8), response: response)
        }
    }

    /// A `204` (or any empty body) decodes as `nil` for an `Optional` and as `Empty`, as
    /// AFNetworking and Alamofire give them; other types fail with a reason that says how.
    @Test func anEmptyBodyDecodesAsNilOrEmpty() throws {
        struct User: Decodable, Sendable, Equatable { var name: String }
        let noContent = HTTPResponse(url: url, statusCode: 204)
        #expect(try DecodableResponseSerializer(User?.self).serialize(Data(), response: noContent) == nil)
        #expect(try DecodableResponseSerializer(Empty.self).serialize(Data(), response: noContent) == Empty())
        #expect(try DecodableResponseSerializer(Empty.self).serialize(Data(" \n".utf8), response: noContent) == .value)
        let error = #expect(throws: FerryError.self) {
            try DecodableResponseSerializer(User.self).serialize(Data(), response: noContent)
        }
        #expect(error?.reason == .serializationFailed)
        #expect(error?.description.contains("Optional or Empty") == true)
        let ok = HTTPResponse(url: url, statusCode: 200)
        #expect(
            try DecodableResponseSerializer(User?.self).serialize(Data(#"{"name":"b"}"#.utf8), response: ok)
                == User(name: "b")
        )
    }

    @Test func progressThrottleNeverLosesBytes() {
        var throttle = ProgressThrottle()
        let start = ContinuousClock.now
        var published: Int64 = 0
        for step in 0..<100 {
            if let due = throttle.add(10, now: start + .milliseconds(step * 7)) { published += due }
        }
        if let rest = throttle.flush() { published += rest }
        #expect(published == 1000)
        let leftover = throttle.flush()
        #expect(leftover == nil)
    }

    @Test func progressFraction() {
        #expect(TransferProgress(completedBytes: 5, totalBytes: nil).fractionCompleted == nil)
        #expect(TransferProgress(completedBytes: 5, totalBytes: 10).fractionCompleted == 0.5)
        #expect(TransferProgress(completedBytes: 0, totalBytes: 0).fractionCompleted == 1)
    }

    @Test func invalidConfigurationsAreRejectedClearly() {
        #expect {
            try Session(configuration: .background(identifier: "not/an identifier"))
        } throws: { error in
            (error as? FerryError)?.reason == .unsupportedConfiguration
        }
        var bad = SessionConfiguration.default
        bad.httpMaximumConnectionsPerHost = 0
        #expect(throws: FerryError.self) { try Session(configuration: bad) }
    }

    @Test func headerValidation() {
        #expect(HeaderFields.isValid(name: "X-Ok", value: "fine value"))
        #expect(!HeaderFields.isValid(name: "X-Bad", value: "a\r\nInjected: yes"))
        #expect(!HeaderFields.isValid(name: "Bad Name", value: "x"))
        #expect(!HeaderFields.isValid(name: "", value: "x"))
    }
}
