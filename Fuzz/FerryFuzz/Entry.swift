import Foundation

#if FUZZING
/// libFuzzer's entry: one input for the target `FERRY_FUZZ_TARGET` names.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let data = start.map { Data(bytes: $0, count: count) } ?? Data()
    FuzzEntry.target.run(data)
    return 0
}

/// libFuzzer's driver, started from the program's `main`.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ testOneInput: @convention(c) (UnsafeRawPointer?, Int) -> CInt
) -> CInt

/// The program's `main`: SwiftPM links an executable target's `main` to `<module>_main`
/// (so that tests can link the module), which leaves libFuzzer's own `main` out; this one
/// starts libFuzzer's driver as that `main` would.
@_cdecl("ferry_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments) { start, length in fuzzOneInput(start, length) }
}

enum FuzzEntry {
    static let target: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["FERRY_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
            FileHandle.standardError.write(Data("FERRY_FUZZ_TARGET must be one of: \(names)\n".utf8))
            exit(2)
        }
        return target
    }()
}
#else
/// Without the fuzzer: runs every file of the corpus directories given (by default each
/// target's seeds) through its target, a regression check of the inputs kept.
///
/// ```
/// swift run ferry-fuzz [Fuzz/Corpus]
/// ```
@main
enum FuzzReplay {
    static func main() {
        let root = URL(fileURLWithPath: CommandLine.arguments.dropFirst().first ?? "Fuzz/Corpus", isDirectory: true)
        var inputs = 0
        for target in FuzzTarget.allCases {
            let directory = root.appendingPathComponent(target.rawValue, isDirectory: true)
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            for file in files.sorted() {
                guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(file).path)
                else { continue }
                target.run(data)
                inputs += 1
            }
        }
        print("ferry-fuzz: \(inputs) inputs replayed, every one returned")
        if inputs == 0 {
            FileHandle.standardError.write(Data("ferry-fuzz: no inputs under \(root.path)\n".utf8))
            exit(1)
        }
    }
}
#endif
