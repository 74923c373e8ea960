//! Issue 31: `gpuctl fleet plan --snapshot-dir` through the real binary. The fixture is the example
//! fleet (`blueprints/fleet/`) in a temporary directory with one snapshot per cluster of that
//! cluster as applied (every rendered object stored, every kind served, each Helm release deployed
//! with the rendered values), so an untouched fleet plans nothing and each edit shows exactly the
//! clusters it reaches. The comment is parsed as CommonMark (pulldown-cmark, as GitHub's renderer
//! reads it) and its example is golden-tested in `golden/fleet/plan.md`.

use std::path::Path;
use std::process::Output;

use gpuctl_core::live::release::LiveRelease;
use gpuctl_core::profiles::Catalog;
use gpuctl_core::render::Templates;
use gpuctl_core::snapshot::{CapturedRelease, SNAPSHOT_FORMAT_VERSION, Snapshot, key};
use pulldown_cmark::{Event, Options, Parser, Tag};
use serde_json::json;

use crate::render_common::root;
use crate::support::fleet::{FleetRepo, copy_dir, example_dir};
use crate::support::gpuctl::Gpuctl;

const TODAY: &str = "2026-11-30";
const TAKEN: &str = "2026-11-30T06:00:00Z";
const NOW: &str = "2026-11-30T09:30:00Z";

fn gpuctl(dir: &Path, args: &[&str]) -> Output {
    Gpuctl::new(args)
        .current_dir(dir)
        .today(TODAY)
        .env("GPUCTL_NOW", NOW)
        .no_color()
        .output()
}

fn plan(dir: &Path, format: &str) -> (Option<i32>, String, String) {
    let o = gpuctl(
        dir,
        &[
            "fleet",
            "plan",
            "fleet.yaml",
            "--snapshot-dir",
            "snapshots",
            "--detailed-exitcode",
            "-o",
            format,
        ],
    );
    (
        o.status.code(),
        String::from_utf8(o.stdout).expect("utf-8"),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Cluster `name` of the fleet in `dir` as applied: what `gpuctl snapshot` would capture after
/// `gpuctl apply` of its effective blueprint.
fn converged_snapshot(dir: &Path, name: &str) -> String {
    let catalog = Catalog::embedded();
    let path = dir.join("fleet.yaml");
    let fleet = gpuctl_core::fleet::load(&path, std::fs::read(&path).unwrap(), catalog).unwrap();
    let i = fleet
        .fleet
        .spec
        .clusters
        .iter()
        .position(|c| c.name == name)
        .unwrap();
    let loaded = fleet
        .load_cluster(i)
        .unwrap()
        .map_err(|b| b.report)
        .unwrap();
    let today = jiff::civil::date(2026, 11, 30);
    let valid =
        gpuctl_core::validate::validate(loaded, catalog, gpuctl_core::validate::Options { today })
            .unwrap_or_else(|r| panic!("{name} validates: {:?}", r.findings));
    let mut set = gpuctl_core::render::render(&valid, catalog, &Templates::embedded()).unwrap();
    // A converged cluster holds its MultiKueue objects too (fleet render adds them).
    gpuctl_core::fleet::multikueue::add(
        &fleet.fleet,
        name,
        fleet.manager_frameworks(),
        &mut set.objects,
    );
    let mut snap = Snapshot {
        format_version: SNAPSHOT_FORMAT_VERSION,
        fingerprint: Some(format!("fp-{name}")),
        captured_at: Some(TAKEN.into()),
        ..Snapshot::default()
    };
    for o in &set.objects {
        let mut v = o.manifest.clone();
        v["metadata"]["resourceVersion"] = json!("1");
        v["metadata"]["uid"] = json!(format!("uid-{}", o.name));
        let k = key(&o.api_version, &o.kind, o.namespace.as_deref(), &o.name);
        snap.objects.insert(k, v);
        let served = format!("{}|{}", o.api_version, o.kind);
        if !snap.served_kinds.contains(&served) {
            snap.served_kinds.push(served);
        }
    }
    let deployed = |h: &gpuctl_core::render::HelmRelease| LiveRelease {
        revision: 1,
        status: "deployed".into(),
        // Helm records the chart's own name, not the repository's alias for it.
        chart: h.chart.rsplit('/').next().unwrap_or_default().to_string(),
        chart_version: h.version.clone(),
        values: h.values.clone(),
    };
    snap.helm_release = Some(deployed(&set.helm));
    // Each pool's nodes as GFD labels them, with gpuctl's labels and taints applied.
    for p in &set.node_patches {
        for n in 0..p.expected_nodes {
            let mut labels = serde_json::Map::new();
            for (k, v) in p.selector.iter().chain(&p.labels) {
                labels.insert(k.clone(), json!(v));
            }
            if let Some(product) = p.expected_products.first() {
                labels.insert("nvidia.com/gpu.product".into(), json!(product));
            }
            labels.insert("nvidia.com/gpu.present".into(), json!("true"));
            labels.insert(
                "nvidia.com/cuda.driver-version.full".into(),
                json!(p.expected_driver),
            );
            for level in &p.topology_levels {
                labels.insert(level.clone(), json!("l1"));
            }
            let taints: Vec<_> = p
                .taints
                .iter()
                .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
                .collect();
            snap.nodes.push(json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": format!("{}-{n}", p.pool), "resourceVersion": "1", "labels": labels},
                "spec": {"taints": taints},
            }));
        }
    }
    for r in &set.releases {
        snap.releases.push(CapturedRelease {
            namespace: r.namespace.clone(),
            release: r.release.clone(),
            live: Some(deployed(r)),
        });
    }
    snap.to_json()
}

