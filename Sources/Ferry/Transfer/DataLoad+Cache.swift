import Foundation
import NIOCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension DataLoad {
    /// A data task's `GET` through the session's ``ResponseCache``, as the request's
    /// `cachePolicy` says (see ``ResponseCache``).
    func loadThroughCache(_ request: URLRequest, cache: ResponseCache) async throws -> TaskOutcome {
        let policy = request.cachePolicy
        let ignoresCache = policy == .reloadIgnoringLocalCacheData || policy == .reloadIgnoringLocalAndRemoteCacheData
        let stored = ignoresCache ? nil : cache.cachedResponse(for: request)
        if let stored {
            switch policy {
            case .returnCacheDataDontLoad, .returnCacheDataElseLoad:
                return try await deliverCached(stored)
            default:
                if policy != .reloadRevalidatingCacheData, CacheRules.isFresh(stored, for: request, now: Date()) {
                    return try await deliverCached(stored)
                }
            }
        } else if policy == .returnCacheDataDontLoad {
            throw FerryError(
                .network,
                "The response is not in the cache, and the request's cache policy (returnCacheDataDontLoad) forbids loading it."
            )
        }
        let conditional = stored.flatMap { CacheRules.conditionalRequest(request, for: $0) } ?? request
        let requestTime = Date()
        let response = try await transfer.open(conditional, body: nil)
        let wire = response.request
        return try await response.read { body, head in
            try await take(
                head,
                body: body,
                sentAs: wire,
                for: request,
                stored: stored,
                cache: cache,
                requestTime: requestTime
            )
        }
    }

    /// Takes the network's answer to a cached `GET`: a `304` freshens the stored response,
    /// another answer is delivered and stored when the rules allow.
    private func take(
        _ head: HTTPResponse,
        body: ResponseBody,
        sentAs wire: URLRequest,
        for request: URLRequest,
        stored: CachedResponse?,
        cache: ResponseCache,
        requestTime: Date
    ) async throws -> TaskOutcome {
        // Judged by the request as it went out (credentials an interceptor or a
        // challenge added count), filed under the URL that answered (a redirect's
        // target is not the URL first asked for).
        var sent = wire
        sent.cachePolicy = request.cachePolicy
        var key = request
        key.url = head.url
        if head.statusCode == 304, let stored {
            // Not modified: the stored body, with the 304's fresh metadata.
            await body.drain()
            let freshened = stored.freshened(by: head, requestTime: requestTime, responseTime: Date())
            if CacheRules.isStorable(head, for: sent) || CacheRules.isStorable(stored.response, for: sent),
                let accepted = await willCache(freshened)
            {
                cache.store(accepted, for: key)
            }
            return try await deliverCached(freshened)
        }
        let outcome = try await consumeInMemory(body, head: head)
        if case .data(let data) = outcome, CacheRules.isStorable(head, for: sent) {
            let entry = CachedResponse(
                response: head,
                body: data,
                request: key,
                requestTime: requestTime,
                responseTime: Date()
            )
            if let accepted = await willCache(entry) { cache.store(accepted, for: key) }
        } else if head.statusCode != 304, !CacheRules.isStorable(head, for: sent) {
            // RFC 9111 §4.4: a response that cannot be stored invalidates nothing for a
            // GET, but a stale entry it replaces must not answer again.
            if stored != nil { cache.removeCachedResponse(for: request) }
        }
        return outcome
    }

    /// Hands a stored response to the task as if it had just arrived.
    private func deliverCached(_ cached: CachedResponse) async throws -> TaskOutcome {
        try await consumeInMemory(ResponseBody(buffered: [ByteBuffer(bytes: cached.body)]), head: cached.response)
    }

    /// What the delegate lets the cache keep (all of it, without a delegate).
    private func willCache(_ proposed: CachedResponse) async -> CachedResponse? {
        guard let delegate = session.delegate, let task = origin as? DataTask else { return proposed }
        let session = self.session
        return await session.hub.ask {
            await delegate.session(session, dataTask: task, willCacheResponse: proposed)
        }
    }
}
