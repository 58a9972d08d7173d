public import Foundation
import Synchronization

/// Calls to one HTTP API: a base URL, default header fields, how parameters are encoded and
/// how responses are validated and turned into values, set once over a ``Session``.
///
/// What AFNetworking's `AFHTTPSessionManager` is to an iOS app: `get`, `post`, `put`,
/// `patch`, `delete` and `head` take a path resolved against ``baseURL`` (RFC 3986, as
/// `URLWithString:relativeToURL:`), parameters and extra header fields, and return the value
/// the manager's ``responseSerializer`` makes of a response its ``validation`` accepts.
///
/// ```swift
/// let api = try HTTPSessionManager(
///     baseURL: URL(string: "https://api.example.com/v1/")!,
///     responseSerializer: .decodable(User.self)
/// )
/// api.setBearerToken(token)
/// let (user, _) = try await api.get("users/42")
/// let (created, _) = try await api.post("users", parameters: NewUser(name: "Ada"))
/// ```
///
/// Parameters of `GET`, `HEAD` and `DELETE` go into the query (AFNetworking's
/// `HTTPMethodsEncodingParametersInURI`); those of other methods into the body with
/// ``bodyEncoder`` (a form by default; ``JSONParameterEncoder`` for JSON APIs).
///
/// ## Thread safety
/// Every member may be called from any thread; the settable state is one struct behind one
/// lock, read once per request.
public final class HTTPSessionManager<Serializer: ResponseSerializer>: Sendable {
    /// What paths are resolved against; `nil` when every path is an absolute URL.
    public let baseURL: URL?
    /// The session the requests run in.
    public let session: Session
    /// Turns each accepted response's body into the value the calls return.
    public let responseSerializer: Serializer

    struct Settings {
        var headers: [String: String] = [:]
        var bodyEncoder: any ParameterEncoder = URLEncodedFormParameterEncoder(
            destination: .body,
            arrayEncoding: .brackets
        )
        var queryArrayEncoding = URLEncodedFormParameterEncoder.ArrayEncoding.brackets
        var validation = ResponseValidation.successful
    }

    let settings = Mutex(Settings())

    /// A manager over an existing session (shared with other code).
    public init(baseURL: URL?, session: Session, responseSerializer: Serializer) {
        self.baseURL = baseURL?.directoryForm
        self.session = session
        self.responseSerializer = responseSerializer
    }

    /// A manager with a session of its own, made from `configuration`.
    ///
    /// - Throws: what ``Session/init(configuration:delegate:)`` throws for the configuration.
    public convenience init(
        baseURL: URL?,
        configuration: SessionConfiguration = .default,
        responseSerializer: Serializer
    ) throws {
        self.init(
            baseURL: baseURL,
            session: try Session(configuration: configuration),
            responseSerializer: responseSerializer
        )
    }

    // MARK: Settings

    /// The encoder for the parameters of methods that carry them in the body (all but
    /// `GET`, `HEAD` and `DELETE`). A form (`application/x-www-form-urlencoded`) by default,
    /// with arrays as AFNetworking writes them (`tag[]=a&tag[]=b`).
    public var bodyEncoder: any ParameterEncoder {
        get { settings.withLock { $0.bodyEncoder } }
        set { settings.withLock { $0.bodyEncoder = newValue } }
    }

    /// How arrays are written in the query of `GET`, `HEAD` and `DELETE`:
    /// ``URLEncodedFormParameterEncoder/ArrayEncoding/brackets`` (`tag[]=a&tag[]=b`, as
    /// AFNetworking writes them) unless set; ``URLEncodedFormParameterEncoder/ArrayEncoding/repeatedName``
    /// writes `tag=a&tag=b`.
    public var queryArrayEncoding: URLEncodedFormParameterEncoder.ArrayEncoding {
        get { settings.withLock { $0.queryArrayEncoding } }
        set { settings.withLock { $0.queryArrayEncoding = newValue } }
    }

    /// What a response must be to be serialized; any other fails with
    /// ``FerryError/Reason/unacceptableStatusCode(_:)`` or
    /// ``FerryError/Reason/unacceptableContentType(_:)``. 2xx by default.
    public var validation: ResponseValidation {
        get { settings.withLock { $0.validation } }
        set { settings.withLock { $0.validation = newValue } }
    }

    /// The header fields every request gets (a request's own fields win).
    public var defaultHeaders: [String: String] { settings.withLock { $0.headers } }

    /// Sets (or with `nil` removes) a header field every request gets.
    public func setValue(_ value: String?, forHTTPHeaderField name: String) {
        settings.withLock { settings in
            let existing = settings.headers.keys.first { $0.caseInsensitiveCompare(name) == .orderedSame }
            if let existing { settings.headers[existing] = nil }
            if let value { settings.headers[name] = value }
        }
    }

    /// Sends `Authorization: Basic …` with every request (RFC 7617, UTF-8).
    public func setBasicAuthorization(user: String, password: String) {
        let token = Data("\(user):\(password)".utf8).base64EncodedString()
        setValue("Basic \(token)", forHTTPHeaderField: "Authorization")
    }

    /// Sends `Authorization: Bearer TOKEN` with every request (RFC 6750).
    public func setBearerToken(_ token: String) {
        setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    }

    /// Stops sending an `Authorization` field.
    public func clearAuthorization() {
        setValue(nil, forHTTPHeaderField: "Authorization")
    }
}

extension HTTPSessionManager where Serializer == DataResponseSerializer {
    /// A manager whose calls return the response body as `Data`.
    public convenience init(baseURL: URL?, configuration: SessionConfiguration = .default) throws {
        try self.init(baseURL: baseURL, configuration: configuration, responseSerializer: .data)
    }

    /// A manager over `session` whose calls return the response body as `Data`.
    public convenience init(baseURL: URL?, session: Session) {
        self.init(baseURL: baseURL, session: session, responseSerializer: .data)
    }
}
