//! Issue 31: `gpuctl fleet apply` in waves across three real API servers side by side.
//!
//! Three fresh harnesses (each its own etcd and kube-apiserver) are the clusters `canary` (wave
//! `canary`, bake 0s) and `east` and `west` (wave `rest`) of a fleet whose clusters extend one
//! base; one kubeconfig names the three contexts. The test checks, against the clusters only:
//! - the first `fleet apply` changes only the canary (the other two hold none of its objects and
//!   no stamp) and stamps its ApplySet parent;
//! - after a change of the base, `--wave rest` is refused, naming the canary's missing revision;
//!   `fleet apply` then takes the canary first; with a bake time of 1h the next wave is refused
//!   naming the bake and the time it ends;
//! - while the GPU Operator reports the canary's NVIDIADriver notReady (the status its condition
//!   updater writes; doctor's GPU232), wave `rest` is refused naming `doctor` and GPU232, and
//!   allowed once it reports ready (its two clusters at once, `maxParallel: 2`); then `fleet plan`
//!   is empty on all three;
//! - killed (SIGKILL) in the middle of wave `rest`, with `west`'s apply lock held: `east` carries
//!   the new revision, `west` does not; a re-run (waiting out the dead run's lock) converges and
//!   `fleet plan` is empty again.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Instant;

use gpuctl_test_skip::needs_test_cluster;
use kube::Client;
use kube::api::Api;
use support::cluster::{TestCluster, nvidia_drivers};
use support::fleet::{BASE, FleetRepo, write};
use support::fresh::FreshCluster;
use support::gpuctl::{Gpuctl, TODAY, in_dir as gpuctl};
use support::operator_driver::{report_not_ready, report_ready};
use support::releases::text;

/// The fleet's clusters and their contexts.
const CLUSTERS: [&str; 3] = ["canary", "east", "west"];

const FLEET: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: Fleet
metadata: { name: waves }
spec:
  clusters:
    - { name: canary, blueprint: clusters/canary.yaml, context: ctx-canary }
    - { name: east, blueprint: clusters/east.yaml, context: ctx-east }
    - { name: west, blueprint: clusters/west.yaml, context: ctx-west }
  waves:
    - { name: canary, clusters: [canary], bake: 0s }
    - { name: rest, selector: {}, gates: [converged, doctor] }
";

/// The fleet revision a cluster's ApplySet parent carries (`None`: no parent or no stamp).
async fn revision(c: &Client, cluster: &str) -> Option<String> {
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(c.clone(), "gpu-operator");
    let cm = cms
        .get_opt(&format!("gpuctl-applyset-{cluster}"))
        .await
        .unwrap()?;
    cm.metadata
        .annotations?
        .get("gpuctl.dev/fleet-revision")
        .cloned()
}

async fn has_namespace(c: &Client, name: &str) -> bool {
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.clone());
    ns.get_opt(name).await.unwrap().is_some()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `fleet plan` is empty on every cluster (exit 0 under `--detailed-exitcode`).