/// The example fleet in a temporary directory with a converged snapshot of each cluster.
fn fixture() -> tempfile::TempDir {
    let d = FleetRepo::new().example("").build();
    std::fs::create_dir(d.path().join("snapshots")).unwrap();
    for name in ["hub", "us-canary", "us-east", "eu-onprem"] {
        let snap = converged_snapshot(d.path(), name);
        std::fs::write(d.path().join(format!("snapshots/{name}.json")), snap).unwrap();
    }
    d
}

fn edit(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "`{from}` not in {file}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// A base change that reaches the clusters keeping the base's team-a quota (the US region sets
/// its own).
fn raise_team_a_pods(dir: &Path) {
    edit(
        dir,
        "base/training.yaml",
        "quota: { nvidia.com/gpu: 64, pods: 200 }",
        "quota: { nvidia.com/gpu: 64, pods: 300 }",
    );
}

/// The clusters in the comment's summary table, in order.
fn table_clusters(md: &str) -> Vec<String> {
    md.lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1).map(str::to_string))
        .collect()
}

#[test]
fn an_untouched_fleet_plans_nothing() {
    let d = fixture();
    let (code, md, err) = plan(d.path(), "markdown");
    assert_eq!(code, Some(0), "{md}{err}");
    assert!(md.contains("No cluster has changes."), "{md}");
    assert!(
        md.contains("4 clusters unchanged: hub, us-canary, us-east, eu-onprem."),
        "{md}"
    );
    assert!(!md.contains("<details>"), "{md}");
}

#[test]
fn a_base_change_plans_every_cluster_that_inherits_it() {
    let d = fixture();
    // Every cluster keeps the base's DCGM exporter: all four plan the operator's upgrade.
    edit(
        d.path(),
        "base/training.yaml",
        "interval: 30s",
        "interval: 15s",
    );
    let (code, md, err) = plan(d.path(), "markdown");
    assert_eq!(code, Some(2), "{md}{err}");
    assert_eq!(
        table_clusters(&md),
        ["hub", "us-canary", "us-east", "eu-onprem"],
        "{md}"
    );
    assert!(!md.contains("unchanged:"), "{md}");
    // The US region sets its own team-a quota: a base change to it reaches only the others.
    edit(
        d.path(),
        "base/training.yaml",
        "interval: 15s",
        "interval: 30s",
    );
    raise_team_a_pods(d.path());
    let (code, md, err) = plan(d.path(), "markdown");
    assert_eq!(code, Some(2), "{md}{err}");
    assert_eq!(table_clusters(&md), ["hub", "eu-onprem"], "{md}");
    assert!(
        md.contains("2 clusters unchanged: us-canary, us-east."),
        "{md}"
    );
    for name in ["hub", "eu-onprem"] {
        assert!(
            md.contains(&format!("<summary><code>{name}</code>")),
            "{md}"
        );
    }
    assert_eq!(md.matches("+ spec.hard.pods: \"300\"").count(), 2, "{md}");
}

