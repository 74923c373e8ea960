//! `gpuctl status` output: tables for people, versioned JSON, Markdown for a ticket, and the SVG
//! picture ([`svg`]). Names come from the cluster and may be hostile: control characters are
//! replaced and long names shortened in text, Markdown special characters escaped.

pub mod svg;

use std::fmt::Write as _;

use gpuctl_day2::status::{StatusReport, UnitKind};

/// Longest name shown in a table cell.
const NAME_MAX: usize = 63;

/// Longest source line (`snapshot PATH (captured T)`, `cluster URL read at T`): a path is the
/// user's, so it is bounded too, but a table cell's bound would cut every real one.
const SOURCE_MAX: usize = 300;

/// A name from the cluster, safe for a terminal: control characters become `?` (no escape
/// sequences reach the terminal) and anything past [`NAME_MAX`] characters becomes `...`.
pub fn clean(s: &str) -> String {
    clean_to(s, NAME_MAX)
}

fn clean_to(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if s.chars().nth(max).is_some() {
        out.push_str("...");
    }
    out
}

/// A cleaned name safe inside a Markdown table cell.
fn md(s: &str) -> String {
    md_to(s, NAME_MAX)
}

fn md_to(s: &str, max: usize) -> String {
    let mut out = String::new();
    for c in clean_to(s, max).chars() {
        if matches!(
            c,
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '&' | '~' | '!'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `0.125` -> `12.5%`.
fn pct(x: f64) -> String {
    let s = format!("{:.1}", x * 100.0);
    format!("{}%", s.strip_suffix(".0").unwrap_or(&s))
}

fn opt_pct(x: Option<f64>) -> String {
    x.map(pct).unwrap_or_else(|| "-".into())
}

fn unit(kind: UnitKind) -> &'static str {
    match kind {
        UnitKind::Gpu => "GPUs",
        UnitKind::Mig => "MIG slices",
        UnitKind::Shared => "replicas",
    }
}

/// Rows of cells; the first is the header.
struct Table(Vec<Vec<String>>);

impl Table {
    fn text(&self) -> String {
        let cols = self.0.iter().map(Vec::len).max().unwrap_or(0);
        let width: Vec<usize> = (0..cols)
            .map(|i| {
                self.0
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let numeric = |c: &str| {
            c.chars().next().is_some_and(|x| x.is_ascii_digit())
                && c.chars().all(|x| x.is_ascii_digit() || "./%".contains(x))
        };
        // A column whose cells are all numbers (counts, `3/8`, `12.5%`) is right-aligned.
        let right: Vec<bool> = (0..cols)
            .map(|i| {
                self.0
                    .iter()
                    .skip(1)
                    .filter_map(|r| r.get(i))
                    .filter(|c| !c.is_empty())
                    .all(|c| numeric(c))
            })
            .collect();
        let mut s = String::new();
        for row in &self.0 {
            let mut line = String::new();
            for (i, c) in row.iter().enumerate() {
                let pad = " ".repeat(width[i] - c.chars().count());
                if right[i] {
                    line.push_str(&pad);
                    line.push_str(c);
                } else {
                    line.push_str(c);
                    line.push_str(&pad);
                }
                line.push_str("  ");
            }
            s.push_str(line.trim_end());
            s.push('\n');
        }
        s
    }

    fn markdown(&self) -> String {
        let mut s = String::new();
        for (i, row) in self.0.iter().enumerate() {
            s.push_str("| ");
            s.push_str(&row.join(" | "));
            s.push_str(" |\n");
            if i == 0 {
                s.push('|');
                s.push_str(&"---|".repeat(row.len()));
                s.push('\n');
            }
        }
        s
    }
}

/// A provisioned pool's bounds and NodeClaims after its node count: `, min 0 max 4 (at max),
/// NodeClaims 2 launched 1 pending`; empty for a static pool.
pub(crate) fn bounds(p: &gpuctl_day2::status::PoolStatus) -> String {
    let Some(v) = &p.provisioner else {
        return String::new();
    };
    let mut s = format!(
        ", min {} max {} ({})",
        v.min_nodes,
        v.max_nodes,
        v.bound.as_str()
    );
    if let Some(c) = v.node_claims {
        s.push_str(&format!(
            ", NodeClaims {} launched {} pending",
            c.launched, c.pending
        ));
    }
    s
}

fn pool_table(r: &StatusReport, name: fn(&str) -> String) -> Table {
    let mut t = vec![
        [
            "POOL",
            "NODES READY/TOTAL",
            "RESOURCE",
            "UNIT",
            "EXPECTED",
            "CAPACITY",
            "ALLOCATED",
            "FREE",
            "CORDONED",
            "UNHEALTHY",
            "LARGEST FIT",
            "FRAGMENTATION",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for p in &r.pools {
        let nodes = format!(
            "{}/{}{}",
            p.nodes.ready,
            p.nodes.total,
            if p.nodes.total == p.nodes.expected {
                String::new()
            } else {
                format!(" (of {})", p.nodes.expected)
            },
        ) + &bounds(p);
        if p.resources.is_empty() {
            t.push(vec![name(&p.name), nodes.clone(), "-".into()]);
        }
        for (i, x) in p.resources.iter().enumerate() {
            let first = i == 0;
            t.push(vec![
                if first { name(&p.name) } else { String::new() },
                if first { nodes.clone() } else { String::new() },
                name(&x.resource),
                unit(x.kind).into(),
                x.expected.to_string(),
                x.capacity.to_string(),
                x.allocated.to_string(),
                x.free.to_string(),
                x.cordoned.to_string(),
                x.unhealthy.to_string(),
                format!("{}/{}", x.largest_placeable, x.largest_packed),
                pct(x.fragmentation),
            ]);
        }
    }
    Table(t)
}

fn tenant_table(r: &StatusReport, name: fn(&str) -> String) -> Table {
    let mut t = vec![
        [
            "TENANT",
            "NAMESPACE",
            "QUOTA",
            "RESOURCE",
            "USED",
            "HARD",
            "USE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for tenant in &r.tenants {
        let mut first = true;
        let mut tn = || {
            if std::mem::take(&mut first) {
                name(&tenant.name)
            } else {
                String::new()
            }
        };
        for q in &tenant.quotas {
            for (i, u) in q.resources.iter().enumerate() {
                t.push(vec![
                    tn(),
                    if i == 0 {
                        name(&q.namespace)
                    } else {
                        String::new()
                    },
                    if i == 0 {
                        format!(
                            "{}{}",
                            name(&q.name),
                            if q.counted { "" } else { " (not counted yet)" }
                        )
                    } else {
                        String::new()
                    },
                    name(&u.resource),
                    name(&u.used),
                    name(&u.hard),
                    opt_pct(u.ratio),
                ]);
            }
        }
        for ns in &tenant.namespaces_without_quota {
            t.push(vec![tn(), name(ns), "(no ResourceQuota)".into()]);
        }
        if tenant.quotas.is_empty() && tenant.namespaces_without_quota.is_empty() {
            t.push(vec![tn(), "-".into(), "(no quota)".into()]);
        }
    }
    Table(t)
}

fn kueue_table(r: &StatusReport, name: fn(&str) -> String) -> Option<Table> {
    let qs = r.cluster_queues.as_ref()?;
    let mut t = vec![
        [
            "CLUSTERQUEUE",
            "COHORT",
            "ADMITTED",
            "PENDING",
            "FLAVOR",
            "RESOURCE",
            "NOMINAL",
            "USED",
            "BORROWED",
            "LENT",
            "USE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for q in qs {
        let label = match (q.live, q.in_blueprint) {
            (false, _) => format!("{} (missing)", name(&q.name)),
            (true, false) => format!("{} (not in blueprint)", name(&q.name)),
            (true, true) if !q.active => format!("{} (inactive)", name(&q.name)),
            _ => name(&q.name),
        };
        let head = vec![
            label,
            q.cohort.as_deref().map(name).unwrap_or_else(|| "-".into()),
            q.admitted.to_string(),
            q.pending.to_string(),
        ];
        if q.flavors.is_empty() {
            t.push(head.clone());
        }
        for (i, f) in q.flavors.iter().enumerate() {
            let mut row = if i == 0 {
                head.clone()
            } else {
                vec![String::new(); 4]
            };
            row.extend([
                name(&f.flavor),
                name(&f.resource),
                name(&f.nominal),
                name(&f.used),
                name(&f.borrowed),
                name(&f.lent),
                opt_pct(f.ratio),
            ]);
            t.push(row);
        }
    }
    Some(Table(t))
}

fn volcano_table(r: &StatusReport, name: fn(&str) -> String) -> Option<Table> {
    let qs = r.volcano_queues.as_ref()?;
    let mut t = vec![
        [
            "QUEUE",
            "STATE",
            "RUNNING",
            "PENDING",
            "RESOURCE",
            "ALLOCATED",
            "DESERVED",
            "CAPABILITY",
            "USE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for q in qs {
        let label = match (q.live, q.in_blueprint) {
            (false, _) => format!("{} (missing)", name(&q.name)),
            (true, false) => format!("{} (not in blueprint)", name(&q.name)),
            _ => name(&q.name),
        };
        let head = vec![
            label,
            q.state.as_deref().map(name).unwrap_or_else(|| "-".into()),
            q.running.to_string(),
            (q.pending + q.inqueue).to_string(),
        ];
        if q.resources.is_empty() {
            t.push(head.clone());
        }
        for (i, x) in q.resources.iter().enumerate() {
            let mut row = if i == 0 {
                head.clone()
            } else {
                vec![String::new(); 4]
            };
            row.extend([
                name(&x.resource),
                name(&x.allocated),
                x.deserved
                    .as_deref()
                    .map(name)
                    .unwrap_or_else(|| "-".into()),
                x.capability
                    .as_deref()
                    .map(name)
                    .unwrap_or_else(|| "-".into()),
                opt_pct(x.ratio),
            ]);
            t.push(row);
        }
    }
    Some(Table(t))
}

/// The last hour per pool (`--prometheus`): average GPUs allocated, used, idle and unknown.
fn last_hour_table(r: &StatusReport, name: fn(&str) -> String) -> Option<(String, Table)> {
    let h = r.last_hour.as_ref()?;
    let mut t = vec![
        ["POOL", "ALLOCATED", "USED", "IDLE", "UNKNOWN"]
            .map(String::from)
            .to_vec(),
    ];
    for p in &h.pools {
        t.push(vec![
            name(&p.pool),
            format!("{:.2}", p.allocated),
            format!("{:.2}", p.used),
            format!("{:.2}", p.idle),
            format!("{:.2}", p.unknown),
        ]);
    }
    Some((
        format!(
            "GPUs in the last hour ({} to {}; averages, as `gpuctl report --by pool`)",
            name(&h.from),
            name(&h.until)
        ),
        Table(t),
    ))
}

fn summary_lines(r: &StatusReport, name: fn(&str) -> String) -> Vec<String> {
    let mut out = Vec::new();
    if r.pending_gpu_pods > 0 {
        out.push(format!(
            "{} GPU pod(s) wait for a node (`gpuctl doctor` says why)",
            r.pending_gpu_pods
        ));
    }
    if r.unpooled.nodes > 0 {
        let more = r.unpooled.nodes - r.unpooled.names.len() as u64;
        out.push(format!(
            "{} GPU node(s) in no pool of the blueprint: {}{}",
            r.unpooled.nodes,
            r.unpooled
                .names
                .iter()
                .map(|n| name(n))
                .collect::<Vec<_>>()
                .join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    out
}

/// The status as tables for a terminal or a log.
pub fn human(r: &StatusReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Status of blueprint {} ({})\n",
        clean(&r.blueprint),
        clean_to(&r.source, SOURCE_MAX)
    );
    let _ = writeln!(s, "GPU pools\n{}", pool_table(r, clean).text());
    let _ = writeln!(s, "Tenant quotas\n{}", tenant_table(r, clean).text());
    if let Some(t) = kueue_table(r, clean) {
        let _ = writeln!(s, "Kueue ClusterQueues\n{}", t.text());
    }
    if let Some(t) = volcano_table(r, clean) {
        let _ = writeln!(s, "Volcano queues\n{}", t.text());
    }
    if let Some((title, t)) = last_hour_table(r, clean) {
        let _ = writeln!(s, "{title}\n{}", t.text());
    }
    for l in summary_lines(r, clean) {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(
        s,
        "LARGEST FIT: the largest request one pod can place now / if the free units were on one node; FRAGMENTATION: 1 - their ratio (docs/status.md)"
    );
    s
}

/// The status as Markdown (an incident ticket, a PR comment).
pub fn markdown(r: &StatusReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## GPU status of `{}`\n\nSource: {}\n",
        clean(&r.blueprint).replace('`', "'"),
        md_to(&r.source, SOURCE_MAX)
    );
    let _ = writeln!(s, "### GPU pools\n\n{}", pool_table(r, md).markdown());
    let _ = writeln!(s, "### Tenant quotas\n\n{}", tenant_table(r, md).markdown());
    if let Some(t) = kueue_table(r, md) {
        let _ = writeln!(s, "### Kueue ClusterQueues\n\n{}", t.markdown());
    }
    if let Some(t) = volcano_table(r, md) {
        let _ = writeln!(s, "### Volcano queues\n\n{}", t.markdown());
    }
    if let Some((title, t)) = last_hour_table(r, md) {
        let _ = writeln!(s, "### {title}\n\n{}", t.markdown());
    }
    for l in summary_lines(r, md) {
        let _ = writeln!(s, "- {l}");
    }
    let _ = writeln!(
        s,
        "\n*Largest fit*: the largest request one pod can place now / if the free units were on one node; *fragmentation*: 1 - their ratio."
    );
    s
}

/// The status as the versioned JSON document (`formatVersion`, docs/status.md).
pub fn json(r: &StatusReport) -> String {
    let mut s =
        serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_cannot_reach_the_terminal_or_break_a_table() {
        assert_eq!(clean("a\x1b[31mb\n"), "a?[31mb?");
        assert_eq!(clean(&"x".repeat(100)).chars().count(), NAME_MAX + 3);
        assert_eq!(md("a|b`c<d>"), "a\\|b\\`c\\<d\\>");
        assert_eq!(pct(0.125), "12.5%");
        assert_eq!(pct(0.75), "75%");
        assert_eq!(pct(0.0), "0%");
    }

    /// The header names the snapshot by its path and capture time in full (a table cell's bound
    /// cut the README's example), and still bounds a hostile one.
    #[test]
    fn the_source_line_keeps_a_real_path_and_bounds_a_hostile_one() {
        let real = "snapshot blueprints/snapshots/dgx-h100-training-day2.json (captured 2026-12-01T10:00:00Z)";
        assert_eq!(clean_to(real, SOURCE_MAX), real);
        let hostile = format!("snapshot {}\x1b[2J", "a/".repeat(1000));
        let shown = clean_to(&hostile, SOURCE_MAX);
        assert_eq!(shown.chars().count(), SOURCE_MAX + 3);
        assert!(!shown.contains('\x1b'));
    }
}
