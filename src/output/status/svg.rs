//! `gpuctl status --svg`: each pool as a grid of its nodes and their GPUs (MIG slices and shared
//! replicas drawn inside a GPU), coloured by tenant, free, cordoned or unhealthy; tenant quotas and
//! queues as bars; a legend. Deterministic bytes (integer coordinates, fixed order, no time), names
//! escaped and shortened (they come from the cluster), and bounded: at most [`MAX_NODES`] nodes per
//! pool, [`MAX_POOLS`] pools and [`MAX_BARS`] bars per section are drawn; the picture says what it
//! left out and gives the totals.
//!
//! The device plugin does not say which device a pod holds, so units are filled in order: a node's
//! pods (by namespace and name) first, then free units, then unhealthy ones.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpuctl_day2::status::{NodeStatus, PoolStatus, StatusReport, UnitKind};

/// Nodes drawn per pool; the rest are summed up in a line.
pub const MAX_NODES: usize = 48;
/// Pools drawn.
pub const MAX_POOLS: usize = 12;
/// Bars drawn per section (quotas, ClusterQueues, Volcano queues).
pub const MAX_BARS: usize = 40;
/// GPU cells drawn per node.
const MAX_GPUS: usize = 16;
/// Strips drawn per shared GPU.
const MAX_REPLICAS: usize = 8;

const WIDTH: i64 = 1100;
const MARGIN: i64 = 16;
const CELL_W: i64 = 14;
const CELL_H: i64 = 26;
const GAP: i64 = 2;
const PAD: i64 = 4;
const NODE_GAP: i64 = 8;
const LABEL_H: i64 = 14;

/// Tenant colours, in blueprint order (cycling beyond eight; each unit's tooltip names its pod).
const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#17becf",
];
const FREE: &str = "#c7e9c0";
const CORDONED: &str = "#d9d9d9";
const OTHER: &str = "#7f7f7f";
const ABSENT: &str = "#ffffff";

/// Text from anywhere, safe in SVG: XML-escaped, control characters (invalid in XML 1.0 even
/// escaped) replaced by `?`, at most `max` characters.
pub fn esc(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\u{FFFE}' | '\u{FFFF}' => out.push('?'),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// What a drawn unit is.
#[derive(Clone, PartialEq, Eq)]
enum Unit {
    /// Held by a pod: its tenant's colour index (None: no tenant), tooltip.
    Held(Option<usize>, String),
    Free,
    Cordoned,
    Unhealthy,
    /// The blueprint expects the slot, the node does not advertise it.
    Absent,
}

fn fill(u: &Unit) -> &'static str {
    match u {
        Unit::Held(Some(i), _) => PALETTE[i % PALETTE.len()],
        Unit::Held(None, _) => OTHER,
        Unit::Free => FREE,
        Unit::Cordoned => CORDONED,
        Unit::Unhealthy => "url(#unhealthy)",
        Unit::Absent => ABSENT,
    }
}

fn tooltip(u: &Unit, resource: &str) -> String {
    match u {
        Unit::Held(_, t) => t.clone(),
        Unit::Free => format!("{resource}: free"),
        Unit::Cordoned => format!("{resource}: free on a cordoned node"),
        Unit::Unhealthy => format!("{resource}: unhealthy or on a NotReady node"),
        Unit::Absent => format!("{resource}: expected, not advertised"),
    }
}

