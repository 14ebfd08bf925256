#!/usr/bin/env python3
"""The other end for clank.fetch's specs: an HTTP/1.1 server and the same
behind TLS, written with Python's own http.server and ssl (an implementation
independent of Clank's). Certificates come from the openssl command: a CA
made now, and a certificate for DNS:localhost signed by it.

    fetch_server.py DIR   -> prints "HTTP_PORT TLS_PORT IPV6_PORT" once listening
                             (IPV6_PORT: HTTP on ::1, 0 without IPv6);
                             DIR gets ca.pem. Exits when stdin closes.
"""
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

connections = {"count": 0}
lock = threading.Lock()


def make_certs(d):
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem", "-days", "2",
        "-subj", "/CN=Clank Test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", *ec, "-keyout", f"{d}/server.key", "-out", f"{d}/server.csr",
        "-subj", "/CN=localhost")
    with open(f"{d}/ext.cnf", "w") as f:
        f.write("subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", f"{d}/server.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
        "-CAcreateserial", "-out", f"{d}/server.pem", "-days", "2", "-extfile", f"{d}/ext.cnf")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        with lock:
            connections["count"] += 1
        super().setup()

    def send(self, status, body, ctype="text/plain", extra=()):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def chunk(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n).decode() if n else ""

    def handle_any(self):
        path = self.path
        if path == "/hello":
            return self.send(200, "hello")
        if path == "/echo" or path.startswith("/echo?"):
            headers = {k.lower(): v for k, v in self.headers.items()}
            return self.send(200, json.dumps({"method": self.command, "path": path,
                                              "headers": headers, "body": self.body()}),
                             "application/json")
        if path == "/connections":
            return self.send(200, str(connections["count"]))
        if path == "/repeated":
            return self.send(200, "x", extra=[("X-Twice", "a"), ("X-Twice", "b")])
        if path == "/quiet-close":  # keep-alive by the headers, then closed
            self.send(200, "bye")
            self.close_connection = True
            return
        if path == "/missing":
            return self.send(404, "nope")
        if path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in ("one,", "two,", "three"):
                self.chunk(part)
                time.sleep(0.01)
            self.wfile.write(b"0\r\n\r\n")
            return
        if path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            # lines split across chunks, and \r\n endings, on purpose
            self.chunk("data: 1\n\nda")
            time.sleep(0.15)
            self.chunk("ta: 2\r\n\r\n")
            time.sleep(0.15)
            self.chunk("data: 3\n\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        if path.startswith("/redirect/"):
            n = int(path.rsplit("/", 1)[1])
            if n == 0:
                return self.send(200, "arrived")
            return self.send(302, "", extra=[("Location", f"/redirect/{n - 1}")])
        if path.startswith("/r3"):  # /r301 /r302 /r303 /r307 /r308
            return self.send(int(path[2:5]), "", extra=[("Location", "/echo")])
        if path.startswith("/cross"):  # another origin: localhost instead of 127.0.0.1
            port = self.server.server_address[1]
            return self.send(302, "", extra=[("Location", f"http://localhost:{port}/echo")])
        if path == "/hang":
            time.sleep(30)
            return
        if path == "/slow-body":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 10)
            self.wfile.flush()
            time.sleep(30)
            return
        if path == "/big":
            self.send_response(200)
            self.send_header("Content-Length", str(4 * 1024 * 1024))
            self.end_headers()
            if self.command == "HEAD":
                return
            try:
                for _ in range(64):
                    self.wfile.write(b"y" * 65536)
            except OSError:
                pass
            return
        if path == "/big-chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for _ in range(64):
                    self.chunk(b"z" * 65536)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            return
        if path == "/firehose":  # 32 MiB, counting what the socket took
            connections["sent"] = 0
            self.send_response(200)
            self.send_header("Content-Length", str(32 * 1024 * 1024))
            self.end_headers()
            try:
                for _ in range(512):
                    self.wfile.write(b"f" * 65536)
                    connections["sent"] += 65536
            except OSError:
                pass
            return
        if path == "/sent":
            return self.send(200, str(connections.get("sent", 0)))
        if path == "/cut":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"only ten b")
            self.wfile.flush()
            self.close_connection = True
            return
        if path == "/garbage":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nBad Header\r\n\r\nhello")
            self.close_connection = True
            return
        return self.send(404, "no route " + path)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any


class Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True
    request_queue_size = 64


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512


def main():
    d = sys.argv[1]
    make_certs(d)
    plain = Server(("127.0.0.1", 0), Handler)
    tls = Server(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(f"{d}/server.pem", f"{d}/server.key")
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    servers = [plain, tls]
    try:
        servers.append(Server6(("::1", 0), Handler))
        port6 = servers[2].server_address[1]
    except OSError:
        port6 = 0
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print(plain.server_address[1], tls.server_address[1], port6, flush=True)
    sys.stdin.read()  # until the spec closes our stdin (or exits)
    os._exit(0)


if __name__ == "__main__":
    main()
