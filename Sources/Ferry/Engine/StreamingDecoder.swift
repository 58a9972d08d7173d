import CFerryCodecs

/// A `br` (RFC 7932) or `zstd` (RFC 8878) decoder for a body fed in pieces, over the
/// system's libbrotlidec and libzstd (loaded on first use: ``isAvailable(_:)`` says whether
/// they are there).
///
/// Used by one caller at a time, from start to ``finish()``; not `Sendable`.
///
/// ```swift
/// let decoder = try StreamingDecoder(.zstd)
/// try decoder.decode(piece) { decoded in write(decoded) }
/// try decoder.finish()  // throws if the stream stopped short
/// ```
final class StreamingDecoder {
    /// The codings, by their `Content-Encoding` names.
    enum Coding: String, CaseIterable {
        case brotli = "br"
        case zstd = "zstd"
    }

    /// The largest zstd window accepted: 8 MiB, what RFC 9659 §3 has HTTP's `zstd` coding
    /// use, so a decoder's memory stays bounded whatever the server sends.
    static let zstdWindowLogMax: Int32 = 23

    /// The codings whose libraries are on this machine, looked for once.
    static let available = Coding.allCases.filter(isAvailable)

    /// Whether the library of `coding` is on this machine.
    static func isAvailable(_ coding: Coding) -> Bool {
        switch coding {
        case .brotli: ferry_brotli_available() == 1
        case .zstd: ferry_zstd_available() == 1
        }
    }

    let coding: Coding
    private let state: UnsafeMutableRawPointer
    /// Whether the input so far ends where a stream (for zstd: a frame) ends.
    private var atEnd = false
    /// Where decoded bytes go before they are handed on.
    private var output = [UInt8](repeating: 0, count: 64 * 1024)

    /// - Throws: ``FerryError/Reason/badServerResponse`` when the library is missing (the
    ///   coding was not asked for, then) or has no memory for a decoder.
    init(_ coding: Coding) throws(FerryError) {
        self.coding = coding
        let made: UnsafeMutableRawPointer? =
            switch coding {
            case .brotli: ferry_brotli_create()
            case .zstd: ferry_zstd_create(Self.zstdWindowLogMax)
            }
        guard let made else {
            throw FerryError(.badServerResponse, "The \(coding.rawValue) body cannot be decoded on this machine.")
        }
        state = made
    }

    deinit {
        switch coding {
        case .brotli: ferry_brotli_destroy(state)
        case .zstd: ferry_zstd_destroy(state)
        }
    }

    /// Decodes `input`, handing each piece of the decoded bytes to `sink` as it comes.
    ///
    /// - Throws: ``FerryError/Reason/badServerResponse`` for bytes that are not the coding's
    ///   (or follow the end of a brotli stream); whatever `sink` throws.
    func decode(_ input: UnsafeRawBufferPointer, into sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard let base = input.baseAddress?.assumingMemoryBound(to: UInt8.self), !input.isEmpty else { return }
        var used = 0
        while used < input.count || !atEnd {
            if atEnd {
                // Bytes after the end: zstd starts its next frame; brotli has none.
                guard coding == .zstd else { throw malformed("has bytes after its end") }
                atEnd = false
            }
            var produced = 0
            let result = output.withUnsafeMutableBufferPointer { out in
                switch coding {
                case .brotli:
                    ferry_brotli_decode(state, base, input.count, &used, out.baseAddress, out.count, &produced)
                case .zstd:
                    ferry_zstd_decode(state, base, input.count, &used, out.baseAddress, out.count, &produced)
                }
            }
            if produced > 0 {
                try output.withUnsafeBytes { try sink(UnsafeRawBufferPointer(rebasing: $0[..<produced])) }
            }
            switch result {
            case FERRY_CODEC_FINISHED:
                atEnd = true
                if used == input.count { return }
            case FERRY_CODEC_NEEDS_OUTPUT:
                // Room was given: a decoder that fills none of it is stuck, not slow.
                guard produced > 0 else { throw malformed("does not decode") }
            case FERRY_CODEC_NEEDS_INPUT:
                if used == input.count { return }
            default:
                throw malformed("does not decode")
            }
        }
    }

    /// The end of the coded body.
    ///
    /// - Throws: ``FerryError/Reason/badServerResponse`` when it stopped before its
    ///   stream's end (a truncated body).
    func finish() throws(FerryError) {
        guard atEnd else { throw malformed("ends before its stream does (truncated?)") }
    }

    private func malformed(_ what: String) -> FerryError {
        FerryError(.badServerResponse, "The \(coding.rawValue) body \(what).")
    }
}
