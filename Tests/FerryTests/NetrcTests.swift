import Foundation
import Testing

@testable import Ferry

@Suite(".netrc files")
struct NetrcTests {
    @Test func machineThenDefault() throws {
        let netrc = try Netrc(
            parsing: """
                machine api.example.com login ada password s3cret
                machine Other.Example.com
                    login "bob smith"
                    password "pa ss\\"word"
                    account ignored
                default login anon password guest
                """
        )
        #expect(netrc.credential(forHost: "api.example.com") == Credential(user: "ada", password: "s3cret"))
        #expect(
            netrc.credential(forHost: "other.example.com") == Credential(user: "bob smith", password: "pa ss\"word")
        )
        #expect(netrc.credential(forHost: "elsewhere") == Credential(user: "anon", password: "guest"))
    }

    @Test func macrosAreSkippedToTheBlankLine() throws {
        let netrc = try Netrc(
            parsing: """
                macdef init
                machine evil login x password y

                machine good login ada password pw
                """
        )
        #expect(netrc.credential(forHost: "evil") == nil)
        #expect(netrc.credential(forHost: "good") == Credential(user: "ada", password: "pw"))
    }

    @Test func noDefaultNoCredentialAndErrorsAreTyped() throws {
        #expect(try Netrc(parsing: "machine a login x password y").credential(forHost: "b") == nil)
        #expect(throws: FerryError.self) { try Netrc(parsing: "machine a login") }
        #expect(throws: FerryError.self) { try Netrc(parsing: "machine a password \"open") }
    }

    @Test func aFileOthersMayReadIsRefused() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("netrc-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try "machine a login x password y\n".write(to: file, atomically: true, encoding: .utf8)
        chmod(file.path, 0o644)
        #expect(throws: FerryError.self) { try Netrc(contentsOf: file) }
        chmod(file.path, 0o600)
        #expect(try Netrc(contentsOf: file).credential(forHost: "a") == Credential(user: "x", password: "y"))
    }
}
