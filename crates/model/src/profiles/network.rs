//! Network and topology facts (`profiles/network.yaml`): GPUDirect RDMA requirements, Network
//! Operator releases, kubelet NUMA limits.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::common::{PartialDate, TextList, text_list};
use super::{Architecture, CudaRequirement, FactRow, NETWORK_FILE};
use super::{ProfileError, RowLog, inconsistent, sourced};
use crate::version::CudaVersion;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NetworkFile {
    pub(super) source: TextList,
    /// When the sources were read (every section without its own date).
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) gpudirect_rdma: GpuDirectRdma,
    pub(super) network_operator: NetworkOperatorFacts,
    pub(super) kubelet: KubeletFacts,
    pub(super) nv_ipam: NvIpamFacts,
}

/// All network facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkFacts {
    /// GPUDirect RDMA requirements.
    pub gpudirect_rdma: GpuDirectRdma,
    /// Network Operator releases.
    pub network_operator: NetworkOperatorFacts,
    /// kubelet NUMA facts.
    pub kubelet: KubeletFacts,
    /// NVIDIA IPAM pools.
    pub nv_ipam: NvIpamFacts,
}

/// What each GPUDirect RDMA mechanism needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuDirectRdma {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
    /// DMA-BUF.
    pub dma_buf: DmaBuf,
    /// Legacy nvidia-peermem.
    pub nvidia_peermem: Peermem,
    /// `useHostMofed`.
    pub host_mofed: HostMofed,
    /// Caveats.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// DMA-BUF requirements as NVIDIA's GPUDirect RDMA page states them. No first GPU Operator
/// release is documented, so none is recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DmaBuf {
    /// Whether the driver must load the open GPU kernel modules.
    pub open_kernel_modules: bool,
    /// Oldest CUDA whose driver supports it (its driver floor comes from `cuda.yaml`).
    pub min_cuda: String,
    /// Oldest GPU architecture (a key of `architectures.yaml`).
    pub min_architecture: String,
    /// First Linux kernel, `major.minor`.
    pub min_kernel: String,
}

/// nvidia-peermem requirements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peermem {
    /// First GPU Operator release with `driver.rdma.enabled`.
    pub min_operator: String,
    /// First driver branch shipping nvidia-peermem.
    pub min_driver_branch: u32,
}

/// `useHostMofed` requirements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostMofed {
    /// First GPU Operator release.
    pub min_operator: String,
}

/// Network Operator facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkOperatorFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
    /// `mellanox.com/v1alpha1`.
    pub api_version: String,
    /// Chart name.
    pub chart: String,
    /// Helm repository.
    pub chart_repository: String,
    /// PCI vendor id of NVIDIA NICs.
    pub nic_vendor: String,
    /// Releases gpuctl renders for.
    pub releases: Vec<NetworkOperatorRelease>,
    /// Caveats.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// One Network Operator release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkOperatorRelease {
    /// `v26.4.1`.
    pub version: String,
    /// The Kubernetes minors the release's platform page supports; `None` when not found.
    #[serde(default)]
    pub kubernetes: Option<super::operator::KubeRange>,
    /// The chart's `kubeVersion` install guard (not a support range), when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_kube_version: Option<String>,
    /// Image repository of the NVIDIA-built components.
    pub repository: String,
    /// Their tag.
    pub tag: String,
    /// The DOCA-OFED driver container version the release ships (`ofedDriver.version`), the
    /// default a blueprint may override.
    pub doca_driver: String,
    /// The DOCA-OFED LTS driver the release also supports, when its docs name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doca_driver_lts: Option<String>,
    /// The DOCA-OFED version to pin for precompiled driver containers, when it differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doca_driver_precompiled: Option<String>,
    /// Image names.
    pub images: NetworkImages,
    /// The release's chart, as read from its archive; `None` where the archive was not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<NetworkOperatorChart>,
    /// Where this release's facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
    /// Caveats.
    #[serde(
        default,
        rename = "note",
        deserialize_with = "text_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub notes: Vec<String>,
}

