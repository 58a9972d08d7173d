import Foundation
import Testing

/// `ferry --generate-completion-script`: the scripts a shell loads for `ferry <TAB>`.
@Suite struct ShellCompletionTests {
    /// What bash offers for `line` (the cursor at its end), with ferry's script sourced the
    /// way bash-completion sources it, and `complete -p` showing it is registered.
    func bashCompletions(_ line: String) async throws -> [String] {
        let directory = try makeTemporaryDirectory("completion")
        defer { try? FileManager.default.removeItem(at: directory) }
        let script = directory.appendingPathComponent("ferry.bash")
        let generated = try await ProcessRunner.run(ProcessRunner.ferry, ["--generate-completion-script", "bash"])
        #expect(generated.status == 0)
        try generated.stdout.write(to: script)
        let words = line.split(separator: " ", omittingEmptySubsequences: false).map { "'\($0)'" }
        let program = """
            source '\(script.path)'
            complete -p ferry >&2
            COMP_LINE='\(line)'; COMP_POINT=${#COMP_LINE}
            COMP_WORDS=(\(words.joined(separator: " "))); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
            _ferry ferry "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try await ProcessRunner.run("/bin/bash", ["--norc", "--noprofile", "-c", program])
        #expect(result.status == 0, "\(result.stderrText)")
        #expect(result.stderrText.contains("-F _ferry ferry"))
        return result.stdoutText.split(separator: "\n").map { String($0).trimmingCharacters(in: .whitespaces) }
    }

    @Test func bashCompletesSubcommandsAndOptions() async throws {
        let all = try await bashCompletions("ferry ")
        for command in ["get", "upload", "put", "add", "ls", "wait", "pause", "resume", "cancel", "daemon", "web"] {
            #expect(all.contains(command), "ferry <TAB> lacks \(command): \(all)")
        }
        #expect(try await bashCompletions("ferry ge") == ["get"])
        #expect(try await bashCompletions("ferry daemon --we") == ["--web"])
        #expect(try await bashCompletions("ferry get --limit-r") == ["--limit-rate"])
        let split = try await bashCompletions("ferry get --sp")
        #expect(split == ["--split"])
    }

    @Test func zshAndFishScriptsNameEveryCommand() async throws {
        for shell in ["zsh", "fish"] {
            let result = try await ProcessRunner.run(ProcessRunner.ferry, ["--generate-completion-script", shell])
            #expect(result.status == 0)
            for command in ["get", "daemon", "web", "limit-rate"] {
                #expect(result.stdoutText.contains(command), "\(shell) script lacks \(command)")
            }
        }
        let zsh = try await ProcessRunner.run(ProcessRunner.ferry, ["--generate-completion-script", "zsh"])
        #expect(zsh.stdoutText.hasPrefix("#compdef ferry"))
    }
}
