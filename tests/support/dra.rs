//! A test driver that plays NVIDIA's DRA driver for GPUs (chart `nvidia-dra-driver-gpu` v25.12.0)
//! as far as the API server and kube-scheduler see it, for the DRA cluster tests.
//!
//! What it plays:
//! - the DeviceClasses `gpu.nvidia.com` and `mig.nvidia.com` as the chart's templates define them:
//!   the CEL selectors are read at test time from
//!   `../shared/upstream/dra-driver-nvidia-gpu/v25.12.0/templates/deviceclass-{gpu,mig}.yaml`
//!   ([`crate::support::releases::shared`]); `extendedResourceName` is left out (Kubernetes 1.35
//!   drops it on write, its gate DRAExtendedResource being off);
//! - per node what the GPU kubelet plugin publishes: one ResourceSlice, driver `gpu.nvidia.com`,
//!   pool named after the node (generation 1, resourceSliceCount 1), `nodeName` set, with
//!   - a whole GPU as device `gpu-<minor>`: attributes `type` = gpu, `uuid`, `productName` (NVML's
//!     name), `brand`, `architecture` (strings), `cudaComputeCapability`, `driverVersion`,
//!     `cudaDriverVersion` (semver versions, normalised as the driver does: `580.95.05` ->
//!     `580.95.5`, `9.0` -> `9.0.0`); capacity `memory` (NVML's total);
//!   - on a MIG-enabled GPU, its MIG devices only (the full GPU of a MIG-enabled Ampere is not
//!     advertised), named `gpu-<minor>-mig-<giProfileId>-<placementStart>-<placementSize>`:
//!     the parent's attributes with `type` = mig, plus `profile` and `parentUUID`; capacities
//!     `memory` and `multiprocessors`;
//! - Ready Nodes for it (cpu/memory/pods allocatable, no not-ready taint, GFD labels, no
//!   `nvidia.com/gpu` allocatable: no device plugin runs there).
//!
//! What it does not play: no kubelet, no kubelet plugin, no NodePrepareResources or CDI, no health
//! checks; pods are bound by the real kube-scheduler (profile `gpuctl-dra`, `run up
//! --with-scheduler`) and never run. Attributes the real driver also publishes but no test reads
//! (`pcieBusID`, `addressingMode`; MIG engine and `memorySlice<N>` capacities) are left out;
//! compute-domain and vfio devices are not published.
#![allow(dead_code)]

use std::path::PathBuf;

use anyhow::{Context, Result};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::support::cluster::{GpuNode, TestCluster};
use crate::support::releases::shared;

/// The driver name (and the attribute/capacity domain in CEL).
pub const DRIVER: &str = "gpu.nvidia.com";
/// The scheduler name `tools/kube-harness/run up --with-scheduler` serves.
pub const SCHEDULER: &str = "gpuctl-dra";
/// The release of NVIDIA's DRA driver whose DeviceClasses are played.
pub const DRIVER_RELEASE: &str = "v25.12.0";

/// The chart's DeviceClass template for `kind` (`gpu`, `mig`, ...).
pub fn class_template(kind: &str) -> PathBuf {
    shared()
        .join("upstream/dra-driver-nvidia-gpu")
        .join(DRIVER_RELEASE)
        .join("templates")
        .join(format!("deviceclass-{kind}.yaml"))
}

/// The DeviceClass of the chart's template `deviceclass-<kind>.yaml`: its `metadata.name` and the
/// CEL expressions of `spec.selectors`, read from the template (a Helm template, so read by line:
/// the lines `name:` and `expression:`; the Go-template lines around them are not YAML).
pub fn device_class(kind: &str) -> Result<DeviceClass> {
    let path = class_template(kind);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (GPUCTL_SHARED)", path.display()))?;
    let mut name = None;
    let mut selectors = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("name:") {
            name.get_or_insert_with(|| v.trim().to_string());
        } else if let Some(v) = t.strip_prefix("expression:") {
            let v = v.trim();
            let expr: String = if v.starts_with('"') {
                serde_json::from_str(v).with_context(|| format!("{}: {v}", path.display()))?
            } else {
                v.trim_matches('\'').to_string()
            };
            selectors.push(json!({"cel": {"expression": expr}}));
        }
    }
    let name = name.with_context(|| format!("no metadata.name in {}", path.display()))?;
    anyhow::ensure!(
        !selectors.is_empty(),
        "no CEL selector in {}",
        path.display()
    );
    Ok(serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": selectors},
    }))?)
}

/// [`device_class`] with the template's `extendedResourceName` where it sets one (the chart writes
/// it on resource.k8s.io/v1 only, `gpu.nvidia.com`: `nvidia.com/gpu`).
pub fn device_class_v1(kind: &str) -> Result<DeviceClass> {
    let mut class = device_class(kind)?;
    let text = std::fs::read_to_string(class_template(kind))?;
    if let Some(name) = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("extendedResourceName:"))
    {
        class.spec.extended_resource_name = Some(name.trim().to_string());
    }
    Ok(class)
}

