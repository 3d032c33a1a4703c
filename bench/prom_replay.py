"""Serve recorded Prometheus answers on loopback, as `/api/v1/query` would (a bench helper process).

    python bench/prom_replay.py DIR PORT

DIR holds `<variant>/<query name>.json` (bodies) and `queries.json` ({PromQL: query name}). A request
for `/<prefix>/api/v1/query?query=...` gets the next variant of that query's answer for that prefix, so
each client (one prefix each) sees the same sequence of refreshes. gzip when the client accepts it, as
Prometheus does; HTTP/1.1 keep-alive.
"""

from __future__ import annotations

import gzip
import http.server
import json
import sys
import threading
import urllib.parse
from pathlib import Path


def main() -> int:
    root, port = Path(sys.argv[1]), int(sys.argv[2])
    names: dict[str, str] = json.loads((root / "queries.json").read_text())
    variants = sorted(p for p in root.iterdir() if p.is_dir())
    plain = [{n: (v / f"{n}.json").read_bytes() for n in names.values()} for v in variants]
    packed = [{n: gzip.compress(b, 6) for n, b in bodies.items()} for bodies in plain]
    turns: dict[tuple[str, str], int] = {}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urllib.parse.urlparse(self.path)
            prefix = url.path.split("/api/v1/query")[0]
            name = names.get(urllib.parse.parse_qs(url.query).get("query", [""])[0])
            if name is None:
                self.send_error(404, "unknown query")
                return
            with lock:
                turn = turns.get((prefix, name), 0)
                turns[(prefix, name)] = turn + 1
            zipped = "gzip" in self.headers.get("Accept-Encoding", "")
            body = (packed if zipped else plain)[turn % len(plain)][name]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if zipped:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 128  # ten queries connect at once; the default backlog of 5 drops SYNs
        daemon_threads = True

    Server(("127.0.0.1", port), Handler).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