/// The Network Operator chart of one release, read from its archive: what helm installs and lists,
/// the subcharts it vendors, the `values.yaml` defaults gpuctl relies on, and its hook Jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkOperatorChart {
    /// The chart's `version` (`26.4.1`, no `v`): what helm pins and lists.
    pub version: String,
    /// The chart's `appVersion` (`v26.4.1`).
    pub app_version: String,
    /// The dependencies in `Chart.yaml`, vendored under `charts/`.
    pub subcharts: Vec<Subchart>,
    /// `values.yaml` defaults gpuctl's rendered values leave in force or set on purpose, by dotted
    /// path.
    pub defaults: BTreeMap<String, serde_json::Value>,
    /// Helm hook Jobs helm waits for on install and upgrade.
    #[serde(default)]
    pub hooks: Vec<ChartHook>,
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
}

/// A chart dependency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subchart {
    /// Its name (the folder under `charts/`, and the values key of its own values).
    pub name: String,
    /// Its chart version.
    pub version: String,
    /// The parent's value that turns it on (`nfd.enabled`).
    pub condition: String,
}

/// A helm hook Job of a chart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChartHook {
    /// The Job's name.
    pub job: String,
    /// `helm.sh/hook` events (`pre-install`, `pre-upgrade`).
    pub events: Vec<String>,
    /// The value that must be true for the chart to render it; always rendered when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

impl NetworkOperatorChart {
    /// The chart's default at `path` (one of [`NetworkOperatorChart::defaults`]).
    pub fn default_of(&self, path: &str) -> Option<&serde_json::Value> {
        self.defaults.get(path)
    }

    /// Whether `path` is true in the release's values: the rendered `values` where they set it,
    /// the chart's default otherwise (false when neither says).
    pub fn is_on(&self, values: &serde_json::Value, path: &str) -> bool {
        let pointer = format!("/{}", path.replace('.', "/"));
        values
            .pointer(&pointer)
            .or_else(|| self.default_of(path))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    }

    /// The subcharts a release with `values` deploys (its condition on), in `Chart.yaml` order.
    pub fn deployed_subcharts(&self, values: &serde_json::Value) -> Vec<&Subchart> {
        self.subcharts
            .iter()
            .filter(|s| self.is_on(values, &s.condition))
            .collect()
    }

    /// The hook Jobs a release with `values` runs on install and upgrade.
    pub fn hook_jobs(&self, values: &serde_json::Value) -> Vec<&ChartHook> {
        self.hooks
            .iter()
            .filter(|h| h.condition.as_ref().is_none_or(|c| self.is_on(values, c)))
            .collect()
    }
}

/// Component image names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkImages {
    /// DOCA-OFED driver.
    pub doca_driver: String,
    /// RDMA shared device plugin.
    pub rdma_shared_device_plugin: String,
    /// SR-IOV network device plugin.
    pub sriov_device_plugin: String,
    /// Multus.
    pub multus: String,
    /// Reference CNI plugins.
    pub cni_plugins: String,
    /// IPoIB CNI.
    pub ipoib: String,
    /// NVIDIA IPAM.
    pub nv_ipam: String,
}

/// kubelet facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeletFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
    /// `kubelet.config.k8s.io/v1beta1`.
    pub api_version: String,
    /// NUMA nodes above which the Topology Manager refuses to start by default.
    pub topology_manager_max_numa_nodes: u32,
}

/// NVIDIA IPAM (nv-ipam) facts: the pool objects' API and the limits nv-ipam enforces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvIpamFacts {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// When they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
    /// `nv-ipam.nvidia.com/v1alpha1`.
    pub api_version: String,
    /// The CNI `ipam.poolType` naming a CIDRPool.
    pub cidrpool_cni_type: String,
    /// The smallest `perNodeBlockSize` nv-ipam accepts.
    pub min_per_node_block_size: u32,
    /// Addresses of a subnet that are never handed out, per family.
    pub reserved_addresses: ReservedAddresses,
    /// Caveats.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// Addresses of a subnet nv-ipam never hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReservedAddresses {
    /// IPv4: the network and broadcast addresses.
    pub ipv4: u32,
    /// IPv6: the network address.
    pub ipv6: u32,
}

