//! Test support for cluster tests: a connection to the real kube-apiserver that
//! `tools/kube-harness/run up` starts (see docs/testing.md), a fresh namespace per test, unique names for
//! cluster-scoped objects, and GPU Nodes that look like what GPU Feature Discovery and the device plugin
//! publish.
//!
//! Include it from an integration test with
//!
//! ```ignore
//! #[path = "support/cluster.rs"]
//! mod cluster;
//! ```
//!
//! (or `mod support;` and `support::cluster`), and start each cluster test with
//!
//! ```ignore
//! #[needs_test_cluster] // use gpuctl_test_skip::needs_test_cluster;
//! #[tokio::test]
//! async fn my_test() {
//!     let Some(tc) = cluster::TestCluster::connect("my_test").await else { return };
//! ```
//!
//! Without `GPUCTL_TEST_KUBECONFIG`, `CI` and `GPUCTL_REQUIRE_CLUSTER`, build.rs sets the cfg
//! `gpuctl_no_test_cluster`, so `cargo test` lists each cluster test as `ignored, skipped: needs the
//! test API server` and counts it in the summary's `ignored` (`#[needs_test_cluster]`,
//! tests/skip/src/lib.rs); a cluster test without the attribute fails and says to add it. Without `GPUCTL_TEST_KUBECONFIG`, `connect` panics when `CI` or
//! `GPUCTL_REQUIRE_CLUSTER` is set (cluster tests must fail, not skip, in CI) and otherwise (a run
//! with `--ignored`) prints a skip notice and returns `None`.
//!
//! The cluster runs kube-controller-manager (Job, ResourceQuota, namespace, garbage-collector and
//! serviceaccount controllers), Kueue and Volcano's admission webhook, but no scheduler or kubelet:
//! Pods stay Pending. Tests play what needs GPUs (Nodes, [`GpuNode`]). Objects are left behind on
//! purpose (unique names keep tests apart); `tools/kube-harness/run down` throws the whole cluster away.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, Node, ResourceQuota};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch, PatchParams,
    PostParams, ValidationDirective,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

/// Field manager for everything gpuctl (and its tests) apply.
pub const FIELD_MANAGER: &str = "gpuctl";
/// Label put on every object the helpers create; its value is the test's unique prefix.
pub const OWNER_LABEL: &str = "gpuctl-test/owner";
/// The environment variable that points at the harness kubeconfig.
pub const KUBECONFIG_ENV: &str = "GPUCTL_TEST_KUBECONFIG";

/// Server-side apply parameters gpuctl uses: field manager `gpuctl`, strict field validation
/// (an unknown or duplicate field fails the request instead of being dropped).
pub fn apply_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        field_validation: Some(ValidationDirective::Strict),
        ..PatchParams::default()
    }
}

/// Whether a missing cluster must fail the test instead of skipping it.
pub fn cluster_required() -> bool {
    ["CI", "GPUCTL_REQUIRE_CLUSTER"].iter().any(|v| {
        std::env::var(v)
            .map(|s| !s.is_empty() && s != "0" && !s.eq_ignore_ascii_case("false"))
            .unwrap_or(false)
    })
}

/// A connection to the test cluster with a namespace of this test's own.
pub struct TestCluster {
    pub client: Client,
    /// A fresh namespace, created for this test.
    pub namespace: String,
    /// Unique per test (and per process): prefix cluster-scoped names with [`TestCluster::name`].
    pub prefix: String,
}