#[test]
fn an_overlay_change_plans_only_its_cluster() {
    let d = fixture();
    edit(
        d.path(),
        "clusters/us-east.yaml",
        "  name: us-east\n",
        "  name: us-east\nspec:\n  tenants:\n    - name: team-a\n      quota: { pods: 250 }\n",
    );
    let (code, md, err) = plan(d.path(), "markdown");
    assert_eq!(code, Some(2), "{md}{err}");
    assert_eq!(table_clusters(&md), vec!["us-east".to_string()], "{md}");
    assert!(
        md.contains("3 clusters unchanged: hub, us-canary, eu-onprem."),
        "{md}"
    );
}

#[test]
fn a_missing_snapshot_is_an_error_row_and_the_others_are_still_planned() {
    let d = fixture();
    std::fs::remove_file(d.path().join("snapshots/eu-onprem.json")).unwrap();
    let (code, md, _) = plan(d.path(), "markdown");
    assert_eq!(code, Some(1), "{md}");
    assert_eq!(table_clusters(&md), vec!["eu-onprem".to_string()], "{md}");
    assert!(
        md.contains("- `eu-onprem`: no snapshot `snapshots/eu-onprem.json`"),
        "{md}"
    );
    assert!(md.contains("3 clusters unchanged"), "{md}");
    let (code, json, _) = plan(d.path(), "json");
    assert_eq!(code, Some(1));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["clusters"][3]["name"], "eu-onprem");
    assert!(
        v["clusters"][3]["error"]
            .as_str()
            .unwrap()
            .contains("no snapshot")
    );
    let (code, human, _) = plan(d.path(), "human");
    assert_eq!(code, Some(1));
    assert!(
        human.contains("error: cluster `eu-onprem` not planned"),
        "{human}"
    );
}

/// The comment as GitHub renders it: CommonMark with tables; returns the table header cells, the
/// number of raw `<details>` openings and the languages of the fenced code blocks.
fn parse(md: &str) -> (Vec<String>, usize, Vec<String>) {
    let mut header = Vec::new();
    let (mut in_head, mut in_cell, mut details, mut fences) = (false, false, 0, Vec::new());
    for ev in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match ev {
            Event::Start(Tag::TableHead) => in_head = true,
            Event::End(pulldown_cmark::TagEnd::TableHead) => in_head = false,
            Event::Start(Tag::TableCell) => in_cell = true,
            Event::End(pulldown_cmark::TagEnd::TableCell) => in_cell = false,
            Event::Text(t) if in_head && in_cell && header.len() < 8 => header.push(t.to_string()),
            Event::Html(h) | Event::InlineHtml(h) => details += h.matches("<details>").count(),
            Event::Start(Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Fenced(lang))) => {
                fences.push(lang.to_string())
            }
            _ => {}
        }
    }
    (header, details, fences)
}

#[test]
fn the_comment_is_commonmark_with_a_table_details_and_diffs_and_its_bytes_are_stable() {
    let d = fixture();
    raise_team_a_pods(d.path());
    let (_, md, _) = plan(d.path(), "markdown");
    let (header, details, fences) = parse(&md);
    assert_eq!(
        header,
        [
            "cluster",
            "wave",
            "source",
            "create",
            "update",
            "delete",
            "conflicts",
            "findings"
        ],
        "{md}"
    );
    assert!(details >= table_clusters(&md).len(), "{md}");
    assert!(fences.iter().any(|l| l == "diff"), "{fences:?}\n{md}");
    assert!(md.contains("snapshot, 3 h old"), "{md}");
    let (_, again, _) = plan(d.path(), "markdown");
    assert_eq!(md, again, "same input, same bytes");
}

