//! The optional NVIDIA Network Operator stack of a blueprint (`spec.networkOperator`): which NIC
//! driver, which RDMA device plugin and which secondary pod network the declared fabric gets.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::install::InstallMode;

/// The NVIDIA Network Operator release and the `NicClusterPolicy` gpuctl renders for it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkOperator {
    /// Chart release, e.g. `v26.4.1`; must be known to `profiles/network.yaml`.
    #[schemars(example = &"v26.4.1")]
    pub version: String,
    /// Namespace of the operator and its operands.
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// How the Helm release is handled (as for the GPU Operator).
    #[serde(default)]
    pub install: InstallMode,
    /// Where the NIC driver (DOCA-OFED) comes from.
    #[serde(default)]
    pub nic_driver: NicDriver,
    /// The device plugin that advertises RDMA devices to pods.
    #[serde(default)]
    pub device_plugin: DevicePlugin,
    /// A secondary network for pods (IPoIB on InfiniBand, macvlan or host-device on RoCE).
    #[serde(default)]
    pub secondary_network: Option<SecondaryNetwork>,
    /// Where the chart comes from with `install: helm` (default: NVIDIA's Helm repository), as
    /// for `gpuOperator.chart`.
    #[serde(default)]
    pub chart: crate::blueprint::ChartSourceSpec,
    /// Raw chart overrides, deep-merged last; every key path must exist in the chart's values.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub values: serde_json::Map<String, serde_json::Value>,
}

fn default_namespace() -> String {
    "nvidia-network-operator".to_string()
}

/// The NIC driver's source.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NicDriver {
    /// `operator`: the Network Operator runs the DOCA-OFED driver container; `host`: the hosts
    /// carry it (then set `gpuOperator.rdma.useHostMofed` for nvidia-peermem).
    #[serde(default)]
    pub source: NicDriverSource,
    /// DOCA-OFED driver container tag (`ofedDriver.version`) with `source: operator`. Default: the
    /// driver the chosen Network Operator release ships (`gpuctl profiles` lists it per release);
    /// set it to pin another tag.
    #[serde(default)]
    #[schemars(example = &"doca3.3.0-26.01-1.0.0.0-0")]
    pub version: Option<String>,
}

/// Where the NIC driver comes from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum NicDriverSource {
    /// The Network Operator's driver container.
    #[default]
    Operator,
    /// Installed on the hosts.
    Host,
}

/// Which device plugin exposes RDMA to pods.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DevicePlugin {
    /// `rdma-shared` (all pods share the node's HCAs) or `sriov` (one virtual function per
    /// request; the VFs themselves are configured outside gpuctl).
    #[serde(default)]
    pub kind: DevicePluginKind,
    /// Resource name without prefix; pods request `<prefix>/<name>` (`rdma/` for the shared
    /// plugin, `nvidia.com/` for SR-IOV).
    #[serde(default = "default_resource_name")]
    #[schemars(example = &"rdma_shared_device_a")]
    pub resource_name: String,
    /// Pods that may share the node's HCAs at once (`rdmaHcaMax`, shared plugin only).
    #[serde(default = "default_hca_max")]
    pub hca_max: u32,
    /// Network interfaces whose RDMA devices are advertised, e.g. `[ibp12s0, ibp75s0]`; empty:
    /// every NVIDIA (vendor 15b3) NIC.
    #[serde(default)]
    pub if_names: Vec<String>,
}

impl Default for DevicePlugin {
    fn default() -> Self {
        DevicePlugin {
            kind: DevicePluginKind::default(),
            resource_name: default_resource_name(),
            hca_max: default_hca_max(),
            if_names: Vec::new(),
        }
    }
}

fn default_resource_name() -> String {
    "rdma_shared_device_a".to_string()
}

fn default_hca_max() -> u32 {
    63
}

/// RDMA device plugin flavour.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DevicePluginKind {
    /// k8s-rdma-shared-dev-plugin.
    #[default]
    RdmaShared,
    /// SR-IOV network device plugin.
    Sriov,
}

impl DevicePlugin {
    /// The extended resource pods request.
    pub fn resource(&self) -> String {
        match self.kind {
            DevicePluginKind::RdmaShared => format!("rdma/{}", self.resource_name),
            DevicePluginKind::Sriov => format!("nvidia.com/{}", self.resource_name),
        }
    }
}

/// A secondary pod network.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecondaryNetwork {
    /// `ipoib` (InfiniBand), `macvlan` or `host-device` (RoCE / Ethernet).
    pub kind: SecondaryNetworkKind,
    /// Name of the network object and its NetworkAttachmentDefinition (pods name it in
    /// `k8s.v1.cni.cncf.io/networks`).
    #[serde(default = "default_network_name")]
    pub name: String,
    /// Host interface to enslave (`ipoib`, `macvlan`), e.g. `ibp12s0`.
    #[serde(default)]
    #[schemars(example = &"ibp12s0")]
    pub master: Option<String>,
    /// Namespace of the NetworkAttachmentDefinition (default: `default`); pods of other
    /// namespaces name it `<namespace>/<name>`.
    #[serde(default)]
    #[schemars(example = &"default")]
    pub network_namespace: Option<String>,
    /// Pod address range of the whereabouts IPAM, a CIDR such as `192.168.100.0/24`.
    #[schemars(example = &"192.168.100.0/24")]
    pub range: String,
    /// Interface MTU (macvlan only; 0: the master's).
    #[serde(default)]
    #[schemars(example = 9000)]
    pub mtu: u32,
    /// Addresses NVIDIA IPAM hands each node from `range` at a time (`perNodeBlockSize` of the
    /// nv-ipam IPPool).
    #[serde(default = "default_block")]
    pub per_node_block_size: u32,
}

fn default_block() -> u32 {
    32
}

fn default_network_name() -> String {
    "rdma-net".to_string()
}

/// Kinds of secondary networks the Network Operator renders NetworkAttachmentDefinitions for.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SecondaryNetworkKind {
    /// IP over InfiniBand (`IPoIBNetwork`).
    Ipoib,
    /// macvlan on a RoCE/Ethernet interface (`MacvlanNetwork`).
    Macvlan,
    /// A whole device moved into the pod (`HostDeviceNetwork`, with the SR-IOV plugin).
    HostDevice,
}
