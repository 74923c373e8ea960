//! Network and topology objects against the real kube-apiserver of the harness, whose CRDs include
//! the Network Operator's and Kueue's from ../shared/upstream: every rendered NicClusterPolicy,
//! secondary network, Kueue Topology and ResourceFlavor of the network examples passes a server-side
//! apply (dry run) with strict field validation, and `gpuctl plan` shows those objects and the pool
//! nodes that lack a topology level label.
//!
//! Stand-ins, stated plainly: the nodes are Node objects written by the test helper (no kubelet runs
//! here, so no kubelet configuration can be read back through the node proxy).

use crate::render_common;
use crate::support;

use gpuctl_test_skip::needs_test_cluster;
use kube::api::Patch;
use serde_json::{Value, json};
use support::cluster::{GpuNode, TestCluster, api_error, apply_params};
use support::gpuctl::{Gpuctl, TODAY};

const KINDS: [&str; 6] = [
    "NicClusterPolicy",
    "IPoIBNetwork",
    "MacvlanNetwork",
    "HostDeviceNetwork",
    "Topology",
    "ResourceFlavor",
];

fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{lower}s"),
    }
}

async fn dry_run_apply(
    tc: &TestCluster,
    manifest: &Value,
) -> kube::Result<kube::api::DynamicObject> {
    let api_version = manifest["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap();
    let kind = manifest["kind"].as_str().unwrap();
    let api = tc.dynamic(group, version, kind, &plural(kind), false);
    let mut params = apply_params();
    params.dry_run = true;
    let name = manifest["metadata"]["name"].as_str().unwrap();
    api.patch(name, &params, &Patch::Apply(manifest)).await
}

#[needs_test_cluster]
#[tokio::test]
async fn network_objects_pass_strict_validation_on_the_api_server() {
    let Some(tc) = TestCluster::connect("network_objects_strict").await else {
        return;
    };
    let mut checked = std::collections::BTreeSet::new();
    for file in [
        "blueprints/dgx-h100-training.yaml",
        "blueprints/gb200-nvl72-training.yaml",
    ] {
        let set = render_common::render_file(&render_common::root().join(file));
        for o in set
            .objects
            .iter()
            .filter(|o| KINDS.contains(&o.kind.as_str()))
        {
            dry_run_apply(&tc, &o.manifest).await.unwrap_or_else(|e| {
                panic!(
                    "{file}: the API server refused {}: {e}\n{}",
                    o.display_id(),
                    serde_json::to_string_pretty(&o.manifest).unwrap()
                )
            });
            checked.insert(o.kind.clone());
        }
    }
    for kind in [
        "NicClusterPolicy",
        "IPoIBNetwork",
        "Topology",
        "ResourceFlavor",
    ] {
        assert!(checked.contains(kind), "no {kind} was sent: {checked:?}");
    }

    // The same path refuses what the CRDs refuse: an unknown field, and Kueue's CEL rule that
    // `kubernetes.io/hostname` be the lowest level.
    let typo = json!({
        "apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy",
        "metadata": {"name": "nic-cluster-policy"},
        "spec": {"rdmaSharedDevicePlugin": {"image": "k8s-rdma-shared-dev-plugin", "repository": "nvcr.io/nvidia/mellanox", "version": "network-operator-v26.4.1", "confg": "{}"}},
    });
    let (code, message) = api_error(dry_run_apply(&tc, &typo).await).expect("refused");
    assert!(
        code >= 400 && message.contains("confg"),
        "{code}: {message}"
    );
    let hostname_first = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
        "metadata": {"name": tc.name("topo")},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "topology.example.com/rack"}]},
    });
    let (code, message) = api_error(dry_run_apply(&tc, &hostname_first).await).expect("refused");
    assert!(
        code == 422 && message.contains("lowest level"),
        "{code}: {message}"
    );
}

