import Foundation

/// Events a download owes its observers once: the response head, and where it continues.
struct DownloadProgress {
    private var announcedResponse: Bool { response != nil }
    /// The last response announced: the download's head when its body is in.
    private(set) var response: HTTPResponse?
    /// The next response continues bytes already on disk: say where.
    private var offsetPending: Bool

    init(resumed: Bool) { offsetPending = resumed }

    /// A retry is about to continue the download.
    mutating func willContinue() { offsetPending = true }

    mutating func announceResponse(_ head: HTTPResponse, task: SessionTask) {
        task.client.didReceive(response: head, announce: !announcedResponse)
        response = head
    }

    /// Publishes `resumedAtOffset` for the first response after a resume or a retry, and
    /// whenever bytes on disk are discarded (`force`).
    mutating func announceOffset(_ offset: Int64, total: Int64?, task: SessionTask, force: Bool) {
        task.client.setDownloadPosition(offset, expected: total)
        guard force || offsetPending else { return }
        offsetPending = false
        task.client.publish(.resumedAtOffset(offset, expectedTotalBytes: total))
    }
}
