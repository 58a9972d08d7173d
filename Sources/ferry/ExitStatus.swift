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

    /// Says what went wrong in one line on standard error (unless JSON events carry it) and
    /// exits with the status for it.
    static func exit(with error: any Error, json: Bool = false) -> Never {
        let error = error as? FerryError ?? FerryError(.network, "The transfer failed.", underlying: error)
        if !json { FileHandle.standardError.write(Data("ferry: \(error.description)\n".utf8)) }
        Foundation.exit(code(for: error))
    }
}
