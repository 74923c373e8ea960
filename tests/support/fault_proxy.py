#!/usr/bin/env python3
"""A small fault-injecting HTTP proxy in front of the test kube-apiserver (tests only).

gpuctl talks plain HTTP to this proxy; the proxy forwards each request over TLS with the harness's
admin client certificate. It answers a deterministic share of requests itself with 429 or 5xx (the
real API server's Status bodies), and with --cut-after N it stops answering after N forwarded
requests (connections are closed), which looks to a client exactly like a dead or unreachable server.

Usage: fault_proxy.py --upstream https://127.0.0.1:PORT --ca CA --cert CRT --key KEY
                      [--fail-every K] [--cut-after N] [--cut-after-writes N]
Prints the listening port on the first line of stdout. Loopback only; stops when stdin closes.
"""
import argparse
import http.client
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization", "proxy-authenticate"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--fail-every", type=int, default=0, help="answer every K-th request with a fault")
    ap.add_argument("--cut-after", type=int, default=0, help="stop answering after N forwarded requests")
    ap.add_argument("--cut-after-writes", type=int, default=0,
                    help="stop answering after N forwarded writes (POST, PUT, PATCH, DELETE; dry-runs not counted)")
    args = ap.parse_args()

    up = urlparse(args.upstream)
    ctx = ssl.create_default_context(cafile=args.ca)
    ctx.load_cert_chain(args.cert, args.key)
    lock = threading.Lock()
    counters = {"seen": 0, "forwarded": 0, "writes": 0, "faults": 0}
    faults = [(429, "TooManyRequests", "too many requests, please try again later"),
              (500, "InternalError", "Internal error occurred: injected by fault_proxy"),
              (503, "ServiceUnavailable", "the server is currently unable to handle the request")]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def handle_any(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            with lock:
                counters["seen"] += 1
                n = counters["seen"]
                cut = (args.cut_after and counters["forwarded"] >= args.cut_after) or \
                    (args.cut_after_writes and counters["writes"] >= args.cut_after_writes)
                fault = None
                if not cut and args.fail_every and n % args.fail_every == 0:
                    fault = faults[counters["faults"] % len(faults)]
                    counters["faults"] += 1
                if not cut and fault is None:
                    counters["forwarded"] += 1
                    if self.command != "GET" and "dryRun=" not in self.path:
                        counters["writes"] += 1
            if cut:
                self.close_connection = True
                self.connection.close()
                return
            if fault:
                code, reason, message = fault
                payload = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": message, "reason": reason, "code": code}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                if code == 429:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(payload)
                return
            conn = http.client.HTTPSConnection(up.hostname, up.port, context=ctx, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP and k.lower() != "host"}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            conn.close()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Stop when the test drops our stdin (or dies).
    sys.stdin.read()
    server.shutdown()
    sys.stderr.write(json.dumps(counters) + "\n")


if __name__ == "__main__":
    main()
