//! Issue 31: `gpuctl fleet plan` live, against a real API server.
//!
//! The example fleet (`blueprints/fleet/`, copied into a directory marked as a repository) has four
//! clusters, each naming a kubeconfig context. A fresh harness plays all four: the test writes a
//! kubeconfig whose four contexts point at it. `fleet plan --kubeconfig` plans every cluster
//! through its own context (every object a create: the cluster is empty), exits 2 under
//! `--detailed-exitcode` and names each source `live`. The hub's MultiKueueConfig is in the
//! cluster beforehand, so neither plan may create it. Then `gpuctl fleet snapshot` writes one
//! snapshot per cluster through its context (owner-only), the snapshot plans count exactly what
//! the live ones did, and a context that does not connect is named while the others are written.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use gpuctl_test_skip::needs_test_cluster;
use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::fleet::FleetRepo;
use support::fresh::FreshCluster;
use support::gpuctl::in_dir as gpuctl;
use support::releases::text;

/// The example fleet's clusters and their contexts.
const CLUSTERS: [(&str, &str); 4] = [
    ("hub", "hub-admin"),
    ("us-canary", "gke-us-canary"),
    ("us-east", "gke-us-east"),
    ("eu-onprem", "dgx-eu"),
];

/// The harness's kubeconfig with one context per fleet cluster, all on its one cluster and user.
fn fleet_kubeconfig(harness: &Path, out: &Path) {
    let text = std::fs::read_to_string(harness).unwrap();
    let mut kc: Value = serde_saphyr::from_str(&text).unwrap();
    let first = kc["contexts"][0]["context"].clone();
    kc["contexts"] = Value::Array(
        CLUSTERS
            .iter()
            .map(|(_, ctx)| json!({"name": ctx, "context": first}))
            .collect(),
    );
    kc["current-context"] = json!(CLUSTERS[0].1);
    std::fs::write(out, serde_json::to_string_pretty(&kc).unwrap()).unwrap();
}

/// Per cluster: (name, create, update, delete) of a `fleet plan -o json` document.
fn counts(doc: &Value) -> Vec<(String, u64, u64, u64)> {
    let mut out: Vec<_> = doc["clusters"]
        .as_array()
        .unwrap_or_else(|| panic!("no clusters: {doc:#}"))
        .iter()
        .map(|c| {
            let s = &c["plan"]["summary"];
            let n = |k: &str| s[k].as_u64().unwrap_or(0);
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                n("create"),
                n("update"),
                n("delete"),
            )
        })
        .collect();
    out.sort();
    out
}

