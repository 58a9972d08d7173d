extension HTTP2Pool {
    /// Which of Ferry's own HTTP/2 connections a request takes, and when another is opened:
    /// the pool's decisions as a value, with no I/O.
    ///
    /// Guarantees, each tested in `HTTP2PoolStateTests`:
    /// - A request takes a connection with a stream to spare (the fewest streams in use
    ///   first); a connection never gets more streams than its server allows
    ///   (`SETTINGS_MAX_CONCURRENT_STREAMS`) while another may still be opened.
    /// - A connection is opened only when none has a stream to spare and the connections
    ///   being opened cannot take the requests already waiting for them (a connection whose
    ///   limit is not known yet is taken to hold them all, so a burst of requests to a new
    ///   origin opens one connection, not one each).
    /// - At most ``maximumConnections`` connections per origin (a segmented download's further
    ///   connections, `slot` 1 and up, one each); past that, requests share the connections
    ///   there are, and the HTTP/2 handler queues their streams until the server allows them.
    /// - A connection that is going away (`GOAWAY`, closed) takes no new request.
    /// - An origin that answered ALPN with HTTP/1.1 is remembered: its requests go through
    ///   AsyncHTTPClient from then on.
    struct State: Sendable {
        /// Connections are kept apart by origin and by a segmented download's connection.
        struct Key: Hashable, Sendable {
            var origin: Origin
            var slot: Int
        }

        struct Connection: Sendable, Equatable {
            var key: Key
            /// Streams in use or promised to a request on its way.
            var streams = 0
            /// What the server allows at once (assumed 100, as RFC 9113 advises as a least,
            /// until its SETTINGS say).
            var limit = 100
            var usable = true
        }

        struct Opening: Sendable, Equatable {
            var key: Key
            /// Requests waiting for this connection.
            var waiters = 1
            /// Cleared by a `GOAWAY` that came before the pool knew it was open.
            var usable = true
        }

        enum Action: Equatable, Sendable {
            /// Use this connection: a stream on it is counted for the request.
            case use(connection: Int)
            /// Wait for this connection to open, then ask again (or fail as it failed).
            case wait(opening: Int)
            /// Open a connection (it has this number), then ask again.
            case connect(opening: Int)
            /// The origin speaks HTTP/1.1 only.
            case http1
        }

        let maximumConnections: Int
        private(set) var connections: [Int: Connection] = [:]
        private(set) var openings: [Int: Opening] = [:]
        private var http1Origins: Set<Origin> = []
        private var nextNumber = 0

        init(maximumConnections: Int) {
            self.maximumConnections = max(1, maximumConnections)
        }

        /// A request to `key` asks for a connection.
        mutating func lease(_ key: Key) -> Action {
            if http1Origins.contains(key.origin) { return .http1 }
            // One pass, no collection built: this runs for every request. Connections rank by
            // streams in use, then number.
            var candidates = 0
            var leastBusy: (streams: Int, number: Int)?
            var leastBusyWithRoom: (streams: Int, number: Int)?
            for (number, connection) in connections where connection.key == key && connection.usable {
                candidates += 1
                let rank = (streams: connection.streams, number: number)
                if leastBusy.map({ rank < $0 }) ?? true { leastBusy = rank }
                if connection.streams < connection.limit, leastBusyWithRoom.map({ rank < $0 }) ?? true {
                    leastBusyWithRoom = rank
                }
            }
            if let (_, number) = leastBusyWithRoom {
                connections.modifyValue(forKey: number) { $0.streams += 1 }
                return .use(connection: number)
            }
            let opening = openings.filter { $0.value.key == key }
            // What a connection being opened will take: what the origin's others allow.
            let capacity = connections.values.filter { $0.key.origin == key.origin }.map(\.limit).max() ?? .max
            if let (number, _) =
                opening
                .filter({ $0.value.waiters < capacity })
                .min(by: { ($0.value.waiters, $0.key) < ($1.value.waiters, $1.key) })
            {
                openings[number]?.waiters += 1
                return .wait(opening: number)
            }
            let allowed = key.slot == 0 ? maximumConnections : 1
            if candidates + opening.count < allowed {
                nextNumber += 1
                openings[nextNumber] = Opening(key: key)
                return .connect(opening: nextNumber)
            }
            if let (number, _) = opening.min(by: { ($0.value.waiters, $0.key) < ($1.value.waiters, $1.key) }) {
                openings[number]?.waiters += 1
                return .wait(opening: number)
            }
            // At the limit: the least busy connection queues the stream.
            guard let (_, number) = leastBusy else {
                preconditionFailure("a key at its limit has a connection or an opening")
            }
            connections.modifyValue(forKey: number) { $0.streams += 1 }
            return .use(connection: number)
        }

        /// Opening `number` succeeded: its waiters ask again.
        ///
        /// - Returns: whether the connection is the pool's; not when it closed already (its
        ///   router can report that before the opening ends).
        mutating func opened(_ number: Int, limit: Int) -> Bool {
            guard let opening = openings.removeValue(forKey: number) else { return false }
            connections[number] = Connection(key: opening.key, limit: max(1, limit), usable: opening.usable)
            return true
        }

        /// A request that waited for opening `number` stopped waiting (cancelled, or timed
        /// out): the connection is counted to hold one request fewer.
        mutating func stoppedWaiting(_ number: Int) {
            guard let waiters = openings[number]?.waiters else { return }
            openings[number]?.waiters = max(0, waiters - 1)
        }

        /// Opening `number` failed (its waiters fail with it; later requests open anew).
        mutating func failed(_ number: Int) {
            openings.removeValue(forKey: number)
        }

        /// Opening `number` found that the origin speaks HTTP/1.1 only.
        mutating func negotiatedHTTP1(_ number: Int) {
            if let opening = openings.removeValue(forKey: number) { http1Origins.insert(opening.key.origin) }
        }

        /// A stream of connection `number` ended (or its request never started one).
        mutating func released(_ number: Int) {
            connections.modifyValue(forKey: number) { connection in
                precondition(connection.streams > 0, "a stream is released once")
                connection.streams -= 1
            }
        }

        /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` on connection `number`.
        mutating func limitChanged(_ number: Int, to limit: Int) {
            connections[number]?.limit = max(1, limit)
        }

        /// Connection `number` takes no more requests (`GOAWAY`).
        mutating func goingAway(_ number: Int) {
            connections[number]?.usable = false
            openings[number]?.usable = false
        }

        /// Connection `number` is closed (while opening too: it is never used then).
        mutating func closed(_ number: Int) {
            connections.removeValue(forKey: number)
            openings.removeValue(forKey: number)
        }
    }
}
