#!/usr/bin/env python3
"""A validating admission webhook for tests: allows every request, counts them.

The test API server calls webhooks behind a Service at the Service's ready EndpointSlice addresses
(the harness runs kube-apiserver with --enable-aggregator-routing), and EndpointSlices may not hold
loopback addresses, so this server listens on all interfaces and reports the host's first
non-loopback IPv4 address for the test to put in its EndpointSlice.

Usage: webhook_server.py --cert CRT --key KEY
Prints "PORT IP" on the first line of stdout. Stops when stdin closes and prints
{"requests": N} on stderr.
"""
import argparse
import json
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def host_ip():
    # A UDP "connect" sends nothing; it only picks the source address of the default route.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))
        ip = s.getsockname()[0]
    except OSError:
        ip = socket.gethostbyname(socket.gethostname())
    finally:
        s.close()
    if ip.startswith("127."):
        sys.exit("webhook_server: no non-loopback IPv4 address on this host")
    return ip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    args = ap.parse_args()
    lock = threading.Lock()
    counters = {"requests": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            review = json.loads(self.rfile.read(length) or b"{}")
            with lock:
                counters["requests"] += 1
            uid = review.get("request", {}).get("uid", "")
            body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": {"uid": uid, "allowed": True}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("0.0.0.0", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    print(server.server_address[1], host_ip(), flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()
    sys.stderr.write(json.dumps(counters) + "\n")


if __name__ == "__main__":
    main()
