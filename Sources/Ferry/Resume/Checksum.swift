import Crypto
import Foundation

/// A digest a download must have, checked on the complete file (also after resumes) before
/// it reaches its destination. A mismatch fails the task with
/// ``FerryError/Reason/checksumMismatch``, and the file is removed.
///
/// ```swift
/// task.checksum = try Checksum(parsing: "sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
/// ```
public struct Checksum: Sendable, Hashable, CustomStringConvertible {
    /// A digest algorithm. Later versions may add algorithms: switch with an
    /// `@unknown default`.
    @nonexhaustive(warn)
    public enum Algorithm: String, Sendable, CaseIterable {
        /// SHA-256.
        case sha256
        /// SHA-384.
        case sha384
        /// SHA-512.
        case sha512
        /// For legacy mirrors only: not collision-resistant.
        case sha1, md5

        var hexLength: Int {
            switch self {
            case .sha256: 64
            case .sha384: 96
            case .sha512: 128
            case .sha1: 40
            case .md5: 32
            }
        }
    }

    /// The digest's algorithm.
    public let algorithm: Algorithm
    /// The digest, lower-case hex.
    public let hex: String

    /// A checksum from an algorithm and a hex digest of the right length.
    public init(_ algorithm: Algorithm, hex: String) throws(FerryError) {
        let lower = hex.lowercased()
        guard lower.count == algorithm.hexLength, lower.allSatisfy(\.isHexDigit) else {
            throw FerryError(
                .invalidRequest,
                "'\(hex)' is not a \(algorithm.rawValue) digest (\(algorithm.hexLength) hex digits)."
            )
        }
        self.algorithm = algorithm
        self.hex = lower
    }

    /// Parses `ALGORITHM=HEX`, for example `sha256=9f86…`.
    public init(parsing text: String) throws(FerryError) {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, let algorithm = Algorithm(rawValue: parts[0].lowercased()) else {
            throw FerryError(
                .invalidRequest,
                "'\(text)' is not ALGORITHM=HEX with ALGORITHM one of \(Algorithm.allCases.map(\.rawValue).joined(separator: ", "))."
            )
        }
        try self.init(algorithm, hex: parts[1])
    }

    public var description: String { "\(algorithm.rawValue)=\(hex)" }

    /// The digest of `file`, read in 1 MiB pieces through its descriptor.
    static func digest(of file: PartialFile, algorithm: Algorithm) throws -> String {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        func run<H: HashFunction>(_ hasher: inout H) throws -> String {
            var offset: Int64 = 0
            while true {
                let count = try buffer.withUnsafeMutableBytes { try file.read(into: $0, at: offset) }
                if count == 0 { break }
                buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                offset += Int64(count)
            }
            return hasher.finalize().map { String(format: "%02x", $0) }.joined()
        }
        switch algorithm {
        case .sha256:
            var hasher = SHA256()
            return try run(&hasher)
        case .sha384:
            var hasher = SHA384()
            return try run(&hasher)
        case .sha512:
            var hasher = SHA512()
            return try run(&hasher)
        case .sha1:
            var hasher = Insecure.SHA1()
            return try run(&hasher)
        case .md5:
            var hasher = Insecure.MD5()
            return try run(&hasher)
        }
    }

    /// Throws ``FerryError/Reason/checksumMismatch`` unless `file` has this checksum.
    func verify(_ file: PartialFile) throws {
        let actual = try Self.digest(of: file, algorithm: algorithm)
        guard actual == hex else {
            throw FerryError(
                .checksumMismatch,
                "The download's \(algorithm.rawValue) is \(actual), not the expected \(hex)."
            )
        }
    }
}

extension Checksum.Algorithm {
    /// The digest of the bytes of `chunks` (a tus append's `Upload-Checksum`).
    func digest(of chunks: ByteChunks) async throws -> Data {
        func run<H: HashFunction>(_ hasher: inout H) async throws -> Data {
            for try await chunk in chunks { chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) } }
            return Data(hasher.finalize())
        }
        switch self {
        case .sha256:
            var hasher = SHA256()
            return try await run(&hasher)
        case .sha384:
            var hasher = SHA384()
            return try await run(&hasher)
        case .sha512:
            var hasher = SHA512()
            return try await run(&hasher)
        case .sha1:
            var hasher = Insecure.SHA1()
            return try await run(&hasher)
        case .md5:
            var hasher = Insecure.MD5()
            return try await run(&hasher)
        }
    }
}
