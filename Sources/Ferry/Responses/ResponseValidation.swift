public import Foundation

/// Rules a response must meet: acceptable status codes and content types.
///
/// ```swift
/// let (data, response) = try await session.data(from: url)
/// try ResponseValidation.successful.accepting(contentTypes: ["application/json"]).validate(response)
/// ```
public struct ResponseValidation: Sendable {
    /// Status codes that pass; `nil` accepts any.
    public var acceptableStatusCodes: Set<Int>?
    /// Media types that pass (`type/subtype`, `type/*` or `*/*`); `nil` accepts any.
    public var acceptableContentTypes: [String]?

    /// Creates a validation.
    public init(acceptableStatusCodes: Set<Int>? = nil, acceptableContentTypes: [String]? = nil) {
        self.acceptableStatusCodes = acceptableStatusCodes
        self.acceptableContentTypes = acceptableContentTypes
    }

    /// Accepts 200...299, any content type.
    public static let successful = ResponseValidation(acceptableStatusCodes: Set(200..<300))
    /// Accepts everything.
    public static let none = ResponseValidation()

    /// A copy that also requires one of `contentTypes`.
    public func accepting(contentTypes: [String]) -> ResponseValidation {
        var copy = self
        copy.acceptableContentTypes = contentTypes
        return copy
    }

    /// A copy that requires a status in `codes`.
    public func accepting<Codes: Sequence<Int>>(statusCodes codes: Codes) -> ResponseValidation {
        var copy = self
        copy.acceptableStatusCodes = Set(codes)
        return copy
    }

    /// Throws ``FerryError/Reason/unacceptableStatusCode(_:)`` or
    /// ``FerryError/Reason/unacceptableContentType(_:)`` when `response` breaks a rule.
    public func validate(_ response: HTTPResponse, body: Data? = nil) throws {
        if let codes = acceptableStatusCodes, !codes.contains(response.statusCode) {
            throw FerryError(
                .unacceptableStatusCode(response.statusCode),
                "\(response.url.absoluteString): HTTP \(response.statusCode)\(response.reasonPhrase.isEmpty ? "" : " " + response.reasonPhrase)",
                response: response,
                responseBodyPrefix: body.map { Data($0.prefix(65536)) }
            )
        }
        if let types = acceptableContentTypes {
            let empty = body?.isEmpty ?? false
            if empty && [204, 205, 304].contains(response.statusCode) { return }
            guard let actual = response.mimeType,
                types.contains(where: { Self.mediaType(actual, matches: $0) })
            else {
                throw FerryError(
                    .unacceptableContentType(response.mimeType),
                    "\(response.url.absoluteString): content type '\(response.mimeType ?? "none")' is not one of \(types.joined(separator: ", ")).",
                    response: response
                )
            }
        }
    }

    static func mediaType(_ actual: String, matches pattern: String) -> Bool {
        let pattern = pattern.lowercased()
        if pattern == "*/*" || pattern == actual { return true }
        let patternParts = pattern.split(separator: "/")
        let actualParts = actual.split(separator: "/")
        guard patternParts.count == 2, actualParts.count == 2 else { return false }
        return patternParts[0] == actualParts[0] && patternParts[1] == "*"
    }
}
