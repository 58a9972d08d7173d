public import Foundation
import Synchronization

/// Credentials by protection space, in memory or in a file: what `URLCredentialStorage` is
/// to URLSession.
///
/// A session consults its store (``SessionConfiguration/credentialStore``) when a server asks
/// for credentials and neither the delegate nor ``SessionConfiguration/credential`` answered.
/// A credential stored for a space without a realm answers every realm of that origin.
///
/// ```swift
/// let store = try CredentialStore(persistingTo: configDirectory.appendingPathComponent("credentials.json"))
/// store.set(Credential(user: "ada", password: "secret"),
///           for: ProtectionSpace(url: api, realm: "staff", authenticationMethod: .digest))
/// ```
///
/// A persistent store writes a JSON file readable only by its owner (mode 0600), through a
/// temporary file and a rename: passwords are in it as they are in `.netrc`. Thread-safe.
public final class CredentialStore: Sendable {
    private struct Key: Hashable, Codable {
        var scheme: String
        var host: String
        var port: Int
        var realm: String?

        init(_ space: ProtectionSpace) {
            scheme = space.scheme
            host = space.host
            port = space.port
            realm = space.realm
        }
    }

    private struct Entry: Codable {
        var key: Key
        var user: String
        var password: String
    }

    private let entries: Mutex<[Key: Credential]>
    /// Where a persistent store saves itself; `nil` in memory.
    public let fileURL: URL?

    /// A store that lives as long as it is referenced.
    public init() {
        entries = Mutex([:])
        fileURL = nil
    }

    /// A store kept in `file`: loaded now if the file exists, saved at every change.
    ///
    /// - Throws: ``FerryError/Reason/fileSystem`` when the file exists but cannot be read or
    ///   is not a store.
    public init(persistingTo file: URL) throws {
        fileURL = file
        var loaded: [Key: Credential] = [:]
        if FileManager.default.fileExists(atPath: file.path) {
            do {
                let data = try Data(contentsOf: file)
                for entry in try JSONDecoder().decode([Entry].self, from: data) {
                    loaded[entry.key] = Credential(user: entry.user, password: entry.password)
                }
            } catch {
                throw FerryError(.fileSystem, "\(file.path) is not a credential store.", underlying: error)
            }
        }
        entries = Mutex(loaded)
    }

    /// The credential for `space`: one stored for its realm, else one stored for its whole
    /// origin.
    public func credential(for space: ProtectionSpace) -> Credential? {
        var any = Key(space)
        any.realm = nil
        return entries.withLock { $0[Key(space)] ?? $0[any] }
    }

    /// Stores `credential` for `space` (its authentication method does not matter), replacing
    /// what was there; saves a persistent store.
    public func set(_ credential: Credential, for space: ProtectionSpace) throws {
        let snapshot = entries.withLock {
            $0[Key(space)] = credential
            return $0
        }
        try save(snapshot)
    }

    /// Forgets the credential stored for exactly `space` (and realm).
    public func remove(for space: ProtectionSpace) throws {
        let snapshot = entries.withLock {
            $0[Key(space)] = nil
            return $0
        }
        try save(snapshot)
    }

    private func save(_ snapshot: [Key: Credential]) throws {
        guard let fileURL else { return }
        let list = snapshot.map { Entry(key: $0.key, user: $0.value.user, password: $0.value.password) }
            .sorted { ($0.key.host, $0.key.port, $0.key.realm ?? "") < ($1.key.host, $1.key.port, $1.key.realm ?? "") }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        do {
            let data = try encoder.encode(list)
            try FileSystem.createDirectory(fileURL.deletingLastPathComponent(), mode: 0o700)
            try FileSystem.writeAtomically(data, to: fileURL)
        } catch let error as FerryError {
            throw error
        } catch {
            throw FerryError(.fileSystem, "Cannot save the credential store.", underlying: error)
        }
    }
}
