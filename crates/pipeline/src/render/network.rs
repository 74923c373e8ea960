//! Network and topology output: the GPU Operator's GPUDirect RDMA settings, the NVIDIA Network
//! Operator's `NicClusterPolicy`, secondary network and chart values, and the per-pool kubelet
//! NUMA fragments. Kueue `Topology` objects are rendered with the other Kueue objects
//! (`objects::queues`).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::nodes::Toleration;
use super::{Builder, HelmRelease, Phase, RenderError, Templates};
use gpuctl_model::blueprint::{
    Blueprint, DevicePlugin, DevicePluginKind, Fabric, InstallMode, IpPool, IpPoolKind,
    NetworkOperator, NicDriverSource, NodePool, RdmaMechanism, SecondaryNetwork,
    SecondaryNetworkKind,
};
use gpuctl_model::profiles::Catalog;
use gpuctl_model::profiles::network::NetworkOperatorRelease;

/// The only NicClusterPolicy name the Network Operator reconciles.
pub const NIC_CLUSTER_POLICY: &str = "nic-cluster-policy";
/// Path of the Network Operator's Helm values in [`super::RenderedSet::documents`].
pub const NETWORK_OPERATOR_VALUES: &str = "helm/network-operator-values.yaml";
/// Path of the Network Operator's release description in the documents.
pub const NETWORK_OPERATOR_RELEASE: &str = "helm/network-operator-release.yaml";

/// Whether any pool asks for GPUDirect RDMA.
fn any_rdma(bp: &Blueprint) -> bool {
    bp.spec.node_pools.iter().any(crate::validate::wants_rdma)
}

/// `driver.rdma` of the GPU Operator values: written when a pool asks for GPUDirect RDMA.
/// `enabled` loads the legacy nvidia-peermem module; DMA-BUF needs no module (so `false`).
pub fn helm_rdma(bp: &Blueprint) -> Option<Value> {
    if !any_rdma(bp) {
        return None;
    }
    let r = bp.spec.gpu_operator.rdma.clone().unwrap_or_default();
    Some(json!({
        "enabled": r.mechanism == RdmaMechanism::NvidiaPeermem,
        "useHostMofed": r.use_host_mofed,
    }))
}

/// `spec.rdma` of the NVIDIADriver CRs (which, not the chart values, configure the driver pods
/// gpuctl's CRs own): only when nvidia-peermem is loaded.
pub fn driver_rdma(bp: &Blueprint) -> Option<Value> {
    helm_rdma(bp).filter(|v| v["enabled"] == Value::Bool(true))
}

/// The pools whose nodes carry an RDMA fabric, with their index.
fn rdma_pools(bp: &Blueprint) -> Vec<&gpuctl_model::blueprint::NodePool> {
    bp.spec
        .node_pools
        .iter()
        .filter(|p| {
            p.topology
                .as_ref()
                .and_then(|t| t.network.as_ref())
                .is_some_and(|n| n.fabric != Fabric::Ethernet)
        })
        .collect()
}

/// Renders the Network Operator's objects: its namespace, the NicClusterPolicy and the secondary
/// network.
pub(crate) fn objects(
    bp: &Blueprint,
    catalog: &Catalog,
    out: &mut Builder<'_>,
) -> Result<(), RenderError> {
    let Some(no) = &bp.spec.network_operator else {
        return Ok(());
    };
    let facts = &catalog.network().network_operator;
    let release = facts
        .release(&no.version)
        .ok_or_else(|| RenderError::QueueRelease {
            message: format!("Network Operator `{}` is not in the catalog", no.version),
            hint: format!("use one of: {}", facts.known()),
        })?;
    out.object(
        Phase::Foundation,
        "objects/operator-namespace.yaml.j2",
        "spec.networkOperator.namespace".to_string(),
        json!({ "namespace": no.namespace }),
    )?;
    let pools = rdma_pools(bp);
    let ip_pools = no.pools();
    let image = |name: &str| image(release, name);
    let mut spec = Map::new();
    if no.nic_driver.source == NicDriverSource::Operator {
        spec.insert(
            "ofedDriver".into(),
            json!({
                "image": release.images.doca_driver,
                "repository": release.repository,
                // The blueprint's pin, else the DOCA-OFED driver the release ships.
                "version": no.nic_driver.version.clone().unwrap_or_else(|| release.doca_driver.clone()),
            }),
        );
    }
    let dp = &no.device_plugin;
    device_plugin(&mut spec, dp, release, &facts.nic_vendor);
    if let Some(sn) = &no.secondary_network {
        let mut secondary = Map::new();
        secondary.insert("multus".into(), image(&release.images.multus));
        secondary.insert("cniPlugins".into(), image(&release.images.cni_plugins));
        if sn.kind == SecondaryNetworkKind::Ipoib {
            secondary.insert("ipoib".into(), image(&release.images.ipoib));
        }
        spec.insert("secondaryNetwork".into(), Value::Object(secondary));
    }
    // nv-ipam serves the pools; the operator applies its CRDs when this is set.
    if !ip_pools.is_empty() {
        spec.insert("nvIpam".into(), image(&release.images.nv_ipam));
    }
    placement(&mut spec, &pools);
    let policy = json!({
        "apiVersion": facts.api_version,
        "kind": "NicClusterPolicy",
        "metadata": { "name": NIC_CLUSTER_POLICY },
        "spec": spec,
    });
    out.push(
        Phase::Operator,
        "network/nicclusterpolicy",
        "spec.networkOperator".to_string(),
        policy,
    )?;
    if let Some(sn) = &no.secondary_network {
        out.push(
            Phase::Operator,
            "network/secondary-network",
            "spec.networkOperator.secondaryNetwork".to_string(),
            secondary_network(sn, dp, no, catalog),
        )?;
    }
    for (path, pool) in &ip_pools {
        out.push(
            Phase::Network,
            "network/ip-pool",
            path.clone(),
            ip_pool(bp, no, pool, catalog),
        )?;
    }
    Ok(())
}