#[test]
fn the_example_fleets_comment_is_golden() {
    let d = fixture();
    raise_team_a_pods(d.path());
    let (_, md, _) = plan(d.path(), "markdown");
    insta::with_settings!({
        snapshot_path => root().join("golden/fleet"),
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!("plan.md", md);
    });
}

/// A fleet of `n` overlays of the example's base, each with an empty snapshot (a first rollout:
/// every object is a create), so the comment must budget the plans.
fn big_fleet(n: usize) -> tempfile::TempDir {
    let d = FleetRepo::new().build();
    copy_dir(&example_dir().join("base"), &d.path().join("base"));
    std::fs::create_dir_all(d.path().join("clusters")).unwrap();
    std::fs::create_dir_all(d.path().join("snapshots")).unwrap();
    let mut fleet = String::from(
        "apiVersion: gpuctl.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: many\nspec:\n  clusters:\n",
    );
    let empty = Snapshot {
        format_version: SNAPSHOT_FORMAT_VERSION,
        captured_at: Some(TAKEN.into()),
        ..Snapshot::default()
    }
    .to_json();
    for i in 0..n {
        let name = format!("gpu-{i:02}");
        fleet.push_str(&format!(
            "    - {{ name: {name}, blueprint: clusters/{name}.yaml, context: ctx-{i:02} }}\n"
        ));
        std::fs::write(
            d.path().join(format!("clusters/{name}.yaml")),
            format!(
                "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: ../base/training.yaml\nmetadata:\n  name: {name}\n"
            ),
        )
        .unwrap();
        std::fs::write(d.path().join(format!("snapshots/{name}.json")), &empty).unwrap();
    }
    std::fs::write(d.path().join("fleet.yaml"), fleet).unwrap();
    d
}

#[test]
fn sixty_clusters_fit_one_comment_and_it_says_what_it_cut() {
    let d = big_fleet(60);
    let started = std::time::Instant::now();
    let (code, md, err) = plan(d.path(), "markdown");
    let took = started.elapsed();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        md.chars().count() < 65_536 && md.len() <= 64_000,
        "{} bytes",
        md.len()
    );
    // The table is never cut.
    let rows = table_clusters(&md);
    assert_eq!(rows.len(), 60, "{md}");
    let shown = md.matches("<details><summary><code>").count();
    let cut_line = md
        .lines()
        .find(|l| l.starts_with("… plans of "))
        .unwrap_or_else(|| panic!("no cut line in {} bytes", md.len()));
    let cut: Vec<&str> = cut_line.rsplit(": ").next().unwrap().split(", ").collect();
    assert!(shown > 0 && !cut.is_empty(), "{shown} shown, {cut_line}");
    assert_eq!(shown + cut.len(), 60, "{cut_line}");
    assert!(
        cut_line.contains(&format!("plans of {} clusters cut", cut.len())),
        "{cut_line}"
    );
    for name in &cut {
        assert!(
            !md.contains(&format!("<summary><code>{name}</code>")),
            "{name} is cut and shown"
        );
    }
    let (header, details, _) = parse(&md);
    assert_eq!(header.len(), 8);
    assert!(details >= shown);
    let (_, again, _) = plan(d.path(), "markdown");
    assert_eq!(md, again, "same input, same bytes");
    eprintln!(
        "60 clusters: comment {} bytes, {shown} plans shown, {} cut, {took:?}",
        md.len(),
        cut.len()
    );
    // The JSON artifact the comment points to has every cluster's full plan.
    let (_, json, _) = plan(d.path(), "json");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["format_version"], 1);
    let clusters = v["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 60);
    assert!(clusters.iter().all(|c| c["plan"]["mode"] == "snapshot"));
}

