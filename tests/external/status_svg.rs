//! `gpuctl status` output on a hand-built cluster of the DGX example: the tables, JSON, Markdown and
//! the SVG picture are golden files (`golden/status/`, reviewed with `cargo insta review`); the
//! picture is deterministic, escapes hostile names, stays bounded on a huge cluster, and a real
//! browser (headless Chromium, `tools/check-svg`) draws it.

use std::collections::BTreeMap;
use std::path::Path;

use gpuctl::output::status::{human, json, markdown, svg::svg};
use gpuctl_core::blueprint::Blueprint;
use gpuctl_core::status::{NodeFacts, PodFacts, QuotaFacts, StatusInput, StatusReport, compute};
use gpuctl_test_skip::needs_chromium;
use serde_json::json;

use crate::support::gpuctl::{Gpuctl, TODAY};

const GPU: &str = "nvidia.com/gpu";
const MIG: &str = "nvidia.com/mig-3g.40gb";

fn example() -> Blueprint {
    gpuctl_core::blueprint::load_file(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("blueprints/dgx-h100-training.yaml"),
    )
    .expect("the example loads")
    .blueprint
}

fn node(
    name: &str,
    pool: &str,
    ready: bool,
    cordoned: bool,
    res: &str,
    cap: u64,
    alloc: u64,
) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        labels: BTreeMap::from([
            ("node.kubernetes.io/instance-type".into(), "dgx-h100".into()),
            ("gpuctl.dev/pool".into(), pool.into()),
        ]),
        ready,
        unschedulable: cordoned,
        capacity: BTreeMap::from([(res.to_string(), cap)]),
        allocatable: BTreeMap::from([(res.to_string(), alloc)]),
    }
}

fn pod(ns: &str, name: &str, node: &str, res: &str, n: u64) -> PodFacts {
    PodFacts {
        namespace: ns.into(),
        name: name.into(),
        node: node.into(),
        phase: "Running".into(),
        gpus: BTreeMap::from([(res.to_string(), n)]),
    }
}

