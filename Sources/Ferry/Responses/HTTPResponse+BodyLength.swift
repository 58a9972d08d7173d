import Foundation

extension HTTPResponse {
    /// The body length a client should expect (RFC 9110 §6.4.1): none for HEAD, 1xx, 204, 304.
    func expectedBodyLength(forMethod method: HTTPMethod) -> Int64? {
        if method == .head || statusCode == 204 || statusCode == 304 || (100..<200).contains(statusCode) {
            return 0
        }
        return expectedContentLength
    }
}
