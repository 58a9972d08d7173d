import Ferry
import Foundation

extension ConnectionOptions {
    /// What the connection options read from outside the command line: the environment's
    /// proxy variables (with `-x` and `--noproxy` over them), the `--cacert` file and the
    /// netrc file.
    ///
    /// Read once for all of a command's downloads (`-Z`, `-i`, several URLs), not once per
    /// URL: a list of 10,000 URLs read the environment, the CA file and `.netrc` 10,000 times
    /// (a twentieth of the command's CPU). A file that cannot be read fails each download
    /// that needs it, with the error it gave, as it would have alone.
    struct Inputs: Sendable {
        /// The proxy variables by curl's rules, `-x` and `--noproxy` applied.
        let proxyVariables: [String: String]
        /// `--cacert`'s certificates, when given.
        let trustRoots: Result<String, FerryError>?
        /// The netrc file's entries, when `--netrc`, `--netrc-optional` or `--netrc-file`
        /// asks for them and `-u` does not replace them (`nil` inside: no file to read).
        let netrc: Result<Netrc?, FerryError>?
    }

    /// Reads this command's ``Inputs``.
    func inputs() -> Inputs {
        var variables = ProcessInfo.processInfo.environment
        if let proxy {
            for name in ["https_proxy", "http_proxy", "all_proxy"] { variables[name] = proxy }
        }
        if let noProxy { variables["no_proxy"] = noProxy }
        return Inputs(
            proxyVariables: variables,
            trustRoots: caCertificates.map { path in Result { () throws(FerryError) in try Self.read(path) } },
            netrc: readsNetrc ? Result { () throws(FerryError) in try netrcEntries(variables: variables) } : nil
        )
    }

    /// Whether a credential may come from a netrc file.
    private var readsNetrc: Bool {
        CommandRequest.credential(from: user) == nil && (netrc || netrcOptional || netrcFile != nil)
    }

    /// The netrc file's entries: `--netrc-file`'s, else `$HOME/.netrc` (`nil` when that is
    /// missing, which --netrc and --netrc-optional allow).
    private func netrcEntries(variables: [String: String]) throws(FerryError) -> Netrc? {
        // $HOME first, as curl reads it.
        let home =
            variables["HOME"].map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.homeDirectoryForCurrentUser
        let file =
            netrcFile.map { URL(fileURLWithPath: $0) } ?? home.appendingPathComponent(".netrc", isDirectory: false)
        if netrcFile == nil, !FileManager.default.fileExists(atPath: file.path) { return nil }
        return try Netrc(contentsOf: file)
    }

    /// The credential for `url`: -u's, else the netrc file's entry for its host.
    func credential(for url: URL, inputs: Inputs) throws(FerryError) -> Credential? {
        if let credential = CommandRequest.credential(from: user) { return credential }
        guard let netrc = inputs.netrc, let host = url.host else { return nil }
        return try netrc.get()?.credential(forHost: host)
    }
}
