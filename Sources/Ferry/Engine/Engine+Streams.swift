import Foundation

/// The connections Ferry speaks on itself rather than through AsyncHTTPClient: a data
/// task's `Upgrade`, which becomes a ``StreamTask``.
extension Engine {
    /// How a connection of Ferry's own reaches `url`, the way the session's requests do:
    /// through the session's proxy when it applies (an HTTP proxy's `CONNECT` tunnel with its
    /// credential, or SOCKS5), and over TLS verified as the session verifies (its pins, the
    /// delegate's server-trust challenge).
    ///
    /// Routed by the ``TLSBridge`` when either applies: the session's own, or one made for
    /// the purpose when the session has none (a SOCKS5 proxy without a credential). Straight
    /// otherwise; an `https` origin then gets TLS from ``ResolvedTLS/configuration(forHost:)``.
    ///
    /// - Throws: ``FerryError/Reason/unsupportedConfiguration`` when the TLS options cannot
    ///   make the bridge.
    func streamRoute(for url: URL) throws(FerryError) -> StreamConnection.Route {
        let origin = Origin(url)
        let proxy = configuration.proxy.flatMap { $0.applies(to: url) ? $0 : nil }
        if let bridge, proxy != nil || bridge.evaluator.bridges(url) {
            return .bridged(bridge, origin, via: proxy)
        }
        guard let proxy else { return .direct }
        return .bridged(try madeBridge(), origin, via: proxy)
    }

    /// ``streamBridge``, made on first use.
    private func madeBridge() throws(FerryError) -> TLSBridge {
        try streamBridge.withLock { made throws(FerryError) in
            if let made { return made }
            guard let evaluator = try configuration.tls.resolved(bridgingProxy: true).evaluator else {
                throw FerryError(.unsupportedConfiguration, "The session's TLS options make no verifier for a proxy.")
            }
            let bridge = try Engine.makeBridge(evaluator, configuration)
            made = bridge
            return bridge
        }
    }
}
