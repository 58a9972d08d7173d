extension Dictionary {
    /// Changes the value stored for `key` in place, if there is one.
    ///
    /// The same as `self[key]?.change()`, without its cost: that goes through the
    /// subscript's `modify` accessors, whose coroutine frames take three heap allocations
    /// (and frees) on each call, where this takes none. Worth it where a value changes once
    /// per frame or per request: an HTTP/2 stream's window, a connection's stream count.
    ///
    /// ```swift
    /// var counts = ["a": 1]
    /// counts.modifyValue(forKey: "a") { $0 += 1 }  // counts == ["a": 2]
    /// let doubled = counts.modifyValue(forKey: "a") { value -> Int in
    ///     value *= 2
    ///     return value
    /// }  // 4, counts == ["a": 4]
    /// counts.modifyValue(forKey: "b") { $0 += 1 }  // nil: no "b", counts unchanged
    /// ```
    ///
    /// - Parameters:
    ///   - key: The key whose value changes.
    ///   - change: Changes the value; what it returns is returned.
    /// - Returns: What `change` returned, or `nil` when there is no value for `key` (and
    ///   `change` was not called).
    @inline(__always) @discardableResult
    mutating func modifyValue<Result>(forKey key: Key, _ change: (inout Value) throws -> Result) rethrows -> Result? {
        guard let index = index(forKey: key) else { return nil }
        return try change(&values[index])
    }
}