impl TestCluster {
    /// Connects to the cluster named by `GPUCTL_TEST_KUBECONFIG` and creates a fresh namespace.
    ///
    /// Returns `None` (after printing why) when the variable is unset on a developer machine; panics
    /// when it is unset in CI (`CI` or `GPUCTL_REQUIRE_CLUSTER` set) or when the cluster is unreachable.
    pub async fn connect(test_name: &str) -> Option<TestCluster> {
        let path = match std::env::var_os(KUBECONFIG_ENV) {
            Some(p) if !p.is_empty() => p,
            _ => {
                if cluster_required() {
                    panic!(
                        "{KUBECONFIG_ENV} is not set, but CI/GPUCTL_REQUIRE_CLUSTER says cluster tests must run: \
                         start the harness with `tools/kube-harness/run up` and `eval \"$(tools/kube-harness/run env)\"`"
                    );
                }
                // Cluster tests are reported `ignored` when no server is configured (build.rs); one
                // that gets here without being asked for (`--ignored`) would pass silently instead.
                let asked = std::env::args().any(|a| a == "--ignored" || a == "--include-ignored");
                if cfg!(gpuctl_no_test_cluster) && !asked {
                    panic!(
                        "{test_name} needs the test cluster but is not marked \
                         #[needs_test_cluster] (above its #[test] or #[tokio::test]): add it, so a local `cargo test` reports the test as ignored instead of passing it"
                    );
                }
                // Not captured by the test harness: a skip must be visible in `cargo test` output.
                let _ = writeln!(
                    std::io::stderr(),
                    "skipped {test_name}: no test cluster ({KUBECONFIG_ENV} is unset), run tools/kube-harness/run up \
                     and eval \"$(tools/kube-harness/run env)\""
                );
                return None;
            }
        };
        let tc = Self::connect_to(std::path::Path::new(&path), test_name)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "cannot use the test cluster from {}: {e:#}",
                    path.to_string_lossy()
                )
            });
        Some(tc)
    }

    /// Connects to the cluster of `kubeconfig` (a harness a test started itself, e.g. a fresh one per
    /// example in tests/cluster/composition.rs) and creates a fresh namespace.
    pub async fn connect_kubeconfig(
        kubeconfig: &std::path::Path,
        test_name: &str,
    ) -> Result<TestCluster> {
        Self::connect_to(kubeconfig, test_name).await
    }

    async fn connect_to(kubeconfig: &std::path::Path, test_name: &str) -> Result<TestCluster> {
        let kc = Kubeconfig::read_from(kubeconfig).context("reading the kubeconfig")?;
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .context("loading the kubeconfig")?;
        let client = Client::try_from(config).context("building the client")?;
        let prefix = unique_prefix(test_name);
        let namespace = prefix.clone();
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.clone()),
                labels: Some(BTreeMap::from([(OWNER_LABEL.to_string(), prefix.clone())])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {namespace} (is the harness up?)"))?;
        Ok(TestCluster {
            client,
            namespace,
            prefix,
        })
    }

    /// A unique name for a cluster-scoped object of this test: `<prefix>-<suffix>`.
    pub fn name(&self, suffix: &str) -> String {
        let name = format!("{}-{}", self.prefix, sanitize(suffix));
        assert!(name.len() <= 63, "name {name} is longer than 63 characters");
        name
    }

    /// The label selector matching the objects this test's helpers created (`gpuctl-test/owner=<prefix>`).
    pub fn owner_selector(&self) -> String {
        format!("{OWNER_LABEL}={}", self.prefix)
    }

    /// The labels every helper-created object carries.
    pub fn owner_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(OWNER_LABEL.to_string(), self.prefix.clone())])
    }

    /// Typed API in this test's namespace.
    pub fn namespaced<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Typed API for a cluster-scoped kind.
    pub fn cluster_scoped<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>,
    {
        Api::all(self.client.clone())
    }

    /// Dynamic API for a custom resource (`plural` as in the CRD), cluster-scoped or in this test's namespace.
    pub fn dynamic(
        &self,
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
    ) -> Api<DynamicObject> {
        let ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        if namespaced {
            Api::namespaced_with(self.client.clone(), &self.namespace, &ar)
        } else {
            Api::all_with(self.client.clone(), &ar)
        }
    }

    /// NVIDIADriver CRs (`nvidia.com/v1alpha1`, cluster-scoped).
    pub fn nvidia_drivers(&self) -> Api<DynamicObject> {
        nvidia_drivers(&self.client)
    }

    /// CustomResourceDefinitions.
    pub fn crds(&self) -> Api<DynamicObject> {
        self.dynamic(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        )
    }

    /// Server-side applies `manifest` (a full object with apiVersion, kind and metadata.name) with
    /// [`apply_params`] through `api`, and returns what the server stored.
    pub async fn apply<K>(&self, api: &Api<K>, manifest: &Value) -> kube::Result<K>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let name = manifest["metadata"]["name"]
            .as_str()
            .expect("manifest needs metadata.name")
            .to_string();
        api.patch(&name, &apply_params(), &Patch::Apply(manifest))
            .await
    }

    /// Copies `spec.hard` into `status.hard` and sets `status.used` to zero for each resource, so
    /// quota admission enforces a quota at once (the resource-quota controller does the same on its
    /// first sync, moments later; only for a quota no Pod has been charged to yet).
    pub async fn sync_quota_status(&self, name: &str) -> Result<ResourceQuota> {
        let api: Api<ResourceQuota> = self.namespaced();
        let rq = api.get(name).await?;
        let hard = rq.spec.and_then(|s| s.hard).unwrap_or_default();
        let used: BTreeMap<String, String> =
            hard.keys().map(|k| (k.clone(), "0".to_string())).collect();
        let patch = json!({"status": {"hard": hard, "used": used}});
        Ok(api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?)
    }

    /// Creates a Node that looks like a GPU node after GPU Feature Discovery and the device plugin ran
    /// (labels, then `status.capacity`/`allocatable` through the status subresource). Its name is
    /// `<prefix>-<suffix>` and it carries [`OWNER_LABEL`].
    pub async fn create_gpu_node(&self, suffix: &str, gpu: &GpuNode) -> Result<Node> {
        let name = self.name(suffix);
        let mut labels = gpu.labels();
        labels.extend(self.owner_labels());
        labels.insert("kubernetes.io/hostname".into(), name.clone());
        labels.insert("kubernetes.io/os".into(), "linux".into());
        labels.insert("kubernetes.io/arch".into(), "amd64".into());
        let nodes: Api<Node> = self.cluster_scoped();
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {},
        }))?;
        nodes
            .create(&PostParams::default(), &node)
            .await
            .with_context(|| format!("creating node {name}"))?;
        // Node status is ignored on create; it is written through the status subresource, as the kubelet does.
        let capacity = gpu.capacity();
        let status = json!({
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": [{
                    "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": now_rfc3339(),
                }],
                "nodeInfo": {
                    "architecture": "amd64", "operatingSystem": "linux", "osImage": "Ubuntu 24.04.3 LTS",
                    "kernelVersion": "6.8.0-85-generic", "containerRuntimeVersion": "containerd://2.1.4",
                    "kubeletVersion": "v1.35.4", "kubeProxyVersion": "", "machineID": "", "systemUUID": "",
                    "bootID": "",
                },
            }
        });
        nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .with_context(|| format!("writing the status of node {name}"))
    }

    /// [`TestCluster::create_gpu_node`], then lifts the `node.kubernetes.io/not-ready` taint the
    /// API server puts on a new Node, as the node lifecycle controller (not in the harness) does
    /// once the node reports Ready; other taints stay. Returns the node's name.
    pub async fn create_ready_gpu_node(&self, suffix: &str, gpu: &GpuNode) -> Result<String> {
        let node = self.create_gpu_node(suffix, gpu).await?;
        let name = node.metadata.name.unwrap_or_default();
        let taints: Vec<_> = node
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key != "node.kubernetes.io/not-ready")
            .collect();
        let nodes: Api<Node> = self.cluster_scoped();
        nodes
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"taints": taints}})),
            )
            .await
            .with_context(|| format!("lifting the not-ready taint of node {name}"))?;
        Ok(name)
    }

    /// Creates `count` nodes like `gpu` with [`TestCluster::create_gpu_node`], suffixes `n0`, `n1`,
    /// ..., and returns their names.
    pub async fn create_gpu_nodes(&self, count: usize, gpu: &GpuNode) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for i in 0..count {
            let node = self.create_gpu_node(&format!("n{i}"), gpu).await?;
            names.push(node.metadata.name.unwrap_or_default());
        }
        Ok(names)
    }

    /// This test's GPU nodes (by [`OWNER_LABEL`]), sorted by name.
    pub async fn gpu_nodes(&self) -> Result<Vec<Node>> {
        let nodes: Api<Node> = self.cluster_scoped();
        let mut list = nodes
            .list(&ListParams::default().labels(&self.owner_selector()))
            .await?
            .items;
        list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(list)
    }
}

