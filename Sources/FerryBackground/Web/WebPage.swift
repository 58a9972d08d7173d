import Crypto
import Foundation

/// The web interface's one page: HTML with its style and script inline, allowed by hash in
/// a Content-Security-Policy that allows nothing else (no other script, style, image, frame,
/// form target or connection but this origin's API).
///
/// The script lists the daemon's transfers (`GET /v1/tasks` once a second, the rate and ETA
/// from successive samples), adds a URL (`POST /v1/tasks`), and pauses, resumes and cancels
/// (`POST /v1/tasks/ID/ACTION`), with the token from the page's address in an
/// `Authorization` header. It writes text with `textContent` only: nothing a URL or a server
/// says becomes markup.
struct WebPage: Sendable {
    /// The answer to `GET /?token=…`.
    let response: BackgroundRouter.Response

    /// - Parameter saveTo: the folder the form offers for new downloads.
    init(saveTo: String) {
        let html = Self.document(saveTo: Self.escape(saveTo))
        response = BackgroundRouter.Response(
            status: 200,
            body: Data(html.utf8),
            headers: [
                ("Content-Type", "text/html; charset=utf-8"),
                ("Content-Security-Policy", Self.contentSecurityPolicy),
            ]
        )
    }

    /// Sent with every answer of the web interface, the page's and the API's.
    static let securityHeaders: [(name: String, value: String)] = [
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
        ("Cross-Origin-Resource-Policy", "same-origin"),
    ]

    /// The page's policy: its own inline script and style by their SHA-256, the API on this
    /// origin, nothing else.
    static let contentSecurityPolicy = [
        "default-src 'none'",
        "script-src '\(hash(script))'",
        "style-src '\(hash(style))'",
        "connect-src 'self'",
        "img-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ].joined(separator: "; ")

    private static func hash(_ text: String) -> String {
        "sha256-" + Data(SHA256.hash(data: Data(text.utf8))).base64EncodedString()
    }

    /// `text` with the characters that mean something in HTML escaped.
    static func escape(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.append(character)
            }
        }
        return result
    }

    private static func document(saveTo: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="ferry-save-to" content="\(saveTo)">
        <title>Ferry transfers</title>
        <style>\(style)</style>
        </head>
        <body>
        <header><h1>Ferry</h1><span id="summary"></span></header>
        <main>
        <form id="add" autocomplete="off">
        <label>URL <input id="url" type="url" required placeholder="https://example.com/file.iso"></label>
        <label>Save to folder <input id="folder" required></label>
        <label>File name <input id="filename" placeholder="from the URL"></label>
        <label>Connections <input id="connections" type="number" min="1" max="16" value="1"></label>
        <button type="submit" id="add-button">Add</button>
        </form>
        <p id="message" role="status"></p>
        <nav id="pager">
        <label>Show <select id="filter"><option value="">everything</option><option>running</option><option>queued</option><option>paused</option><option>failed</option><option>completed</option><option>canceled</option></select></label>
        <button type="button" id="previous" disabled>Previous page</button>
        <button type="button" id="next" disabled>Next page</button>
        </nav>
        <table id="tasks">
        <thead><tr><th>#</th><th>File</th><th>State</th><th>Progress</th><th>Rate</th><th>ETA</th><th></th></tr></thead>
        <tbody></tbody>
        </table>
        <p id="empty">No transfers yet.</p>
        <p><button type="button" id="clean">Clear finished</button></p>
        </main>
        <script>\(script)</script>
        </body>
        </html>

        """
    }
}