/// Creates the chart's `gpu.nvidia.com` and `mig.nvidia.com` DeviceClasses as the chart writes them
/// on resource.k8s.io/v1, with the extended-resource name: for a Kubernetes 1.36 cluster of the
/// test's own (1.35 drops the field on write). Returns them as stored.
pub async fn create_device_classes_v1(tc: &TestCluster) -> Result<Vec<DeviceClass>> {
    let api: Api<DeviceClass> = tc.cluster_scoped();
    let mut out = Vec::new();
    for kind in ["gpu", "mig"] {
        out.push(
            api.create(&PostParams::default(), &device_class_v1(kind)?)
                .await
                .with_context(|| format!("creating DeviceClass {kind}"))?,
        );
    }
    Ok(out)
}

/// Creates the chart's `gpu.nvidia.com` and `mig.nvidia.com` DeviceClasses (cluster-wide names:
/// only in a cluster of the test's own). Returns them as stored.
pub async fn create_device_classes(tc: &TestCluster) -> Result<Vec<DeviceClass>> {
    let api: Api<DeviceClass> = tc.cluster_scoped();
    let mut out = Vec::new();
    for kind in ["gpu", "mig"] {
        let class = device_class(kind)?;
        out.push(
            api.create(&PostParams::default(), &class)
                .await
                .with_context(|| format!("creating DeviceClass {kind}"))?,
        );
    }
    Ok(out)
}

/// One MIG device as the driver publishes it (`nvidia-smi mig -lgip` gives the numbers).
#[derive(Clone, Debug)]
pub struct MigDevice {
    /// e.g. `1g.10gb`
    pub profile: String,
    /// The GPU instance profile id (19 for `1g.10gb` on an A100 80GB).
    pub gi_profile_id: u32,
    pub placement_start: u32,
    pub placement_size: u32,
    /// Quantity, e.g. `9728Mi`.
    pub memory: String,
    pub multiprocessors: u32,
}

/// One physical GPU of a node.
#[derive(Clone, Debug)]
pub struct DraGpu {
    pub minor: u32,
    pub uuid: String,
    /// NVML's name, e.g. `NVIDIA H100 80GB HBM3`.
    pub product_name: String,
    pub brand: String,
    pub architecture: String,
    /// Normalised semver, e.g. `9.0.0`.
    pub cuda_compute_capability: String,
    pub driver_version: String,
    pub cuda_driver_version: String,
    /// Quantity, e.g. `81559Mi`.
    pub memory: String,
    /// Empty: MIG off, published as `gpu-<minor>`; else MIG on, only these are published.
    pub migs: Vec<MigDevice>,
}

/// `580.95.05` -> `580.95.5`, `9.0` -> `9.0.0`: the semver form the driver publishes
/// (Masterminds' normalisation: numeric parts without leading zeros, three parts).
pub fn semver(v: &str) -> String {
    let mut parts: Vec<String> = v
        .split('.')
        .map(|p| p.parse::<u64>().map(|n| n.to_string()).unwrap_or(p.into()))
        .collect();
    while parts.len() < 3 {
        parts.push("0".into());
    }
    parts.join(".")
}

