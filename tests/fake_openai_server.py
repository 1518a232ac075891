"""A small OpenAI-compatible ``/v1/chat/completions`` server on loopback, for the tuner's LLM tests.

Each request pops the next scripted behaviour (the last one repeats):
- ``("reply", text)``: a normal completion whose message content is ``text``;
- ``("sleep", seconds)``: wait, then answer (to trip the client's timeout);
- ``("status", code)``: an HTTP error with an OpenAI-style error body.
Every request body received is kept in ``requests`` for the tests to inspect.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self, script: list[tuple[str, object]]):
        self.script = list(script)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                with outer._lock:
                    outer.requests.append(body)
                    kind, arg = outer.script[0] if len(outer.script) == 1 else outer.script.pop(0)
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                if kind == "sleep":
                    time.sleep(float(arg))
                    kind, arg = "reply", '{"candidates": []}'
                if kind == "status":
                    return self._send(int(arg), {"error": {"message": "fake server error", "type": "server_error"}})
                self._send(200, {
                    "id": f"chatcmpl-{len(outer.requests)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": arg}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                })

            def _send(self, code: int, obj: dict):
                data = json.dumps(obj).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