/// One nv-ipam `IPPool` or `CIDRPool`, in the operator's namespace (the only one nv-ipam reads
/// under the Network Operator).
fn ip_pool(bp: &Blueprint, no: &NetworkOperator, pool: &IpPool, catalog: &Catalog) -> Value {
    let mut spec = Map::new();
    match pool.kind {
        IpPoolKind::Ippool => {
            spec.insert("subnet".into(), json!(pool.range));
            spec.insert("perNodeBlockSize".into(), json!(pool.block_size()));
            if let Some(g) = &pool.gateway {
                spec.insert("gateway".into(), json!(g));
            }
        }
        IpPoolKind::Cidrpool => {
            spec.insert("cidr".into(), json!(pool.range));
            spec.insert(
                "perNodeNetworkPrefix".into(),
                json!(pool.per_node_network_prefix.unwrap_or_default()),
            );
            if let Some(i) = pool.gateway_index {
                spec.insert("gatewayIndex".into(), json!(i));
            }
        }
    }
    if pool.default_gateway {
        spec.insert("defaultGateway".into(), Value::Bool(true));
    }
    if !pool.exclusions.is_empty() {
        let ranges: Vec<Value> = pool
            .exclusions
            .iter()
            .map(|e| json!({ "startIP": e.start_ip, "endIP": e.end_ip }))
            .collect();
        spec.insert("exclusions".into(), Value::Array(ranges));
    }
    let terms = node_selector_terms(&crate::validate::ip_pool_nodes(bp, pool));
    if !terms.is_empty() {
        spec.insert("nodeSelector".into(), json!({ "nodeSelectorTerms": terms }));
    }
    json!({
        "apiVersion": catalog.network().nv_ipam.api_version,
        "kind": pool.kind.object_kind(),
        "metadata": { "name": pool.name, "namespace": no.namespace },
        "spec": spec,
    })
}

/// One node selector term per pool (ORed), matching its selector labels.
fn node_selector_terms(pools: &[&NodePool]) -> Vec<Value> {
    pools
        .iter()
        .map(|p| {
            let exprs: Vec<Value> = p
                .selector
                .iter()
                .map(|(k, v)| json!({ "key": k, "operator": "In", "values": [v] }))
                .collect();
            json!({ "matchExpressions": exprs })
        })
        .collect()
}

/// A NicClusterPolicy component's image: `name` from the release's repository at its tag.
fn image(release: &NetworkOperatorRelease, name: &str) -> Value {
    json!({ "image": name, "repository": release.repository, "version": release.tag })
}

