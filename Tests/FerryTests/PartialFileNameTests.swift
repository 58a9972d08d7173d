import Foundation
import Testing

@testable import Ferry

@Suite("Partial file names")
struct PartialFileNameTests {
    /// Partial files are named by random version 4 UUIDs (RFC 9562 §5.4), in lower case:
    /// names no other process can guess, and that ``PartialFile/isPartialFileName(_:)``
    /// accepts when resume data names them.
    @Test func partialFileNamesAreRandomVersion4UUIDs() {
        let names = (0..<500).map { _ in PartialFile.newName() }
        #expect(Set(names).count == names.count)
        for name in names {
            #expect(PartialFile.isPartialFileName(URL(fileURLWithPath: "/p/" + name)))
            let id = Array(name.dropFirst(".ferry-".count).dropLast(".partial".count).utf8)
            #expect(id.count == 36)
            #expect([8, 13, 18, 23].allSatisfy { id[$0] == UInt8(ascii: "-") })
            #expect(id[14] == UInt8(ascii: "4"), "the version")
            #expect("89ab".utf8.contains(id[19]), "the variant")
            #expect(id.allSatisfy { "0123456789abcdef-".utf8.contains($0) })
        }
        // Random, not fixed: each of the 30 random hex digits takes more than one value.
        let randomPlaces = (0..<36).filter { ![8, 13, 14, 18, 19, 23].contains($0) }
        for place in randomPlaces {
            #expect(Set(names.map { Array($0.utf8)[".ferry-".count + place] }).count > 1)
        }
    }
}
