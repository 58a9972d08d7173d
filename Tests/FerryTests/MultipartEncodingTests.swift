import Foundation
import Testing

@testable import Ferry

@Suite("Multipart encoding details")
struct MultipartEncodingTests {
    @Test func escapingFollowsWHATWG() {
        #expect(MultipartFormData.escape("a\"b\r\nc") == "a%22b%0D%0Ac")
        #expect(MultipartFormData.escape("naïve ü") == "naïve ü")
        #expect(MultipartFormData.headerValue("x\r\nInjected: 1") == "xInjected: 1")
    }

    @Test func mimeTypesFromExtensions() {
        #expect(MIMEType.forExtension(of: "photo.JPG") == "image/jpeg")
        #expect(MIMEType.forExtension(of: "archive.tar.gz") == "application/gzip")
        #expect(MIMEType.forExtension(of: "README") == "application/octet-stream")
        #expect(MIMEType.forExtension(of: ".bashrc") == "application/octet-stream")
    }

    @Test func exactLengthOfAnInMemoryForm() async throws {
        var form = MultipartFormData(boundary: "B")
        form.append("v", name: "n")
        form.append(Data([1, 2]), name: "f", fileName: "x.bin")
        var produced = [UInt8]()
        var iterator = form.chunks().makeAsyncIterator()
        while let chunk = try await iterator.next() { produced += chunk.readableBytesView }
        let expected =
            "--B\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\nv\r\n"
            + "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        #expect(produced == Array(expected.utf8) + [1, 2] + Array("\r\n--B--\r\n".utf8))
        #expect(Int64(produced.count) == form.contentLength)
    }
}
