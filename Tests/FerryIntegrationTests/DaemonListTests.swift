import Ferry
import FerryBackground
import Foundation
import Testing

/// `ferry add -i` of a long list (batches: one request and one transaction each, ids in
/// order) and `ferry ls` by pages (`--state`, `--limit`, `--after`, the totals), against a
/// real daemon process. Nothing downloads: every task waits for `--start-after`.
@Suite("ferry add -i batches, ferry ls pages (real processes)", .serialized)
struct DaemonListTests {
    /// More than the API takes in one batch, and not a whole number of `add -i`'s batches.
    static let count = BackgroundAPI.AddTasks.maximumCount + 2345

    @Test func aLongListIsAddedInBatchesAndListedByPages() async throws {
        let (daemon, pid) = try await DaemonProcess.started()
        defer { DaemonProcess.killNine(pid) }
        let folder = daemon.directory.appendingPathComponent("files", isDirectory: true)
        let list = daemon.directory.appendingPathComponent("list.txt")
        var text = ""
        for index in 0..<Self.count { text += "http://127.0.0.1:9/f\(index)\n  dir=\(folder.path)\n" }
        try Data(text.utf8).write(to: list)

        let added = try await daemon.ferry(["add", "-i", list.path, "--start-after", "3600"])
        #expect(added.status == 0, "\(added.stderrText)")
        let ids = added.stdoutText.split(separator: "\n").compactMap { Int64($0) }
        #expect(ids.count == Self.count)
        let first = try #require(ids.first)
        #expect(ids == Array(first..<first + Int64(Self.count)), "one id a line, in the list's order")
        let tasks = try await daemon.client.page(states: [.queued], limit: 3)
        #expect(tasks.tasks.map(\.url) == (0..<3).map { "http://127.0.0.1:9/f\($0)" })
        #expect(tasks.totals == ["queued": Self.count])

        // A page, its totals, and where the next one starts.
        let page = try await daemon.ferry(["ls", "--state", "queued", "--limit", "100"])
        #expect(page.status == 0, "\(page.stderrText)")
        var lines = page.stdoutText.split(separator: "\n")
        #expect(lines.count == 102, "a heading, 100 tasks, the totals")
        #expect(lines.first?.hasPrefix("ID") == true)
        #expect(lines[1].hasPrefix("\(first) "))
        let hundredth = first + 99
        #expect(lines.last == "\(Self.count) queued; more after this page: --after queued:\(hundredth)")
        let next = try await daemon.ferry([
            "ls", "--state", "queued", "--limit", "100", "--after", "queued:\(hundredth)",
        ])
        lines = next.stdoutText.split(separator: "\n")
        #expect(lines.count == 102)
        #expect(lines[1].hasPrefix("\(hundredth + 1) "))
        // Every task, page by page.
        let whole = try await daemon.ferry(["ls", "--json", "--limit", "0", "--state", "queued"])
        let rows = try #require(try JSONSerialization.jsonObject(with: whole.stdout) as? [[String: Any]])
        #expect(rows.compactMap { ($0["id"] as? NSNumber)?.int64Value } == ids)
        // The default: running first, then queued…, with the totals.
        let plain = try await daemon.ferry(["ls"])
        #expect(plain.stdoutText.split(separator: "\n").count == 102)
        #expect(plain.stdoutText.hasSuffix("\(Self.count) queued; more after this page: --after queued:\(hundredth)\n"))

        // A paused task is listed after the queued ones, in the totals of its state.
        let paused = try #require(ids.last)
        #expect(try await daemon.ferry(["pause", "\(paused)"]).status == 0)
        let after = try await daemon.client.page(after: "queued:\(paused - 2)", limit: 5)
        #expect(after.tasks.map(\.id) == [paused - 1, paused])
        #expect(after.tasks.map(\.state) == [.queued, .paused])
        #expect(after.totals == ["queued": Self.count - 1, "paused": 1])
    }

    /// A batch is all or none: one bad task refuses it, named by its index; too many tasks,
    /// an unknown field, a bad page are refused with the reason.
    @Test func aBadBatchOrPageIsRefusedWholly() async throws {
        let (daemon, pid) = try await DaemonProcess.started()
        defer { DaemonProcess.killNine(pid) }
        let file = daemon.directory.appendingPathComponent("f").path
        var good = BackgroundAPI.AddTask(url: "http://127.0.0.1:9/a", destination: file)
        good.earliestBeginDate = Date(timeIntervalSinceNow: 3600)
        let bad = BackgroundAPI.AddTask(url: "ftp://127.0.0.1/b", destination: file)
        await #expect { try await daemon.client.add([good, good, bad]) } throws: { error in
            "\(error)".contains("tasks[2]") && "\(error)".contains("ftp://127.0.0.1/b")
        }
        #expect(try await daemon.client.page(limit: 10).totals == [:], "nothing of a refused batch was added")
        await #expect {
            try await daemon.client.add(Array(repeating: good, count: BackgroundAPI.AddTasks.maximumCount + 1))
        } throws: { "\($0)".contains("1 to \(BackgroundAPI.AddTasks.maximumCount) tasks") }
        await #expect { try await daemon.client.add([]) } throws: { "\($0)".contains("1 to") }
        let added = try await daemon.client.add([good, good])
        #expect(added.count == 2 && added[0] < added[1])
        #expect(try await daemon.client.page(states: [.queued], limit: 10).tasks.compactMap(\.id) == added)
        for (limit, after) in [(0, "1"), (10_001, "1"), (10, "done:1"), (10, "x")] {
            await #expect { try await daemon.client.page(after: after, limit: limit) } throws: { error in
                "\(error)".contains("'limit'") || "\(error)".contains("'after'")
            }
        }
        let refused = try await daemon.ferry(["ls", "--state", "done"])
        #expect(refused.status != 0)
        #expect(refused.stderrText.contains("'done' is not a state"))
    }
}
