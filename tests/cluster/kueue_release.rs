//! Kueue installed from its own chart by `gpuctl apply` (`scheduling.kueue.install: helm`), with the
//! real helm and the real Kueue v0.19.2 chart (the one in Kueue's Go module, which the harness keeps
//! beside its Kueue binary), into a fresh harness started **without** Kueue (`run up
//! --without-kueue`: no Kueue CRDs, webhook configurations or controller), so the chart's CRDs and
//! webhook configurations are the only ones and no other test shares them.
//!
//! Asserted: apply installs the release before the queues phase and then creates the queues through
//! the chart's own admission webhooks; the live `kueue-manager-config` ConfigMap holds exactly the
//! Configuration gpuctl rendered; a second plan finds the release up to date (and apply leaves it
//! alone); a configuration change plans as an upgrade of exactly that value and apply makes
//! revision 2; a snapshot carries the release and plans the same.
//!
//! Stand-in, stated plainly: no kubelet runs the chart's Deployment, so the test plays its pod: once
//! helm has created the manager ConfigMap, it starts the harness's Kueue binary (same v0.19.2) with
//! that Configuration, changed only where a pod and this machine differ (listen addresses and ports,
//! the certificate directory, metrics off, the leader-election namespace a pod reads from its
//! service account), and gives the chart's webhook Service a ready endpoint
//! (an EndpointSlice to that process, as the endpoint controller does for a ready pod), and plays
//! the kubelet's Secret volume: the pod mounts the webhook Secret at Kueue's certificate directory,
//! so the test copies the Secret's keys there. Kueue's own internal certificate management, as the
//! chart configures it, generates the certificate into that Secret and injects its CA into the
//! chart's webhook configurations and CRDs, exactly as in a cluster.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gpuctl_test_skip::needs_test_cluster;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster};
use support::fresh::FreshCluster;
use support::releases::{Hooks, NS, WEBHOOK_SERVICE, gpuctl, plan_json, text};

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
    queueing: kueue
    kueue:
      version: v0.19.2
      install: helm
      chart: { path: kueue-0.19.2.tgz }
      config:
        resources: { quotaCheckStrategy: BlockUndeclared }
      clusterQueues:
        - name: "@P@-cq"
          resources:
            - pool: "@P@-h100"
              quota: { nvidia.com/gpu: 8, cpu: "64", memory: 512Gi }
  tenants:
    - name: "@P@-t"
      namespaces: ["@P@-ns"]
      queue: "@P@-cq"
      quota: { nvidia.com/gpu: 8, pods: 20 }
"#;

/// Revisions of the Kueue release in Helm's storage.
async fn revisions(client: &kube::Client) -> usize {
    support::releases::revisions(client, NS, "kueue").await
}