/// A deterministic UUID-shaped id for `(node, minor)`: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
fn fake_uuid(prefix: &str, node: &str, n: u32) -> String {
    // FNV-1a over the node name and index; only needs to be unique and stable within a test.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes().chain(n.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    let hex = format!("{h:016x}{:016x}", h.rotate_left(17) ^ u64::from(n));
    format!(
        "{prefix}-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// What the GPU kubelet plugin of one node publishes.
#[derive(Clone, Debug)]
pub struct DraNode {
    pub gpus: Vec<DraGpu>,
}

impl DraNode {
    fn gpus(node: &str, count: u32, product: &str, arch: &str, cc: &str, memory: &str) -> DraNode {
        DraNode {
            gpus: (0..count)
                .map(|minor| DraGpu {
                    minor,
                    uuid: fake_uuid("GPU", node, minor),
                    product_name: product.into(),
                    brand: "Nvidia".into(),
                    architecture: arch.into(),
                    cuda_compute_capability: semver(cc),
                    driver_version: semver("580.95.05"),
                    cuda_driver_version: semver("13.0"),
                    memory: memory.into(),
                    migs: Vec::new(),
                })
                .collect(),
        }
    }

    /// `count` NVIDIA H100 80GB HBM3 (Hopper, CC 9.0, NVML total 81559 MiB), MIG off.
    pub fn h100(node: &str, count: u32) -> DraNode {
        Self::gpus(
            node,
            count,
            "NVIDIA H100 80GB HBM3",
            "Hopper",
            "9.0",
            "81559Mi",
        )
    }

    /// `count` NVIDIA A100-SXM4-80GB (Ampere, CC 8.0, 81920 MiB), MIG off.
    pub fn a100_80gb(node: &str, count: u32) -> DraNode {
        Self::gpus(
            node,
            count,
            "NVIDIA A100-SXM4-80GB",
            "Ampere",
            "8.0",
            "81920Mi",
        )
    }

    /// The GPUs `minors` split into seven `1g.10gb` instances each (A100 80GB: GI profile 19,
    /// placements 0-6 of size 1, 9.5 GiB and 14 SMs each); the others stay whole.
    pub fn mig_1g_10gb(mut self, minors: &[u32]) -> DraNode {
        for g in self.gpus.iter_mut().filter(|g| minors.contains(&g.minor)) {
            g.migs = (0..7)
                .map(|start| MigDevice {
                    profile: "1g.10gb".into(),
                    gi_profile_id: 19,
                    placement_start: start,
                    placement_size: 1,
                    memory: "9728Mi".into(),
                    multiprocessors: 14,
                })
                .collect();
        }
        self
    }

    /// The devices of the node's slice, as the driver names and describes them.
    pub fn devices(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for g in &self.gpus {
            let mut common = serde_json::Map::new();
            common.insert("uuid".into(), json!({"string": g.uuid}));
            common.insert("productName".into(), json!({"string": g.product_name}));
            common.insert("brand".into(), json!({"string": g.brand}));
            common.insert("architecture".into(), json!({"string": g.architecture}));
            common.insert(
                "cudaComputeCapability".into(),
                json!({"version": g.cuda_compute_capability}),
            );
            common.insert("driverVersion".into(), json!({"version": g.driver_version}));
            common.insert(
                "cudaDriverVersion".into(),
                json!({"version": g.cuda_driver_version}),
            );
            if g.migs.is_empty() {
                let mut attrs = common.clone();
                attrs.insert("type".into(), json!({"string": "gpu"}));
                out.push(json!({
                    "name": format!("gpu-{}", g.minor),
                    "attributes": attrs,
                    "capacity": {"memory": {"value": g.memory}},
                }));
                continue;
            }
            for (i, m) in g.migs.iter().enumerate() {
                let mut attrs = common.clone();
                attrs.insert("type".into(), json!({"string": "mig"}));
                attrs.insert(
                    "uuid".into(),
                    json!({"string": fake_uuid("MIG", &g.uuid, i as u32)}),
                );
                attrs.insert("parentUUID".into(), json!({"string": g.uuid}));
                attrs.insert("profile".into(), json!({"string": m.profile}));
                out.push(json!({
                    "name": format!(
                        "gpu-{}-mig-{}-{}-{}",
                        g.minor, m.gi_profile_id, m.placement_start, m.placement_size
                    ),
                    "attributes": attrs,
                    "capacity": {
                        "memory": {"value": m.memory},
                        "multiprocessors": {"value": m.multiprocessors.to_string()},
                    },
                }));
            }
        }
        out
    }

    /// The node's ResourceSlice: driver `gpu.nvidia.com`, pool `<node>` (generation 1, one slice).
    pub fn slice(&self, node: &str) -> Result<ResourceSlice> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-{}", DRIVER.replace('.', "-"))},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": self.devices(),
            },
        }))?)
    }
}

/// Creates a Ready node (`<prefix>-<suffix>`, see [`TestCluster::create_ready_gpu_node`]) with
/// `gpu`'s labels and no device plugin, and publishes `devices` (built for the node's name by
/// `make`) as its ResourceSlice. Returns the node's name and the slice as stored.
pub async fn create_dra_node(
    tc: &TestCluster,
    suffix: &str,
    gpu: &GpuNode,
    make: impl FnOnce(&str) -> DraNode,
) -> Result<(String, ResourceSlice)> {
    let node = tc.create_ready_gpu_node(suffix, &gpu.clone().dra()).await?;
    let slice = make(&node).slice(&node)?;
    let api: Api<ResourceSlice> = tc.cluster_scoped();
    let stored = api
        .create(&PostParams::default(), &slice)
        .await
        .with_context(|| format!("publishing the ResourceSlice of {node}"))?;
    Ok((node, stored))
}

/// A pod whose one container uses the claim made from `template` (pod claim name `gpu`), for
/// `scheduler` (None: the default scheduler, which no DRA test runs), pinned to `node` by
/// hostname when given.
pub fn claim_pod(
    name: &str,
    template: &str,
    scheduler: Option<&str>,
    node: Option<&str>,
) -> k8s_openapi::api::core::v1::Pod {
    let mut spec = json!({
        "restartPolicy": "Never",
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        "containers": [{
            "name": "cuda",
            "image": "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04",
            "command": ["nvidia-smi", "-L"],
            "resources": {"claims": [{"name": "gpu"}]},
        }],
    });
    if let Some(s) = scheduler {
        spec["schedulerName"] = json!(s);
    }
    if let Some(n) = node {
        spec["nodeSelector"] = json!({"kubernetes.io/hostname": n});
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec,
    }))
    .expect("valid pod")
}
