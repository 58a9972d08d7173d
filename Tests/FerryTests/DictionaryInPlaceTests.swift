import Testing

@testable import Ferry

@Suite("Dictionary.modifyValue")
struct DictionaryInPlaceTests {
    @Test func changesThePresentValueAndReturnsWhatTheChangeReturned() {
        var counts = ["a": 1, "b": 10]
        let returned = counts.modifyValue(forKey: "a") { value -> Int in
            value += 1
            return value * 100
        }
        #expect(returned == 200)
        #expect(counts == ["a": 2, "b": 10])
    }

    @Test func leavesTheDictionaryAloneAndNeverCallsTheChangeForAMissingKey() {
        var counts = ["a": 1]
        var called = false
        let returned: Int? = counts.modifyValue(forKey: "z") { value in
            called = true
            value += 1
            return value
        }
        #expect(returned == nil)
        #expect(!called)
        #expect(counts == ["a": 1])
    }

    @Test func aCopyTakenBeforeIsNotChanged() {
        var counts = ["a": 1]
        let before = counts
        counts.modifyValue(forKey: "a") { $0 = 5 }
        #expect(before == ["a": 1])
        #expect(counts == ["a": 5])
    }

    @Test func anOptionalResultComesBackNested() {
        var queues: [String: [Int]] = ["q": [7]]
        // The change's own `nil` (an empty queue) is told apart from a missing key.
        #expect(queues.modifyValue(forKey: "q") { $0.popLast() } == .some(7))
        #expect(queues.modifyValue(forKey: "q") { $0.popLast() } == .some(nil))
        #expect(queues.modifyValue(forKey: "x") { $0.popLast() } == nil)
    }
}