fn assert_plans_empty(dir: &Path, kc: &str, when: &str) {
    let o = gpuctl(
        &[
            "fleet",
            "plan",
            "fleet.yaml",
            "--kubeconfig",
            kc,
            "--detailed-exitcode",
        ],
        dir,
    );
    assert_eq!(o.status.code(), Some(0), "{when}: {}", text(&o));
    assert!(
        out(&o).contains("3 clusters unchanged"),
        "{when}: {}",
        text(&o)
    );
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_apply_rolls_out_in_waves_behind_gates_and_resumes_after_a_kill() {
    let Some(_shared) = TestCluster::connect("fleet_apply").await else {
        return;
    };
    let started = Instant::now();
    // Three API servers side by side, started at once (no Kueue or Volcano: the fleet needs
    // neither, and each start is shorter without them).
    let fresh = FreshCluster::up_all(&CLUSTERS.map(|c| {
        let flags = vec!["--without-kueue", "--without-volcano"];
        (format!("fleet-apply-{c}"), flags)
    }));
    eprintln!(
        "fleet_apply: three clusters up in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let mut fleet = FleetRepo::new().git().file("base.yaml", BASE);
    for c in CLUSTERS {
        fleet = fleet.cluster(c, "");
    }
    let repo = fleet.file("fleet.yaml", FLEET).build();
    let dir = repo.path();
    let harnesses: Vec<(&str, PathBuf)> = CLUSTERS
        .iter()
        .zip(&fresh)
        .map(|(c, f)| (*c, f.kubeconfig()))
        .collect();
    let kc = dir.join("kubeconfig.json");
    support::fleet::kubeconfig(&harnesses, &kc);
    let kcs = kc.display().to_string();
    let mut clients = Vec::new();
    for f in &fresh {
        clients.push(f.client().await);
    }
    let (canary, east, west) = (&clients[0], &clients[1], &clients[2]);
    let apply = |extra: &[&str]| {
        let mut args = vec!["fleet", "apply", "fleet.yaml", "--kubeconfig", &kcs];
        args.extend_from_slice(extra);
        gpuctl(&args, dir)
    };

    // 1. The first apply changes only the canary.
    let o = apply(&[]);
    assert_eq!(o.status.code(), Some(0), "first apply: {}", text(&o));
    assert!(
        out(&o).contains("wave `canary` (1 of 2): canary"),
        "{}",
        text(&o)
    );
    let r1 = revision(canary, "canary").await.expect("canary stamped");
    assert!(r1.starts_with("sha256:"), "{r1}");
    assert!(has_namespace(canary, "team-a").await);
    for (c, name) in [(east, "east"), (west, "west")] {
        assert!(!has_namespace(c, "team-a").await, "{name} was changed");
        assert_eq!(revision(c, name).await, None, "{name}");
    }

    // 2. The base changes: the canary lacks the new revision, so wave `rest` is refused.
    write(dir, "base.yaml", &BASE.replace("gpu: 8 }", "gpu: 16 }"));
    let o = apply(&["--wave", "rest"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "rest before the canary: {}",
        text(&o)
    );
    let refused = out(&o);
    eprintln!("{refused}");
    assert!(
        refused.contains("wave `rest` refused")
            && refused.contains("canary (wave canary) revision: carries revision sha256:")
            && refused.contains("next: `gpuctl fleet apply fleet.yaml --wave canary`"),
        "{}",
        text(&o)
    );
    assert!(
        !has_namespace(east, "team-a").await,
        "a refused wave changed east"
    );
    // Without --wave the canary goes first.
    let o = apply(&[]);
    assert_eq!(o.status.code(), Some(0), "canary again: {}", text(&o));
    assert!(out(&o).contains("wave `canary` (1 of 2)"), "{}", text(&o));
    let r2 = revision(canary, "canary").await.unwrap();
    assert_ne!(r1, r2, "a base change is a new revision");
    // With a bake time of an hour, the canary applied seconds ago holds wave `rest`.
    write(dir, "fleet.yaml", &FLEET.replace("bake: 0s", "bake: 1h"));
    let o = apply(&[]);
    assert_eq!(o.status.code(), Some(1), "rest while baking: {}", text(&o));
    let refused = out(&o);
    assert!(
        refused.contains("canary (wave canary) bake: applied at ")
            && refused.contains("next: wait 1h for bake (until "),
        "{}",
        text(&o)
    );
    write(dir, "fleet.yaml", FLEET);

    // 3. Doctor reports an error on the canary (its NVIDIADriver notReady): wave `rest` waits.
    let drivers = nvidia_drivers(canary);
    report_not_ready(
        &drivers,
        "cluster-default",
        "gpu-operator",
        "DriverNotReady",
        "Waiting for driver pod to be ready",
    )
    .await;
    let o = apply(&[]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "rest while doctor errs: {}",
        text(&o)
    );
    let refused = out(&o);
    eprintln!("{refused}");
    assert!(
        refused.contains("wave `rest` (2 of 2)")
            && refused.contains("canary (wave canary) doctor: doctor reports 1 error(s): GPU232")
            && refused.contains("`gpuctl doctor ")
            && refused.contains("--context ctx-canary"),
        "{}",
        text(&o)
    );
    // Only the doctor gate: the canary carries its revision and plans empty.
    assert!(
        !refused.contains(") revision:") && !refused.contains(") converged:"),
        "{refused}"
    );
    assert!(!has_namespace(east, "team-a").await);
    report_ready(&drivers, "cluster-default", "gpu-operator").await;
    // Wave `rest` with `maxParallel: 2`: east and west are applied at once.
    write(
        dir,
        "fleet.yaml",
        &FLEET.replace(
            "gates: [converged, doctor] }",
            "gates: [converged, doctor], maxParallel: 2 }",
        ),
    );
    let o = apply(&[]);
    assert_eq!(o.status.code(), Some(0), "rest once healthy: {}", text(&o));
    assert!(out(&o).contains("gates passed"), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let first_done = err.find("Apply complete").expect("applies");
    for c in ["east", "west"] {
        let started = err.find(&format!("== cluster {c}")).expect("started");
        assert!(
            started < first_done,
            "{c} started after the first apply ended:\n{err}"
        );
    }
    write(dir, "fleet.yaml", FLEET);
    for (c, name) in [(east, "east"), (west, "west")] {
        assert!(has_namespace(c, "team-a").await, "{name}");
        assert!(revision(c, name).await.is_some(), "{name}");
    }
    let o = apply(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(out(&o).contains("nothing to apply"), "{}", text(&o));
    assert_plans_empty(dir, &kcs, "after the rollout");

    // 4. Killed in the middle of wave `rest`: a re-run converges. The change adds a tenant, so
    // west's apply has several phases to be killed in.
    let before = (revision(east, "east").await, revision(west, "west").await);
    let grown = format!(
        "{}    - name: team-c\n      namespaces: [team-c]\n      quota: {{ nvidia.com/gpu: 8 }}\n",
        BASE.replace("gpu: 8 }", "gpu: 24 }")
    );
    write(dir, "base.yaml", &grown);
    let o = apply(&["--wave", "canary"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut child = Gpuctl::new([
        "fleet",
        "apply",
        "fleet.yaml",
        "--kubeconfig",
        &kcs,
        "--lock-duration",
        "2s",
    ])
    .current_dir(dir)
    .today(TODAY)
    .no_color()
    .spawn(Stdio::null(), Stdio::piped());
    // Killed at west's first apply phase: its lock is held, east is done.
    let mut seen = Vec::new();
    let mut west_started = false;
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        west_started |= line.starts_with("== cluster west");
        seen.push(line.clone());
        if west_started && line.starts_with("phase ") {
            child.kill().unwrap();
            break;
        }
    }
    let status = child.wait().unwrap();
    assert!(
        west_started && !status.success(),
        "not killed mid-wave ({status}):\n{}",
        seen.join("\n")
    );
    let after = (revision(east, "east").await, revision(west, "west").await);
    assert!(
        after.0.is_some() && after.0 != before.0,
        "east carries the new revision before west starts"
    );
    assert_eq!(after.1, before.1, "west was stamped before the kill");
    let o = apply(&["--lock-timeout", "30s"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "re-run after the kill: {}",
        text(&o)
    );
    let rerun = out(&o);
    eprintln!("{rerun}");
    assert!(
        rerun.contains("wave `rest` (2 of 2)")
            && rerun.contains("east (context ctx-east): no changes; already at revision")
            && rerun.contains("west (context ctx-west): ")
            && rerun.contains("stamped revision"),
        "{}",
        text(&o)
    );
    assert_plans_empty(dir, &kcs, "after the re-run");
    eprintln!(
        "fleet_apply: done in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    // Stopped side by side, as they started.
    std::thread::scope(|s| {
        for f in fresh {
            s.spawn(move || drop(f));
        }
    });
}