/// The device plugin of the NicClusterPolicy `spec`: the RDMA shared one or SR-IOV, with its
/// resource and the NICs it selects.
fn device_plugin(
    spec: &mut Map<String, Value>,
    dp: &DevicePlugin,
    release: &NetworkOperatorRelease,
    nic_vendor: &str,
) {
    let mut selectors = Map::new();
    selectors.insert("vendors".into(), json!([nic_vendor]));
    if !dp.if_names.is_empty() {
        selectors.insert("ifNames".into(), json!(dp.if_names));
    }
    match dp.kind {
        DevicePluginKind::RdmaShared => {
            let config = json!({ "configList": [{
                "resourceName": dp.resource_name,
                "rdmaHcaMax": dp.hca_max,
                "selectors": selectors,
            }]});
            let mut plugin = image(release, &release.images.rdma_shared_device_plugin);
            plugin["config"] = Value::String(config.to_string());
            spec.insert("rdmaSharedDevicePlugin".into(), plugin);
        }
        DevicePluginKind::Sriov => {
            selectors.insert("isRdma".into(), Value::Bool(true));
            let config = json!({ "resourceList": [{
                "resourcePrefix": "nvidia.com",
                "resourceName": dp.resource_name,
                "selectors": selectors,
            }]});
            let mut plugin = image(release, &release.images.sriov_device_plugin);
            plugin["config"] = Value::String(config.to_string());
            spec.insert("sriovDevicePlugin".into(), plugin);
        }
    }
}

/// Runs the NIC components only on the RDMA pools' nodes (node affinity), through their taints.
fn placement(spec: &mut Map<String, Value>, pools: &[&NodePool]) {
    let terms = node_selector_terms(pools);
    if !terms.is_empty() {
        spec.insert(
            "nodeAffinity".into(),
            json!({ "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": terms } }),
        );
    }
    let mut tolerations: Vec<Toleration> = Vec::new();
    for p in pools {
        for t in &p.taints {
            let tol = Toleration::exact(t);
            if !tolerations.contains(&tol) {
                tolerations.push(tol);
            }
        }
    }
    if !tolerations.is_empty() {
        spec.insert(
            "tolerations".into(),
            serde_json::to_value(&tolerations).expect("serialises"),
        );
    }
}

/// The secondary network object (IPoIB, macvlan or host-device) with its NVIDIA IPAM pool
/// (`poolType` names a CIDRPool; nv-ipam looks for an IPPool without it).
fn secondary_network(
    sn: &SecondaryNetwork,
    dp: &DevicePlugin,
    no: &NetworkOperator,
    catalog: &Catalog,
) -> Value {
    let api_version = &catalog.network().network_operator.api_version;
    let pool_name = sn.pool_name();
    let cidr = no
        .ip_pools
        .iter()
        .any(|p| p.name == pool_name && p.kind == IpPoolKind::Cidrpool);
    let mut ipam = json!({ "type": "nv-ipam", "poolName": pool_name });
    if cidr {
        ipam["poolType"] = json!(catalog.network().nv_ipam.cidrpool_cni_type);
    }
    let ipam = ipam.to_string();
    let mut nspec = Map::new();
    nspec.insert("ipam".into(), Value::String(ipam));
    nspec.insert(
        "networkNamespace".into(),
        Value::String(
            sn.network_namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
        ),
    );
    let kind = match sn.kind {
        SecondaryNetworkKind::Ipoib => "IPoIBNetwork",
        SecondaryNetworkKind::Macvlan => "MacvlanNetwork",
        SecondaryNetworkKind::HostDevice => "HostDeviceNetwork",
    };
    match sn.kind {
        SecondaryNetworkKind::Ipoib => {
            nspec.insert(
                "master".into(),
                json!(sn.master.clone().unwrap_or_default()),
            );
        }
        SecondaryNetworkKind::Macvlan => {
            nspec.insert(
                "master".into(),
                json!(sn.master.clone().unwrap_or_default()),
            );
            nspec.insert("mode".into(), json!("bridge"));
            nspec.insert("mtu".into(), json!(sn.mtu));
        }
        SecondaryNetworkKind::HostDevice => {
            // The device plugin's resource name without its prefix, as the operator's samples write it.
            nspec.insert("resourceName".into(), json!(dp.resource_name));
        }
    }
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": { "name": sn.name },
        "spec": nspec,
    })
}

/// The Network Operator's Helm release: chart values (checked against the chart's key tree, with
/// `networkOperator.values` merged last) and the chart source (default NVIDIA's repository).
pub fn release(bp: &Blueprint, templates: &Templates) -> Result<Option<HelmRelease>, RenderError> {
    let Some(no) = &bp.spec.network_operator else {
        return Ok(None);
    };
    let facts = &Catalog::embedded().network().network_operator;
    let values = values(bp, no, templates)?;
    Ok(Some(HelmRelease {
        stack: super::Stack::NetworkOperator,
        release: facts.chart.clone(),
        chart: format!("nvidia/{}", facts.chart),
        version: chart_version(facts, &no.version),
        namespace: no.namespace.clone(),
        install: no.install,
        values: Value::Object(values),
        source: super::ChartSource::from_spec(
            &no.chart,
            super::ChartSource::Repository {
                url: facts.chart_repository.clone(),
            },
        ),
    }))
}

