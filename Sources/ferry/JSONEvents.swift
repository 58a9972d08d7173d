import Ferry
import Foundation

/// `--json` output: one JSON object per line on standard output.
enum JSONEvents {
    static func emit(_ fields: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    static func emit(_ event: TaskEvent) {
        switch event {
        case .resumed:
            emit(["event": "resumed"])
        case .suspended:
            emit(["event": "suspended"])
        case .willRedirect(let response, let request):
            emit([
                "event": "redirect", "status": response.statusCode,
                "location": request.url?.absoluteString ?? "",
            ])
        case .trailers(let fields):
            emit(["event": "trailers", "fields": Dictionary(fields.map { ($0.name, $0.value) }) { $1 }])
        case .informationalResponse(let response):
            var fields: [String: Any] = ["event": "informational", "status": response.statusCode]
            let links = response.headers.values(for: "Link")
            if !links.isEmpty { fields["link"] = links }
            emit(fields)
        case .response(let response):
            var fields: [String: Any] = [
                "event": "response", "status": response.statusCode, "url": response.url.absoluteString,
            ]
            if let length = response.expectedContentLength { fields["contentLength"] = length }
            emit(fields)
        case .wroteData(_, let total, let expected):
            var fields: [String: Any] = ["event": "progress", "bytes": total]
            if let expected { fields["total"] = expected }
            emit(fields)
        case .resumedAtOffset(let offset, let total):
            var fields: [String: Any] = ["event": "resumedAtOffset", "offset": offset]
            if let total { fields["total"] = total }
            emit(fields)
        case .willRetry(let attempt, let delay, let error):
            emit(["event": "retry", "attempt": attempt, "delay": delay, "error": error.description])
        case .movedDownload(let url):
            emit(["event": "saved", "file": url.path])
        case .failedToMoveDownload(let error):
            emit(["event": "saveFailed", "error": error.description])
        case .completed(let error):
            if let error {
                emit(["event": "failed", "error": error.description, "reason": "\(error.reason)"])
            } else {
                emit(["event": "completed"])
            }
        case .sentBodyData(_, let total, let expected):
            var fields: [String: Any] = ["event": "uploadProgress", "bytes": total]
            if let expected { fields["total"] = expected }
            emit(fields)
        case .finishedCollectingMetrics(let metrics):
            emit(Self.fields(of: metrics))
        case .segments(let count, let reason):
            var fields: [String: Any] = ["event": "segments", "count": count]
            if let reason { fields["reason"] = reason }
            emit(fields)
        case .data, .becameDownload, .becameStreamTask, .finishedDownloading:
            break
        }
    }

    /// curl's `-w` numbers, in seconds from the task's start (`time_total`,
    /// `time_starttransfer` of the last request, …), and each request's own.
    static func fields(of metrics: TaskMetrics) -> [String: Any] {
        let start = metrics.taskInterval.start
        func seconds(_ date: Date?) -> Double? {
            date.map { (($0.timeIntervalSince(start)) * 1e6).rounded() / 1e6 }
        }
        let requests: [[String: Any]] = metrics.transactions.map { transaction in
            var fields: [String: Any] = [
                "reason": transaction.reason.rawValue,
                "url": transaction.request.url?.absoluteString ?? "",
                "bytesSent": transaction.countOfRequestBodyBytesSent,
                "bytesReceived": transaction.countOfResponseBodyBytesReceived,
            ]
            if let status = transaction.response?.statusCode { fields["status"] = status }
            if let name = transaction.networkProtocolName { fields["protocol"] = name }
            if let reused = transaction.isReusedConnection { fields["reusedConnection"] = reused }
            if let address = transaction.remoteAddress { fields["remoteAddress"] = address }
            let times: [(String, Date?)] = [
                ("fetchStart", transaction.fetchStartDate), ("connectStart", transaction.connectStartDate),
                ("secureConnectionStart", transaction.secureConnectionStartDate),
                ("secureConnectionEnd", transaction.secureConnectionEndDate),
                ("connectEnd", transaction.connectEndDate),
                ("requestStart", transaction.requestStartDate),
                ("requestEnd", transaction.requestEndDate), ("responseStart", transaction.responseStartDate),
                ("responseEnd", transaction.responseEndDate),
            ]
            for (name, date) in times { if let value = seconds(date) { fields[name] = value } }
            return fields
        }
        var fields: [String: Any] = [
            "event": "metrics",
            "time_total": metrics.taskInterval.duration,
            "num_redirects": metrics.redirectCount,
            "requests": requests,
        ]
        if let first = seconds(metrics.transactions.last?.responseStartDate) { fields["time_starttransfer"] = first }
        // curl's time_connect and time_appconnect, from the first request that opened one.
        if let opened = metrics.transactions.first(where: { $0.connectStartDate != nil }) {
            if let connected = seconds(opened.secureConnectionStartDate ?? opened.connectEndDate) {
                fields["time_connect"] = connected
            }
            if let handshaken = seconds(opened.secureConnectionEndDate) { fields["time_appconnect"] = handshaken }
        }
        return fields
    }
}
