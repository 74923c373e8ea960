#!/usr/bin/env python3
"""A stand-in for dcgm-exporter (no GPU here): serves /metrics exactly as dcgm-exporter formats them.

The GPUs and their values come from a JSON state file the test writes, re-read on every scrape, so a
test changes a GPU's values while Prometheus scrapes. The format follows dcgm-exporter's templates
(internal/pkg/rendermetrics/render_metrics.go; collector/expcollector.go for the DCGM_EXP_* metrics):

    # HELP <name> <help>
    # TYPE <name> <type>
    <name>{gpu="0",UUID="GPU-...",pci_bus_id="...",device="nvidia0",modelName="...",Hostname="node",<labels sorted>,<attributes sorted>} <value>

Labels are the CSV's `label` rows (DCGM_FI_DRIVER_VERSION) plus, for DCGM_EXP_*, window_size_in_ms and
the per-entity label (xid); attributes are the Kubernetes pod mapping (container, namespace, pod), left
off when no pod holds the GPU as dcgm-exporter does today (internal/pkg/transformation/kubernetes.go
sets them only for a mapped device), or written empty as older releases did when the state says
"empty_attributes": true. The DCGM_EXP_* template has no pci_bus_id. Go templates range over maps in
sorted key order, so labels and attributes come out sorted.

/metrics?node=NAME serves only the GPUs whose hostname is NAME: one exporter per node, as the GPU
Operator's DaemonSet runs it, for a Prometheus scraping one target per node.

State (JSON):
    {"metrics": [{"name": ..., "type": "gauge"|"counter", "help": ..., "per": "xid"?}],
     "driver_label": "DCGM_FI_DRIVER_VERSION", "driver": "580.95.05",
     "empty_attributes": false,
    "gpus": [{"gpu": 0, "uuid": ..., "pci_bus_id": ..., "model": ..., "hostname": ...,
               "pod": "", "namespace": "", "container": "",
               "values": {"<metric>": 1.0, "<per-metric>": {"79": 2}}}]}

Usage:
    dcgm_exporter.py serve STATE PORT_FILE      listen on 127.0.0.1:<free port>, write the port
    dcgm_exporter.py openmetrics STATE START END STEP SCRAPE
        print the same series as OpenMetrics, one sample per STEP seconds from START to END (unix
        seconds), with the target labels Prometheus adds, for `promtool tsdb create-blocks-from
        openmetrics` (history a test cannot wait for). SCRAPE is a JSON file:
            {"honor_labels": false, "targets": [{"node": "node-a" or null, "labels": {...}}]}
        a target's labels go on the series of its node's GPUs (null: every GPU), merged as
        Prometheus merges them: with honor_labels false a target label wins and a clashing,
        non-empty exposed label is kept as exported_<name>; with true the exposed label wins, even
        empty. Empty labels are dropped.
"""

import http.server
import json
import sys
import urllib.parse

EXP_WINDOW_MS = "300000"  # dcgm-exporter's default --xid-count-window-size (5 minutes)


def esc(v):
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def fmt_value(v):
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def parse_labels(text):
    """The labels of one exposition line's braces, as (name, value) pairs."""
    out, i = [], 0
    while i < len(text):
        eq = text.index("=", i)
        name = text[i:eq]
        j, value = eq + 2, []
        while text[j] != '"':
            if text[j] == "\\":
                j += 1
                value.append({"n": "\n"}.get(text[j], text[j]))
            else:
                value.append(text[j])
            j += 1
        out.append((name, "".join(value)))
        i = j + 2 if j + 1 < len(text) and text[j + 1] == "," else j + 1
    return out


def merge(exposed, target, honor):
    """Prometheus's merge of a sample's labels with its target's (scrape.go mutateSampleLabels)."""
    labels = dict(exposed)
    if honor:
        for k, v in target.items():
            if k not in labels:
                labels[k] = v
    else:
        for k, v in target.items():
            if labels.get(k):
                labels["exported_" + k] = labels[k]
            labels[k] = v
    return {k: v for k, v in labels.items() if v != ""}


def series(state, node=None):
    """Yields (metric, help, type, [(labels_text, value)]) in the exporter's order; only the GPUs of
    `node` when given."""
    driver_label = state.get("driver_label")
    empty_attributes = state.get("empty_attributes", False)
    for m in state["metrics"]:
        name, per = m["name"], m.get("per")
        rows = []
        for g in state["gpus"]:
            if node is not None and g.get("hostname") != node:
                continue
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
            if g.get("pod") or empty_attributes:
                attrs = {k: g.get(k, "") for k in ("container", "namespace", "pod")}
            else:
                attrs = {}
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


def exposition(state, node=None):
    lines = []
    for name, help_text, typ, rows in series(state, node):
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s %s" % (name, typ))
        for labels, v in rows:
            lines.append("%s{%s} %s" % (name, labels, fmt_value(v)))
    return "\n".join(lines) + "\n"


def openmetrics(state, start, end, step, scrape):
    out = []
    honor = scrape.get("honor_labels", False)
    families = {}
    for target in scrape["targets"]:
        for name, help_text, _typ, rows in series(state, target.get("node")):
            fam = families.setdefault(name, (help_text, []))
            for labels, v in rows:
                merged = merge(parse_labels(labels), target["labels"], honor)
                text = ",".join('%s="%s"' % (k, esc(merged[k])) for k in sorted(merged))
                fam[1].append((text, v))
    for name, (help_text, rows) in families.items():
        # Every family as a gauge: OpenMetrics counters need a _total suffix dcgm-exporter does not use,
        # and PromQL treats both alike.
        out.append("# HELP %s %s" % (name, help_text))
        out.append("# TYPE %s gauge" % name)
        t = start
        while t <= end:
            for labels, v in rows:
                out.append("%s{%s} %s %d" % (name, labels, fmt_value(v), t))
            t += step
    out.append("# EOF")
    return "\n".join(out) + "\n"


def serve(state_path, port_file):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            path, _, query = self.path.partition("?")
            if path != "/metrics":
                self.send_error(404)
                return
            node = urllib.parse.parse_qs(query).get("node", [None])[0]
            with open(state_path) as f:
                body = exposition(json.load(f), node).encode()
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
    elif len(sys.argv) == 7 and sys.argv[1] == "openmetrics":
        with open(sys.argv[2]) as f:
            state = json.load(f)
        with open(sys.argv[6]) as f:
            scrape = json.load(f)
        start, end, step = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        sys.stdout.write(openmetrics(state, start, end, step, scrape))
    else:
        sys.stderr.write(__doc__)
        sys.exit(64)


if __name__ == "__main__":
    main()
