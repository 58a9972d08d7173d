import Ferry
import Foundation
import Testing

/// `POST /v1/tasks/batch`'s body, decoded strictly in one pass: every refusal names what is
/// wrong, and where.
@Suite("BackgroundAPI: a batch's body")
struct BackgroundBatchTests {
    func refusal(_ json: String) -> String? {
        do {
            _ = try BackgroundAPI.decodeBatch(Data(json.utf8))
            return nil
        } catch {
            return error.message
        }
    }

    @Test func aBatchDecodesInOrder() throws {
        let json = """
            {"tasks": [{"url": "http://h/a", "destination": "/tmp/a"},
                       {"url": "http://h/b", "destination": "/tmp/b", "priority": 1, "mirrors": ["http://m/b"]}]}
            """
        let batch = try BackgroundAPI.decodeBatch(Data(json.utf8))
        #expect(batch.tasks.map(\.url) == ["http://h/a", "http://h/b"])
        #expect(batch.tasks[1].priority == 1)
        #expect(batch.tasks[1].mirrors == ["http://m/b"])
    }

    @Test func everyRefusalSaysWhatAndWhere() {
        let task = #"{"url": "http://h/a", "destination": "/tmp/a"}"#
        #expect(refusal(#"{"tasks": [\#(task)], "extra": 1}"#) == "Unknown field 'extra'.")
        #expect(
            refusal(#"{"tasks": [\#(task), {"url": "u", "destination": "d", "colour": 1}]}"#)
                == "tasks[1]: unknown field 'colour'."
        )
        #expect(refusal(#"{"tasks": []}"#) == "A batch holds 1 to 10000 tasks, not 0.")
        #expect(refusal(#"{"tasks": [\#(task), 3]}"#)?.contains("wrong type") == true)
        #expect(refusal(#"{"tasks": [{"url": "http://h/a"}]}"#)?.contains("'destination' is missing") == true)
        let wrong = refusal(#"{"tasks": [{"url": 4, "destination": "/tmp/a"}]}"#)
        #expect(wrong?.contains("url' has the wrong type") == true, "\(wrong ?? "")")
        #expect(refusal(#"[]"#) != nil)
        #expect(refusal(#"{}"#) != nil)
        #expect(refusal("not json") != nil)
        let many = "{\"tasks\": [" + Array(repeating: task, count: 10_001).joined(separator: ",") + "]}"
        #expect(refusal(many) == "A batch holds 1 to 10000 tasks, not 10001.")
    }
}