#[needs_test_cluster]
#[tokio::test]
async fn plan_shows_network_objects_and_nodes_without_level_labels() {
    let Some(tc) = TestCluster::connect("network_plan").await else {
        return;
    };
    // The example with a pool selector only this test's nodes carry.
    let pool = tc.name("gb200");
    let text =
        std::fs::read_to_string(render_common::root().join("blueprints/gb200-nvl72-training.yaml"))
            .unwrap()
            .replace(
                "gpuctl.dev/pool: gb200",
                &format!("gpuctl.dev/pool: {pool}"),
            );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gb200.yaml");
    std::fs::write(&path, text).unwrap();
    let node = |clique: Option<&str>| {
        let n = GpuNode::h100(4)
            .driver("580.173.02", (13, 0))
            .label("nvidia.com/gpu.product", "NVIDIA-GB200")
            .label("gpuctl.dev/pool", &pool)
            .label("network.topology.nvidia.com/spine", "spine-1");
        match clique {
            Some(c) => n.label("nvidia.com/gpu.clique", c),
            None => n,
        }
    };
    tc.create_gpu_node("rack1-t1", &node(Some("a1b2c3d4.1")))
        .await
        .unwrap();
    tc.create_gpu_node("rack1-t2", &node(None)).await.unwrap();

    let kubeconfig = std::env::var(support::cluster::KUBECONFIG_ENV).unwrap();
    let o = Gpuctl::new([
        "plan",
        path.to_str().unwrap(),
        "--kubeconfig",
        &kubeconfig,
        "-o",
        "json",
    ])
    .today(TODAY)
    .output();
    let plan: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| {
        panic!(
            "plan output is not JSON: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    let actions: Vec<String> = plan["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{}/{}",
                a["kind"].as_str().unwrap(),
                a["name"].as_str().unwrap()
            )
        })
        .collect();
    for want in [
        "NicClusterPolicy/nic-cluster-policy",
        "IPoIBNetwork/ib-storage",
        "Topology/gb200",
        "ResourceFlavor/gb200",
        "Namespace/nvidia-network-operator",
    ] {
        assert!(
            actions.iter().any(|a| a == want),
            "{want} not in {actions:?}"
        );
    }
    let findings: Vec<&str> = plan["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["message"].as_str())
        .collect();
    let missing = tc.name("rack1-t2");
    let topo: Vec<&&str> = findings
        .iter()
        .filter(|m| m.contains("topology level label"))
        .collect();
    assert_eq!(topo.len(), 1, "{findings:?}");
    assert!(
        topo[0].contains("`nvidia.com/gpu.clique`") && topo[0].contains(&missing),
        "{}",
        topo[0]
    );
    assert!(!topo[0].contains(&tc.name("rack1-t1")), "{}", topo[0]);
}

/// The gb200 example with the installs left to someone else (this test is about the pools, not
/// helm), its pool selector unique to this test, and two more nv-ipam pools: an IPv4 CIDRPool the
/// secondary network uses (so its IPAM names `poolType: cidrpool`) and an IPv6 IPPool.
fn ip_pools_blueprint(pool: &str) -> String {
    let text =
        std::fs::read_to_string(render_common::root().join("blueprints/gb200-nvl72-training.yaml"))
            .unwrap();
    let edits = [
        ("    install: helm\n", "    install: none\n"),
        (
            "gpuctl.dev/pool: gb200",
            &format!("gpuctl.dev/pool: {pool}"),
        ),
        ("ipPool: ib-storage }", "ipPool: rail-1 }"),
        (
            "        nodePools: [gb200]\n",
            "        nodePools: [gb200]\n      - { name: rail-1, kind: cidrpool, range: 10.220.0.0/16, perNodeNetworkPrefix: 24, gatewayIndex: 1, defaultGateway: true, exclusions: [{ startIP: 10.220.0.1, endIP: 10.220.0.3 }] }\n      - { name: rail-v6, range: \"fd00:10:220::/48\", gateway: \"fd00:10:220::1\", perNodeBlockSize: 1024 }\n",
        ),
    ];
    let mut text = text;
    for (from, to) in edits {
        assert!(text.contains(from), "not in the example: {from}");
        text = text.replace(from, to);
    }
    text
}