fn out_text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Whether cluster `name`'s plan in a `fleet plan -o json` document creates an object of `kind`.
fn creates(doc: &Value, name: &str, kind: &str) -> bool {
    let plan = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no cluster {name}: {doc:#}"));
    let text = plan["plan"].to_string();
    assert!(
        text.contains("\"create\""),
        "the plan format changed: {text}"
    );
    plan["plan"]["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["action"] == "create" && c["kind"] == kind)
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_plan_plans_every_cluster_through_its_context_and_snapshots_agree() {
    let Some(_shared) = TestCluster::connect("fleet_plan_live").await else {
        return;
    };
    // A cluster of its own: the plans must not see other tests' objects come and go between the
    // live plan and the snapshots.
    let fresh = FreshCluster::up_with("fleet-plan", &["--without-kueue"]);
    let repo = FleetRepo::new().example("fleet").git().build();
    let kc = repo.path().join("kubeconfig.json");
    fleet_kubeconfig(&fresh.kubeconfig(), &kc);
    let kcs = kc.display().to_string();
    let dir = repo.path();

    // The hub's MultiKueueConfig is already in the cluster (Kueue v0.19.2's CRD, the object as
    // `fleet render` renders it, applied under gpuctl's field manager): a snapshot must read it,
    // or a plan from the snapshot would create what exists.
    let kubectl = |args: &[&str]| {
        let o = Command::new(fresh.var("GPUCTL_KUBECTL"))
            .arg("--kubeconfig")
            .arg(fresh.kubeconfig())
            .args(args)
            .output()
            .expect("kubectl runs");
        assert!(o.status.success(), "kubectl {args:?}: {}", text(&o));
    };
    let crd = support::releases::shared()
        .join("upstream/kueue/v0.19.2/crds/kueue.x-k8s.io_multikueueconfigs.yaml");
    kubectl(&["apply", "--server-side", "-f", crd.to_str().unwrap()]);
    kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=120s",
        "crd/multikueueconfigs.kueue.x-k8s.io",
    ]);
    let rendered = dir.join("rendered");
    let o = gpuctl(
        &[
            "fleet",
            "render",
            "fleet/fleet.yaml",
            "-o",
            rendered.to_str().unwrap(),
        ],
        dir,
    );
    assert!(o.status.success(), "fleet render: {}", text(&o));
    let mkc = rendered.join("hub/40-queues/multikueueconfig_multikueue.yaml");
    kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=gpuctl",
        "-f",
        mkc.to_str().unwrap(),
    ]);

    let o = gpuctl(
        &[
            "fleet",
            "plan",
            "fleet/fleet.yaml",
            "--kubeconfig",
            &kcs,
            "-o",
            "json",
            "--detailed-exitcode",
        ],
        dir,
    );
    assert_eq!(o.status.code(), Some(2), "live fleet plan: {}", text(&o));
    let live: Value = serde_json::from_slice(&o.stdout).unwrap();
    for c in live["clusters"].as_array().unwrap() {
        assert!(
            c["source"].to_string().contains("live"),
            "{}: {}",
            c["name"],
            c["source"]
        );
    }
    let live_counts = counts(&live);
    assert_eq!(live_counts.len(), 4, "{live_counts:?}");
    for (name, create, _, delete) in &live_counts {
        assert!(*create > 0, "{name} plans creates on an empty cluster");
        assert_eq!(*delete, 0, "{name}");
    }

    assert!(
        !creates(&live, "hub", "MultiKueueConfig"),
        "the live plan creates the hub's MultiKueueConfig that exists"
    );

    // `fleet snapshot`: one snapshot per cluster through its own context (an overlay's `extends`
    // chain bounded by the repository); the snapshot plans agree, object for object.
    let snaps = dir.join("snapshots");
    let o = gpuctl(
        &[
            "fleet",
            "snapshot",
            "fleet/fleet.yaml",
            "--kubeconfig",
            &kcs,
            "-o",
            snaps.to_str().unwrap(),
        ],
        dir,
    );
    assert!(o.status.success(), "fleet snapshot: {}", text(&o));
    assert!(
        out_text(&o).contains("4 of 4 cluster(s) captured"),
        "{}",
        text(&o)
    );
    for (name, _) in CLUSTERS {
        let meta = std::fs::metadata(snaps.join(format!("{name}.json"))).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
        }
        assert!(meta.len() > 0, "{name}");
    }
    let o = gpuctl(
        &[
            "fleet",
            "plan",
            "fleet/fleet.yaml",
            "--snapshot-dir",
            snaps.to_str().unwrap(),
            "-o",
            "json",
        ],
        dir,
    );
    assert!(o.status.success(), "snapshot fleet plan: {}", text(&o));
    let offline: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(counts(&offline), live_counts);
    assert!(
        !creates(&offline, "hub", "MultiKueueConfig"),
        "the snapshot missed the hub's MultiKueueConfig"
    );

    // A context that does not connect: that cluster is named, the others are still written.
    let mut kc_text: Value = serde_json::from_str(&std::fs::read_to_string(&kc).unwrap()).unwrap();
    kc_text["contexts"][3]["context"]["cluster"] = json!("nowhere");
    kc_text["clusters"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}}));
    std::fs::write(&kc, serde_json::to_string(&kc_text).unwrap()).unwrap();
    let again = dir.join("snapshots-2");
    let o = gpuctl(
        &[
            "fleet",
            "snapshot",
            "fleet/fleet.yaml",
            "--kubeconfig",
            &kcs,
            "-o",
            again.to_str().unwrap(),
        ],
        dir,
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = out_text(&o);
    assert!(
        said.contains(&format!("{}: not captured: ", CLUSTERS[3].0))
            && said.contains("3 of 4 cluster(s) captured"),
        "{}",
        text(&o)
    );
    assert!(again.join(format!("{}.json", CLUSTERS[0].0)).is_file());
    assert!(!again.join(format!("{}.json", CLUSTERS[3].0)).exists());
    drop(fresh);
}
