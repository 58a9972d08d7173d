import Testing

@testable import Ferry

@Suite("TaskStateMachine")
struct TaskStateMachineTests {
    let cancelled = FerryError(.cancelled, "cancelled")
    let failure = FerryError(.network, "broken")

    @Test func newTaskIsSuspendedAndStartsOnce() {
        var machine = TaskStateMachine()
        #expect(machine.publicState == .suspended)
        #expect(machine.resume() == .startTransfer)
        #expect(machine.publicState == .running)
        #expect(machine.resume() == .none)
    }

    @Test func suspendAndResumeToggleWithoutRestarting() {
        var machine = TaskStateMachine()
        _ = machine.resume()
        #expect(machine.suspend() == .pause)
        #expect(machine.publicState == .suspended)
        #expect(machine.suspend() == .none)
        #expect(machine.resume() == .unpause)
        #expect(machine.publicState == .running)
    }

    @Test func suspendBeforeResumeDoesNothing() {
        var machine = TaskStateMachine()
        #expect(machine.suspend() == .none)
        #expect(machine.state == .initial)
    }

    @Test func cancelBeforeStartCompletesWithoutTransfer() {
        var machine = TaskStateMachine()
        #expect(machine.cancel(cancelled) == .completeWithoutTransfer(cancelled))
        #expect(machine.publicState == .completed)
        #expect(machine.resume() == .none)
        #expect(machine.cancel(cancelled) == .none)
        #expect(machine.transferFinished(error: nil) == .none)
    }

    @Test(arguments: [false, true])
    func cancelWhileRunningOrPausedStopsTransferAndCompletesWithCancel(paused: Bool) {
        var machine = TaskStateMachine()
        _ = machine.resume()
        if paused { _ = machine.suspend() }
        #expect(machine.cancel(cancelled) == .stopTransfer)
        #expect(machine.publicState == .canceling)
        #expect(machine.resume() == .none)
        #expect(machine.suspend() == .none)
        #expect(machine.cancel(failure) == .none)
        #expect(machine.transferWillFinish() == false)
        // The transfer's own result loses to the cancel's reason.
        #expect(machine.transferFinished(error: nil) == .complete(cancelled))
        #expect(machine.transferFinished(error: nil) == .none)
    }

    @Test func lateCancelAfterCommitChangesNothing() {
        var machine = TaskStateMachine()
        _ = machine.resume()
        let committed = machine.transferWillFinish()
        #expect(committed)
        #expect(machine.publicState == .running)
        #expect(machine.cancel(cancelled) == .none)
        #expect(machine.suspend() == .none)
        #expect(machine.transferFinished(error: nil) == .complete(nil))
        #expect(machine.publicState == .completed)
    }

    @Test func failureCompletesOnceWithTheError() {
        var machine = TaskStateMachine()
        _ = machine.resume()
        #expect(machine.transferFinished(error: failure) == .complete(failure))
        #expect(machine.transferFinished(error: nil) == .none)
        #expect(machine.cancel(cancelled) == .none)
    }

    @Test func adoptingATransferOnlyFromInitial() {
        var machine = TaskStateMachine()
        let adopted = machine.adoptRunningTransfer()
        #expect(adopted)
        #expect(machine.publicState == .running)
        let adoptedTwice = machine.adoptRunningTransfer()
        #expect(!adoptedTwice)
        var cancelledFirst = TaskStateMachine()
        _ = cancelledFirst.cancel(cancelled)
        let adoptedAfterCancel = cancelledFirst.adoptRunningTransfer()
        #expect(!adoptedAfterCancel)
    }

    /// Every sequence of up to six events from every state: at most one completion, and
    /// none after `completed`.
    @Test func everySequenceCompletesAtMostOnce() {
        enum Event: CaseIterable { case resume, suspend, cancel, willFinish, finishOK, finishError }
        func run(_ events: [Event]) -> Int {
            var machine = TaskStateMachine()
            var completions = 0
            for event in events {
                switch event {
                case .resume: _ = machine.resume()
                case .suspend: _ = machine.suspend()
                case .cancel:
                    if case .completeWithoutTransfer = machine.cancel(cancelled) { completions += 1 }
                case .willFinish: _ = machine.transferWillFinish()
                case .finishOK:
                    if case .complete = machine.transferFinished(error: nil) { completions += 1 }
                case .finishError:
                    if case .complete = machine.transferFinished(error: failure) { completions += 1 }
                }
            }
            return completions
        }
        var sequences: [[Event]] = [[]]
        for _ in 0..<6 {
            sequences = sequences.flatMap { prefix in Event.allCases.map { prefix + [$0] } }
            for sequence in sequences { #expect(run(sequence) <= 1) }
        }
    }
}
