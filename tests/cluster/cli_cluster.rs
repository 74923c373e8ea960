//! The real `gpuctl` binary against the harness: apply an example blueprint (installing the real
//! GPU Operator chart with the real helm), plan again (exit 0), edit it (exit 2 and exactly the
//! expected action), change a chart value (an upgrade of exactly that value), apply a saved plan,
//! kill an apply mid-way and re-run it, and plan from a snapshot. One test function: the example's
//! object names are fixed, so its steps must not run in parallel with each other.
//!
//! Real parts: kube-apiserver with the upstream CRDs (the Prometheus Operator's included), helm
//! v3.22.0 built from its Go module by the harness (`GPUCTL_HELM`), the GPU Operator v26.7.0 chart
//! archive and the NVIDIA Network Operator v26.4.1 chart archive from ../shared/upstream, named by
//! the blueprint's `gpuOperator.chart.path` and `networkOperator.chart.path`.
//! Stand-ins, stated plainly: MIG Manager does not run here, so a small task plays its part and
//! reports `nvidia.com/mig.config.state=success` once a node's `nvidia.com/mig.config` label is
//! set, as MIG Manager does after reconfiguring. **Hooks are skipped**: no kubelet runs Jobs, so
//! the `helm` on the PATH is the real helm behind a wrapper that adds `--no-hooks` to install and
//! upgrade (`support::releases::Hooks::Skip`), or helm would wait for the Network Operator's
//! `network-operator-keep-ncp` Job (rendered always) until it times out; the GPU Operator's
//! pre-upgrade CRD hook Job is also turned off in its values (`operator.upgradeCRD: false`).

use crate::support;

use std::process::{Command, Output, Stdio};

use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use serde_json::Value;
use support::cluster::{GpuNode, TestCluster};
use support::gpuctl::{Gpuctl, TODAY};

const BLUEPRINT: &str = "blueprints/dgx-h100-training.yaml";

fn gpuctl(args: &[&str]) -> Output {
    gpuctl_with(args, &[])
}

fn gpuctl_with(args: &[&str], env: &[(&str, String)]) -> Output {
    Gpuctl::new(args)
        .today(TODAY)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
}

/// A PATH whose `helm` is the real helm the harness built, skipping chart hooks.
fn helm_env(dir: &std::path::Path) -> Vec<(&'static str, String)> {
    let helm = std::env::var("GPUCTL_HELM").expect(
        "the harness env names its helm (GPUCTL_HELM); restart it with tools/kube-harness/run up",
    );
    vec![(
        "PATH",
        support::releases::helm_path(dir, &helm, support::releases::Hooks::Skip),
    )]
}

/// The example blueprint next to a copy of the real chart archive, installed from it.
fn local_example(dir: &std::path::Path) -> std::path::PathBuf {
    let archive = support::releases::gpu_operator_archive(dir);
    let text = std::fs::read_to_string(BLUEPRINT).unwrap();
    // The GPU Operator's `install: helm` (the first one; the Network Operator has its own).
    let local = text.replacen(
        "    install: helm\n",
        &format!(
            "    install: helm\n    chart: {{ path: {archive} }}\n    values: {{ operator: {{ upgradeCRD: false }} }}\n"
        ),
        1,
    );
    assert_ne!(local, text, "the example installs with helm");
    // The Network Operator's real chart archive, installed the same way.
    let network_archive = support::releases::network_operator_archive(dir);
    let network = "    namespace: nvidia-network-operator\n    install: helm\n";
    assert!(
        local.contains(network),
        "the example installs the Network Operator with helm"
    );
    let local = local.replace(
        network,
        &format!("{network}    chart: {{ path: {network_archive} }}\n"),
    );
    let path = dir.join("dgx-h100-training.yaml");
    std::fs::write(&path, local).unwrap();
    path
}

/// Revisions of the operator's release in Helm's storage (its Secrets).
async fn helm_revisions(tc: &TestCluster) -> usize {
    release_revisions(tc, "gpu-operator", "gpu-operator").await
}

/// Revisions of release `name` in `namespace`.
async fn release_revisions(tc: &TestCluster, namespace: &str, name: &str) -> usize {
    support::releases::revisions(&tc.client, namespace, name).await
}

const NETWORK_NS: &str = "nvidia-network-operator";

fn kubeconfig() -> String {
    std::env::var(support::cluster::KUBECONFIG_ENV).expect("checked by TestCluster::connect")
}