/// The units of one resource on one node, in drawing order.
fn units(
    node: &NodeStatus,
    resource: &str,
    tenants: &BTreeMap<&str, usize>,
    cap: usize,
) -> Vec<Unit> {
    let mut out = Vec::new();
    let Some(r) = node.resources.get(resource) else {
        return out;
    };
    let capacity = usize::try_from(r.capacity).unwrap_or(usize::MAX).min(cap);
    if !node.ready {
        out.resize(capacity, Unit::Unhealthy);
        return out;
    }
    let allocatable = usize::try_from(r.allocatable)
        .unwrap_or(usize::MAX)
        .min(capacity);
    'holders: for h in &r.holders {
        let tenant = h.tenant.as_deref().and_then(|t| tenants.get(t).copied());
        let tip = format!(
            "{}/{}{}: {} x {resource}",
            h.namespace,
            h.pod,
            h.tenant
                .as_deref()
                .map(|t| format!(" (tenant {t})"))
                .unwrap_or_default(),
            h.amount
        );
        for _ in 0..h.amount {
            if out.len() == allocatable {
                break 'holders;
            }
            out.push(Unit::Held(tenant, tip.clone()));
        }
    }
    let free = if node.cordoned {
        Unit::Cordoned
    } else {
        Unit::Free
    };
    out.resize(allocatable, free);
    out.resize(capacity, Unit::Unhealthy);
    out
}

/// One drawn slot inside a GPU cell: which resource, and the slot's share of the cell (in strips).
struct Slot {
    resource: String,
}

/// The slots of each GPU of a pool's node: one per GPU, one per MIG instance, one per replica.
fn layout(pool: &PoolStatus) -> Vec<Vec<Slot>> {
    let gpus = (pool.gpus_per_node as usize).min(MAX_GPUS);
    let shared = pool
        .resources
        .iter()
        .find(|r| r.kind == UnitKind::Shared)
        .map(|r| r.resource.clone());
    (0..gpus)
        .map(|g| {
            if let Some(Some(l)) = pool.mig_layout.get(g) {
                let mut v = Vec::new();
                for (profile, n) in l {
                    let resource = format!("nvidia.com/mig-{}", profile.replace('+', "."));
                    let present = pool.resources.iter().any(|r| r.resource == resource);
                    // Under the `single` strategy the slices are advertised as nvidia.com/gpu.
                    let resource = if present {
                        resource
                    } else {
                        "nvidia.com/gpu".to_string()
                    };
                    for _ in 0..(*n as usize).min(MAX_REPLICAS) {
                        v.push(Slot {
                            resource: resource.clone(),
                        });
                    }
                }
                v
            } else if let Some(res) = &shared {
                let per_gpu = pool
                    .resources
                    .iter()
                    .find(|r| &r.resource == res)
                    .map(|r| {
                        (r.expected
                            / u64::from(pool.gpus_per_node.max(1))
                            / pool.nodes.expected.max(1)) as usize
                    })
                    .unwrap_or(1)
                    .clamp(1, MAX_REPLICAS);
                (0..per_gpu)
                    .map(|_| Slot {
                        resource: res.clone(),
                    })
                    .collect()
            } else {
                vec![Slot {
                    resource: "nvidia.com/gpu".to_string(),
                }]
            }
        })
        .collect()
}

struct Canvas {
    body: String,
    y: i64,
}