fn quota(ns: &str, name: &str, hard: &[(&str, &str)], used: &[(&str, &str)]) -> QuotaFacts {
    QuotaFacts {
        namespace: ns.into(),
        name: name.into(),
        hard: hard
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        used: used
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn cq(
    name: &str,
    flavor: &str,
    res: &str,
    nominal: &str,
    used: &str,
    borrowed: &str,
    (admitted, pending): (u64, u64),
) -> serde_json::Value {
    json!({
        "metadata": { "name": name },
        "spec": {
            "cohortName": "gpu-all",
            "resourceGroups": [{ "coveredResources": [res], "flavors": [{ "name": flavor, "resources": [{ "name": res, "nominalQuota": nominal }] }] }]
        },
        "status": {
            "admittedWorkloads": admitted, "reservingWorkloads": admitted, "pendingWorkloads": pending,
            "conditions": [{ "type": "Active", "status": "True" }],
            "flavorsReservation": [{ "name": flavor, "resources": [{ "name": res, "total": used, "borrowed": borrowed }] }]
        }
    })
}

/// Six of the sixteen training nodes (one cordoned, one NotReady, one with a withdrawn GPU), the four
/// MIG inference nodes, team pods, quotas as kube-controller-manager counts them, ClusterQueues as
/// Kueue reports them (team-a borrows 8 from the cohort).
fn cluster() -> StatusInput {
    let mut nodes = Vec::new();
    for i in 0..6 {
        let name = format!("dgx-train-{i:02}");
        nodes.push(match i {
            3 => node(&name, "h100-train", true, true, GPU, 8, 8),
            4 => node(&name, "h100-train", false, false, GPU, 8, 8),
            5 => node(&name, "h100-train", true, false, GPU, 8, 7),
            _ => node(&name, "h100-train", true, false, GPU, 8, 8),
        });
    }
    for i in 0..4 {
        nodes.push(node(
            &format!("dgx-infer-{i}"),
            "h100-infer",
            true,
            false,
            MIG,
            16,
            16,
        ));
    }
    let pods = vec![
        pod("team-a-train", "llm-pretrain-0", "dgx-train-00", GPU, 8),
        pod("team-a-train", "llm-pretrain-1", "dgx-train-01", GPU, 8),
        pod("team-a-train", "llm-pretrain-2", "dgx-train-02", GPU, 4),
        pod("team-b-train", "vision-0", "dgx-train-02", GPU, 2),
        pod("team-b-train", "vision-1", "dgx-train-03", GPU, 2),
        pod("dev-test", "notebook", "dgx-train-05", GPU, 1),
        pod("kube-system", "stray", "dgx-train-05", GPU, 1),
        pod("team-a-train", "lost", "dgx-train-04", GPU, 4),
        pod("online-infer", "chat-0", "dgx-infer-0", MIG, 6),
        pod("online-infer", "chat-1", "dgx-infer-1", MIG, 6),
        pod("offline-batch", "embed", "dgx-infer-2", MIG, 3),
    ];
    let quotas = vec![
        quota(
            "team-a-train",
            "team-a-quota",
            &[
                ("requests.nvidia.com/gpu", "80"),
                ("pods", "200"),
                ("requests.cpu", "1200"),
            ],
            &[
                ("requests.nvidia.com/gpu", "24"),
                ("pods", "4"),
                ("requests.cpu", "32"),
            ],
        ),
        quota(
            "team-b-train",
            "team-b-quota",
            &[("requests.nvidia.com/gpu", "64"), ("pods", "200")],
            &[("requests.nvidia.com/gpu", "4"), ("pods", "2")],
        ),
        quota(
            "online-infer",
            "serving-quota",
            &[("requests.nvidia.com/mig-3g.40gb", "64"), ("pods", "400")],
            &[("requests.nvidia.com/mig-3g.40gb", "12"), ("pods", "2")],
        ),
        quota(
            "dev-test",
            "dev-quota",
            &[("requests.nvidia.com/gpu", "26"), ("pods", "50")],
            &[],
        ),
    ];
    StatusInput {
        nodes,
        pods,
        quotas,
        cluster_queues: Some(vec![
            cq("cq-team-a", "h100-train", GPU, "64", "72", "8", (9, 2)),
            cq("cq-team-b", "h100-train", GPU, "48", "4", "0", (2, 0)),
            cq("cq-infer", "h100-infer", MIG, "64", "12", "0", (2, 0)),
            cq("cq-dev", "h100-train", GPU, "16", "1", "0", (1, 3)),
        ]),
        volcano_queues: None,
        node_claims: None,
    }
}

fn report() -> StatusReport {
    compute(
        &example(),
        &cluster(),
        "snapshot dgx.json (captured 2026-11-30T12:00:00Z)",
    )
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/status"));
    s.set_prepend_module_to_snapshot(false);
    s
}

#[test]
fn status_outputs_match_their_golden_files() {
    let r = report();
    settings().bind(|| {
        insta::assert_snapshot!("dgx-human", human(&r));
        insta::assert_snapshot!("dgx-markdown", markdown(&r));
        insta::assert_snapshot!("dgx-json", json(&r));
        insta::assert_snapshot!("dgx-svg", svg(&r));
    });
}

#[test]
fn the_picture_is_the_same_bytes_every_time() {
    let a = svg(&report());
    let b = svg(&report());
    assert_eq!(a, b);
    assert!(a.starts_with("<svg ") && a.ends_with("</svg>\n"));
}

/// Every `<` starts one of the elements gpuctl writes: nothing from the cluster became markup.
fn only_known_elements(svg: &str) -> Result<(), String> {
    const KNOWN: [&str; 8] = [
        "svg", "title", "defs", "pattern", "rect", "line", "text", "g",
    ];
    for (i, _) in svg.match_indices('<') {
        let rest = &svg[i + 1..];
        let rest = rest.strip_prefix('/').unwrap_or(rest);
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        if !KNOWN.contains(&name.as_str()) {
            return Err(format!(
                "unexpected markup at byte {i}: {}",
                &svg[i..(i + 40).min(svg.len())]
            ));
        }
    }
    if svg.chars().any(|c| c.is_control() && c != '\n') {
        return Err("a control character reached the SVG".into());
    }
    Ok(())
}

#[test]
fn hostile_names_from_the_cluster_are_text_not_markup() {
    let mut input = cluster();
    let evil = "<script>alert(1)</script>\"'&\u{1b}[31m\u{0}";
    input.nodes[0].name = format!("dgx-train-00{evil}");
    input.pods[0].node = input.nodes[0].name.clone();
    input.pods[0].name = format!("pod{evil}");
    input.pods.push(pod(
        &format!("ns{evil}"),
        "x",
        &input.nodes[1].name.clone(),
        GPU,
        1,
    ));
    input.quotas[0]
        .used
        .insert("requests.nvidia.com/gpu".into(), format!("24{evil}"));
    let r = compute(&example(), &input, &format!("snapshot {evil}"));
    let s = svg(&r);
    only_known_elements(&s).unwrap();
    assert!(s.contains("&lt;script&gt;"));
    for text in [human(&r), markdown(&r)] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{0}'),
            "{text}"
        );
    }
    assert!(!markdown(&r).contains("<script>"));
}