/// The Configuration the blueprint renders (what the ConfigMap must hold).
fn rendered_config(bp: &Path) -> String {
    let loaded = gpuctl_core::blueprint::load_file(bp).expect("the test blueprint loads");
    let k = loaded.blueprint.spec.scheduling.kueue.clone().unwrap();
    let facts = &gpuctl_core::profiles::Catalog::embedded()
        .queueing()
        .kueue_configuration;
    gpuctl_core::render::kueue_config::values(&k.config, &[], facts)["managerConfig"]
        ["controllerManagerConfigYaml"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The live ConfigMap's Configuration is the rendered one, setting by setting. The chart parses
/// the value and writes it back (keys sorted), adding `internalCertManagement` (on, with its
/// Service and Secret names) when the Configuration has none (its
/// `templates/manager/manager-config.yaml`): that one addition is the chart's, and is checked too.
async fn assert_config(cms: &Api<ConfigMap>, bp: &Path) {
    let live = cms
        .get(support::releases::CONFIG_MAP)
        .await
        .unwrap()
        .data
        .unwrap()[support::releases::CONFIG_KEY]
        .clone();
    let live: Value = serde_saphyr::from_str(&live).unwrap();
    let rendered: Value = serde_saphyr::from_str(&rendered_config(bp)).unwrap();
    let (live, rendered) = (live.as_object().unwrap(), rendered.as_object().unwrap());
    for (k, v) in rendered {
        assert_eq!(
            live.get(k),
            Some(v),
            "setting `{k}` of the live Configuration"
        );
    }
    let extra: Vec<&String> = live.keys().filter(|k| !rendered.contains_key(*k)).collect();
    assert_eq!(
        extra,
        ["internalCertManagement"],
        "only the chart's addition"
    );
    assert_eq!(
        live["internalCertManagement"],
        json!({"enable": true, "webhookServiceName": WEBHOOK_SERVICE, "webhookSecretName": "kueue-webhook-server-cert"})
    );
}

/// What both tests start from: a fresh harness without Kueue, the real chart packaged as an
/// archive beside the blueprint (its digest is pinned by plans), a PATH whose `helm` is the real
/// one, the blueprint for this test's prefix, and the one GPU node of its pool.
struct Setup {
    fresh: FreshCluster,
    tc: TestCluster,
    kc: PathBuf,
    helm: String,
    dir: tempfile::TempDir,
    path: String,
    prefix: String,
    bp: PathBuf,
    bps: String,
    kcs: String,
    blueprint: String,
}

async fn setup(test: &str, name: &str) -> Option<Setup> {
    let _shared = TestCluster::connect(test).await?;
    let fresh = FreshCluster::up_with(name, &["--without-kueue"]);
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, name)
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
    assert!(dir.path().join("kueue-0.19.2.tgz").is_file());
    let path = support::releases::helm_path(dir.path(), &helm, Hooks::Run);
    let mut prefix = tc.prefix.clone();
    prefix.truncate(30);
    let prefix = prefix.trim_end_matches('-').to_string();
    let blueprint = BLUEPRINT.replace("@P@", &prefix);
    let bp = dir.path().join("kueue.yaml");
    std::fs::write(&bp, &blueprint).unwrap();
    let bps = bp.to_str().unwrap().to_string();
    let kcs = kc.to_str().unwrap().to_string();
    tc.create_gpu_node(
        "h100-0",
        &GpuNode::h100(8)
            .driver("595.91.07", (13, 2))
            .label("gpuctl.dev/pool", &format!("{prefix}-h100")),
    )
    .await
    .unwrap();
    Some(Setup {
        fresh,
        tc,
        kc,
        helm,
        dir,
        path,
        prefix,
        bp,
        bps,
        kcs,
        blueprint,
    })
}

fn apply_args(bps: &str, kcs: &str) -> Vec<String> {
    [
        "apply",
        bps,
        "--kubeconfig",
        kcs,
        "--yes",
        "--crd-timeout",
        "60s",
        "--wait-timeout",
        "60s",
    ]
    .map(String::from)
    .to_vec()
}

#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_is_installed_from_its_chart_and_upgraded_by_exactly_its_config() {
    let Some(Setup {
        fresh,
        tc,
        dir,
        path,
        prefix,
        bp,
        bps,
        kcs,
        ..
    }) = setup("kueue_release", "kueue-release").await
    else {
        return;
    };
    let apply = apply_args(&bps, &kcs);
    let apply: Vec<&str> = apply.iter().map(String::as_str).collect();

    // Before: the plan installs Kueue (every value of the release is an addition).
    let (o, p) = plan_json(&["plan", &bps, "--kubeconfig", &kcs, "-o", "json"], &path);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let step = &p["releases"][0];
    assert_eq!(step["release"]["stack"], "kueue", "{p}");
    assert_eq!(step["plan"]["action"], "install", "{step}");
    assert!(
        p["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "ClusterQueue" && a["action"] == "create-after-crd"),
        "queues wait for Kueue's CRDs: {p}"
    );

    // Apply while the stand-in plays Kueue's pod.
    let started = Instant::now();
    let (o, _pod) =
        support::releases::apply_with_kueue_pod(&fresh, &tc.client, dir.path(), &path, &apply)
            .await;
    assert_eq!(o.status.code(), Some(0), "apply: {}", text(&o));
    eprintln!(
        "apply with the Kueue release: {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("helm release kueue-system/kueue installed: chart kueue 0.19.2 from ")
            && err.contains(", revision 1"),
        "{err}"
    );
    assert_eq!(revisions(&tc.client).await, 1);

    // The live manager ConfigMap holds exactly the Configuration gpuctl rendered.
    let cms: Api<ConfigMap> = Api::namespaced(tc.client.clone(), NS);
    assert_config(&cms, &bp).await;
    // The queue went through the chart's webhooks, and the Kueue that plays the chart's pod,
    // configured by the release, made it Active.
    let cqs: Api<kube::api::DynamicObject> = Api::all_with(
        tc.client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "ClusterQueue"),
            "clusterqueues",
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cq = cqs.get(&format!("{prefix}-cq")).await.unwrap();
        let active = cq.data["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Active" && c["status"] == "True")
        });
        if active {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ClusterQueue never Active: {:?}",
            cq.data
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // A second plan: the release is up to date, nothing to do; a second apply runs no helm.
    let (o, p) = plan_json(
        &[
            "plan",
            &bps,
            "--kubeconfig",
            &kcs,
            "-o",
            "json",
            "--detailed-exitcode",
        ],
        &path,
    );
    assert_eq!(o.status.code(), Some(0), "plan after apply: {}", text(&o));
    assert_eq!(p["releases"][0]["plan"]["action"], "no-op", "{p}");
    let o = gpuctl(&apply, &path);
    assert_eq!(o.status.code(), Some(0), "second apply: {}", text(&o));
    assert_eq!(
        revisions(&tc.client).await,
        1,
        "helm ran for an unchanged release"
    );

    // A configuration change: an upgrade of exactly that value, then revision 2 holds it.
    let changed = std::fs::read_to_string(&bp).unwrap().replace(
        "        resources: { quotaCheckStrategy: BlockUndeclared }\n",
        "        resources: { quotaCheckStrategy: BlockUndeclared }\n        fairSharing: {}\n",
    );
    std::fs::write(&bp, changed).unwrap();
    let (o, p) = plan_json(
        &[
            "plan",
            &bps,
            "--kubeconfig",
            &kcs,
            "-o",
            "json",
            "--detailed-exitcode",
        ],
        &path,
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "plan of a config change: {}",
        text(&o)
    );
    let step = &p["releases"][0]["plan"];
    assert_eq!(step["action"], "upgrade", "{step}");
    let paths: Vec<&str> = step["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["managerConfig.controllerManagerConfigYaml"]);
    let after = step["changes"][0]["after"].as_str().unwrap();
    // Fair sharing without named strategies: the list gpuctl writes (Kueue v0.19 requires one).
    assert!(
        after.contains("fairSharing:\n  preemptionStrategies:\n  - LessThanOrEqualToFinalShare\n  - LessThanInitialShare\n"),
        "{after}"
    );
    assert_eq!(p["summary"]["helm"], 1);
    let unchanged_objects = p["actions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|a| a["action"] == "no-op");
    assert!(unchanged_objects, "only the release changes: {p}");
    let o = gpuctl(&apply, &path);
    assert_eq!(
        o.status.code(),
        Some(0),
        "apply of the change: {}",
        text(&o)
    );
    assert_eq!(revisions(&tc.client).await, 2);
    assert_config(&cms, &bp).await;

    // A snapshot carries the release: planned from it, it is up to date too.
    let snap = dir.path().join("snap.json");
    let o = gpuctl(
        &[
            "snapshot",
            &bps,
            "--kubeconfig",
            &kcs,
            "--out",
            snap.to_str().unwrap(),
        ],
        &path,
    );
    assert_eq!(o.status.code(), Some(0), "snapshot: {}", text(&o));
    let s: Value = serde_json::from_slice(&std::fs::read(&snap).unwrap()).unwrap();
    assert_eq!(
        s["format_version"],
        gpuctl_core::snapshot::SNAPSHOT_FORMAT_VERSION
    );
    assert_eq!(s["releases"][0]["release"], "kueue", "{}", s["releases"]);
    assert_eq!(s["releases"][0]["live"]["revision"], 2);
    let (o, p) = plan_json(
        &[
            "plan",
            &bps,
            "--snapshot",
            snap.to_str().unwrap(),
            "-o",
            "json",
        ],
        &path,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(p["releases"][0]["plan"]["action"], "no-op", "{p}");
}

/// The test's blueprint without Kueue: no queueing, the tenant without a queue.
fn without_kueue(text: &str) -> String {
    let start = text
        .find("  scheduling:\n")
        .expect("the blueprint has scheduling");
    let end = text
        .find("  tenants:\n")
        .expect("the blueprint has tenants");
    let mut out = format!("{}{}", &text[..start], &text[end..]);
    let queue = out
        .lines()
        .find(|l| l.trim_start().starts_with("queue: "))
        .expect("the tenant names its queue")
        .to_string();
    out = out.replace(&format!("{queue}\n"), "");
    out
}

fn kueue_api(
    client: &Client,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<kube::api::DynamicObject> {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind),
        plural,
    );
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// Removing Kueue from a blueprint whose Kueue gpuctl installed: the plan uninstalls the release
/// (saying why it is gpuctl's), apply refuses while the queues exist (nothing changes), and once
/// they are deleted apply uninstalls it with the real helm: `helm list` no longer has it, and the
/// CRDs stay. Same fresh harness without Kueue and same stand-in pod as the test above.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_kueue_uninstalls_its_release_once_its_queues_are_gone_and_keeps_the_crds() {
    let Some(Setup {
        fresh,
        tc,
        kc,
        helm,
        dir,
        path,
        prefix,
        bp,
        bps,
        kcs,
        blueprint: with,
    }) = setup("kueue_removal", "kueue-removal").await
    else {
        return;
    };
    let apply = apply_args(&bps, &kcs);
    let apply: Vec<&str> = apply.iter().map(String::as_str).collect();
    let (o, _pod) =
        support::releases::apply_with_kueue_pod(&fresh, &tc.client, dir.path(), &path, &apply)
            .await;
    assert_eq!(o.status.code(), Some(0), "apply with Kueue: {}", text(&o));
    assert_eq!(revisions(&tc.client).await, 1);

    // Kueue dropped from the blueprint: the plan uninstalls the release, blocked by the queues
    // (which it also prunes).
    std::fs::write(&bp, without_kueue(&with)).unwrap();
    let (o, p) = plan_json(&["plan", &bps, "--kubeconfig", &kcs, "-o", "json"], &path);
    assert_eq!(o.status.code(), Some(0), "plan without Kueue: {}", text(&o));
    let u = &p["uninstalls"][0];
    assert_eq!(u["release"], "kueue", "{p}");
    assert_eq!(u["namespace"], NS);
    assert_eq!(u["chart"], "kueue");
    let reason = u["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("gpuctl.dev/blueprint={prefix}"))
            && reason.contains("no longer declares spec.scheduling.kueue"),
        "{reason}"
    );
    let blockers: Vec<&str> = u["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    let cq = format!("ClusterQueue/{prefix}-cq");
    assert!(blockers.contains(&cq.as_str()), "{blockers:?}");
    assert_eq!(p["summary"]["uninstall"], 1);
    let o = gpuctl(&["plan", &bps, "--kubeconfig", &kcs], &path);
    let human = String::from_utf8_lossy(&o.stdout);
    assert!(
        human.contains("- uninstall HelmRelease/kueue-system/kueue"),
        "{human}"
    );
    assert!(human.contains("Kueue release: uninstall."), "{human}");

    // Apply is refused while they exist: exit 1, the objects named, nothing changed.
    let o = gpuctl(&apply, &path);
    assert_eq!(
        o.status.code(),
        Some(1),
        "apply while queues exist: {}",
        text(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nothing was applied"), "{err}");
    assert!(
        err.contains("is not uninstalled while objects of its kinds exist"),
        "{err}"
    );
    assert!(err.contains(&cq), "{err}");
    assert!(err.contains("--force-uninstall"), "{err}");
    let cqs = kueue_api(&tc.client, "ClusterQueue", "clusterqueues", None);
    assert!(
        cqs.get_opt(&format!("{prefix}-cq"))
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(revisions(&tc.client).await, 1, "the release was touched");

    // The queues deleted (Kueue, still running, lets them go): apply uninstalls the release.
    let dp = kube::api::DeleteParams::default();
    for (kind, plural, ns) in [
        ("LocalQueue", "localqueues", Some(format!("{prefix}-ns"))),
        ("ClusterQueue", "clusterqueues", None),
        ("ResourceFlavor", "resourceflavors", None),
    ] {
        let api = kueue_api(&tc.client, kind, plural, ns.as_deref());
        for o in api.list(&ListParams::default()).await.unwrap() {
            let _ = api.delete(&o.metadata.name.unwrap(), &dp).await;
        }
    }
    let k = gpuctl_cluster::connect(&gpuctl_cluster::ConnectOptions {
        kubeconfig: Some(kc.clone()),
        context: None,
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = gpuctl_cluster::release::objects_in_groups(&k, &["kueue.x-k8s.io".to_string()])
            .await
            .unwrap();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "Kueue objects stay: {left:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let o = gpuctl(&apply, &path);
    assert_eq!(
        o.status.code(),
        Some(0),
        "apply once the queues are gone: {}",
        text(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("helm release kueue-system/kueue (kueue 0.19.2) uninstalled; its CRDs stay"),
        "{err}"
    );
    // Kueue's chart templates its CRDs, which helm deletes with the release unless kept.
    assert!(
        err.contains("helm.sh/resource-policy: keep set on CRD(s)")
            && err.contains("clusterqueues.kueue.x-k8s.io"),
        "{err}"
    );
    let o = Command::new(&helm)
        .args(["list", "-A", "-a", "--kubeconfig", &kcs, "-o", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "helm list: {}", text(&o));
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        !listed
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "kueue"),
        "helm list still has kueue: {listed}"
    );
    assert_eq!(revisions(&tc.client).await, 0);
    // Kueue's CRDs stay (served still), and the next plan is empty.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(tc.client.clone());
    for crd in [
        "clusterqueues.kueue.x-k8s.io",
        "localqueues.kueue.x-k8s.io",
        "resourceflavors.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io",
    ] {
        assert!(
            crds.get_opt(crd).await.unwrap().is_some(),
            "CRD {crd} was deleted"
        );
    }
    let o = gpuctl(
        &["plan", &bps, "--kubeconfig", &kcs, "--detailed-exitcode"],
        &path,
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "plan after the uninstall: {}",
        text(&o)
    );
}