impl Canvas {
    fn text(&mut self, x: i64, y: i64, attrs: &str, text: &str) {
        let _ = writeln!(self.body, r#"<text x="{x}" y="{y}"{attrs}>{text}</text>"#);
    }
}

fn node_width(slots: &[Vec<Slot>]) -> i64 {
    let cells = slots.len().max(1) as i64;
    PAD * 2 + cells * CELL_W + (cells - 1) * GAP
}

fn draw_node(
    c: &mut Canvas,
    x: i64,
    y: i64,
    node: &NodeStatus,
    slots: &[Vec<Slot>],
    tenants: &BTreeMap<&str, usize>,
) {
    let w = node_width(slots);
    let (stroke, extra, state) = match (node.ready, node.cordoned) {
        (false, _) => ("#d62728", r#" stroke-width="2""#, "NotReady"),
        (true, true) => ("#636363", r#" stroke-dasharray="4 2""#, "Ready, cordoned"),
        (true, false) => ("#636363", "", "Ready"),
    };
    let _ = writeln!(
        c.body,
        r##"<g><title>{} ({state})</title><rect x="{x}" y="{y}" width="{w}" height="{}" rx="3" fill="#f7f7f7" stroke="{stroke}"{extra}/>"##,
        esc(&node.name, 253),
        CELL_H + 2 * PAD
    );
    // Units of every resource, taken in slot order.
    let mut queues: BTreeMap<&str, std::vec::IntoIter<Unit>> = BTreeMap::new();
    let total_slots = slots.iter().map(Vec::len).sum::<usize>();
    for s in slots.iter().flatten() {
        queues
            .entry(s.resource.as_str())
            .or_insert_with(|| units(node, &s.resource, tenants, total_slots).into_iter());
    }
    for (g, gpu) in slots.iter().enumerate() {
        let gx = x + PAD + g as i64 * (CELL_W + GAP);
        let n = gpu.len().max(1) as i64;
        for (i, s) in gpu.iter().enumerate() {
            let u = queues
                .get_mut(s.resource.as_str())
                .and_then(Iterator::next)
                .unwrap_or(Unit::Absent);
            // Slots split the cell top to bottom; integer edges, the last one takes the rest.
            let top = y + PAD + (i as i64) * CELL_H / n;
            let bottom = y + PAD + (i as i64 + 1) * CELL_H / n;
            let dash = if u == Unit::Absent {
                r#" stroke-dasharray="2 2""#
            } else {
                ""
            };
            let _ = writeln!(
                c.body,
                r##"<rect x="{gx}" y="{top}" width="{CELL_W}" height="{}" fill="{}" stroke="#525252" stroke-width="0.5"{dash}><title>{}</title></rect>"##,
                (bottom - top).max(1),
                fill(&u),
                esc(&tooltip(&u, &s.resource), 600)
            );
        }
    }
    let chars = ((w / 6) as usize).max(4);
    c.text(
        x,
        y + CELL_H + 2 * PAD + LABEL_H - 3,
        r##" font-size="10" fill="#333333""##,
        &esc(&node.name, chars),
    );
    c.body.push_str("</g>\n");
}

fn draw_pool(c: &mut Canvas, pool: &PoolStatus, tenants: &BTreeMap<&str, usize>) {
    let headline = format!(
        "Pool {} — {} x {}, {}; nodes {}/{} Ready{}",
        pool.name,
        pool.gpus_per_node,
        pool.model,
        if pool.partitioning == "none" {
            "whole GPUs".to_string()
        } else {
            pool.partitioning.clone()
        },
        pool.nodes.ready,
        pool.nodes.total,
        if pool.nodes.total == pool.nodes.expected {
            String::new()
        } else {
            format!(" (blueprint: {})", pool.nodes.expected)
        }
    ) + &super::bounds(pool);
    c.y += 22;
    c.text(
        MARGIN,
        c.y,
        r#" font-size="14" font-weight="bold""#,
        &esc(&headline, 140),
    );
    for r in &pool.resources {
        c.y += 16;
        let unit = match r.kind {
            UnitKind::Gpu => "GPUs",
            UnitKind::Mig => "MIG slices",
            UnitKind::Shared => "replicas",
        };
        let line = format!(
            "{}: {} {unit}: {} allocated, {} free, {} cordoned, {} unhealthy; largest fit {} of {} packed, fragmentation {}%",
            r.resource,
            r.capacity,
            r.allocated,
            r.free,
            r.cordoned,
            r.unhealthy,
            r.largest_placeable,
            r.largest_packed,
            (r.fragmentation * 100.0).round() as i64
        );
        c.text(MARGIN, c.y, r##" fill="#444444""##, &esc(&line, 160));
    }
    let slots = layout(pool);
    let w = node_width(&slots);
    let per_row = ((WIDTH - 2 * MARGIN + NODE_GAP) / (w + NODE_GAP)).max(1) as usize;
    let row_h = CELL_H + 2 * PAD + LABEL_H + NODE_GAP;
    c.y += 10;
    let shown = pool.node_list.len().min(MAX_NODES);
    for (i, node) in pool.node_list.iter().take(MAX_NODES).enumerate() {
        let x = MARGIN + (i % per_row) as i64 * (w + NODE_GAP);
        let y = c.y + (i / per_row) as i64 * row_h;
        draw_node(c, x, y, node, &slots, tenants);
    }
    c.y += shown.div_ceil(per_row) as i64 * row_h;
    if pool.node_list.len() > shown {
        let rest = &pool.node_list[shown..];
        let ready = rest.iter().filter(|n| n.ready).count();
        c.y += 8;
        c.text(
            MARGIN,
            c.y,
            r##" fill="#444444" font-style="italic""##,
            &format!(
                "… and {} more node(s) not drawn ({ready} Ready); the figures above count every node",
                rest.len()
            ),
        );
    }
    if pool.node_list.is_empty() {
        c.y += 14;
        c.text(
            MARGIN,
            c.y,
            r##" fill="#d62728""##,
            "no node matches this pool's selector",
        );
    }
    c.y += 8;
}

/// A horizontal bar: `used` of `base` (clamped), a hatched overflow beyond it (up to half a bar),
/// the figures after it.
fn bar(c: &mut Canvas, label: &str, used: f64, base: f64, colour: &str, text: &str, tip: &str) {
    const LABEL_W: i64 = 300;
    const BAR_W: i64 = 240;
    c.y += 20;
    let y = c.y;
    c.text(MARGIN, y + 11, "", &esc(label, 46));
    let x = MARGIN + LABEL_W;
    let frac = if base > 0.0 { used / base } else { 0.0 };
    let inside = (frac.clamp(0.0, 1.0) * BAR_W as f64).round() as i64;
    let _ = writeln!(
        c.body,
        r##"<g><title>{}</title><rect x="{x}" y="{y}" width="{BAR_W}" height="14" fill="#f0f0f0" stroke="#969696"/>"##,
        esc(tip, 600)
    );
    if inside > 0 {
        let _ = writeln!(
            c.body,
            r##"<rect x="{x}" y="{y}" width="{inside}" height="14" fill="{colour}"/>"##
        );
    }
    let mut end = x + BAR_W;
    if frac > 1.0 {
        let over = ((frac - 1.0).min(0.5) * BAR_W as f64).round().max(1.0) as i64;
        let _ = writeln!(
            c.body,
            r##"<rect x="{end}" y="{y}" width="{over}" height="14" fill="url(#borrowed)" stroke="#969696"/>"##
        );
        end += over;
    }
    c.body.push_str("</g>\n");
    c.text(
        end + 8,
        y + 11,
        r##" font-size="11" fill="#333333""##,
        &esc(text, 64),
    );
}

fn num(s: &str) -> f64 {
    gpuctl_model::quantity::parse_milli(s)
        .map(|m| m as f64 / 1000.0)
        .unwrap_or(0.0)
}

fn section(c: &mut Canvas, title: &str) {
    c.y += 40;
    c.text(MARGIN, c.y, r#" font-size="15" font-weight="bold""#, title);
    c.y -= 6;
}

fn more(c: &mut Canvas, n: usize) {
    if n > 0 {
        c.y += 18;
        c.text(
            MARGIN,
            c.y,
            r##" fill="#444444" font-style="italic""##,
            &format!("… and {n} more not drawn (see `gpuctl status -o json`)"),
        );
    }
}

fn legend(c: &mut Canvas, r: &StatusReport) {
    c.y += 10;
    let mut items: Vec<(String, String)> = r
        .tenants
        .iter()
        .take(PALETTE.len() * 2)
        .enumerate()
        .map(|(i, t)| {
            (
                PALETTE[i % PALETTE.len()].to_string(),
                format!("tenant {}", t.name),
            )
        })
        .collect();
    items.extend([
        (OTHER.to_string(), "pod of no tenant".to_string()),
        (FREE.to_string(), "free".to_string()),
        (CORDONED.to_string(), "free, node cordoned".to_string()),
        (
            "url(#unhealthy)".to_string(),
            "unhealthy / NotReady".to_string(),
        ),
        (ABSENT.to_string(), "expected, not advertised".to_string()),
    ]);
    let mut x = MARGIN;
    c.y += 4;
    for (colour, label) in items {
        let text = esc(&label, 30);
        let w = 22 + 7 * text.chars().count() as i64;
        if x + w > WIDTH - MARGIN {
            x = MARGIN;
            c.y += 18;
        }
        let _ = writeln!(
            c.body,
            r##"<rect x="{x}" y="{}" width="14" height="12" fill="{colour}" stroke="#525252" stroke-width="0.5"/>"##,
            c.y
        );
        c.text(x + 18, c.y + 10, "", &text);
        x += w + 10;
    }
    c.y += 30;
    c.text(
        MARGIN,
        c.y,
        r##" font-size="11" fill="#555555""##,
        "Each box is a node, each cell a GPU; MIG slices and shared replicas split a cell. Units fill in order (pods by namespace and name, then free, then unhealthy): the device plugin does not say which device a pod holds.",
    );
}

/// The picture of `r`.
pub fn svg(r: &StatusReport) -> String {
    let tenants: BTreeMap<&str, usize> = r
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    let mut c = Canvas {
        body: String::new(),
        y: 0,
    };
    c.y += 26;
    c.text(
        MARGIN,
        c.y,
        r#" font-size="18" font-weight="bold""#,
        &esc(&format!("GPU status of blueprint {}", r.blueprint), 100),
    );
    c.y += 18;
    c.text(MARGIN, c.y, r##" fill="#555555""##, &esc(&r.source, 140));
    legend(&mut c, r);

    for pool in r.pools.iter().take(MAX_POOLS) {
        draw_pool(&mut c, pool, &tenants);
    }
    if r.pools.len() > MAX_POOLS {
        more(&mut c, r.pools.len() - MAX_POOLS);
    }
    quota_bars(&mut c, r);
    cluster_queue_bars(&mut c, r);
    volcano_queue_bars(&mut c, r);
    last_hour_bars(&mut c, r);
    document(&c, r)
}

/// `--prometheus`: each pool's idle GPUs of its allocated ones over the last hour (averages).
fn last_hour_bars(c: &mut Canvas, r: &StatusReport) {
    let Some(h) = &r.last_hour else {
        return;
    };
    section(
        c,
        &esc(
            &format!(
                "GPUs idle in the last hour, of those allocated ({} to {}; averages)",
                h.from, h.until
            ),
            140,
        ),
    );
    for p in h.pools.iter().take(MAX_BARS) {
        let text = format!(
            "idle {:.2} of {:.2} allocated (used {:.2}, unknown {:.2})",
            p.idle, p.allocated, p.used, p.unknown
        );
        bar(
            c,
            &p.pool,
            p.idle,
            p.allocated,
            "#e15759",
            &text,
            &format!("{}: {text}", p.pool),
        );
    }
    more(c, h.pools.len().saturating_sub(MAX_BARS));
}

/// Tenant quotas: GPU keys only (the picture is about GPUs; every key is in the table and JSON).
fn quota_bars(c: &mut Canvas, r: &StatusReport) {
    let bars: Vec<(usize, String, &gpuctl_day2::status::QuotaUse)> = r
        .tenants
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            t.quotas.iter().flat_map(move |q| {
                q.resources
                    .iter()
                    .filter(|u| u.resource.contains("nvidia.com/"))
                    .map(move |u| {
                        (
                            i,
                            format!(
                                "{} · {} · {}",
                                t.name,
                                q.namespace,
                                u.resource.trim_start_matches("requests.")
                            ),
                            u,
                        )
                    })
            })
        })
        .collect();
    if !bars.is_empty() {
        section(c, "Tenant GPU quotas (used of hard)");
        for (i, label, u) in bars.iter().take(MAX_BARS) {
            let text = format!(
                "{} / {}{}",
                u.used,
                u.hard,
                u.ratio
                    .map(|x| format!(" ({}%)", (x * 100.0).round() as i64))
                    .unwrap_or_default()
            );
            bar(
                c,
                label,
                num(&u.used),
                num(&u.hard),
                PALETTE[i % PALETTE.len()],
                &text,
                &format!("{label}: {text}"),
            );
        }
        more(c, bars.len().saturating_sub(MAX_BARS));
    }
}

/// Kueue ClusterQueues' GPU flavors: used of nominal, borrowing hatched.
fn cluster_queue_bars(c: &mut Canvas, r: &StatusReport) {
    let Some(qs) = &r.cluster_queues else {
        return;
    };
    let rows: Vec<_> = qs
        .iter()
        .flat_map(|q| {
            q.flavors
                .iter()
                .filter(|f| f.resource.contains("nvidia.com/"))
                .map(move |f| (q, f))
        })
        .collect();
    if !rows.is_empty() {
        section(
            c,
            "Kueue ClusterQueues (used of nominal; hatched: borrowed beyond nominal)",
        );
        for (q, f) in rows.iter().take(MAX_BARS) {
            let label = format!("{} · {} · {}", q.name, f.flavor, f.resource);
            let text = format!(
                "{} / {}, borrowed {}, lent {}; {} admitted, {} pending",
                f.used, f.nominal, f.borrowed, f.lent, q.admitted, q.pending
            );
            bar(
                c,
                &label,
                num(&f.used),
                num(&f.nominal),
                "#4e79a7",
                &text,
                &format!("{label}: {text}"),
            );
        }
        more(c, rows.len().saturating_sub(MAX_BARS));
    }
}

/// Volcano queues' GPU resources: allocated of deserved (else of capability).
fn volcano_queue_bars(c: &mut Canvas, r: &StatusReport) {
    let Some(qs) = &r.volcano_queues else {
        return;
    };
    let rows: Vec<_> = qs
        .iter()
        .flat_map(|q| {
            q.resources
                .iter()
                .filter(|x| x.resource.contains("nvidia.com/"))
                .map(move |x| (q, x))
        })
        .collect();
    if !rows.is_empty() {
        section(c, "Volcano queues (allocated of deserved)");
        for (q, x) in rows.iter().take(MAX_BARS) {
            let label = format!("{} · {}", q.name, x.resource);
            let base = x.deserved.as_deref().or(x.capability.as_deref());
            let text = format!(
                "{} / {}; {} running, {} pending",
                x.allocated,
                base.unwrap_or("-"),
                q.running,
                q.pending + q.inqueue
            );
            bar(
                c,
                &label,
                num(&x.allocated),
                base.map(num).unwrap_or(0.0),
                "#59a14f",
                &text,
                &format!("{label}: {text}"),
            );
        }
        more(c, rows.len().saturating_sub(MAX_BARS));
    }
}

/// The SVG document: the canvas's body under a header sized to it, with the hatch patterns.
fn document(c: &Canvas, r: &StatusReport) -> String {
    let height = c.y + 20;
    let mut s = String::with_capacity(c.body.len() + 1024);
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        "<title>{}</title>",
        esc(&format!("GPU status of blueprint {}", r.blueprint), 100)
    );
    s.push_str(
        r##"<defs><pattern id="unhealthy" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f4a6a6"/><line x1="0" y1="0" x2="0" y2="6" stroke="#d62728" stroke-width="3"/></pattern><pattern id="borrowed" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#a0c4e8"/><line x1="0" y1="0" x2="0" y2="6" stroke="#4e79a7" stroke-width="2"/></pattern></defs>
"##,
    );
    s.push_str("<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
    s.push_str(&c.body);
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_cluster_is_escaped_and_bounded() {
        assert_eq!(
            esc("<a href='x'>&\"", 100),
            "&lt;a href=&apos;x&apos;&gt;&amp;&quot;"
        );
        assert_eq!(esc("a\u{0}b\u{1b}c\u{FFFF}", 100), "a?b?c?");
        assert_eq!(esc("abcdef", 3), "abc…");
    }
}
