import ArgumentParser
import Ferry

/// The exit status for each kind of failure, curl's numbers where curl has one.
enum ExitStatus {
    static let interrupted: Int32 = 130

    static func code(for error: FerryError) -> Int32 {
        switch error.reason {
        case .invalidURL, .invalidRequest: 3
        case .network: 7
        case .badServerResponse: 8
        case .unacceptableStatusCode, .unacceptableContentType: 22
        case .fileSystem, .uploadBodyFailed, .destinationInUse: 23
        case .checksumMismatch: 9
        case .timedOut: 28
        case .redirectFailed: 47
        case .cancelled, .cancelledByDelegate: interrupted
        case .sessionInvalidated, .unsupportedConfiguration, .bodyTooLarge, .bodyNotReplayable, .invalidResumeData,
            .serializationFailed:
            1
        }
    }
}
