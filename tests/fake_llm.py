"""A small HTTP server on 127.0.0.1 that speaks the OpenAI Chat Completions and the
Anthropic Messages wire formats, answering from a script and recording every request.

The real SDKs talk to it; nothing is mocked inside them.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeLLMServer:
    def __init__(self):
        self.script: list[tuple] = []   # ("text", str) or ("status", code, message)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self.down_until = 0.0  # an outage: every request until then gets a 503, the script untouched
        self.refused = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def answer(self, *texts: str) -> "FakeLLMServer":
        self.script.extend(("text", t) for t in texts)
        return self

    def fail(self, code: int, message: str = "scripted failure") -> "FakeLLMServer":
        self.script.append(("status", code, message))
        return self

    def outage(self, seconds: float) -> "FakeLLMServer":
        """From now on, for ``seconds``, every request fails with 503 (an overloaded provider)."""
        self.down_until = time.monotonic() + seconds
        return self

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def _next(self, path: str, body: dict) -> tuple:
        with self._lock:
            self.requests.append({"path": path, "body": body})
            if time.monotonic() < self.down_until:
                self.refused += 1
                return ("status", 503, "fake server: outage")
            if not self.script:
                return ("status", 500, "fake server: script exhausted")
            return self.script.pop(0)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                step = server._next(self.path, body)
                anthropic = self.path.endswith("/messages")
                if step[0] == "status":
                    _, code, message = step
                    if anthropic:
                        payload = {"type": "error", "error": {"type": "api_error", "message": message}}
                    else:
                        payload = {"error": {"message": message, "type": "server_error", "code": code}}
                    return self._send(code, payload)
                text = step[1]
                tokens_in = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                tokens_out = len(text) // 4
                if anthropic:
                    payload = {"id": f"msg_{len(server.requests)}", "type": "message", "role": "assistant",
                               "model": body.get("model"), "content": [{"type": "text", "text": text}],
                               "stop_reason": "end_turn", "stop_sequence": None,
                               "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}}
                elif self.path.endswith("/chat/completions"):
                    payload = {"id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion",
                               "created": 0, "model": body.get("model"),
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": text}}],
                               "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                                         "total_tokens": tokens_in + tokens_out}}
                else:
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                self._send(200, payload)

            def _send(self, code: int, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