#[test]
fn no_output_shows_a_credential_from_a_clusters_release() {
    let d = fixture();
    // The live operator release of one cluster holds a password the blueprint does not set: the
    // plan upgrades it away, and no format may print it.
    let path = d.path().join("snapshots/us-east.json");
    let mut snap: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    snap["helm_release"]["values"]["auth"] = json!({"password": "hunter2-fleet"});
    std::fs::write(&path, serde_json::to_string_pretty(&snap).unwrap()).unwrap();
    for format in ["markdown", "human", "json"] {
        let (code, out, err) = plan(d.path(), format);
        assert_eq!(code, Some(2), "{format}: {out}{err}");
        assert!(out.contains("us-east"), "{format}: {out}");
        assert!(out.contains("(sensitive)"), "{format}: {out}");
        assert!(
            !out.contains("hunter2"),
            "{format} leaks the password:\n{out}"
        );
        assert!(
            !err.contains("hunter2"),
            "{format} leaks the password:\n{err}"
        );
    }
}

/// `fleet apply`'s command line without a cluster: an unknown `--wave` is a usage error naming
/// the fleet's waves (before any cluster is read); clusters whose stamps cannot be read never let
/// a later wave go first: the first wave is tried, and its cluster's connection error fails it.
#[test]
fn fleet_apply_refuses_an_unknown_wave_and_starts_with_the_first_wave_it_cannot_read() {
    let d = FleetRepo::new().example("").build();
    let missing = d.path().join("no-such-kubeconfig");
    let missing = missing.to_str().unwrap();
    let o = gpuctl(
        d.path(),
        &[
            "fleet",
            "apply",
            "fleet.yaml",
            "--wave",
            "eu",
            "--kubeconfig",
            missing,
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(64), "{err}");
    assert!(
        err.contains("fleet `gpu-platform` has no wave `eu`; its waves: canary, us, rest"),
        "{err}"
    );
    let o = gpuctl(
        d.path(),
        &["fleet", "apply", "fleet.yaml", "--kubeconfig", missing],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        out.contains("wave `canary` (1 of 3): us-canary")
            && out.contains("us-canary (context gke-us-canary): failed"),
        "{out}\n{err}"
    );
    assert!(
        !out.contains("us-east") && !err.contains("== cluster us-east"),
        "{out}\n{err}"
    );
}

/// Issue 42 (Deliver 4): a new fleet's first pull request has no snapshots; `--offline` plans
/// every cluster as `gpuctl plan --offline` does, every object a create, and says so.
#[test]
fn fleet_plan_offline_plans_every_cluster_as_new_and_says_so() {
    let o = Gpuctl::new([
        "fleet",
        "plan",
        "blueprints/fleet/fleet.yaml",
        "--offline",
        "--detailed-exitcode",
        "-o",
        "markdown",
    ])
    .today(TODAY)
    .env("GPUCTL_NOW", NOW)
    .output();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains("4 clusters, 4 with changes, 0 unchanged, 0 not planned"),
        "{text}"
    );
    assert_eq!(
        text.matches("offline (no cluster state: every object is a create)")
            .count(),
        4,
        "{text}"
    );
    let json = Gpuctl::new([
        "fleet",
        "plan",
        "blueprints/fleet/fleet.yaml",
        "--offline",
        "-o",
        "json",
    ])
    .today(TODAY)
    .output();
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    for c in doc["clusters"].as_array().unwrap() {
        assert_eq!(c["source"], "offline", "{c:#}");
        let s = &c["plan"]["summary"];
        assert!(s["create"].as_u64().unwrap() > 0, "{c:#}");
        assert_eq!(
            (s["update"].as_u64(), s["delete"].as_u64()),
            (Some(0), Some(0))
        );
    }
    // --offline and a source of cluster state exclude each other.
    let both = Gpuctl::new([
        "fleet",
        "plan",
        "blueprints/fleet/fleet.yaml",
        "--offline",
        "--snapshot-dir",
        "x",
    ])
    .output();
    assert_eq!(both.status.code(), Some(64));
}
