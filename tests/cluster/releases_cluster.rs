//! Issue 30's done-means, with the real helm and three real charts: `gpuctl apply` of the DGX example
//! (`blueprints/dgx-h100-training.yaml`) installs the NVIDIA Network Operator v26.4.1 release from
//! its archive in ../shared, the Kueue v0.19.2 release (Kueue's own chart, from its Go module) and
//! the GPU Operator v26.7.0 release (its archive in ../shared), into a fresh harness started
//! `--without-kueue --without-crds network-operator,gpu-operator`, so every CRD those kinds need is
//! the one the charts install (`crds/`), and no other test shares them.
//!
//! Asserted: the plan creates the releases' kinds only after their CRDs (`create-after-crd`);
//! apply installs the GPU Operator and then the Network Operator release before the operator phase
//! (the NVIDIADriver CRs that carry the GPU Operator's RDMA settings and the NicClusterPolicy come
//! after both), Kueue's release before the first queue object, and each release's CRDs were
//! created by helm; apply's report names release, chart, version, namespace and revision of
//! each; `helm list -A` shows all three deployed at the versions gpuctl pins
//! (`profiles/network.yaml`, `profiles/queueing.yaml`); the next plan is empty
//! (`--detailed-exitcode` exits 0); a change of one Network Operator value plans as exactly that
//! value's diff and applies as revision 2, which the chart's real templates act on.
//! Then the Network Operator is dropped from the blueprint: the plan uninstalls its release, apply
//! is refused while the NicClusterPolicy exists (exit 1, the policy named, the release untouched),
//! and once the policy is deleted apply uninstalls the release with the real helm (`helm list` no
//! longer has it, its CRDs stay, the next plan is empty).
//!
//! Skipped, stated plainly: **chart hooks**. No kubelet runs here, so the charts' pre-install and
//! pre-upgrade hook Jobs (the Network Operator's `network-operator-keep-ncp` and
//! `network-operator-upgrade-crd`, the GPU Operator's CRD upgrade Job) would never complete and helm
//! would wait for them until it times out. The `helm` on the test's PATH is the harness's real helm
//! behind a two-line wrapper that adds `--no-hooks` to `install` and `upgrade`
//! (`support::releases::Hooks::Skip`); every other part of each release is helm's. The charts'
//! Deployments are created but never run; Kueue's is played by the harness's Kueue binary
//! (`support::releases::kueue_pod`, as in `kueue_release`), because its admission webhooks must
//! answer for the queues to be created.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use gpuctl_test_skip::needs_test_cluster;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;
use support::cluster::TestCluster;
use support::fresh::FreshCluster;
use support::releases::{Hooks, gpuctl, helm_path, plan_json, revisions, text};

const EXAMPLE: &str = "blueprints/dgx-h100-training.yaml";
const NETWORK_NS: &str = "nvidia-network-operator";

/// The DGX example with every release installed by gpuctl from a local chart: the GPU Operator's
/// and the Network Operator's archives from ../shared, Kueue's chart packaged from its Go module
/// (`install: none` in the example, where the platform team runs Kueue, becomes `install: helm`).
fn dgx_blueprint(dir: &Path, kueue_archive: &str) -> std::path::PathBuf {
    let gpu = support::releases::gpu_operator_archive(dir);
    let network = support::releases::network_operator_archive(dir);
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let edits = [
        (
            "    namespace: gpu-operator\n    install: helm\n",
            format!(
                "    namespace: gpu-operator\n    install: helm\n    chart: {{ path: {gpu} }}\n"
            ),
        ),
        (
            "      install: none\n",
            format!("      install: helm\n      chart: {{ path: {kueue_archive} }}\n"),
        ),
        (
            "    namespace: nvidia-network-operator\n    install: helm\n",
            format!(
                "    namespace: nvidia-network-operator\n    install: helm\n    chart: {{ path: {network} }}\n"
            ),
        ),
    ];
    let mut out = text.clone();
    for (from, to) in edits {
        assert_eq!(
            out.matches(from).count(),
            1,
            "the example has `{from}` once"
        );
        out = out.replace(from, &to);
    }
    let path = dir.join("dgx-h100-training.yaml");
    std::fs::write(&path, out).unwrap();
    path
}

