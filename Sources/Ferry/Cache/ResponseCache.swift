import Crypto
public import Foundation
import Synchronization

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Responses kept to answer later requests without the network, or with a cheap `304`:
/// URLSession's `URLCache`, following the parts of RFC 9111 a private client cache needs.
///
/// A session with a cache (``SessionConfiguration/responseCache``) consults it for data tasks
/// that `GET`, as the request's `cachePolicy` says: `.useProtocolCachePolicy` answers from a
/// fresh entry and revalidates a stale one with `If-None-Match` / `If-Modified-Since`;
/// `.reloadIgnoringLocalCacheData` always loads; `.returnCacheDataElseLoad` takes any entry;
/// `.returnCacheDataDontLoad` never loads. Freshness comes from `max-age` or `Expires`
/// (no heuristics); `no-store`, `no-cache`, `Vary` and requests with `Authorization` are
/// honoured. The delegate's `willCacheResponse` can change or refuse what is stored.
///
/// Memory and disk are each bounded; the least recently used entries go first. A disk cache
/// keeps one file per entry (0600) in its directory. Thread-safe.
public final class ResponseCache: Sendable {
    private struct State {
        var entries: [String: [CachedResponse]] = [:]
        var order: [String] = []
        var bytes = 0
    }

    /// Most bytes of response bodies kept in memory.
    public let memoryCapacity: Int
    /// Most bytes of responses kept on disk.
    public let diskCapacity: Int
    /// Where entries are kept on disk; `nil` for memory only.
    public let directory: URL?
    private let state = Mutex(State())

    /// - Parameters:
    ///   - memoryCapacity: Bytes of bodies kept in memory.
    ///   - diskCapacity: Bytes of entries kept in `directory`.
    ///   - directory: Where to keep entries across processes; `nil` for memory only.
    public init(memoryCapacity: Int = 8 << 20, diskCapacity: Int = 64 << 20, directory: URL? = nil) {
        self.memoryCapacity = memoryCapacity
        self.diskCapacity = directory == nil ? 0 : diskCapacity
        self.directory = directory
    }

    /// The stored response for `request`, if one matches its URL and `Vary`.
    public func cachedResponse(for request: URLRequest) -> CachedResponse? {
        guard let key = Self.key(request) else { return nil }
        if let found = state.withLock({ state -> CachedResponse? in
            guard let match = state.entries[key]?.first(where: { CacheRules.variantMatches($0, request) }) else {
                return nil
            }
            state.order.removeAll { $0 == key }
            state.order.append(key)
            return match
        }) {
            return found
        }
        guard let file = fileURL(for: key), let data = try? Data(contentsOf: file),
            let stored = try? JSONDecoder().decode([CachedResponse].self, from: data)
        else { return nil }
        return stored.first { CacheRules.variantMatches($0, request) }
    }

    /// Stores `response` for `request`, replacing the entry for the same variant.
    public func store(_ response: CachedResponse, for request: URLRequest) {
        guard let key = Self.key(request), response.body.count <= max(memoryCapacity, diskCapacity) else { return }
        let variants = state.withLock { state -> [CachedResponse] in
            var variants = state.entries[key] ?? []
            let removed = variants.filter { $0.varyingRequestFields == response.varyingRequestFields }
            state.bytes -= removed.reduce(0) { $0 + $1.body.count }
            variants.removeAll { $0.varyingRequestFields == response.varyingRequestFields }
            variants.append(response)
            state.entries[key] = variants
            state.bytes += response.body.count
            state.order.removeAll { $0 == key }
            state.order.append(key)
            while state.bytes > memoryCapacity, let oldest = state.order.first {
                state.order.removeFirst()
                state.bytes -= state.entries.removeValue(forKey: oldest)?.reduce(0) { $0 + $1.body.count } ?? 0
            }
            return variants
        }
        write(variants, key: key)
    }

    /// Forgets what is stored for `request`'s URL.
    public func removeCachedResponse(for request: URLRequest) {
        guard let key = Self.key(request) else { return }
        state.withLock { state in
            state.bytes -= state.entries.removeValue(forKey: key)?.reduce(0) { $0 + $1.body.count } ?? 0
            state.order.removeAll { $0 == key }
        }
        if let file = fileURL(for: key) { FileSystem.removeIfPresent(file) }
    }

    /// Forgets everything, in memory and on disk.
    public func removeAll() {
        state.withLock { $0 = State() }
        guard let directory,
            let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path)
        else { return }
        for name in names where name.hasSuffix(".ferry-cache.json") {
            FileSystem.removeIfPresent(directory.appendingPathComponent(name))
        }
    }

    /// The URL without its fragment: one key for every variant.
    private static func key(_ request: URLRequest) -> String? {
        guard let url = request.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            return nil
        }
        components.fragment = nil
        return components.string
    }

    private func fileURL(for key: String) -> URL? {
        guard let directory, diskCapacity > 0 else { return nil }
        let digest = SHA256.hash(data: Data(key.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
        return directory.appendingPathComponent("\(digest).ferry-cache.json")
    }

    /// Writes an entry's variants, then trims the directory to its capacity (oldest files
    /// first). A cache that cannot write loses entries, never a transfer.
    private func write(_ variants: [CachedResponse], key: String) {
        guard let directory, let file = fileURL(for: key), let data = try? JSONEncoder().encode(variants) else {
            return
        }
        try? FileSystem.createDirectory(directory, mode: 0o700)
        try? FileSystem.writeAtomically(data, to: file)
        let keys: [URLResourceKey] = [.contentModificationDateKey, .fileSizeKey]
        guard
            let files = try? FileManager.default.contentsOfDirectory(
                at: directory,
                includingPropertiesForKeys: keys
            ).filter({ $0.lastPathComponent.hasSuffix(".ferry-cache.json") })
        else { return }
        let described = files.compactMap { url -> (URL, Date, Int)? in
            guard let values = try? url.resourceValues(forKeys: Set(keys)) else { return nil }
            return (url, values.contentModificationDate ?? .distantPast, values.fileSize ?? 0)
        }.sorted { $0.1 < $1.1 }
        var total = described.reduce(0) { $0 + $1.2 }
        for (url, _, size) in described where total > diskCapacity && url != file {
            FileSystem.removeIfPresent(url)
            total -= size
        }
    }
}
