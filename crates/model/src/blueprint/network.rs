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
    /// NVIDIA IPAM (nv-ipam) address pools: each becomes an `IPPool` or `CIDRPool` in the
    /// operator's namespace, and declaring any turns on `nvIpam` in the NicClusterPolicy. A
    /// secondary network takes its addresses from one of them (`secondaryNetwork.ipPool`).
    #[serde(default)]
    pub ip_pools: Vec<IpPool>,
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
    /// Pod address range, a CIDR such as `192.168.100.0/24`: the shorthand of one nv-ipam
    /// `IPPool` named after the network (with `perNodeBlockSize`). Give either `range` or
    /// `ipPool`.
    #[serde(default)]
    #[schemars(example = &"192.168.100.0/24")]
    pub range: Option<String>,
    /// Name of the `networkOperator.ipPools` entry the network takes its addresses from (instead
    /// of `range`).
    #[serde(default)]
    #[schemars(example = &"ib-pool")]
    pub ip_pool: Option<String>,
    /// Interface MTU (macvlan only; 0: the master's).
    #[serde(default)]
    #[schemars(example = 9000)]
    pub mtu: u32,
    /// With `range`: addresses NVIDIA IPAM hands each node from it at a time (`perNodeBlockSize`
    /// of the IPPool). Default 32.
    #[serde(default)]
    #[schemars(example = 32)]
    pub per_node_block_size: Option<u32>,
}

impl SecondaryNetwork {
    /// The nv-ipam pool this network's IPAM names: `ipPool`, else the implicit pool of `range`
    /// (named after the network).
    pub fn pool_name(&self) -> &str {
        self.ip_pool.as_deref().unwrap_or(&self.name)
    }
}

fn default_block() -> u32 {
    32
}

/// Which nv-ipam pool kind a pool is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum IpPoolKind {
    /// `IPPool`: each node gets `perNodeBlockSize` addresses of one shared subnet.
    #[default]
    Ippool,
    /// `CIDRPool`: each node gets its own subnet of `perNodeNetworkPrefix` bits.
    Cidrpool,
}

impl IpPoolKind {
    /// The nv-ipam object kind.
    pub fn object_kind(self) -> &'static str {
        match self {
            IpPoolKind::Ippool => "IPPool",
            IpPoolKind::Cidrpool => "CIDRPool",
        }
    }
}

/// An NVIDIA IPAM address pool (nv-ipam `IPPool` or `CIDRPool`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IpPool {
    /// Pool name (DNS-1123 label, unique): the object's name and the `poolName` networks use.
    #[schemars(example = &"ib-pool")]
    pub name: String,
    /// `ippool` (a block of addresses per node from one subnet) or `cidrpool` (a subnet per
    /// node).
    #[serde(default)]
    pub kind: IpPoolKind,
    /// The pool's addresses, an IPv4 or IPv6 CIDR written at its network address (`subnet` of an
    /// IPPool, `cidr` of a CIDRPool).
    #[schemars(example = &"10.210.0.0/16")]
    pub range: String,
    /// `ippool`: the gateway handed to pods, an address inside `range`.
    #[serde(default)]
    #[schemars(example = &"10.210.0.1")]
    pub gateway: Option<String>,
    /// `cidrpool`: the gateway is this address index of each node's subnet (1: its first host).
    #[serde(default)]
    #[schemars(example = 1)]
    pub gateway_index: Option<u32>,
    /// Add the gateway as the pods' default route (needs `gateway` or `gatewayIndex`).
    #[serde(default)]
    pub default_gateway: bool,
    /// `ippool`: addresses each node gets at a time. Default 32.
    #[serde(default)]
    #[schemars(example = 64)]
    pub per_node_block_size: Option<u32>,
    /// `cidrpool`: prefix length of each node's subnet, longer than the range's (e.g. 24 in a
    /// /16). Required for `cidrpool`.
    #[serde(default)]
    #[schemars(example = 24)]
    pub per_node_network_prefix: Option<u32>,
    /// Addresses never handed out, as inclusive ranges inside `range`.
    #[serde(default)]
    pub exclusions: Vec<IpRange>,
    /// Node pools (`spec.nodePools[].name`) whose nodes get addresses from this pool; empty: the
    /// pools with an InfiniBand or RoCE network (where the NIC components run).
    #[serde(default)]
    pub node_pools: Vec<String>,
}

impl IpPool {
    /// The implicit pool of a secondary network's `range` shorthand.
    pub fn from_range(sn: &SecondaryNetwork, range: &str) -> IpPool {
        IpPool {
            name: sn.name.clone(),
            kind: IpPoolKind::Ippool,
            range: range.to_string(),
            gateway: None,
            gateway_index: None,
            default_gateway: false,
            per_node_block_size: sn.per_node_block_size,
            per_node_network_prefix: None,
            exclusions: Vec::new(),
            node_pools: Vec::new(),
        }
    }

    /// `perNodeBlockSize` with its default.
    pub fn block_size(&self) -> u32 {
        self.per_node_block_size.unwrap_or_else(default_block)
    }
}

/// An inclusive range of addresses.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IpRange {
    /// First address of the range.
    #[serde(rename = "startIP")]
    #[schemars(example = &"10.210.0.1")]
    pub start_ip: String,
    /// Last address of the range (not before `startIP`).
    #[serde(rename = "endIP")]
    #[schemars(example = &"10.210.0.9")]
    pub end_ip: String,
}

impl NetworkOperator {
    /// Every nv-ipam pool gpuctl renders, each with the blueprint path it is declared at: the
    /// `ipPools` in order, then the implicit pool of `secondaryNetwork.range`.
    pub fn pools(&self) -> Vec<(String, IpPool)> {
        let mut out: Vec<(String, IpPool)> = self
            .ip_pools
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("spec.networkOperator.ipPools[{i}]"), p.clone()))
            .collect();
        if let Some(sn) = &self.secondary_network
            && let Some(range) = &sn.range
        {
            out.push((
                "spec.networkOperator.secondaryNetwork".to_string(),
                IpPool::from_range(sn, range),
            ));
        }
        out
    }
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