impl NetworkOperatorFacts {
    /// The release `version` names (`v26.4.1` or `26.4.1`).
    pub fn release(&self, version: &str) -> Option<&NetworkOperatorRelease> {
        let want = version.strip_prefix('v').unwrap_or(version);
        self.releases
            .iter()
            .find(|r| r.version.strip_prefix('v').unwrap_or(&r.version) == want)
    }

    /// Known releases, for hints.
    pub fn known(&self) -> String {
        self.releases
            .iter()
            .map(|r| r.version.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub use super::common::kernel_major_minor;

impl NetworkFile {
    pub(super) fn check(&self) -> Result<(), String> {
        if kernel_major_minor(&self.gpudirect_rdma.dma_buf.min_kernel).is_none() {
            return Err(format!(
                "gpudirect_rdma.dma_buf.min_kernel `{}` is not `major.minor`",
                self.gpudirect_rdma.dma_buf.min_kernel
            ));
        }
        let dma_buf = &self.gpudirect_rdma.dma_buf;
        dma_buf
            .min_cuda
            .parse::<crate::version::CudaVersion>()
            .map_err(|e| format!("gpudirect_rdma.dma_buf.min_cuda: {e}"))?;
        for v in [
            &self.gpudirect_rdma.nvidia_peermem.min_operator,
            &self.gpudirect_rdma.host_mofed.min_operator,
        ] {
            v.parse::<crate::version::OperatorVersion>()
                .map_err(|e| format!("operator minimum `{v}`: {e}"))?;
        }
        if self.network_operator.releases.is_empty() {
            return Err("network_operator lists no release".into());
        }
        let mut seen = std::collections::BTreeSet::new();
        for r in &self.network_operator.releases {
            if !seen.insert(r.version.trim_start_matches('v')) {
                return Err(format!("network_operator {} is listed twice", r.version));
            }
            if r.source.iter().all(|s| s.trim().is_empty()) {
                return Err(format!("network_operator {} has no `source:`", r.version));
            }
            if let Some(c) = &r.chart {
                check_chart(&r.version, c)?;
            }
            if let Some(k) = &r.kubernetes
                && k.min > k.max
            {
                return Err(format!(
                    "network_operator {}: kubernetes min is above max",
                    r.version
                ));
            }
            for (what, v) in [
                ("doca_driver", Some(&r.doca_driver)),
                ("doca_driver_lts", r.doca_driver_lts.as_ref()),
                (
                    "doca_driver_precompiled",
                    r.doca_driver_precompiled.as_ref(),
                ),
            ] {
                if let Some(v) = v
                    && (v.is_empty()
                        || !v
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'))
                {
                    return Err(format!(
                        "network_operator {}: {what} `{v}` is not a container tag",
                        r.version
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A release's chart facts: its versions match the release, every subchart is turned on by a value
/// the chart has a default for, every condition is a dotted path.
fn check_chart(release: &str, c: &NetworkOperatorChart) -> Result<(), String> {
    let bare = release.trim_start_matches('v');
    if c.version != bare || c.app_version.trim_start_matches('v') != bare {
        return Err(format!(
            "network_operator {release}: chart version `{}` / appVersion `{}` do not match the release",
            c.version, c.app_version
        ));
    }
    if c.source.iter().all(|s| s.trim().is_empty()) {
        return Err(format!(
            "network_operator {release}: chart has no `source:`"
        ));
    }
    let conditions = c
        .subcharts
        .iter()
        .map(|s| &s.condition)
        .chain(c.hooks.iter().filter_map(|h| h.condition.as_ref()));
    for cond in conditions {
        if !c
            .default_of(cond)
            .is_some_and(serde_json::Value::is_boolean)
        {
            return Err(format!(
                "network_operator {release}: chart condition `{cond}` has no true/false default in `chart.defaults`"
            ));
        }
    }
    Ok(())
}

pub(super) fn load_network(
    file: NetworkFile,
    architectures: &BTreeMap<String, Architecture>,
    cuda: &BTreeMap<CudaVersion, CudaRequirement>,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<NetworkFacts, ProfileError> {
    const F: &str = NETWORK_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    log.row(
        "gpudirect_rdma",
        &file.gpudirect_rdma.source,
        file.gpudirect_rdma.read,
    );
    log.row(
        "network_operator",
        &file.network_operator.source,
        file.network_operator.read,
    );
    for r in &file.network_operator.releases {
        log.row(
            format!("network_operator.releases.{}", r.version),
            &r.source,
            r.read,
        );
        if let Some(c) = &r.chart {
            log.row(
                format!("network_operator.releases.{}.chart", r.version),
                &c.source,
                c.read,
            );
        }
    }
    log.row("kubelet", &file.kubelet.source, file.kubelet.read);
    log.row("nv_ipam", &file.nv_ipam.source, file.nv_ipam.read);
    let dma_buf = &file.gpudirect_rdma.dma_buf;
    if !architectures.contains_key(&dma_buf.min_architecture) {
        return Err(inconsistent(
            F,
            format!(
                "gpudirect_rdma.dma_buf.min_architecture `{}` is not in architectures.yaml",
                dma_buf.min_architecture
            ),
        ));
    }
    if dma_buf
        .min_cuda
        .parse::<CudaVersion>()
        .ok()
        .and_then(|v| cuda.get(&v.without_patch()))
        .is_none()
    {
        return Err(inconsistent(
            F,
            format!(
                "gpudirect_rdma.dma_buf.min_cuda `{}` is not a CUDA release of cuda.yaml",
                dma_buf.min_cuda
            ),
        ));
    }
    sourced(
        sources,
        F,
        Some("gpudirect_rdma"),
        &file.gpudirect_rdma.source,
    )?;
    sourced(
        sources,
        F,
        Some("network_operator"),
        &file.network_operator.source,
    )?;
    sourced(sources, F, Some("kubelet"), &file.kubelet.source)?;
    sourced(sources, F, Some("nv_ipam"), &file.nv_ipam.source)?;
    file.check().map_err(|m| inconsistent(F, m))?;
    Ok(NetworkFacts {
        gpudirect_rdma: file.gpudirect_rdma,
        network_operator: file.network_operator,
        kubelet: file.kubelet,
        nv_ipam: file.nv_ipam,
    })
}

#[cfg(test)]
mod tests {
    use super::{NetworkOperatorChart, check_chart, kernel_major_minor};
    use crate::profiles::Catalog;
    use serde_json::json;

    fn chart(release: &str) -> Option<&'static NetworkOperatorChart> {
        Catalog::embedded()
            .network()
            .network_operator
            .release(release)
            .and_then(|r| r.chart.as_ref())
    }

    /// Per release: the chart version helm installs and its subcharts (name, version, condition),
    /// as read from the archive; releases whose archive was not read have none.
    #[test]
    fn network_operator_chart_facts_per_release() {
        let v26_4_1 = vec![
            ("node-feature-discovery", "0.2.1", "nfd.enabled"),
            (
                "sriov-network-operator",
                "0.1.0",
                "sriovNetworkOperator.enabled",
            ),
            (
                "maintenance-operator-chart",
                "0.0.1",
                "maintenanceOperator.enabled",
            ),
        ];
        for (release, want) in [
            ("v26.4.1", Some(("26.4.1", "v26.4.1", v26_4_1.clone()))),
            ("26.4.1", Some(("26.4.1", "v26.4.1", v26_4_1))),
            ("v26.4.0", None),
            ("v26.7.0", None),
        ] {
            let got = chart(release).map(|c| {
                (
                    c.version.as_str(),
                    c.app_version.as_str(),
                    c.subcharts
                        .iter()
                        .map(|s| (s.name.as_str(), s.version.as_str(), s.condition.as_str()))
                        .collect::<Vec<_>>(),
                )
            });
            assert_eq!(got, want, "{release}");
        }
    }

    /// The values.yaml defaults gpuctl relies on, one row each.
    #[test]
    fn network_operator_chart_defaults_gpuctl_relies_on() {
        let c = chart("v26.4.1").unwrap();
        for (path, want) in [
            ("nfd.enabled", json!(true)),
            ("nfd.deployNodeFeatureRules", json!(true)),
            ("sriovNetworkOperator.enabled", json!(false)),
            ("maintenanceOperator.enabled", json!(false)),
            ("upgradeCRDs", json!(true)),
            ("operator.admissionController.enabled", json!(false)),
            ("operator.repository", json!("nvcr.io/nvidia/cloud-native")),
            ("operator.image", json!("network-operator")),
        ] {
            assert_eq!(c.default_of(path), Some(&want), "{path}");
        }
        assert_eq!(c.default_of("no.such.key"), None);
    }

    /// Which subcharts and hook Jobs a release deploys: the rendered values where they say, the
    /// chart's defaults otherwise.
    #[test]
    fn subcharts_and_hooks_follow_the_values_then_the_defaults() {
        let c = chart("v26.4.1").unwrap();
        for (values, subcharts, hooks) in [
            (
                json!({}),
                vec!["node-feature-discovery"],
                vec!["network-operator-keep-ncp", "network-operator-upgrade-crd"],
            ),
            (
                json!({"nfd": {"enabled": false}, "sriovNetworkOperator": {"enabled": false}}),
                vec![],
                vec!["network-operator-keep-ncp", "network-operator-upgrade-crd"],
            ),
            (
                json!({"sriovNetworkOperator": {"enabled": true}, "upgradeCRDs": false}),
                vec!["node-feature-discovery", "sriov-network-operator"],
                vec!["network-operator-keep-ncp"],
            ),
            (
                json!({"maintenanceOperator": {"enabled": true}, "nfd": {"enabled": "yes"}}),
                vec!["maintenance-operator-chart"],
                vec!["network-operator-keep-ncp", "network-operator-upgrade-crd"],
            ),
        ] {
            let got: Vec<&str> = c
                .deployed_subcharts(&values)
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            assert_eq!(got, subcharts, "{values}");
            let got: Vec<&str> = c
                .hook_jobs(&values)
                .iter()
                .map(|h| h.job.as_str())
                .collect();
            assert_eq!(got, hooks, "{values}");
        }
    }

    /// A chart row that contradicts its release, or names a condition without a default, is
    /// refused when the tables load.
    #[test]
    fn chart_facts_are_checked_when_loaded() {
        let good = chart("v26.4.1").unwrap().clone();
        assert_eq!(check_chart("v26.4.1", &good), Ok(()));
        let mut v = good.clone();
        v.version = "v26.4.1".into();
        let mut app = good.clone();
        app.app_version = "v26.4.0".into();
        let mut cond = good.clone();
        cond.subcharts[0].condition = "nfd.nosuch".into();
        let mut hook = good.clone();
        hook.hooks[1].condition = Some("operator.image".into());
        let mut unsourced = good.clone();
        unsourced.source = vec![" ".into()];
        for (what, c, want) in [
            ("chart version with a v", v, "chart version `v26.4.1`"),
            ("appVersion of another release", app, "appVersion `v26.4.0`"),
            (
                "unknown condition",
                cond,
                "`nfd.nosuch` has no true/false default",
            ),
            (
                "non-boolean condition",
                hook,
                "`operator.image` has no true/false default",
            ),
            ("no source", unsourced, "has no `source:`"),
        ] {
            let err = check_chart("v26.4.1", &c).unwrap_err();
            assert!(err.contains(want), "{what}: {err}");
        }
    }

    #[test]
    fn kernel_releases_parse_to_major_minor() {
        assert_eq!(kernel_major_minor("5.15.0-1055-aws"), Some((5, 15)));
        assert_eq!(kernel_major_minor("6.8"), Some((6, 8)));
        assert_eq!(
            kernel_major_minor("4.18.0-553.el8_10.x86_64"),
            Some((4, 18))
        );
        assert_eq!(kernel_major_minor("banana"), None);
        assert_eq!(kernel_major_minor("5"), None);
    }
}