fn assert_code(o: &Output, code: i32, what: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{what}: stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn plan_json(args: &[&str]) -> (Output, Value) {
    let o = gpuctl(args);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o, v)
}

fn changed(plan: &Value) -> Vec<String> {
    plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] != "no-op")
        .map(|a| {
            format!(
                "{} {}/{}",
                a["action"].as_str().unwrap(),
                a["kind"].as_str().unwrap(),
                a["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_blueprint_apply_plan_edit_kill_and_snapshot() {
    let Some(tc) = TestCluster::connect("cli_cycle").await else {
        return;
    };
    let kc = kubeconfig();
    for i in 0..2 {
        tc.create_gpu_node(
            &format!("infer{i}"),
            &GpuNode::h100(8)
                .driver("580.173.02", (13, 0))
                .label("node.kubernetes.io/instance-type", "dgx-h100")
                .label("gpuctl.dev/pool", "h100-infer"),
        )
        .await
        .unwrap();
    }
    // The example's names are fixed: forget a Helm release an earlier run on this server left.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(tc.client.clone(), "gpu-operator");
    let _ = secrets
        .delete_collection(
            &kube::api::DeleteParams::default(),
            &ListParams::default().labels("owner=helm,name=gpu-operator"),
        )
        .await;
    let network_secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(tc.client.clone(), NETWORK_NS);
    let _ = network_secrets
        .delete_collection(
            &kube::api::DeleteParams::default(),
            &ListParams::default().labels("owner=helm,name=network-operator"),
        )
        .await;
    let mig =
        support::mig_manager::stand_in(tc.client.clone(), "gpuctl.dev/pool=h100-infer".into());
    let dir = tempfile::tempdir().unwrap();
    let common = ["--kubeconfig", &kc];
    let example = local_example(dir.path());
    let example = example.to_str().unwrap();

    // At a terminal, apply shows the plan and asks; any answer but `yes` changes nothing.
    let summary = || {
        let (o, plan) = plan_json(&[&["plan", example, "-o", "json"][..], &common[..]].concat());
        assert_code(&o, 0, "plan");
        plan["summary"].clone()
    };
    let before = summary();
    let o = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/pty-run"
        ))
        .args(["no", "Only 'yes' is accepted", support::gpuctl::BIN])
        .args(["apply", example, "--kubeconfig", &kc, "--no-helm"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("GPUCTL_TODAY", "2026-11-30")
        .output()
        .expect("python3 runs");
    assert_code(&o, 1, "apply answered `no`");
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.contains(&format!("Node/{}", tc.name("infer0")))
            && shown.contains("Apply these changes to https://127.0.0.1:")
            && shown.contains("Apply cancelled; nothing was changed."),
        "{shown}"
    );
    assert_eq!(summary(), before, "a cancelled apply changed the cluster");

    // Apply (the real helm installs the real chart archive), then a second plan finds nothing to
    // do: the plan reads the release helm stored and finds its values equal.
    let helm_env = helm_env(dir.path());
    let apply_args = [
        &[
            "apply",
            example,
            "--wait-timeout",
            "60s",
            "--crd-timeout",
            "30s",
        ][..],
        &common[..],
    ]
    .concat();
    let o = gpuctl_with(&apply_args, &helm_env);
    assert_code(&o, 0, "first apply");
    // helm installed revision 1 from the archive, into the cluster gpuctl used; and the Network
    // Operator's (stand-in) chart, with exactly the values gpuctl rendered.
    assert_eq!(helm_revisions(&tc).await, 1);
    assert_eq!(
        release_revisions(&tc, NETWORK_NS, "network-operator").await,
        1
    );
    let (_, rendered) = plan_json(&[&["plan", example, "-o", "json"][..], &common[..]].concat());
    let network = rendered["releases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["release"]["stack"] == "network-operator")
        .expect("the plan has the Network Operator's release step")
        .clone();
    assert_eq!(network["plan"]["action"], "no-op", "{network}");
    // The values helm stored for the release (`helm get values`) are exactly the rendered ones, and
    // the real chart's templates ran with them: the operator's Deployment is there, and the chart's
    // own NFD subchart is off (the GPU Operator's NFD serves both).
    let helm = std::env::var("GPUCTL_HELM").unwrap();
    let got = Command::new(&helm)
        .args([
            "get",
            "values",
            "network-operator",
            "-n",
            NETWORK_NS,
            "-o",
            "json",
            "--kubeconfig",
            kc.as_str(),
        ])
        .output()
        .unwrap();
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let given: Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(given, network["release"]["values"]);
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(tc.client.clone(), NETWORK_NS);
    let names: Vec<String> = deployments
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    assert_eq!(
        names,
        ["network-operator"],
        "no NFD of the Network Operator's own"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "helm release gpu-operator/gpu-operator installed: chart gpu-operator v26.7.0 from"
        ),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = gpuctl(&[&["plan", example, "--detailed-exitcode"][..], &common[..]].concat());
    assert_code(&o, 0, "plan after apply");
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("Operator release: unchanged. Network Operator release: unchanged."),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // A second apply leaves the unchanged release alone: no new helm revision.
    let o = gpuctl_with(&apply_args, &helm_env);
    assert_code(&o, 0, "second apply");
    assert_eq!(
        helm_revisions(&tc).await,
        1,
        "helm ran again for an unchanged release"
    );
    assert_eq!(
        release_revisions(&tc, NETWORK_NS, "network-operator").await,
        1,
        "helm ran again for the unchanged Network Operator release"
    );

    // A chart value changes: the plan is an upgrade of exactly that value, and apply makes
    // revision 2.
    let valued = std::fs::read_to_string(example).unwrap().replace(
        "values: { operator: { upgradeCRD: false } }",
        "values: { operator: { upgradeCRD: false, logging: { level: debug } } }",
    );
    let valued_path = dir.path().join("valued.yaml");
    std::fs::write(&valued_path, &valued).unwrap();
    let vp = valued_path.to_str().unwrap();
    let (o, p) = plan_json(
        &[
            &["plan", vp, "-o", "json", "--detailed-exitcode"][..],
            &common[..],
        ]
        .concat(),
    );
    assert_code(&o, 2, "plan of a values change");
    assert!(
        changed(&p).is_empty(),
        "no object changes: {:?}",
        changed(&p)
    );
    assert_eq!(
        p["helm_release"]["action"], "upgrade",
        "{}",
        p["helm_release"]
    );
    // The release's stored values have no `operator.logging` yet: exactly that subtree is added.
    assert_eq!(
        p["helm_release"]["changes"],
        serde_json::json!([{"path": "operator.logging", "after": {"level": "debug"}}]),
        "{}",
        p["helm_release"]
    );
    let o = gpuctl_with(
        &[&["apply", vp, "--wait-timeout", "60s"][..], &common[..]].concat(),
        &helm_env,
    );
    assert_code(&o, 0, "apply of a values change");
    assert_eq!(helm_revisions(&tc).await, 2);
    let o = gpuctl(&[&["plan", vp, "--detailed-exitcode"][..], &common[..]].concat());
    assert_code(&o, 0, "plan after the upgrade");
    let o = gpuctl_with(&apply_args, &helm_env);
    assert_code(&o, 0, "back to the example's values");
    assert_eq!(helm_revisions(&tc).await, 3);
    let nodes: Api<Node> = Api::all(tc.client.clone());
    let n = nodes.get(&tc.name("infer0")).await.unwrap();
    let labels = n.metadata.labels.unwrap();
    assert_eq!(
        labels
            .get("nvidia.com/mig.config.state")
            .map(String::as_str),
        Some("success")
    );
    assert!(labels.contains_key("nvidia.com/mig.config"));

    // An edit: one quota changes, so exactly one object updates and the exit code is 2.
    let text = std::fs::read_to_string(example).unwrap();
    // (Raised: below what team-a's queue admits, validation refuses it, GPU112.)
    let edited = text.replace(
        "quota: { nvidia.com/gpu: 80, pods: 200,",
        "quota: { nvidia.com/gpu: 96, pods: 200,",
    );
    assert_ne!(edited, text);
    let edited_path = dir.path().join("edited.yaml");
    std::fs::write(&edited_path, &edited).unwrap();
    let ep = edited_path.to_str().unwrap();
    let (o, plan) = plan_json(
        &[
            &["plan", ep, "--detailed-exitcode", "-o", "json"][..],
            &common[..],
        ]
        .concat(),
    );
    assert_code(&o, 2, "plan of an edit");
    assert_eq!(
        changed(&plan),
        vec!["update ResourceQuota/team-a-quota".to_string()]
    );

    // Save the plan and apply it; then nothing is left to do.
    let saved = dir.path().join("plan.json");
    let o = gpuctl(
        &[
            &["plan", ep, "--out", saved.to_str().unwrap()][..],
            &common[..],
        ]
        .concat(),
    );
    assert_code(&o, 0, "plan --out");
    let o = gpuctl(
        &[
            &["apply", saved.to_str().unwrap(), "--no-helm"][..],
            &common[..],
        ]
        .concat(),
    );
    assert_code(&o, 0, "apply saved plan");
    let o = gpuctl(&[&["plan", ep, "--detailed-exitcode"][..], &common[..]].concat());
    assert_code(&o, 0, "plan after applying the saved plan");
    // Applying the same saved plan again is refused: the quota moved since it was made.
    let o = gpuctl(
        &[
            &["apply", saved.to_str().unwrap(), "--no-helm"][..],
            &common[..],
        ]
        .concat(),
    );
    assert_code(&o, 1, "stale saved plan");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("stale"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Kill an apply mid-way (SIGKILL after its first applied object), then re-run: it waits for
    // the killed run's apply lock to expire (nobody renews it) and converges.
    let bigger = text.replace(
        "namespaces: [dev-test]",
        "namespaces: [dev-test, dev-extra-1, dev-extra-2, dev-extra-3]",
    );
    let bigger_path = dir.path().join("bigger.yaml");
    std::fs::write(&bigger_path, &bigger).unwrap();
    let bp = bigger_path.to_str().unwrap();
    let mut child = Gpuctl::new([
        "apply",
        bp,
        "--no-helm",
        "--parallelism",
        "1",
        "--lock-duration",
        "3s",
        "--kubeconfig",
        &kc,
    ])
    .today(TODAY)
    .spawn(Stdio::null(), Stdio::piped());
    {
        use std::io::BufRead;
        let stderr = child.stderr.take().unwrap();
        for line in std::io::BufReader::new(stderr).lines() {
            if line.unwrap().trim_start().starts_with("created") {
                break;
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (o, mid) = plan_json(&[&["plan", bp, "-o", "json"][..], &common[..]].concat());
    assert_code(&o, 0, "plan after the kill");
    assert!(!changed(&mid).is_empty(), "the kill left work to do");
    let o = gpuctl(
        &[
            &[
                "apply",
                bp,
                "--no-helm",
                "--wait-timeout",
                "60s",
                "--lock-timeout",
                "60s",
            ][..],
            &common[..],
        ]
        .concat(),
    );
    assert_code(&o, 0, "re-run after the kill");
    let o = gpuctl(&[&["plan", bp, "--detailed-exitcode"][..], &common[..]].concat());
    assert_code(&o, 0, "converged after the kill");

    // A snapshot plans offline exactly like the live cluster.
    let snap = dir.path().join("snap.json");
    let o = gpuctl(
        &[
            &["snapshot", bp, "--out", snap.to_str().unwrap()][..],
            &common[..],
        ]
        .concat(),
    );
    assert_code(&o, 0, "snapshot");
    {
        // Issue 10: the snapshot holds the live Helm values unmasked, so it is owner-only.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&snap).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "snapshot file mode {mode:o}");
    }
    let o = gpuctl(&[
        "plan",
        bp,
        "--snapshot",
        snap.to_str().unwrap(),
        "--detailed-exitcode",
    ]);
    assert_code(&o, 0, "snapshot plan of a converged cluster");
    let (o, p) = plan_json(&[
        "plan",
        ep,
        "--snapshot",
        snap.to_str().unwrap(),
        "-o",
        "json",
        "--detailed-exitcode",
    ]);
    assert_code(&o, 2, "snapshot plan of an edit");
    assert!(
        changed(&p).contains(&"update ResourceQuota/team-a-quota".to_string()),
        "{:?}",
        changed(&p)
    );

    // Back to the example: the extra tenant namespaces' objects are pruned, the namespaces kept.
    let o = gpuctl(&[&["apply", example, "--no-helm"][..], &common[..]].concat());
    assert_code(&o, 0, "apply the original again");
    let (o, p) = plan_json(
        &[
            &["plan", example, "-o", "json", "--detailed-exitcode"][..],
            &common[..],
        ]
        .concat(),
    );
    assert_code(&o, 0, "plan after restoring");
    assert!(
        p["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["message"]
                .as_str()
                .unwrap()
                .contains("Namespace/dev-extra-1")),
        "{}",
        p["findings"]
    );
    mig.abort();
}
