import Testing

@Suite("The bound tests wait with")
struct BoundedTests {
    /// A body still running at its bound is cancelled: a poll in it ends rather than looking
    /// on for the rest of the run.
    @Test func aBodyPastItsBoundIsCancelled() async {
        let ended = CallTally()
        let outcome = await finishing(within: 0.05) { () -> Bool in
            await poll { false }
            ended.record()
            return true
        }
        #expect(outcome == nil)
        #expect(await ended.ran(within: 60), "the body went on polling")
    }
}