/// NVIDIADriver CRs (`nvidia.com/v1alpha1`, cluster-scoped) through `client`.
pub fn nvidia_drivers(client: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("nvidia.com", "v1alpha1", "NVIDIADriver"),
        "nvidiadrivers",
    );
    Api::all_with(client.clone(), &ar)
}

/// How MIG is set up on a [`GpuNode`].
#[derive(Clone, Debug, PartialEq)]
pub enum Mig {
    /// MIG off (or not supported): whole GPUs as `nvidia.com/gpu`.
    Off,
    /// MIG strategy `single`: every GPU split into `per_gpu` instances of `profile`, exposed as `nvidia.com/gpu`.
    Single {
        profile: String,
        per_gpu: u32,
        memory_mib: u64,
    },
    /// MIG strategy `mixed`: each profile its own resource `nvidia.com/mig-<profile>`; `(profile, count on
    /// the node, memory MiB)`.
    Mixed(Vec<(String, u32, u64)>),
}

/// A GPU node's hardware and driver as GPU Feature Discovery reports them.
#[derive(Clone, Debug)]
pub struct GpuNode {
    /// Sanitised model as in `nvidia.com/gpu.product`, e.g. `NVIDIA-H100-80GB-HBM3`.
    pub product: String,
    pub count: u32,
    /// Per-GPU memory in MiB (`nvidia.com/gpu.memory`).
    pub memory_mib: u64,
    /// `nvidia.com/gpu.family`, e.g. `hopper`.
    pub family: String,
    /// CUDA compute capability (major, minor).
    pub compute: (u32, u32),
    /// Driver version, e.g. `580.95.05`.
    pub driver: String,
    /// Highest CUDA version the driver supports (major, minor).
    pub cuda: (u32, u32),
    pub mig_capable: bool,
    pub mig: Mig,
    /// `nvidia.com/gpu.machine`.
    pub machine: String,
    /// Extra labels (override the generated ones).
    pub extra_labels: BTreeMap<String, String>,
    pub cpu: String,
    pub memory: String,
    /// Time-slicing replicas per GPU (1: not shared): the device plugin advertises
    /// `count * replicas` `nvidia.com/gpu` and GFD labels `gpu.replicas` and `gpu.sharing-strategy`.
    pub replicas: u32,
    /// Other extended resources a device plugin advertises (`rdma/rdma_shared_device_a` from the
    /// Network Operator's RDMA shared device plugin), by name.
    pub extra_capacity: BTreeMap<String, String>,
    /// Whether NVIDIA's device plugin runs on the node (it advertises `nvidia.com/gpu` or
    /// `nvidia.com/mig-*`). Off on a DRA node ([`GpuNode::dra`]), whose GPUs are ResourceSlice devices.
    pub device_plugin: bool,
}

