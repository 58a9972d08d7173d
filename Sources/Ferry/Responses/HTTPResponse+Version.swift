extension HTTPResponse {
    /// The version as curl writes it (`%{http_version}`, `curl -v`'s `< HTTP/2 200`): `1.1`,
    /// `1` for HTTP/1.0, `2` for HTTP/2, `3` for HTTP/3 — a `.0` minor version left out.
    ///
    /// ```swift
    /// HTTPResponse(url: url, statusCode: 200, httpVersion: "HTTP/2.0").shortVersion  // "2"
    /// ```
    package var shortVersion: String {
        var version = Substring(httpVersion)
        if version.hasPrefix("HTTP/") { version = version.dropFirst("HTTP/".count) }
        if version.hasSuffix(".0") { version = version.dropLast(2) }
        return String(version)
    }
}
