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
        self.by_op: dict[str, str] = {}  # answers kept for every request naming the operator
        self.delay_s = 0.0  # each answer takes this long, as a model's does
        self.limited = 0  # requests still to be answered 429 (a rate limit), before anything else
        self.in_flight = self.most_in_flight = 0
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

    def answer_by_op(self, answers: dict[str, str]) -> "FakeLLMServer":
        """Answer every request with the text of the operator its first message names first
        (for batches, whose operators ask in no fixed order); the script is used for no other."""
        self.by_op.update(answers)
        return self

    def latency(self, seconds: float) -> "FakeLLMServer":
        self.delay_s = seconds
        return self

    def rate_limit(self, requests: int) -> "FakeLLMServer":
        """The next ``requests`` requests get 429 with Retry-After: 1."""
        self.limited += requests
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
            self.requests.append({"path": path, "body": body, "received_at": time.time()})
            if time.monotonic() < self.down_until:
                self.refused += 1
                return ("status", 503, "fake server: outage")
            if self.limited:
                self.limited -= 1
                return ("status", 429, "fake server: rate limited")
            if self.by_op:
                first = str((body.get("messages") or [{}])[0].get("content", ""))
                named = [(first.find(op), op) for op in self.by_op if op in first]
                if named:
                    return ("text", self.by_op[min(named)[1]])
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
                with server._lock:
                    server.in_flight += 1
                    server.most_in_flight = max(server.most_in_flight, server.in_flight)
                try:
                    time.sleep(server.delay_s if step[0] == "text" else 0.0)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                anthropic = self.path.endswith("/messages")
                if step[0] == "status":
                    _, code, message = step
                    if anthropic:
                        payload = {"type": "error", "error": {"type": "api_error", "message": message}}
                    else:
                        payload = {"error": {"message": message, "type": "server_error", "code": code}}
                    return self._send(code, payload, {"retry-after": "1"} if code == 429 else {})
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

            def _send(self, code: int, payload: dict, headers: dict | None = None):
                data = json.dumps(payload).encode()
                self.send_response(code)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