impl GpuNode {
    fn new(
        product: &str,
        count: u32,
        memory_mib: u64,
        family: &str,
        compute: (u32, u32),
        mig_capable: bool,
    ) -> Self {
        GpuNode {
            product: product.into(),
            count,
            memory_mib,
            family: family.into(),
            compute,
            driver: "580.95.05".into(),
            cuda: (13, 0),
            mig_capable,
            mig: Mig::Off,
            machine: "ProLiant-XL675d-Gen10-Plus".into(),
            extra_labels: BTreeMap::new(),
            cpu: "128".into(),
            memory: "2113456540Ki".into(),
            replicas: 1,
            extra_capacity: BTreeMap::new(),
            device_plugin: true,
        }
    }

    /// NVIDIA H100 80GB HBM3 (SXM), Hopper, MIG-capable.
    pub fn h100(count: u32) -> Self {
        Self::new(
            "NVIDIA-H100-80GB-HBM3",
            count,
            81559,
            "hopper",
            (9, 0),
            true,
        )
    }

    /// NVIDIA A100-SXM4-80GB, Ampere, MIG-capable.
    pub fn a100_80gb(count: u32) -> Self {
        Self::new(
            "NVIDIA-A100-SXM4-80GB",
            count,
            81920,
            "ampere",
            (8, 0),
            true,
        )
    }