/// Issue 30: a blueprint with IP pools applies, the API server (with nv-ipam's CRDs, which the
/// harness installs from ../shared/upstream/nvidia-k8s-ipam) stores pools equal to what was
/// rendered, and the next plan is empty. Stand-in, stated plainly: no Network Operator runs here,
/// so nothing deploys nv-ipam or hands out addresses; the CRDs are the ones it would apply.
#[needs_test_cluster]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ip_pools_apply_and_are_stored_as_rendered() {
    let Some(_shared) = TestCluster::connect("ip_pools").await else {
        return;
    };
    // A cluster of its own: the NicClusterPolicy and IPoIBNetwork are cluster-scoped singletons.
    let fresh = support::fresh::FreshCluster::up("ip-pools");
    let kc = fresh.kubeconfig();
    let tc = TestCluster::connect_kubeconfig(&kc, "ip-pools")
        .await
        .expect("connects to the fresh cluster");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pools.yaml");
    std::fs::write(&path, ip_pools_blueprint(&tc.name("gb200"))).unwrap();
    let set = render_common::render_file(&path);
    let pools: Vec<_> = set
        .objects
        .iter()
        .filter(|o| o.api_version.starts_with("nv-ipam.nvidia.com/"))
        .collect();
    let kinds: Vec<String> = pools
        .iter()
        .map(|o| format!("{}/{}", o.kind, o.name))
        .collect();
    assert_eq!(
        kinds,
        ["CIDRPool/rail-1", "IPPool/ib-storage", "IPPool/rail-v6"],
        "rendered pools"
    );

    let kubeconfig = kc.to_str().unwrap();
    let run = |args: &[&str]| {
        Gpuctl::new(args)
            .args(["--kubeconfig", kubeconfig])
            .today(TODAY)
            .output()
    };
    let p = path.to_str().unwrap();
    let o = run(&[
        "apply",
        p,
        "--no-helm",
        "--wait-timeout",
        "60s",
        "--crd-timeout",
        "30s",
    ]);
    let out = format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "apply failed: {out}");

    for o in &pools {
        let (group, version) = o.api_version.split_once('/').unwrap();
        let ar = kube::discovery::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(group, version, &o.kind),
            &format!("{}s", o.kind.to_ascii_lowercase()),
        );
        let ns = o.namespace.as_deref().expect("pools are namespaced");
        assert_eq!(
            ns, "nvidia-network-operator",
            "nv-ipam reads the operator's namespace"
        );
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(tc.client.clone(), ns, &ar);
        let stored = api
            .get(&o.name)
            .await
            .unwrap_or_else(|e| panic!("{}/{} was not stored: {e}\n{out}", o.kind, o.name));
        let stored_spec = &stored.data["spec"];
        let rendered = o.manifest["spec"].as_object().unwrap();
        // Field by field, both ways: what was rendered is stored, and nothing else is.
        for (k, v) in rendered {
            assert_eq!(&stored_spec[k], v, "{}/{} spec.{k}", o.kind, o.name);
        }
        let stored_keys: Vec<&String> = stored_spec.as_object().unwrap().keys().collect();
        let rendered_keys: Vec<&String> = rendered.keys().collect();
        let mut a = stored_keys.clone();
        let mut b = rendered_keys.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{}/{}: spec keys", o.kind, o.name);
        for (k, v) in o.manifest["metadata"]["labels"].as_object().unwrap() {
            assert_eq!(
                stored.metadata.labels.as_ref().and_then(|l| l.get(k)),
                v.as_str().map(str::to_string).as_ref(),
                "{}/{} label {k}",
                o.kind,
                o.name
            );
        }
    }
    // The stored network names the CIDRPool as nv-ipam's CNI reads it.
    let net = tc
        .dynamic(
            "mellanox.com",
            "v1alpha1",
            "IPoIBNetwork",
            "ipoibnetworks",
            false,
        )
        .get("ib-storage")
        .await
        .expect("the secondary network is stored");
    let ipam: Value = serde_json::from_str(net.data["spec"]["ipam"].as_str().unwrap()).unwrap();
    assert_eq!(
        ipam,
        json!({"type": "nv-ipam", "poolName": "rail-1", "poolType": "cidrpool"})
    );
    let policy = tc
        .dynamic(
            "mellanox.com",
            "v1alpha1",
            "NicClusterPolicy",
            "nicclusterpolicies",
            false,
        )
        .get("nic-cluster-policy")
        .await
        .unwrap();
    assert_eq!(
        policy.data["spec"]["nvIpam"]["image"], "nvidia-k8s-ipam",
        "nv-ipam is on when pools are declared"
    );

    let o = run(&["plan", p, "--detailed-exitcode"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the plan after apply is not empty:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
