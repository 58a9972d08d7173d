import Foundation
import Testing

@testable import Ferry

@Suite("Authentication challenges and Digest")
struct AuthenticationTests {
    @Test func parsesSeveralChallengesWithQuotedCommas() {
        let challenges = Challenge.parse([
            #"Digest realm="a, b", qop="auth,auth-int", nonce="n\"1", algorithm=SHA-256, Basic realm="b""#,
            "Bearer",
            "Negotiate YII+abc==",
        ])
        #expect(challenges.count == 4)
        #expect(challenges[0].scheme == "digest")
        #expect(challenges[0]["realm"] == "a, b")
        #expect(challenges[0]["qop"] == "auth,auth-int")
        #expect(challenges[0]["nonce"] == #"n"1"#)
        #expect(challenges[0]["algorithm"] == "SHA-256")
        #expect(challenges[1] == Challenge(scheme: "basic", parameters: ["realm": "b"]))
        #expect(challenges[2] == Challenge(scheme: "bearer"))
        #expect(challenges[3] == Challenge(scheme: "negotiate", token68: "YII+abc=="))
    }

    @Test func malformedChallengesAreSkippedNotGuessed() {
        #expect(Challenge.parse(["", ",,", "=x", #"Digest realm="unterminated"#]).map(\.parameters) == [[:]])
        #expect(
            Challenge.parse([#"Basic realm="r", =oops, charset=UTF-8"#])[0].parameters == [
                "realm": "r", "charset": "UTF-8",
            ]
        )
    }

    /// RFC 7616 §3.9.1: the same request answered with SHA-256 and with MD5.
    @Test(arguments: [
        ("SHA-256", "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"),
        ("MD5", "8ca523f5e9506fed4657c9700eebdbec"),
    ])
    func rfc7616Example(algorithm: String, response: String) throws {
        let challenge = try #require(
            Challenge.parse([
                #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=\#(algorithm), nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#
            ]).first
        )
        let digest = try #require(DigestAuthentication(challenge))
        let header = digest.authorization(
            for: Credential(user: "Mufasa", password: "Circle of Life"),
            method: "GET",
            uri: "/dir/index.html",
            cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ",
            nonceCount: 1
        )
        #expect(header.hasPrefix("Digest "))
        #expect(header.contains(#"response="\#(response)""#))
        #expect(header.contains("nc=00000001"))
        #expect(header.contains("qop=auth,") || header.contains("qop=auth "))
        #expect(header.contains(#"opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#))
        #expect(header.contains("algorithm=\(algorithm)"))
    }

    @Test func strongestAnswerableChallengeWins() throws {
        let offered = Challenge.parse([
            #"Basic realm="b""#,
            #"Digest realm="m", nonce="1", algorithm=MD5, qop="auth""#,
            #"Digest realm="s", nonce="2", algorithm=SHA-256, qop="auth""#,
            #"Digest realm="x", nonce="3", algorithm=SHA-512-256"#,
        ])
        #expect(AnswerableChallenge.strongest(offered)?.realm == "s")
        #expect(AnswerableChallenge.strongest(Array(offered.prefix(2)))?.realm == "m")
        #expect(AnswerableChallenge.strongest(Array(offered.prefix(1)))?.method == .basic)
        // Only auth-int, an unknown algorithm, or no nonce: nothing Ferry answers.
        #expect(DigestAuthentication(Challenge.parse([#"Digest realm="r", nonce="n", qop="auth-int""#])[0]) == nil)
        #expect(AnswerableChallenge.strongest(Array(offered.suffix(1))) == nil)
        #expect(DigestAuthentication(Challenge.parse([#"Digest realm="r""#])[0]) == nil)
    }

    @Test func rfc2069AndUserhash() throws {
        let plain = try #require(DigestAuthentication(Challenge.parse([#"Digest realm="r", nonce="n""#])[0]))
        let header = plain.authorization(for: Credential(user: "u", password: "p"), method: "GET", uri: "/")
        #expect(!header.contains("qop="))
        #expect(!header.contains("cnonce="))
        let hashed = try #require(
            DigestAuthentication(
                Challenge.parse([#"Digest realm="r", nonce="n", qop="auth", algorithm=SHA-256, userhash=true"#])[0]
            )
        )
        let hidden = hashed.authorization(for: Credential(user: "u", password: "p"), method: "GET", uri: "/")
        #expect(!hidden.contains(#"username="u""#))
        #expect(hidden.contains("userhash=true"))
    }

    @Test func credentialStoreMatchesRealmThenOriginAndPersists() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-creds-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("credentials.json")
        let url = try #require(URL(string: "https://example.org/a"))
        let store = try CredentialStore(persistingTo: file)
        try store.set(
            Credential(user: "realm", password: "1"),
            for: ProtectionSpace(url: url, realm: "staff", authenticationMethod: .digest)
        )
        try store.set(
            Credential(user: "origin", password: "2"),
            for: ProtectionSpace(url: url, realm: nil, authenticationMethod: .basic)
        )
        let reloaded = try CredentialStore(persistingTo: file)
        #expect(
            reloaded.credential(for: .init(url: url, realm: "staff", authenticationMethod: .basic))?.user == "realm"
        )
        #expect(
            reloaded.credential(for: .init(url: url, realm: "other", authenticationMethod: .basic))?.user == "origin"
        )
        let elsewhere = try #require(URL(string: "http://example.org/a"))
        #expect(reloaded.credential(for: .init(url: elsewhere, realm: "staff", authenticationMethod: .basic)) == nil)
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try Data("not json".utf8).write(to: file)
        #expect(throws: FerryError.self) { try CredentialStore(persistingTo: file) }
    }
}
