import ArgumentParser
import Ferry
import Foundation

/// The exit status for each kind of failure, curl's numbers where curl has one.
enum ExitStatus {
    static let interrupted: Int32 = 130
    /// curl's CURLE_READ_ERROR: a file the command was to read cannot be read.
    static let readError: Int32 = 26

    static func code(for error: FerryError) -> Int32 {
        // Over the package's codes, so that a reason added later must be given a status here.
        switch error.reason.code {
        case .invalidURL, .invalidRequest: 3
        case .network: 7
        case .secureConnectionFailed: 60
        case .badServerResponse: 8
        case .unacceptableStatusCode, .unacceptableContentType: 22
        case .fileSystem, .uploadBodyFailed, .destinationInUse, .destinationExists: 23
        case .bodyTooLarge: 63
        case .checksumMismatch: 9
        case .timedOut: 28
        case .redirectFailed: 47
        case .cancelled, .cancelledByDelegate: interrupted
        case .sessionInvalidated, .unsupportedConfiguration, .bodyNotReplayable, .invalidResumeData,
            .serializationFailed:
            1
        }
    }

    /// The command's exit status from its downloads' (in the order given), by the rules of
    /// the program each form comes from: with `-i`, aria2c's (the last failure's); with `-Z`,
    /// curl's (the first failure's); one after another, curl's (the last download's, so a
    /// failure before a success exits 0: each failure is said on standard error).
    static func combining(_ statuses: [Int32], parallel: Bool, inputFile: Bool) -> Int32 {
        if inputFile { return statuses.last { $0 != 0 } ?? 0 }
        if parallel { return statuses.first { $0 != 0 } ?? 0 }
        return statuses.last ?? 0
    }

    /// Says what went wrong in one line on standard error (unless JSON events carry it) and
    /// exits with the status for it.
    static func exit(with error: any Error, json: Bool = false) -> Never {
        let error = error as? FerryError ?? FerryError(.network, "The transfer failed.", underlying: error)
        if !json { FileHandle.standardError.write(Data("ferry: \(error.description)\n".utf8)) }
        Foundation.exit(code(for: error))
    }
}

extension FerryError {
    /// Whether trying the next mirror can succeed where this error failed: what the server
    /// or the network did, or a digest that did not match.
    var anotherSourceMayHelp: Bool { reason.isServerOrNetwork || reason == .checksumMismatch }
}
