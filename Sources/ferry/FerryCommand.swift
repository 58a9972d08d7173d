import ArgumentParser
import Ferry
import Foundation

/// The `ferry` command-line tool.
@main
struct FerryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "HTTP transfers that are complete, fast and never wrong.",
        discussion: """
            Exit codes: 0 success, 1 other failure, 3 invalid URL, 7 network failure,
            8 bad server response, 9 checksum mismatch, 22 HTTP error status, 23 file system error, 28 timeout,
            47 too many redirects, 64 usage error, 130 interrupted.
            """,
        version: "0.1.0",
        subcommands: [
            GetCommand.self, UploadCommand.self, PutCommand.self, AddCommand.self, ListCommand.self, WaitCommand.self,
            PauseCommand.self, ResumeCommand.self, CancelCommand.self, CleanCommand.self, DaemonCommand.self,
            WebCommand.self,
        ]
    )

    /// Reads curl's config files for the commands that take them (``ConfigFile``), then
    /// parses and runs the command line.
    static func main() async {
        do {
            let arguments = try ConfigFile.expand(Array(CommandLine.arguments.dropFirst()))
            if let hint = SplitHint.message(for: arguments) {
                FileHandle.standardError.write(Data("ferry: \(hint)\n".utf8))
                Foundation.exit(ExitCode.validationFailure.rawValue)
            }
            await main(arguments)
        } catch {
            FileHandle.standardError.write(Data("ferry: \(error.message)\n".utf8))
            // curl's status for a config file it cannot read.
            Foundation.exit(ExitStatus.readError)
        }
    }
}