#[test]
fn a_huge_cluster_gives_a_bounded_picture_that_says_what_it_left_out() {
    let mut input = StatusInput::default();
    for i in 0..5000 {
        input.nodes.push(node(
            &format!("n{i:05}-{}", "x".repeat(200)),
            "h100-train",
            true,
            false,
            GPU,
            8,
            8,
        ));
        input.pods.push(pod(
            "team-a-train",
            &format!("p{i}-{}", "y".repeat(300)),
            &input.nodes[i].name.clone(),
            GPU,
            3,
        ));
    }
    let r = compute(&example(), &input, "generated");
    let s = svg(&r);
    assert!(s.len() < 1_500_000, "{} bytes", s.len());
    assert!(
        s.contains("… and 4952 more node(s) not drawn (4952 Ready)"),
        "{}",
        &s[..2000]
    );
    only_known_elements(&s).unwrap();
}

/// Renders the golden picture in headless Chromium with `tools/check-svg`: the screenshot has the
/// picture's size, is not blank, and shows the tenant, free and unhealthy colours.
#[needs_chromium]
#[test]
fn a_browser_draws_the_picture() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("status.svg");
    std::fs::write(&file, svg(&report())).unwrap();
    let png = std::env::var_os("GPUCTL_STATUS_PNG")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("status.png"));
    let o = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tools/check-svg"))
        .arg(&file)
        .arg("--png")
        .arg(&png)
        // team-a, team-b, serving, dev; free; the unhealthy hatch's stripe; the cordoned grey.
        .args([
            "--expect", "#4e79a7", "--expect", "#f28e2b", "--expect", "#b07aa1",
        ])
        .args([
            "--expect", "#76b7b2", "--expect", "#c7e9c0", "--expect", "#d62728",
        ])
        .args(["--expect", "#d9d9d9", "--min-colours", "10"])
        .output()
        .expect("runs tools/check-svg");
    assert!(
        o.status.success(),
        "tools/check-svg failed (exit {:?}):\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

// --- the command -------------------------------------------------------------------------------

fn gpuctl(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Gpuctl::new(args).today(TODAY).output()
}

fn example_snapshot(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("day2.json");
    let snap = gpuctl_core::testgen::day2::snapshot(gpuctl_core::testgen::day2::Size::EXAMPLE);
    std::fs::write(&path, snap.to_json()).unwrap();
    path
}

#[test]
fn status_reads_a_diagnostics_snapshot_and_draws_it() {
    let dir = tempfile::tempdir().unwrap();
    let snap = example_snapshot(dir.path());
    let svg_file = dir.path().join("status.svg");
    let o = gpuctl(&[
        "status".as_ref(),
        "blueprints/dgx-h100-training.yaml".as_ref(),
        "--snapshot".as_ref(),
        snap.as_os_str(),
        "-o".as_ref(),
        "json".as_ref(),
        "--svg".as_ref(),
        svg_file.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["formatVersion"], 1);
    assert_eq!(v["pools"][0]["name"], "h100-train");
    assert_eq!(v["pools"][0]["fragmentation"], 0.75);
    assert!(
        v["source"].as_str().unwrap().starts_with("snapshot "),
        "{}",
        v["source"]
    );
    let picture = std::fs::read_to_string(&svg_file).unwrap();
    assert!(picture.starts_with("<svg ") && picture.contains("Pool h100-infer"));
    for format in ["human", "markdown"] {
        let o = gpuctl(&[
            "status".as_ref(),
            "blueprints/dgx-h100-training.yaml".as_ref(),
            "--snapshot".as_ref(),
            snap.as_os_str(),
            "-o".as_ref(),
            format.as_ref(),
        ]);
        assert!(
            o.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stdout).contains("h100-train"));
    }
}

#[test]
fn the_picture_is_written_only_where_it_was_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let snap = example_snapshot(dir.path());
    let run = |svg: &Path| {
        gpuctl(&[
            "status".as_ref(),
            "blueprints/dgx-h100-training.yaml".as_ref(),
            "--snapshot".as_ref(),
            snap.as_os_str(),
            "--svg".as_ref(),
            svg.as_os_str(),
        ])
    };
    // A directory is refused (exit 64), before anything is read.
    let o = run(dir.path());
    assert_eq!(o.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a directory"));
    // So is a file in a directory that does not exist.
    let o = run(&dir.path().join("nope/status.svg"));
    assert_eq!(o.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not exist"));
    // A symlink at the path is replaced, never written through.
    #[cfg(unix)]
    {
        let target = dir.path().join("precious.txt");
        std::fs::write(&target, "keep me").unwrap();
        let link = dir.path().join("status.svg");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let o = run(&link);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        assert!(std::fs::read_to_string(&link).unwrap().starts_with("<svg "));
        assert!(
            !std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_snapshot_without_diagnostics_says_how_to_take_one() {
    let o = gpuctl(&[
        "status".as_ref(),
        "blueprints/dgx-h100-training.yaml".as_ref(),
        "--snapshot".as_ref(),
        "blueprints/snapshots/dgx-h100-training.json".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("gpuctl snapshot BLUEPRINT --diagnostics"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
