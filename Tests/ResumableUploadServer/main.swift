// Apple's server side of resumable uploads (swift-nio-extras' `NIOResumableUpload`, interop
// version 6) on 127.0.0.1, for the tests: Ferry's client is tested against a server nobody
// here wrote. The handler behind it is the application's part, and is ours: it stores each
// upload's bytes in a file named by the request's last path component, and answers `201`
// with the number of bytes it stored.
//
//     resumable-upload-server PORT DIRECTORY [ORIGIN]
//
// ORIGIN (default `http://127.0.0.1:PORT`) is the scheme and authority the upload
// resources' URLs are made of: a relay's, when the tests put one in front.
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOResumableUpload

/// Writes a line to standard output at once (it is a file when the tests start the server).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// Stores one upload's bytes in a file; its answer says how many it stored.
final class StoreHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    let directory: URL
    var file: FileHandle?
    var stored = 0

    init(directory: URL) { self.directory = directory }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            switch request.method {
            case .post, .put:
                let name = (request.path ?? "/upload").split(separator: "/").last.map(String.init) ?? "upload"
                let url = directory.appendingPathComponent(name.isEmpty ? "upload" : name)
                _ = FileManager.default.createFile(atPath: url.path, contents: nil)
                file = try? FileHandle(forWritingTo: url)
                stored = 0
                say("upload \(request.method.rawValue) \(request.path ?? "") -> \(url.path)")
                if file == nil { respond(context, .internalServerError, "cannot create \(url.path)\n") }
            case .options:
                respond(context, .noContent, "")
            default:
                respond(context, .methodNotAllowed, "")
            }
        case .body(let buffer):
            buffer.withUnsafeReadableBytes { try? file?.write(contentsOf: $0) }
            stored += buffer.readableBytes
        case .end:
            guard let file else { return }
            try? file.close()
            self.file = nil
            say("stored \(stored)")
            respond(context, .created, "stored \(stored)\n")
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ status: HTTPResponse.Status, _ text: String) {
        var head = HTTPResponse(status: status)
        head.headerFields[.contentLength] = "\(text.utf8.count)"
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !text.isEmpty { context.write(wrapOutboundOut(.body(ByteBuffer(string: text))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let port = Int(arguments[1]) else {
    say("usage: resumable-upload-server PORT DIRECTORY [ORIGIN]")
    exit(2)
}
let directory = URL(fileURLWithPath: arguments[2], isDirectory: true)
let origin = arguments.count > 3 ? arguments[3] : "http://127.0.0.1:\(port)"
let uploads = HTTPResumableUploadContext(origin: origin)
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let server = try ServerBootstrap(group: group)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            try pipeline.configureHTTPServerPipeline()
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandler(
                HTTPResumableUploadHandler(context: uploads, handlers: [StoreHandler(directory: directory)])
            )
        }
    }
    .bind(host: "127.0.0.1", port: port)
    .wait()
say("listening on \(port), upload resources at \(origin)")
try server.closeFuture.wait()
