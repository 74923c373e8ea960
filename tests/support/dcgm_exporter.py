#!/usr/bin/env python3
"""A stand-in for dcgm-exporter (no GPU here): serves /metrics exactly as dcgm-exporter formats them.

The GPUs and their values come from a JSON state file the test writes, re-read on every scrape, so a
test changes a GPU's values while Prometheus scrapes. The format follows dcgm-exporter's templates
(internal/pkg/rendermetrics/render_metrics.go; collector/expcollector.go for the DCGM_EXP_* metrics):

    # HELP <name> <help>
    # TYPE <name> <type>
    <name>{gpu="0",UUID="GPU-...",pci_bus_id="...",device="nvidia0",modelName="...",Hostname="node",<labels sorted>,<attributes sorted>} <value>

Labels are the CSV's `label` rows (DCGM_FI_DRIVER_VERSION) plus, for DCGM_EXP_*, window_size_in_ms and
the per-entity label (xid); attributes are the Kubernetes pod mapping (container, namespace, pod; empty
when no pod holds the GPU). The DCGM_EXP_* template has no pci_bus_id. Go templates range over maps in
sorted key order, so labels and attributes come out sorted.

State (JSON):
    {"metrics": [{"name": ..., "type": "gauge"|"counter", "help": ..., "per": "xid"?}],
     "driver_label": "DCGM_FI_DRIVER_VERSION", "driver": "580.95.05",
     "gpus": [{"gpu": 0, "uuid": ..., "pci_bus_id": ..., "model": ..., "hostname": ...,
               "pod": "", "namespace": "", "container": "",
               "values": {"<metric>": 1.0, "<per-metric>": {"79": 2}}}]}

Usage:
    dcgm_exporter.py serve STATE PORT_FILE      listen on 127.0.0.1:<free port>, write the port
    dcgm_exporter.py openmetrics STATE START END STEP JOB INSTANCE
        print the same series as OpenMetrics, one sample per STEP seconds from START to END (unix
        seconds), with job/instance labels as Prometheus adds them, for `promtool tsdb
        create-blocks-from openmetrics` (history a test cannot wait for)
"""

import http.server
import json
import sys

EXP_WINDOW_MS = "300000"  # dcgm-exporter's default --xid-count-window-size (5 minutes)


def esc(v):
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def fmt_value(v):
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def series(state):
    """Yields (metric, help, type, [(labels_text, value)]) in the exporter's order."""
    driver_label = state.get("driver_label")
    for m in state["metrics"]:
        name, per = m["name"], m.get("per")
        rows = []
        for g in state["gpus"]:
            v = g.get("values", {}).get(name)
            if v is None:
                continue
            head = [("gpu", g["gpu"]), ("UUID", g["uuid"])]
            if not name.startswith("DCGM_EXP_"):
                head.append(("pci_bus_id", g.get("pci_bus_id", "00000000:00:00.0")))
            head += [("device", "nvidia%d" % g["gpu"]), ("modelName", g["model"])]
            if g.get("hostname"):
                head.append(("Hostname", g["hostname"]))
            labels = {}
            if driver_label:
                labels[driver_label] = state.get("driver", "")
            attrs = {k: g.get(k, "") for k in ("container", "namespace", "pod")}
            if per:
                labels["window_size_in_ms"] = EXP_WINDOW_MS
                for entity, count in sorted(v.items(), key=lambda kv: int(kv[0])):
                    lab = dict(labels)
                    lab[per] = entity
                    rows.append((head, lab, attrs, count))
            else:
                rows.append((head, labels, attrs, v))
        out = []
        for head, labels, attrs, v in rows:
            parts = ['%s="%s"' % (k, esc(x)) for k, x in head]
            parts += ['%s="%s"' % (k, esc(labels[k])) for k in sorted(labels)]
            parts += ['%s="%s"' % (k, esc(attrs[k])) for k in sorted(attrs)]
            out.append((",".join(parts), v))
        yield name, m["help"], m["type"], out


def exposition(state):
    lines = []
    for name, help_text, typ, rows in series(state):
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s %s" % (name, typ))
        for labels, v in rows:
            lines.append("%s{%s} %s" % (name, labels, fmt_value(v)))
    return "\n".join(lines) + "\n"


def openmetrics(state, start, end, step, job, instance):
    out = []
    extra = 'instance="%s",job="%s"' % (esc(instance), esc(job))
    for name, help_text, _typ, rows in series(state):
        # Every family as a gauge: OpenMetrics counters need a _total suffix dcgm-exporter does not use,
        # and PromQL treats both alike.
        out.append("# HELP %s %s" % (name, help_text))
        out.append("# TYPE %s gauge" % name)
        t = start
        while t <= end:
            for labels, v in rows:
                out.append("%s{%s,%s} %s %d" % (name, labels, extra, fmt_value(v), t))
            t += step
    out.append("# EOF")
    return "\n".join(out) + "\n"


def serve(state_path, port_file):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            with open(state_path) as f:
                body = exposition(json.load(f)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 8 and sys.argv[1] == "openmetrics":
        with open(sys.argv[2]) as f:
            state = json.load(f)
        start, end, step = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        sys.stdout.write(openmetrics(state, start, end, step, sys.argv[6], sys.argv[7]))
    else:
        sys.stderr.write(__doc__)
        sys.exit(64)


if __name__ == "__main__":
    main()