/// The plan's release steps by stack (`gpu-operator` is the operator's own `helm_release`).
fn release_actions(p: &Value) -> Vec<(String, String)> {
    let mut out = vec![(
        "gpu-operator".to_string(),
        p["helm_release"]["action"]
            .as_str()
            .unwrap_or("?")
            .to_string(),
    )];
    for r in p["releases"].as_array().unwrap() {
        out.push((
            r["release"]["stack"].as_str().unwrap().to_string(),
            r["plan"]["action"].as_str().unwrap_or("?").to_string(),
        ));
    }
    out
}

/// `helm list -A -o json` with the harness's helm: `(namespace, name, chart, status)`.
fn helm_list(helm: &str, kubeconfig: &str) -> Vec<(String, String, String, String)> {
    let o = Command::new(helm)
        .args(["list", "-A", "-o", "json", "--kubeconfig", kubeconfig])
        .output()
        .unwrap();
    assert!(o.status.success(), "helm list: {}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut out: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (s("namespace"), s("name"), s("chart"), s("status"))
        })
        .collect();
    out.sort();
    out
}

/// The field manager that created CRD `name` (`helm` when a chart's `crds/` installed it).
async fn crd_creator(client: &kube::Client, name: &str) -> String {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("CRD {name}: {e}"));
    let fields = crd.metadata.managed_fields.unwrap_or_default();
    fields
        .first()
        .and_then(|f| f.manager.clone())
        .unwrap_or_default()
}

/// The position of the first apply event (NDJSON, `-o json`) that `matches`.
fn event_at(events: &[Value], what: &str, matches: impl Fn(&Value) -> bool) -> usize {
    events
        .iter()
        .position(matches)
        .unwrap_or_else(|| panic!("apply reported no {what}: {events:#?}"))
}

fn note_has(e: &Value, needle: &str) -> bool {
    e["event"] == "note" && e["message"].as_str().is_some_and(|m| m.contains(needle))
}

