//! Volcano installed from its own chart by `gpuctl apply` (`scheduling.volcano.install: helm`), with
//! the real helm and the real Volcano v1.15.1 chart (the one in Volcano's Go module, which the
//! harness keeps beside the webhook-manager it builds from that module), into a fresh harness
//! started **without** Volcano (`run up --without-volcano`: no Volcano CRDs, webhook configurations
//! or webhook-manager), so the chart's CRDs and webhook configurations are the only ones and no
//! other test shares them.
//!
//! Asserted: the plan installs the release and creates the queue after its CRD; apply installs the
//! release (`helm list` shows `volcano` at chart 1.15.1, the CRDs listed in `profiles/queueing.yaml`
//! created by helm) and only then creates the queue, through the chart's own admission webhooks; the
//! next plan is empty and a second apply runs no helm; a change of `scheduling.volcano.values`
//! plans as an upgrade of exactly that value and apply makes revision 2; dropping Volcano from the
//! blueprint plans the uninstall, which apply refuses (exit 1, nothing changed) while the queue
//! exists, and, once it is deleted, runs with the real helm: the release is gone, its CRDs stay
//! (gpuctl marks the chart's templated CRDs `helm.sh/resource-policy: keep`), Volcano's own
//! `default` queue did not block it, and the next plan is empty.
//!
//! Stand-ins, stated plainly: no kubelet runs the chart's Deployments (admission, controllers,
//! scheduler) or its pre-install/pre-upgrade hook Job `volcano-admission-init`, so helm runs behind
//! the `--no-hooks` wrapper ([`Hooks::Skip`]) and the test plays the admission pod: it makes the
//! certificate Secret the hook Job would (`openssl`), mounts its volumes as files, starts the
//! harness's webhook-manager (the same v1.15.1) with the Deployment's own container args (paths,
//! listen address and kubeconfig changed), which puts its CA into the chart's webhook
//! configurations as in a cluster, and gives the chart's Service a ready EndpointSlice, as the
//! endpoint controller does for a ready pod. Volcano's controllers do not run, so the test creates
//! the `default` queue they would.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster};
use support::fresh::FreshCluster;
use support::releases::{Hooks, VOLCANO_NS, gpuctl, plan_json, text, volcano_pod};

const BLUEPRINT: &str = r#"apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: "@P@"
spec:
  kubernetes:
    version: "1.35.1"
  gpuOperator:
    version: v26.7.0
    namespace: "@P@-gpu-operator"
    install: none
    driver:
      version: "595.91.07"
      kernelModuleType: open
  nodePools:
    - name: "@P@-h100"
      role: training
      selector: { gpuctl.dev/pool: "@P@-h100" }
      nodes: 1
      gpu: { model: H100-SXM5-80GB, count: 8 }
  scheduling:
    queueing: volcano
    volcano:
      version: v1.15.1
      install: helm
      chart: { path: volcano-1.15.1.tgz }
      values: { custom: { scheduler_replicas: 1 } }
      queues:
        - { name: "@P@-q", parent: root, weight: 2, capability: { nvidia.com/gpu: 8 } }
  tenants:
    - name: "@P@-t"
      namespaces: ["@P@-ns"]
      queue: "@P@-q"
      quota: { nvidia.com/gpu: 8, pods: 20 }
"#;

/// Revisions of the Volcano release in Helm's storage.
async fn revisions(client: &kube::Client) -> usize {
    support::releases::revisions(client, VOLCANO_NS, "volcano").await
}

fn queues(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "Queue"),
            "queues",
        ),
    )
}