    /// NVIDIA A100-SXM4-40GB, Ampere, MIG-capable.
    pub fn a100_40gb(count: u32) -> Self {
        Self::new(
            "NVIDIA-A100-SXM4-40GB",
            count,
            40960,
            "ampere",
            (8, 0),
            true,
        )
    }

    /// NVIDIA L4, Ada Lovelace, no MIG.
    pub fn l4(count: u32) -> Self {
        Self::new("NVIDIA-L4", count, 23034, "ada-lovelace", (8, 9), false)
    }

    /// Tesla T4, Turing, no MIG.
    pub fn t4(count: u32) -> Self {
        Self::new("Tesla-T4", count, 15360, "turing", (7, 5), false)
    }

    /// Sets the driver version (e.g. `595.91.07`) and the CUDA version it supports.
    pub fn driver(mut self, version: &str, cuda: (u32, u32)) -> Self {
        self.driver = version.into();
        self.cuda = cuda;
        self
    }

    /// MIG strategy `single`: each GPU split into `per_gpu` instances of `profile` (e.g. `1g.10gb`, 7).
    pub fn mig_single(mut self, profile: &str, per_gpu: u32, memory_mib: u64) -> Self {
        assert!(self.mig_capable, "{} is not MIG-capable", self.product);
        self.mig = Mig::Single {
            profile: profile.into(),
            per_gpu,
            memory_mib,
        };
        self
    }

    /// MIG strategy `mixed`: `(profile, instances on the node, memory MiB)` for each profile.
    pub fn mig_mixed(mut self, profiles: &[(&str, u32, u64)]) -> Self {
        assert!(self.mig_capable, "{} is not MIG-capable", self.product);
        self.mig = Mig::Mixed(
            profiles
                .iter()
                .map(|(p, n, m)| (p.to_string(), *n, *m))
                .collect(),
        );
        self
    }

    /// A node whose GPUs NVIDIA's DRA driver publishes (tests/support/dra.rs): no device plugin, so
    /// no `nvidia.com/gpu` or `nvidia.com/mig-*` in its capacity; the GFD labels stay.
    pub fn dra(mut self) -> Self {
        self.device_plugin = false;
        self
    }

    /// Time-slicing with `replicas` per GPU (no MIG).
    pub fn time_slicing(mut self, replicas: u32) -> Self {
        self.replicas = replicas;
        self
    }