fn step_of(e: &Value, kind: &str) -> bool {
    e["event"] == "step"
        && e["object"]
            .as_str()
            .is_some_and(|o| o.starts_with(&format!("{kind}/")))
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dgx_example_installs_network_operator_kueue_and_gpu_operator_releases() {
    let Some(_shared) = TestCluster::connect("releases_cluster").await else {
        return;
    };
    let fresh = FreshCluster::up_with(
        "releases",
        &[
            "--without-kueue",
            "--without-crds",
            "network-operator,gpu-operator",
        ],
    );
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "releases")
        .await
        .expect("connects to the fresh cluster");
    let helm = fresh.var("GPUCTL_HELM");
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(&helm)
        .args(["package", &fresh.var("GPUCTL_KUEUE_CHART"), "-d"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "helm package: {}", text(&o));
    let kueue_chart = gpuctl_core::profiles::Catalog::embedded()
        .queueing()
        .kueue_configuration
        .chart("v0.19.2")
        .expect("profiles/queueing.yaml has Kueue v0.19.2's chart")
        .version
        .clone();
    let bp = dgx_blueprint(dir.path(), &format!("kueue-{kueue_chart}.tgz"));
    let path = helm_path(dir.path(), &helm, Hooks::Skip);
    let bps = bp.to_str().unwrap().to_string();
    let kcs = kc.to_str().unwrap().to_string();

    // Before: three installs; the kinds the charts bring are created after their CRDs.
    let (o, p) = plan_json(&["plan", &bps, "--kubeconfig", &kcs, "-o", "json"], &path);
    assert_eq!(o.status.code(), Some(0), "first plan: {}", text(&o));
    assert_eq!(
        release_actions(&p),
        [
            ("gpu-operator".to_string(), "install".to_string()),
            ("network-operator".to_string(), "install".to_string()),
            ("kueue".to_string(), "install".to_string()),
        ],
        "{}",
        p["releases"]
    );
    let pinned: Vec<(String, String)> = std::iter::once(&p["helm"])
        .chain(
            p["releases"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| &r["release"]),
        )
        .map(|r| {
            (
                r["release"].as_str().unwrap().to_string(),
                r["version"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let network_chart = gpuctl_core::profiles::Catalog::embedded()
        .network()
        .network_operator
        .release("v26.4.1")
        .and_then(|r| r.chart.as_ref())
        .expect("profiles/network.yaml has the v26.4.1 chart")
        .version
        .clone();
    assert_eq!(
        pinned,
        [
            ("gpu-operator".to_string(), "v26.7.0".to_string()),
            ("network-operator".to_string(), network_chart.clone()),
            ("kueue".to_string(), kueue_chart.clone()),
        ]
    );
    for kind in ["NVIDIADriver", "NicClusterPolicy", "ClusterQueue"] {
        let actions: Vec<&Value> = p["actions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["kind"] == kind)
            .collect();
        assert!(!actions.is_empty(), "the example renders {kind}");
        assert!(
            actions.iter().all(|a| a["action"] == "create-after-crd"),
            "{kind} waits for its release's CRD: {actions:?}"
        );
    }

    // Apply, while the stand-in plays Kueue's chart Deployment.
    let pod = tokio::spawn(support::releases::kueue_pod(
        tc.client.clone(),
        fresh.var("GPUCTL_KUEUE"),
        kc.clone(),
        dir.path().to_path_buf(),
    ));
    let started = Instant::now();
    let apply: Vec<String> = [
        "apply",
        &bps,
        "--kubeconfig",
        &kcs,
        "--yes",
        "-o",
        "json",
        "--crd-timeout",
        "90s",
        "--wait-timeout",
        "120s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let o = tokio::task::spawn_blocking({
        let (apply, path) = (apply.clone(), path.clone());
        move || gpuctl(&apply.iter().map(String::as_str).collect::<Vec<_>>(), &path)
    })
    .await
    .unwrap();
    let _pod = pod.await.expect("the Kueue stand-in started");
    assert_eq!(o.status.code(), Some(0), "apply: {}", text(&o));
    eprintln!(
        "apply of the DGX example with three releases: {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let events: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();

    // The order: the GPU Operator's and the Network Operator's releases before the operator phase
    // (NVIDIADriver CRs with the RDMA settings, the NicClusterPolicy); Kueue's before any queue.
    let gpu_release = event_at(&events, "GPU Operator release", |e| {
        note_has(e, "helm release gpu-operator/gpu-operator installed")
    });
    let network_release = event_at(&events, "Network Operator release", |e| {
        note_has(
            e,
            &format!("helm release {NETWORK_NS}/network-operator installed"),
        )
    });
    let kueue_release = event_at(&events, "Kueue release", |e| {
        note_has(e, "helm release kueue-system/kueue installed")
    });
    let driver = event_at(&events, "NVIDIADriver step", |e| step_of(e, "NVIDIADriver"));
    let policy = event_at(&events, "NicClusterPolicy step", |e| {
        step_of(e, "NicClusterPolicy")
    });
    let queue = event_at(&events, "queue step", |e| {
        ["ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue"]
            .iter()
            .any(|k| step_of(e, k))
    });
    assert!(
        gpu_release < network_release && network_release < driver.min(policy),
        "GPU Operator release ({gpu_release}), Network Operator release ({network_release}), then the operator phase (NVIDIADriver {driver}, NicClusterPolicy {policy})"
    );
    assert!(
        kueue_release < queue,
        "Kueue release ({kueue_release}) before the first queue object ({queue})"
    );
    // Exactly what was installed, per release.
    for (i, want) in [
        (
            gpu_release,
            "helm release gpu-operator/gpu-operator installed: chart gpu-operator v26.7.0",
        ),
        (
            network_release,
            &*format!(
                "helm release {NETWORK_NS}/network-operator installed: chart network-operator {network_chart}"
            ),
        ),
        (
            kueue_release,
            &*format!("helm release kueue-system/kueue installed: chart kueue {kueue_chart}"),
        ),
    ] {
        let message = events[i]["message"].as_str().unwrap();
        assert!(
            message.starts_with(want) && message.ends_with(", revision 1"),
            "{message}"
        );
    }
    // Each release's CRDs were created by helm from the chart, not by the harness.
    for crd in [
        "nvidiadrivers.nvidia.com",
        "nicclusterpolicies.mellanox.com",
        "clusterqueues.kueue.x-k8s.io",
    ] {
        assert_eq!(crd_creator(&tc.client, crd).await, "helm", "{crd}");
    }
    assert_eq!(
        support::releases::helm_log(dir.path())
            .iter()
            .filter(|l| l.starts_with("upgrade --install"))
            .map(|l| l.split(' ').nth(2).unwrap_or_default().to_string())
            .collect::<Vec<_>>(),
        ["gpu-operator", "network-operator", "kueue"],
        "helm ran once per release, in dependency order"
    );

    // helm list: all three deployed at the pinned chart versions.
    assert_eq!(
        helm_list(&helm, &kcs),
        [
            (
                "gpu-operator".to_string(),
                "gpu-operator".to_string(),
                "gpu-operator-v26.7.0".to_string(),
                "deployed".to_string()
            ),
            (
                "kueue-system".to_string(),
                "kueue".to_string(),
                format!("kueue-{kueue_chart}"),
                "deployed".to_string()
            ),
            (
                NETWORK_NS.to_string(),
                "network-operator".to_string(),
                format!("network-operator-{network_chart}"),
                "deployed".to_string()
            ),
        ]
    );
    // The real chart's templates ran with gpuctl's values: the GPU Operator's NFD serves both, so
    // the Network Operator's own NFD subchart is off, and its NodeFeatureRule is deployed.
    let rules: Api<DynamicObject> = Api::all_with(
        tc.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("nfd.k8s-sigs.io", "v1alpha1", "NodeFeatureRule"),
            "nodefeaturerules",
        ),
    );
    assert!(rules.get_opt("nvidia-nics-rules").await.unwrap().is_some());

    // The next plan is empty.
    let plan_args = [
        "plan",
        &bps,
        "--kubeconfig",
        &kcs,
        "-o",
        "json",
        "--detailed-exitcode",
    ];
    let (o, p) = plan_json(&plan_args, &path);
    assert_eq!(o.status.code(), Some(0), "plan after apply: {}", text(&o));
    assert!(
        release_actions(&p).iter().all(|(_, a)| a == "no-op"),
        "{:?}",
        release_actions(&p)
    );

    // One Network Operator value changes: the plan is an upgrade of exactly that value.
    let changed = std::fs::read_to_string(&bp).unwrap().replace(
        "    devicePlugin: { kind: rdma-shared,",
        "    values: { nfd: { deployNodeFeatureRules: false } }\n    devicePlugin: { kind: rdma-shared,",
    );
    std::fs::write(&bp, changed).unwrap();
    let (o, p) = plan_json(&plan_args, &path);
    assert_eq!(
        o.status.code(),
        Some(2),
        "plan of a value change: {}",
        text(&o)
    );
    assert_eq!(
        release_actions(&p),
        [
            ("gpu-operator".to_string(), "no-op".to_string()),
            ("network-operator".to_string(), "upgrade".to_string()),
            ("kueue".to_string(), "no-op".to_string()),
        ]
    );
    let step = &p["releases"][0]["plan"];
    assert_eq!(
        step["changes"],
        serde_json::json!([{"path": "nfd.deployNodeFeatureRules", "before": true, "after": false}]),
        "{step}"
    );
    assert!(
        p["actions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["action"] == "no-op"),
        "only the release changes"
    );
    let o = gpuctl(&apply.iter().map(String::as_str).collect::<Vec<_>>(), &path);
    assert_eq!(
        o.status.code(),
        Some(0),
        "apply of the change: {}",
        text(&o)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(&format!(
            "helm release {NETWORK_NS}/network-operator upgraded: chart network-operator {network_chart}"
        )) && out.contains(", revision 2"),
        "{out}"
    );
    assert_eq!(
        revisions(&tc.client, NETWORK_NS, "network-operator").await,
        2
    );
    assert_eq!(
        revisions(&tc.client, "gpu-operator", "gpu-operator").await,
        1
    );
    assert_eq!(revisions(&tc.client, "kueue-system", "kueue").await, 1);
    // The chart acted on it: the rule is gone with revision 2.
    assert!(rules.get_opt("nvidia-nics-rules").await.unwrap().is_none());
    let (o, _) = plan_json(&plan_args, &path);
    assert_eq!(
        o.status.code(),
        Some(0),
        "plan after the upgrade: {}",
        text(&o)
    );

    network_operator_removal(&tc, &helm, &bp, &bps, &kcs, &path, &apply, &network_chart).await;
}

/// Issue 30's removal done-means: with the Network Operator dropped from the blueprint, the plan
/// uninstalls its release, blocked by the NicClusterPolicy; apply is refused (exit 1, the policy
/// named, nothing changed); with the policy deleted, apply uninstalls the release with the real
/// helm, `helm list` no longer has it, its CRDs stay, and the next plan is empty.
#[allow(clippy::too_many_arguments)]
async fn network_operator_removal(
    tc: &TestCluster,
    helm: &str,
    bp: &Path,
    bps: &str,
    kcs: &str,
    path: &str,
    apply: &[String],
    network_chart: &str,
) {
    let text_before = std::fs::read_to_string(bp).unwrap();
    let start = text_before
        .find("  networkOperator:\n")
        .expect("the blueprint has networkOperator");
    let end = text_before
        .find("  monitoring:\n")
        .expect("monitoring follows networkOperator in the example");
    std::fs::write(
        bp,
        format!("{}{}", &text_before[..start], &text_before[end..]),
    )
    .unwrap();
    let (o, p) = plan_json(&["plan", bps, "--kubeconfig", kcs, "-o", "json"], path);
    assert_eq!(
        o.status.code(),
        Some(0),
        "plan without the Network Operator: {}",
        text(&o)
    );
    let u = &p["uninstalls"][0];
    assert_eq!(u["release"], "network-operator", "{p}");
    assert_eq!(u["namespace"], NETWORK_NS);
    assert!(
        u["reason"]
            .as_str()
            .unwrap()
            .contains("no longer declares spec.networkOperator"),
        "{u}"
    );
    let policies: Api<DynamicObject> = Api::all_with(
        tc.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("mellanox.com", "v1alpha1", "NicClusterPolicy"),
            "nicclusterpolicies",
        ),
    );
    let names: Vec<String> = policies
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    assert!(!names.is_empty(), "apply created the NicClusterPolicy");
    let blockers: Vec<&str> = u["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in &names {
        let id = format!("NicClusterPolicy/{name}");
        assert!(blockers.contains(&id.as_str()), "{id} blocks: {blockers:?}");
    }

    // Refused while the policy exists: exit 1, the policy named, the release untouched.
    let apply: Vec<&str> = apply.iter().map(String::as_str).collect();
    let o = gpuctl(&apply, path);
    assert_eq!(
        o.status.code(),
        Some(1),
        "apply while a NicClusterPolicy exists: {}",
        text(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nothing was applied")
            && err.contains("is not uninstalled while objects of its kinds exist")
            && err.contains(&names[0])
            && err.contains("--force-uninstall"),
        "{err}"
    );
    assert_eq!(
        revisions(&tc.client, NETWORK_NS, "network-operator").await,
        2
    );
    assert!(policies.get_opt(&names[0]).await.unwrap().is_some());

    // The policy deleted (no Network Operator controller runs here, so nothing holds it): apply
    // uninstalls the release with the real helm; its CRDs stay.
    for name in &names {
        policies.delete(name, &Default::default()).await.unwrap();
    }
    let k = gpuctl_cluster::connect(&gpuctl_cluster::ConnectOptions {
        kubeconfig: Some(kcs.into()),
        context: None,
    })
    .await
    .unwrap();
    let groups = ["mellanox.com".to_string(), "nv-ipam.nvidia.com".to_string()];
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    while !gpuctl_cluster::release::objects_in_groups(&k, &groups)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(Instant::now() < deadline, "network objects stay");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let o = gpuctl(&apply, path);
    assert_eq!(
        o.status.code(),
        Some(0),
        "apply once the policy is gone: {}",
        text(&o)
    );
    // `-o json`: the report is on stdout, one event per line.
    let out = text(&o);
    assert!(
        out.contains(&format!(
            "helm release {NETWORK_NS}/network-operator (network-operator {network_chart}) uninstalled; its CRDs stay"
        )),
        "{out}"
    );
    assert!(
        !helm_list(helm, kcs)
            .iter()
            .any(|(_, name, _, _)| name == "network-operator"),
        "helm list still has the Network Operator"
    );
    assert_eq!(
        revisions(&tc.client, NETWORK_NS, "network-operator").await,
        0
    );
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(tc.client.clone());
    assert!(
        crds.get_opt("nicclusterpolicies.mellanox.com")
            .await
            .unwrap()
            .is_some(),
        "the NicClusterPolicy CRD was deleted"
    );
    let o = gpuctl(
        &["plan", bps, "--kubeconfig", kcs, "--detailed-exitcode"],
        path,
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "plan after the uninstall: {}",
        text(&o)
    );
}
