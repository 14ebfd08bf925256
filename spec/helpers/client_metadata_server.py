#!/usr/bin/env python3
"""OAuth client ID metadata documents for clank.auth's OAuth specs, served over plain HTTP
by Python's own http.server (an implementation independent of Clank's): a good document
and every way one can be wrong.

    client_metadata_server.py   -> prints "PORT" once listening on 127.0.0.1;
                                   exits when stdin closes.

GET /count/<name> answers how many times /<name> was asked for.
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

counts = {}
lock = threading.Lock()

REDIRECTS = ["http://127.0.0.1:8123/callback", "https://client.example/oauth/callback"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the body right after the head, not 40 ms later

    def log_message(self, *args):
        pass

    def send(self, status, body, ctype="application/json", extra=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def me(self):
        return "http://127.0.0.1:%d%s" % (self.server.server_address[1], self.path)

    def do_GET(self):
        path = self.path
        if path.startswith("/count/"):
            with lock:
                n = counts.get("/" + path[len("/count/"):], 0)
            return self.send(200, str(n), "text/plain")
        with lock:
            counts[path] = counts.get(path, 0) + 1
        if path in ("/good.json", "/again.json"):
            return self.send(200, json.dumps({
                "client_id": self.me(), "client_name": "Metadata Client",
                "redirect_uris": REDIRECTS, "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"], "client_uri": "https://client.example/",
            }))
        if path == "/accept.json":  # only for a client that asks for JSON
            if self.headers.get("Accept") != "application/json":
                return self.send(406, "{}")
            return self.send(200, json.dumps({"client_id": self.me(), "redirect_uris": REDIRECTS}))
        if path.startswith("/many.json"):  # /many.json?n=1, ?n=2, ...: as many documents
            return self.send(200, json.dumps({"client_id": self.me(), "redirect_uris": REDIRECTS}))
        if path == "/nameless.json":
            return self.send(200, json.dumps({"client_id": self.me(), "redirect_uris": REDIRECTS}))
        if path == "/mismatch.json":
            return self.send(200, json.dumps({
                "client_id": self.me().replace("mismatch", "other"),
                "client_name": "Mismatch", "redirect_uris": REDIRECTS}))
        if path == "/no-redirects.json":
            return self.send(200, json.dumps({"client_id": self.me(), "client_name": "None"}))
        if path == "/secret.json":
            return self.send(200, json.dumps({
                "client_id": self.me(), "redirect_uris": REDIRECTS,
                "token_endpoint_auth_method": "client_secret_basic"}))
        if path == "/array.json":
            return self.send(200, json.dumps([{"client_id": self.me()}]))
        if path == "/not-json":
            return self.send(200, "<html>hello</html>", "text/html")
        if path == "/huge.json":
            padding = "x" * (80 * 1024)
            return self.send(200, json.dumps({
                "client_id": self.me(), "redirect_uris": REDIRECTS, "padding": padding}))
        if path == "/redirect.json":
            port = self.server.server_address[1]
            return self.send(302, "", "text/plain",
                             [("Location", "http://127.0.0.1:%d/good.json" % port)])
        if path == "/slow.json":
            time.sleep(8)
            return self.send(200, json.dumps({"client_id": self.me(), "redirect_uris": REDIRECTS}))
        if path == "/missing.json":
            return self.send(404, "{}")
        return self.send(404, "no route " + path, "text/plain")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # until the spec closes our stdin (or exits)
    os._exit(0)


if __name__ == "__main__":
    main()