/// `helm list -A` as JSON.
fn helm_list(helm: &str, kcs: &str) -> Value {
    let o = Command::new(helm)
        .args(["list", "-A", "-a", "--kubeconfig", kcs, "-o", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "helm list: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The test's blueprint without Volcano: no queueing, the tenant without a queue.
fn without_volcano(text: &str, prefix: &str) -> String {
    let start = text.find("  scheduling:\n").unwrap();
    let end = text.find("  tenants:\n").unwrap();
    format!("{}{}", &text[..start], &text[end..])
        .replace(&format!("      queue: \"{prefix}-q\"\n"), "")
}

/// `plan -o json --detailed-exitcode`, its exit code and JSON.
fn plan(bps: &str, kcs: &str, path: &str) -> (Option<i32>, Value, String) {
    let (o, p) = plan_json(
        &[
            "plan",
            bps,
            "--kubeconfig",
            kcs,
            "-o",
            "json",
            "--detailed-exitcode",
        ],
        path,
    );
    (o.status.code(), p, text(&o))
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcano_is_installed_from_its_chart_upgraded_by_its_values_and_uninstalled_once_its_queues_are_gone()
 {
    let Some(_shared) = TestCluster::connect("volcano_release").await else {
        return;
    };
    let fresh = FreshCluster::up_with("volcano-release", &["--without-volcano"]);
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "volcano-release")
        .await
        .expect("connects to the fresh cluster");
    let helm = fresh.var("GPUCTL_HELM");
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(&helm)
        .args(["package", &fresh.var("GPUCTL_VOLCANO_CHART"), "-d"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "helm package: {}", text(&o));
    assert!(dir.path().join("volcano-1.15.1.tgz").is_file());
    let path = support::releases::helm_path(dir.path(), &helm, Hooks::Skip);
    let mut prefix = tc.prefix.clone();
    prefix.truncate(30);
    let prefix = prefix.trim_end_matches('-').to_string();
    let blueprint = BLUEPRINT.replace("@P@", &prefix);
    let bp = dir.path().join("volcano.yaml");
    std::fs::write(&bp, &blueprint).unwrap();
    let (bps, kcs) = (bp.to_str().unwrap(), kc.to_str().unwrap());
    tc.create_gpu_node(
        "h100-0",
        &GpuNode::h100(8)
            .driver("595.91.07", (13, 2))
            .label("gpuctl.dev/pool", &format!("{prefix}-h100")),
    )
    .await
    .unwrap();
    let apply: Vec<&str> = vec![
        "apply",
        bps,
        "--kubeconfig",
        kcs,
        "--yes",
        "--crd-timeout",
        "60s",
        "--wait-timeout",
        "60s",
    ];
    let queue = format!("Queue/{prefix}-q");

    // Before: the plan installs Volcano, and the queue waits for its CRD.
    let (code, p, out) = plan(bps, kcs, &path);
    assert_eq!(code, Some(2), "{out}");
    let step = &p["releases"][0];
    assert_eq!(step["release"]["stack"], "volcano", "{p}");
    assert_eq!(step["release"]["version"], "1.15.1", "{p}");
    assert_eq!(step["plan"]["action"], "install", "{step}");
    assert!(
        p["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "Queue" && a["action"] == "create-after-crd"),
        "the queue waits for Volcano's CRDs: {p}"
    );

    // Apply while the stand-in plays the admission pod: the release first, then the queue.
    let started = Instant::now();
    let pod = tokio::spawn(volcano_pod(
        tc.client.clone(),
        fresh.var("GPUCTL_VOLCANO_WEBHOOK_MANAGER"),
        kc.clone(),
        dir.path().to_path_buf(),
    ));
    let o = tokio::task::spawn_blocking({
        let (apply, path) = (
            apply.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            path.clone(),
        );
        move || gpuctl(&apply.iter().map(String::as_str).collect::<Vec<_>>(), &path)
    })
    .await
    .unwrap();
    let _pod = pod.await.expect("the Volcano admission stand-in started");
    assert_eq!(o.status.code(), Some(0), "apply: {}", text(&o));
    eprintln!(
        "apply with the Volcano release: {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let installed = err
        .find("helm release volcano-system/volcano installed: chart volcano 1.15.1 from ")
        .unwrap_or_else(|| panic!("{err}"));
    assert!(err.contains(", revision 1"), "{err}");
    let created = err
        .find(&format!("created   {queue}"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(installed < created, "the queue before the release: {err}");
    assert_eq!(revisions(&tc.client).await, 1);
    let listed = helm_list(&helm, kcs);
    let release = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "volcano")
        .unwrap_or_else(|| panic!("helm list has no volcano: {listed}"));
    assert_eq!(release["namespace"], VOLCANO_NS);
    assert_eq!(release["chart"], "volcano-1.15.1");
    assert_eq!(release["status"], "deployed");
    // Every CRD the facts list, created by helm (its field manager).
    let facts = &gpuctl_core::profiles::Catalog::embedded()
        .queueing()
        .volcano_release;
    let crd_names = facts.chart_of("v1.15.1").unwrap().crds.clone();
    let crds: Api<CustomResourceDefinition> = Api::all(tc.client.clone());
    for name in &crd_names {
        let crd = crds.get(name).await.unwrap();
        let managers: Vec<String> = crd
            .metadata
            .managed_fields
            .unwrap_or_default()
            .iter()
            .filter_map(|m| m.manager.clone())
            .collect();
        assert!(managers.iter().any(|m| m == "helm"), "{name}: {managers:?}");
    }
    // The queue went through the chart's webhooks: its mutating webhook filled in what the queue
    // does not say.
    let q = queues(&tc.client)
        .get(&format!("{prefix}-q"))
        .await
        .unwrap();
    assert_eq!(q.data["spec"]["weight"], 2);
    assert_eq!(q.data["spec"]["reclaimable"], true, "{:?}", q.data);
    // ... and its validating webhook is the chart's, answered by the stand-in.
    let refused = queues(&tc.client)
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue", "metadata": {"name": format!("{prefix}-bad")},
                "spec": {"weight": 1, "guarantee": {"resource": {"cpu": "4"}}, "deserved": {"cpu": "2"}}}))
            .unwrap(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("validatequeue.volcano.sh"), "{refused}");

    // The next plan is empty; a second apply runs no helm.
    let (code, p, out) = plan(bps, kcs, &path);
    assert_eq!(code, Some(0), "plan after apply: {out}");
    assert_eq!(p["releases"][0]["plan"]["action"], "no-op", "{p}");
    let o = gpuctl(&apply, &path);
    assert_eq!(o.status.code(), Some(0), "second apply: {}", text(&o));
    assert_eq!(
        revisions(&tc.client).await,
        1,
        "helm ran for an unchanged release"
    );

    // A values change: an upgrade of exactly that value, then revision 2 holds it.
    std::fs::write(
        &bp,
        blueprint.replace("scheduler_replicas: 1", "scheduler_replicas: 2"),
    )
    .unwrap();
    let (code, p, out) = plan(bps, kcs, &path);
    assert_eq!(code, Some(2), "plan of a values change: {out}");
    let step = &p["releases"][0]["plan"];
    assert_eq!(step["action"], "upgrade", "{step}");
    let changes: Vec<(&str, &Value)> = step["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["path"].as_str().unwrap(), &c["after"]))
        .collect();
    assert_eq!(
        changes,
        [("custom.scheduler_replicas", &json!(2))],
        "{step}"
    );
    assert_eq!(p["summary"]["helm"], 1);
    assert!(
        p["actions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["action"] == "no-op"),
        "only the release changes: {p}"
    );
    let o = gpuctl(&apply, &path);
    assert_eq!(
        o.status.code(),
        Some(0),
        "apply of the change: {}",
        text(&o)
    );
    assert_eq!(revisions(&tc.client).await, 2);
    let o = Command::new(&helm)
        .args([
            "get",
            "values",
            "volcano",
            "-n",
            VOLCANO_NS,
            "--kubeconfig",
            kcs,
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    let values: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(values, json!({"custom": {"scheduler_replicas": 2}}));

    // Volcano's controllers would have made the `default` queue: it never blocks the uninstall.
    queues(&tc.client)
        .create(
            &Default::default(),
            &serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue", "metadata": {"name": "default"},
                "spec": {"weight": 1, "reclaimable": true}}))
            .unwrap(),
        )
        .await
        .unwrap();

    // Volcano dropped from the blueprint: the plan uninstalls the release, blocked by the queue.
    std::fs::write(&bp, without_volcano(&blueprint, &prefix)).unwrap();
    let (code, p, out) = plan(bps, kcs, &path);
    assert_eq!(code, Some(2), "plan without Volcano: {out}");
    let u = &p["uninstalls"][0];
    assert_eq!(
        (u["release"].as_str(), u["namespace"].as_str()),
        (Some("volcano"), Some(VOLCANO_NS)),
        "{p}"
    );
    assert!(
        u["reason"]
            .as_str()
            .unwrap()
            .contains("no longer declares spec.scheduling.volcano"),
        "{u}"
    );
    let blockers: Vec<&str> = u["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert_eq!(
        blockers,
        [queue.as_str()],
        "Volcano's own default queue does not block"
    );

    // Refused while the queue exists: exit 1, the queue named, nothing changed.
    let o = gpuctl(&apply, &path);
    assert_eq!(
        o.status.code(),
        Some(1),
        "apply while the queue exists: {}",
        text(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nothing was applied")
            && err.contains("is not uninstalled while objects of its kinds exist")
            && err.contains(&queue)
            && err.contains("--force-uninstall"),
        "{err}"
    );
    assert!(
        queues(&tc.client)
            .get_opt(&format!("{prefix}-q"))
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(revisions(&tc.client).await, 2, "the release was touched");

    // The queue deleted (Volcano's webhook lets a leaf queue go): apply uninstalls the release.
    queues(&tc.client)
        .delete(&format!("{prefix}-q"), &Default::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while queues(&tc.client)
        .get_opt(&format!("{prefix}-q"))
        .await
        .unwrap()
        .is_some()
    {
        assert!(Instant::now() < deadline, "the queue stays");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let o = gpuctl(&apply, &path);
    assert_eq!(
        o.status.code(),
        Some(0),
        "apply once the queue is gone: {}",
        text(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "helm release volcano-system/volcano (volcano 1.15.1) uninstalled; its CRDs stay"
        ),
        "{err}"
    );
    assert!(
        err.contains("helm.sh/resource-policy: keep set on CRD(s)")
            && err.contains("queues.scheduling.volcano.sh"),
        "{err}"
    );
    let listed = helm_list(&helm, kcs);
    assert!(
        !listed
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "volcano"),
        "helm list still has volcano: {listed}"
    );
    assert_eq!(revisions(&tc.client).await, 0);
    for name in &crd_names {
        assert!(
            crds.get_opt(name).await.unwrap().is_some(),
            "CRD {name} was deleted"
        );
    }
    assert!(
        queues(&tc.client)
            .get_opt("default")
            .await
            .unwrap()
            .is_some()
    );
    let o = gpuctl(
        &["plan", bps, "--kubeconfig", kcs, "--detailed-exitcode"],
        &path,
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "plan after the uninstall: {}",
        text(&o)
    );
}