    /// Adds or overrides a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.extra_labels.insert(key.into(), value.into());
        self
    }

    /// The labels GFD, NFD and the GPU Operator put on such a node (gpu-operator.md §1.5, §3.3, §5).
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut l = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            l.insert(k.to_string(), v);
        };
        let mut driver = self.driver.splitn(3, '.');
        let (dmaj, dmin, drev) = (
            driver.next().unwrap_or("0").to_string(),
            driver.next().unwrap_or("0").to_string(),
            driver.next().unwrap_or("0").to_string(),
        );
        put("feature.node.kubernetes.io/pci-10de.present", "true".into());
        put("nvidia.com/gpu.present", "true".into());
        put("nvidia.com/gpu.deploy.operands", "true".into());
        put("nvidia.com/gpu.family", self.family.clone());
        put("nvidia.com/gpu.compute.major", self.compute.0.to_string());
        put("nvidia.com/gpu.compute.minor", self.compute.1.to_string());
        put("nvidia.com/cuda.driver-version.major", dmaj.clone());
        put("nvidia.com/cuda.driver-version.minor", dmin.clone());
        put("nvidia.com/cuda.driver-version.revision", drev.clone());
        put("nvidia.com/cuda.driver-version.full", self.driver.clone());
        put("nvidia.com/cuda.driver.major", dmaj);
        put("nvidia.com/cuda.driver.minor", dmin);
        put("nvidia.com/cuda.driver.rev", drev);
        put(
            "nvidia.com/cuda.runtime-version.major",
            self.cuda.0.to_string(),
        );
        put(
            "nvidia.com/cuda.runtime-version.minor",
            self.cuda.1.to_string(),
        );
        put(
            "nvidia.com/cuda.runtime-version.full",
            format!("{}.{}", self.cuda.0, self.cuda.1),
        );
        put("nvidia.com/cuda.runtime.major", self.cuda.0.to_string());
        put("nvidia.com/cuda.runtime.minor", self.cuda.1.to_string());
        put("nvidia.com/gpu.machine", self.machine.clone());
        put("nvidia.com/gpu.mode", "compute".into());
        put("nvidia.com/gpu.replicas", self.replicas.to_string());
        let sharing = if self.replicas > 1 {
            "time-slicing"
        } else {
            "none"
        };
        put("nvidia.com/gpu.sharing-strategy", sharing.into());
        put("nvidia.com/mig.capable", self.mig_capable.to_string());
        let mig_on = self.mig != Mig::Off;
        put("nvidia.com/mps.capable", (!mig_on).to_string());
        if self.mig_capable {
            put("nvidia.com/mig.config.state", "success".into());
        }
        match &self.mig {
            Mig::Off => {
                put("nvidia.com/gpu.product", self.product.clone());
                put("nvidia.com/gpu.count", self.count.to_string());
                put("nvidia.com/gpu.memory", self.memory_mib.to_string());
                if self.mig_capable {
                    put("nvidia.com/mig.config", "all-disabled".into());
                }
            }
            Mig::Single {
                profile,
                per_gpu,
                memory_mib,
            } => {
                put("nvidia.com/mig.strategy", "single".into());
                put("nvidia.com/mig.config", format!("all-{profile}"));
                put(
                    "nvidia.com/gpu.product",
                    format!("{}-MIG-{profile}", self.product),
                );
                put("nvidia.com/gpu.count", (self.count * per_gpu).to_string());
                put("nvidia.com/gpu.memory", memory_mib.to_string());
                let slices = profile_slices(profile);
                put("nvidia.com/gpu.slices.gi", slices.to_string());
                put("nvidia.com/gpu.slices.ci", slices.to_string());
            }
            Mig::Mixed(profiles) => {
                put("nvidia.com/mig.strategy", "mixed".into());
                put("nvidia.com/mig.config", "all-balanced".into());
                // Whole GPUs keep their labels under `mixed`; with every GPU split there are none left.
                put("nvidia.com/gpu.product", self.product.clone());
                put("nvidia.com/gpu.count", self.count.to_string());
                put("nvidia.com/gpu.memory", self.memory_mib.to_string());
                for (profile, n, mem) in profiles {
                    let p = format!("nvidia.com/mig-{profile}");
                    let slices = profile_slices(profile);
                    put(&format!("{p}.count"), n.to_string());
                    put(&format!("{p}.memory"), mem.to_string());
                    put(
                        &format!("{p}.product"),
                        format!("{}-MIG-{profile}", self.product),
                    );
                    put(&format!("{p}.replicas"), "1".into());
                    put(&format!("{p}.sharing-strategy"), "none".into());
                    put(&format!("{p}.slices.gi"), slices.to_string());
                    put(&format!("{p}.slices.ci"), slices.to_string());
                }
            }
        }
        l.extend(self.extra_labels.clone());
        l
    }

    /// `status.capacity` (and `allocatable`) of such a node.
    pub fn capacity(&self) -> BTreeMap<String, String> {
        let mut c = BTreeMap::from([
            ("cpu".to_string(), self.cpu.clone()),
            ("memory".to_string(), self.memory.clone()),
            ("pods".to_string(), "110".to_string()),
            ("ephemeral-storage".to_string(), "1843217364Ki".to_string()),
        ]);
        match &self.mig {
            _ if !self.device_plugin => {}
            Mig::Off => {
                c.insert(
                    "nvidia.com/gpu".into(),
                    (self.count * self.replicas).to_string(),
                );
            }
            Mig::Single { per_gpu, .. } => {
                c.insert("nvidia.com/gpu".into(), (self.count * per_gpu).to_string());
            }
            Mig::Mixed(profiles) => {
                for (profile, n, _) in profiles {
                    c.insert(format!("nvidia.com/mig-{profile}"), n.to_string());
                }
            }
        }
        c.extend(self.extra_capacity.clone());
        c
    }
}