/// The chart version helm installs for Network Operator release `version`: the one its archive
/// was read with (`profiles/network.yaml`), else the release without its `v` (how NVIDIA publishes
/// the chart).
fn chart_version(
    facts: &gpuctl_model::profiles::network::NetworkOperatorFacts,
    version: &str,
) -> String {
    facts
        .release(version)
        .and_then(|r| r.chart.as_ref())
        .map_or_else(
            || version.trim_start_matches('v').to_string(),
            |c| c.version.clone(),
        )
}

/// The Network Operator's documents: its chart values and the release description (the nv-ipam
/// pools are applied objects of the network phase).
pub fn documents(
    bp: &Blueprint,
    release: Option<&HelmRelease>,
    documents: &mut BTreeMap<String, String>,
) -> Result<(), RenderError> {
    let (Some(no), Some(r)) = (&bp.spec.network_operator, release) else {
        return Ok(());
    };
    documents.insert(NETWORK_OPERATOR_VALUES.to_string(), super::yaml(&r.values));
    let note = match no.install {
        InstallMode::Helm => {
            "gpuctl apply installs or upgrades this release with helm before the operator phase (the NicClusterPolicy needs its CRDs)"
        }
        InstallMode::Gitops | InstallMode::None => {
            "gpuctl apply does not install this release: install it with helm or your GitOps tool from these values before applying the NicClusterPolicy"
        }
    };
    let release = json!({
        "release": r.release,
        "chart": r.chart,
        "source": r.source,
        "version": r.version,
        "namespace": r.namespace,
        "install": no.install,
        "valuesFile": "network-operator-values.yaml",
        "note": note,
    });
    documents.insert(NETWORK_OPERATOR_RELEASE.to_string(), super::yaml(&release));
    Ok(())
}

fn values(
    bp: &Blueprint,
    no: &NetworkOperator,
    templates: &Templates,
) -> Result<Map<String, Value>, RenderError> {
    // One Node Feature Discovery per cluster: the GPU Operator's (on by default) serves both.
    let gpu_nfd = bp
        .spec
        .gpu_operator
        .values
        .get("nfd")
        .and_then(|n| n.get("enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let name = "helm/network-operator-values.yaml.j2";
    let text = templates.render(
        name,
        json!({ "nfdEnabled": !gpu_nfd, "tolerations": Value::Null }),
    )?;
    let mut values = super::parse_manifest(name, &text)?;
    let map = values
        .as_object_mut()
        .expect("parse_manifest returns a mapping");
    if let Some(chart) = gpuctl_model::profiles::chart::network_operator_release(&no.version) {
        let problems = chart.unknown_paths(map);
        if !problems.is_empty() {
            return Err(RenderError::RenderedChartKeys {
                version: format!("network-operator {}", chart.version),
                problems,
            });
        }
        let problems = chart.unknown_paths(&no.values);
        if !problems.is_empty() {
            return Err(RenderError::UnknownChartKeys {
                version: format!("network-operator {}", chart.version),
                problems,
            });
        }
    }
    gpuctl_model::profiles::chart::deep_merge(map, &no.values);
    Ok(map.clone())
}

/// One KubeletConfiguration fragment per pool with `topology.kubelet`, at `kubelet/<pool>.yaml`.
pub fn kubelet_documents(
    bp: &Blueprint,
    catalog: &Catalog,
    templates: &Templates,
    documents: &mut BTreeMap<String, String>,
) -> Result<(), RenderError> {
    for pool in &bp.spec.node_pools {
        let Some(k) = pool.topology.as_ref().and_then(|t| t.kubelet.as_ref()) else {
            continue;
        };
        let reserved: Vec<Value> = k
            .reserved_memory
            .iter()
            .filter_map(|(node, q)| {
                node.parse::<u32>()
                    .ok()
                    .map(|n| json!({ "numaNode": n, "memory": q.0 }))
            })
            .collect();
        let text = templates.render(
            "config/kubelet-numa.yaml.j2",
            json!({
                "apiVersion": catalog.network().kubelet.api_version,
                "pool": pool.name,
                "blueprint": bp.metadata.name,
                "k": k,
                "reservedMemory": reserved,
            }),
        )?;
        // Parse it back, as every rendered manifest is, so a template override cannot write
        // something that is not a mapping.
        super::parse_manifest("config/kubelet-numa.yaml.j2", &text)?;
        documents.insert(format!("kubelet/{}.yaml", pool.name), text);
    }
    Ok(())
}