/// `1g.10gb` -> 1: the number of GPU (and compute) slices of a MIG profile.
fn profile_slices(profile: &str) -> u32 {
    profile
        .split('g')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// The HTTP code and message of an API error, or an error saying what came back instead.
pub fn api_error(result: kube::Result<impl std::fmt::Debug>) -> Result<(u16, String)> {
    match result {
        Err(kube::Error::Api(status)) => Ok((status.code, status.message.clone())),
        Err(other) => bail!("expected an API error, got another error: {other:#}"),
        Ok(v) => {
            let full = format!("{v:?}");
            let mut shown: String = full.chars().take(300).collect();
            if shown.len() < full.len() {
                shown.push_str("...");
            }
            bail!("expected an API error, but the request succeeded: {shown}")
        }
    }
}

/// Creates `obj`, retrying while an admission webhook refuses it because its informer cache has
/// not yet seen an object the request names. Kueue's Pod webhook (`mpod.kb.io`) reads the Pod's
/// Namespace and its owning Job from a cache, so a Pod created right after either is refused with
/// `404 ... Namespace "x" not found` (or `Job.batch "x" not found`) for a few milliseconds; a
/// controller retries such a refusal, and so does this helper, for 20 s at most. Any other error,
/// or the same one past the deadline, is returned.
pub async fn create_admitted<K>(api: &Api<K>, obj: &K) -> kube::Result<K>
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match api.create(&PostParams::default(), obj).await {
            Err(kube::Error::Api(s))
                if s.code == 404
                    && s.message.contains("admission webhook")
                    && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

fn now_rfc3339() -> String {
    // Seconds precision is enough; format by hand to avoid a time-crate dependency in tests.
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Lowercase DNS-label characters only.
fn sanitize(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while out.contains("--") {
        out = out.replace("--", "-");
    }
    out.trim_matches('-').to_string()
}

/// `t-<test name, up to 24 chars>-<process and time unique suffix>`: unique across parallel tests, test
/// binaries and runs against the same cluster.
fn unique_prefix(test_name: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut name = sanitize(test_name);
    name.truncate(24);
    let name = name.trim_end_matches('-');
    format!(
        "t-{name}-{:x}{:05x}{n:x}",
        std::process::id() & 0xffff,
        nanos >> 12
    )
}

/// gpuctl's own cluster client for the harness (what `gpuctl plan/apply/upgrade` use).
pub async fn gpuctl_kube() -> gpuctl_cluster::Kube {
    let path = std::env::var(KUBECONFIG_ENV).expect("checked by TestCluster::connect");
    gpuctl_cluster::connect(&gpuctl_cluster::ConnectOptions {
        kubeconfig: Some(path.into()),
        context: None,
    })
    .await
    .expect("connects to the harness")
}
