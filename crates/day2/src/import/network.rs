//! Network and topology, read back: the Network Operator's `NicClusterPolicy`, its secondary
//! network (IPoIBNetwork, MacvlanNetwork or HostDeviceNetwork) and Helm release become
//! `spec.networkOperator`; the pools the policy's node affinity selects get
//! `topology.network`; the GPU Operator's GPUDirect RDMA settings (`driver.rdma` of the chart
//! values, `spec.rdma` of the default NVIDIADriver CR, `spec.driver.rdma` of the ClusterPolicy)
//! become `gpuOperator.rdma`; Kueue `Topology` objects named by a pool's ResourceFlavor become
//! the pool's `topology.levels`. What render does not write, or the objects do not record, is a
//! warning at its place.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::Draft;
use super::emit::Y;
use super::pools::Group;
use super::releases::{Chart, blueprint_version};
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::render::network::NIC_CLUSTER_POLICY;
use gpuctl_plan::live::release::NamedRelease;

/// The group the Network Operator's objects are in.
const GROUP: &str = "mellanox.com";
/// The secondary network kinds, in the order gpuctl's `secondaryNetwork.kind` lists them.
const NETWORK_KINDS: [(&str, &str); 3] = [
    ("IPoIBNetwork", "ipoib"),
    ("MacvlanNetwork", "macvlan"),
    ("HostDeviceNetwork", "host-device"),
];
/// NicClusterPolicy `spec` keys render writes.
const RENDERED_POLICY_KEYS: &[&str] = &[
    "ofedDriver",
    "rdmaSharedDevicePlugin",
    "sriovDevicePlugin",
    "secondaryNetwork",
    "nvIpam",
    "nodeAffinity",
    "tolerations",
];

fn group_of(o: &Value) -> &str {
    o["apiVersion"]
        .as_str()
        .and_then(|a| a.rsplit_once('/'))
        .map_or("", |(g, _)| g)
}

fn name(o: &Value) -> String {
    o["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn of<'a>(all: &[&'a Value], group: &str, kind: &str) -> Vec<&'a Value> {
    all.iter()
        .copied()
        .filter(|o| o["kind"] == kind && group_of(o) == group)
        .collect()
}

/// GPUDirect RDMA as the GPU Operator was told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RdmaLive {
    /// `enabled`: the legacy nvidia-peermem module (else DMA-BUF).
    pub peermem: bool,
    /// `useHostMofed`.
    pub host_mofed: bool,
}

/// `driver.rdma` of the release's user-supplied values (gpuctl writes it exactly when a pool asks
/// for GPUDirect RDMA, `enabled: false` meaning DMA-BUF), else `spec.rdma` of the default
/// NVIDIADriver CR or `spec.driver.rdma` of the ClusterPolicy when they load nvidia-peermem (their
/// `enabled: false` is the chart's default, which says nothing about DMA-BUF).
pub(super) fn rdma_live(
    values: &Value,
    default_cr: Option<&Value>,
    cluster_policy: Option<&Value>,
) -> Option<RdmaLive> {
    let of = |r: &Value| RdmaLive {
        peermem: r["enabled"] == true,
        host_mofed: r["useHostMofed"] == true,
    };
    if values["driver"]["rdma"].is_object() {
        return Some(of(&values["driver"]["rdma"]));
    }
    [
        default_cr.map_or(&Value::Null, |c| &c["spec"]["rdma"]),
        cluster_policy.map_or(&Value::Null, |c| &c["spec"]["driver"]["rdma"]),
    ]
    .into_iter()
    .find(|r| r["enabled"] == true)
    .map(of)
}

/// What the network import found.
#[derive(Debug, Default)]
pub(super) struct NetworkImport {
    /// `spec.networkOperator`.
    pub operator: Option<Y>,
    /// `topology.network` per pool name.
    pub pools: BTreeMap<String, Y>,
    /// `gpuOperator.rdma`, when some pool declares GPUDirect RDMA.
    pub rdma: Option<Y>,
    /// The RDMA resource the device plugin advertises (`rdma/<name>` or `nvidia.com/<name>`).
    pub rdma_resource: Option<String>,
}

/// The device plugin: `(kind, resource name, hcaMax, ifNames, resource)`.
struct Plugin {
    kind: &'static str,
    resource_name: String,
    hca_max: Option<u64>,
    if_names: Vec<String>,
    link_types: Vec<String>,
}

fn plugin(spec: &Value, catalog: &Catalog, p: &str, draft: &mut Draft) -> Option<Plugin> {
    let vendor = &catalog.network().network_operator.nic_vendor;
    let shared = &spec["rdmaSharedDevicePlugin"];
    let sriov = &spec["sriovDevicePlugin"];
    if shared.is_object() && sriov.is_object() {
        draft.warn(
            &format!("{p}.devicePlugin"),
            "the NicClusterPolicy runs both the RDMA shared and the SR-IOV device plugin; gpuctl renders one: the shared one was imported",
        );
    }
    let (kind, plugin, list_key) = if shared.is_object() {
        ("rdma-shared", shared, "configList")
    } else if sriov.is_object() {
        ("sriov", sriov, "resourceList")
    } else {
        draft.warn(
            &format!("{p}.devicePlugin"),
            "the NicClusterPolicy runs no RDMA device plugin; gpuctl always renders one (the first apply adds the RDMA shared device plugin)",
        );
        return None;
    };
    let config: Value = plugin["config"]
        .as_str()
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or(Value::Null);
    let list = config[list_key].as_array().cloned().unwrap_or_default();
    let Some(first) = list.first() else {
        draft.warn(
            &format!("{p}.devicePlugin"),
            format!("the {kind} device plugin's config has no `{list_key}` entry gpuctl can read; the defaults were imported"),
        );
        return None;
    };
    if list.len() > 1 {
        draft.warn(
            &format!("{p}.devicePlugin"),
            format!(
                "the {kind} device plugin advertises {} resources; gpuctl renders one: `{}` was imported",
                list.len(),
                first["resourceName"].as_str().unwrap_or_default()
            ),
        );
    }
    if kind == "sriov" && first["resourcePrefix"] != "nvidia.com" {
        draft.warn(
            &format!("{p}.devicePlugin"),
            format!(
                "the SR-IOV device plugin's resource prefix is `{}`; gpuctl renders `nvidia.com`",
                first["resourcePrefix"].as_str().unwrap_or("")
            ),
        );
    }
    let sel = &first["selectors"];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    };
    if strings(&sel["vendors"]) != [vendor.clone()] {
        draft.warn(
            &format!("{p}.devicePlugin"),
            format!("the device plugin selects NIC vendors {:?}; gpuctl selects NVIDIA's (`{vendor}`) only", strings(&sel["vendors"])),
        );
    }
    let other = keys_outside(sel, &["vendors", "ifNames", "isRdma", "linkTypes"]);
    if !other.is_empty() {
        draft.warn(
            &format!("{p}.devicePlugin"),
            format!("the device plugin's selectors also use {other:?}, which gpuctl does not render; the first apply leaves them to their manager"),
        );
    }
    Some(Plugin {
        kind,
        resource_name: first["resourceName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        hca_max: first["rdmaHcaMax"].as_u64(),
        if_names: strings(&sel["ifNames"]),
        link_types: strings(&sel["linkTypes"]),
    })
}

/// Whether every node of `g` matches one of the policy's node-affinity terms.
fn selected(g: &Group, terms: &[Value]) -> bool {
    terms.iter().any(|t| {
        let exprs = t["matchExpressions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        !exprs.is_empty()
            && g.nodes.iter().all(|n| {
                exprs.iter().all(|e| {
                    let value = n.labels.get(e["key"].as_str().unwrap_or_default());
                    let values: Vec<&str> = e["values"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    match e["operator"].as_str() {
                        Some("In") => value.is_some_and(|v| values.contains(&v.as_str())),
                        Some("Exists") => value.is_some(),
                        _ => false,
                    }
                })
            })
    })
}

/// The Network Operator, the pools' networks and the GPU Operator's RDMA settings.
#[allow(clippy::too_many_arguments)]
pub(super) fn network(
    all: &[&Value],
    release: Option<&NamedRelease>,
    rdma: Option<RdmaLive>,
    groups: &[Group],
    gpu_counts: &BTreeMap<String, u32>,
    catalog: &Catalog,
    draft: &mut Draft,
) -> NetworkImport {
    let p = "spec.networkOperator";
    let mut out = NetworkImport::default();
    let policies = of(all, GROUP, "NicClusterPolicy");
    for other in policies.iter().filter(|o| name(o) != NIC_CLUSTER_POLICY) {
        draft.warn(
            p,
            format!("NicClusterPolicy `{}` is not the one the Network Operator reconciles (`{NIC_CLUSTER_POLICY}`); it is left alone", name(other)),
        );
    }
    let policy = policies
        .iter()
        .copied()
        .find(|o| name(o) == NIC_CLUSTER_POLICY);
    let mut networks: Vec<(&str, &Value)> = NETWORK_KINDS
        .iter()
        .flat_map(|(kind, field)| of(all, GROUP, kind).into_iter().map(move |o| (*field, o)))
        .collect();
    networks.sort_by_key(|(k, o)| (NETWORK_KINDS.iter().position(|(_, f)| f == k), name(o)));

    let mut fabric = Fabric::default();
    match policy {
        None => {
            if release.is_some() || !networks.is_empty() {
                draft.warn(
                    p,
                    format!(
                        "the Network Operator{} has no NicClusterPolicy `{NIC_CLUSTER_POLICY}`; gpuctl cannot express the stack without one{}",
                        release.map(|r| format!(" (Helm release {}/{})", r.namespace, r.name)).unwrap_or_default(),
                        if networks.is_empty() { String::new() } else {
                            format!(" and leaves {} alone", networks.iter().map(|(_, o)| name(o)).collect::<Vec<_>>().join(", "))
                        }
                    ),
                );
            }
            // GPUDirect RDMA without a Network Operator (host MOFED): every GPU pool.
            if rdma.is_some() {
                fabric.pools = groups.iter().map(|g| g.name.clone()).collect();
                if !fabric.pools.is_empty() {
                    draft.warn(
                        "spec.nodePools",
                        "the GPU Operator is set up for GPUDirect RDMA but no NicClusterPolicy says which nodes have RDMA NICs; every pool was given `topology.network.gpuDirectRDMA: true`: remove it from pools without RDMA NICs",
                    );
                }
            }
        }
        Some(policy) => {
            let operator = Operator {
                all,
                release,
                catalog,
                spec: &policy["spec"],
                p,
            };
            out.operator = Some(operator.import(
                &networks,
                groups,
                &mut fabric,
                &mut out.rdma_resource,
                draft,
            ));
        }
    }
    out.pools = pool_networks(groups, &fabric, rdma, gpu_counts, draft);
    out.rdma = rdma.and_then(|r| gpu_operator_rdma(r, out.pools.is_empty(), draft));
    out
}

/// What the NicClusterPolicy and the secondary network say about the pools' network: which pools
/// the policy selects, the fabric (and whether the objects record it), the RDMA interfaces, the MTU.
#[derive(Debug, Default)]
struct Fabric {
    pools: BTreeSet<String>,
    /// `(fabric, known)`.
    kind: Option<(&'static str, bool)>,
    if_names: Vec<String>,
    mtu: Option<u64>,
}

/// The NicClusterPolicy `spec` at `p`, read back into `spec.networkOperator`.
struct Operator<'a> {
    all: &'a [&'a Value],
    release: Option<&'a NamedRelease>,
    catalog: &'a Catalog,
    spec: &'a Value,
    p: &'a str,
}

impl Operator<'_> {
    /// `spec.networkOperator`, one field at a time; what it finds about the pools goes to `fabric`.
    fn import(
        &self,
        networks: &[(&str, &Value)],
        groups: &[Group],
        fabric: &mut Fabric,
        rdma_resource: &mut Option<String>,
        draft: &mut Draft,
    ) -> Y {
        let mut m: Vec<(String, Y)> = Vec::new();
        m.push(("version".into(), Y::s(self.version(draft))));
        let (namespace, install) = self.namespace_and_install(draft);
        m.push(("namespace".into(), Y::s(namespace.clone())));
        m.push(("install".into(), Y::s(install)));
        m.push(("nicDriver".into(), self.nic_driver(draft)));
        if let Some(dp) = plugin(self.spec, self.catalog, self.p, draft) {
            m.push((
                "devicePlugin".into(),
                device_plugin(&dp, fabric, rdma_resource),
            ));
        }
        let mut shorthand = None;
        if let Some(n) = self.secondary_network(networks, fabric, &mut shorthand, draft) {
            m.push(("secondaryNetwork".into(), n));
        }
        if let Some(pools) = self.ip_pools(&namespace, shorthand.as_deref(), groups, draft) {
            m.push(("ipPools".into(), pools));
        }
        self.warn_unrendered_keys(draft);
        self.selected_pools(groups, fabric, draft);
        Y::Map(m)
    }

    /// The release's chart version, else the release whose image tag the policy uses, else a
    /// guess (warned).
    fn version(&self, draft: &mut Draft) -> String {
        let p = self.p;
        let facts = &self.catalog.network().network_operator;
        let tags: BTreeSet<&str> = self
            .spec
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(_, v)| {
                let mut t = vec![v["version"].as_str()];
                if let Some(o) = v.as_object() {
                    t.extend(o.values().map(|x| x["version"].as_str()));
                }
                t
            })
            .flatten()
            .collect();
        if let Some(r) = self.release {
            return blueprint_version(&r.release.chart_version);
        }
        if let Some(r) = facts
            .releases
            .iter()
            .find(|r| tags.contains(r.tag.as_str()))
        {
            draft.comment(
                &format!("{p}.version"),
                format!("no Helm release of the Network Operator was found; the NicClusterPolicy's images are tagged `{}`", r.tag),
            );
            return r.version.clone();
        }
        // The newest release gpuctl can render (one whose chart key tree it has), else the
        // newest it knows; the loader refuses an empty list.
        let newest = facts
            .releases
            .iter()
            .rev()
            .find(|r| gpuctl_model::profiles::chart::network_operator_release(&r.version).is_some())
            .or(facts.releases.last())
            .map(|r| r.version.clone())
            .unwrap_or_default();
        draft.warn(
            &format!("{p}.version"),
            format!("no Helm release of the Network Operator was found and the NicClusterPolicy's image tags name no release gpuctl knows; {newest} is a guess: set the release you run"),
        );
        newest
    }

    /// The namespace and `install` mode: the Helm release's, else `none` in the default
    /// namespace.
    fn namespace_and_install(&self, draft: &mut Draft) -> (String, &'static str) {
        let p = self.p;
        let default_ns = "nvidia-network-operator";
        match self.release {
            Some(r) if r.name == Chart::NetworkOperator.release_name() => {
                (r.namespace.clone(), "helm")
            }
            Some(r) => {
                draft.warn(
                    &format!("{p}.install"),
                    format!(
                        "the Network Operator's Helm release is `{}/{}`; gpuctl's helm mode manages a release named `{}`, so gpuctl leaves this one alone (`install: none`)",
                        r.namespace, r.name, Chart::NetworkOperator.release_name()
                    ),
                );
                (r.namespace.clone(), "none")
            }
            None => {
                draft.comment(
                    &format!("{p}.install"),
                    "`none`: no Helm release of the Network Operator was found, so gpuctl leaves its installation alone",
                );
                let namespaces: BTreeSet<String> = of(self.all, "", "Namespace")
                    .iter()
                    .map(|n| name(n))
                    .collect();
                if !namespaces.contains(default_ns) {
                    draft.warn(
                        &format!("{p}.namespace"),
                        format!("the Network Operator's namespace is not recorded without its Helm release; `{default_ns}` is a guess"),
                    );
                }
                (default_ns.to_string(), "none")
            }
        }
    }

    /// `nicDriver`: the policy's OFED driver, else the hosts'.
    fn nic_driver(&self, draft: &mut Draft) -> Y {
        let ofed = &self.spec["ofedDriver"];
        if ofed.is_object() {
            let mut d = vec![("source".to_string(), Y::s("operator"))];
            if let Some(v) = ofed["version"].as_str() {
                d.push(("version".into(), Y::s(v)));
            }
            return Y::Map(d);
        }
        draft.comment(
            &format!("{}.nicDriver", self.p),
            "the NicClusterPolicy installs no NIC driver: the hosts carry it",
        );
        Y::Map(vec![("source".into(), Y::s("host"))])
    }

    /// `secondaryNetwork`: the first of the cluster's IPoIB, macvlan and host-device networks
    /// (the others are warned about), with its NVIDIA IPAM pool's range.
    fn secondary_network(
        &self,
        networks: &[(&str, &Value)],
        fabric: &mut Fabric,
        shorthand: &mut Option<String>,
        draft: &mut Draft,
    ) -> Option<Y> {
        let p = self.p;
        let Some((kind, sn)) = networks.first().copied() else {
            if self.spec["secondaryNetwork"].is_object() {
                draft.warn(
                    &format!("{p}.secondaryNetwork"),
                    "the NicClusterPolicy deploys secondary-network components (Multus, CNI plugins) but the cluster has no IPoIB, macvlan or host-device network; gpuctl renders them only with a secondary network",
                );
            }
            return None;
        };
        for (_, o) in &networks[1..] {
            draft.warn(
                &format!("{p}.secondaryNetwork"),
                format!("{} `{}` is a second secondary network; gpuctl renders one, and leaves this one alone", o["kind"].as_str().unwrap_or_default(), name(o)),
            );
        }
        let s = &sn["spec"];
        let sname = name(sn);
        let mut n = vec![
            ("kind".to_string(), Y::s(kind)),
            ("name".to_string(), Y::s(sname.clone())),
        ];
        if kind != "host-device"
            && let Some(master) = s["master"].as_str()
        {
            n.push(("master".into(), Y::s(master)));
        }
        if let Some(nn) = s["networkNamespace"].as_str().filter(|n| *n != "default") {
            n.push(("networkNamespace".into(), Y::s(nn)));
        }
        *shorthand = self.address_range(sn, &mut n, draft);
        if kind == "macvlan" {
            fabric.mtu = s["mtu"].as_u64().filter(|m| *m > 0);
            if let Some(v) = fabric.mtu {
                n.push(("mtu".into(), Y::Scalar(json!(v))));
            }
            if s["mode"].as_str().is_some_and(|m| m != "bridge") {
                draft.warn(
                    &format!("{p}.secondaryNetwork"),
                    format!(
                        "MacvlanNetwork `{sname}` uses mode `{}`; gpuctl renders `bridge`",
                        s["mode"].as_str().unwrap_or_default()
                    ),
                );
            }
        }
        match kind {
            "ipoib" => fabric.kind = Some(("infiniband", true)),
            "macvlan" => fabric.kind = fabric.kind.or(Some(("roce", true))),
            _ => {}
        }
        Some(Y::Map(n))
    }

    /// The secondary network `sn`'s addresses: `range` and `perNodeBlockSize` when its nv-ipam
    /// pool is an IPPool named after it with nothing else set (the shorthand render writes; its
    /// name is returned), else `ipPool` naming the pool (listed under `ipPools`); a placeholder
    /// range when no pool is found.
    fn address_range(
        &self,
        sn: &Value,
        n: &mut Vec<(String, Y)>,
        draft: &mut Draft,
    ) -> Option<String> {
        let p = self.p;
        let s = &sn["spec"];
        let sname = name(sn);
        let ipam: Value = s["ipam"]
            .as_str()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null);
        let pool_name = ipam["poolName"].as_str().unwrap_or(&sname).to_string();
        let kind = match ipam["poolType"].as_str() {
            Some(t) if t.eq_ignore_ascii_case("cidrpool") => "CIDRPool",
            _ => "IPPool",
        };
        if ipam["type"] != "nv-ipam" {
            draft.warn(
                &format!("{p}.secondaryNetwork"),
                format!(
                    "{} `{sname}` uses IPAM {}; gpuctl renders NVIDIA IPAM",
                    sn["kind"].as_str().unwrap_or_default(),
                    s["ipam"].as_str().unwrap_or("(none)")
                ),
            );
        }
        let pool = of(self.all, "nv-ipam.nvidia.com", kind)
            .into_iter()
            .find(|o| name(o) == pool_name);
        let shorthand = pool.is_some_and(|o| {
            kind == "IPPool"
                && pool_name == sname
                && o["spec"].as_object().is_some_and(|m| {
                    m.keys().all(|k| {
                        ["subnet", "perNodeBlockSize", "nodeSelector"].contains(&k.as_str())
                    })
                })
        });
        if pool.is_some() && !shorthand {
            n.push(("ipPool".into(), Y::s(pool_name)));
            return None;
        }
        let range = pool
            .and_then(|o| o["spec"]["subnet"].as_str().map(str::to_string))
            .or_else(|| ipam["range"].as_str().map(str::to_string));
        match range {
            Some(r) => n.push(("range".into(), Y::s(r))),
            None => {
                draft.warn(
                    &format!("{p}.secondaryNetwork.range"),
                    format!("the pods' address range is in NVIDIA IPAM's {kind} `{pool_name}`, which was not found (its CRD is installed by the Network Operator); `192.168.0.0/16` is a placeholder: set the range the pool uses"),
                );
                n.push(("range".into(), Y::s("192.168.0.0/16")));
            }
        }
        if let Some(b) = pool.and_then(|o| o["spec"]["perNodeBlockSize"].as_u64()) {
            n.push(("perNodeBlockSize".into(), Y::Scalar(json!(b))));
        }
        shorthand.then_some(pool_name)
    }

    /// `ipPools`: the IPPools and CIDRPools of the operator's namespace (the only ones nv-ipam
    /// reads under the Network Operator), but the one the secondary network's `range` stands for.
    fn ip_pools(
        &self,
        namespace: &str,
        shorthand: Option<&str>,
        groups: &[Group],
        draft: &mut Draft,
    ) -> Option<Y> {
        let mut pools: Vec<&Value> = ["IPPool", "CIDRPool"]
            .iter()
            .flat_map(|k| of(self.all, "nv-ipam.nvidia.com", k))
            .filter(|o| o["metadata"]["namespace"] == namespace)
            .filter(|o| !(o["kind"] == "IPPool" && Some(name(o).as_str()) == shorthand))
            .collect();
        pools.sort_by_key(|o| name(o));
        let list: Vec<Y> = pools
            .into_iter()
            .enumerate()
            .map(|(i, o)| ip_pool(o, groups, &format!("{}.ipPools[{i}]", self.p), draft))
            .collect();
        (!list.is_empty()).then_some(Y::List(list))
    }

    /// Warns about the policy's `spec` keys render does not write.
    fn warn_unrendered_keys(&self, draft: &mut Draft) {
        let extra: Vec<&String> = self
            .spec
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
            .filter(|k| !RENDERED_POLICY_KEYS.contains(&k.as_str()))
            .collect();
        if !extra.is_empty() {
            draft.warn(
                self.p,
                format!("the NicClusterPolicy also sets {extra:?}, which gpuctl does not render; they stay as their manager wrote them"),
            );
        }
    }

    /// The pools the policy's node affinity selects carry the RDMA fabric.
    fn selected_pools(&self, groups: &[Group], fabric: &mut Fabric, draft: &mut Draft) {
        let terms = self.spec["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if terms.is_empty() {
            draft.warn(
                self.p,
                "the NicClusterPolicy has no node affinity: its components run on every node. gpuctl runs them only on the pools that declare an InfiniBand or RoCE `topology.network`; no pool was given one, so declare it on the RDMA pools (the first apply then adds the node affinity)",
            );
        } else {
            for g in groups.iter().filter(|g| selected(g, &terms)) {
                fabric.pools.insert(g.name.clone());
            }
        }
    }
}

/// One `ipPools` entry from an nv-ipam IPPool or CIDRPool; `nodePools` are the pools its node
/// selector picks.
fn ip_pool(o: &Value, groups: &[Group], p: &str, draft: &mut Draft) -> Y {
    let s = &o["spec"];
    let cidr = o["kind"] == "CIDRPool";
    let mut m = vec![("name".to_string(), Y::s(name(o)))];
    if cidr {
        m.push(("kind".into(), Y::s("cidrpool")));
    }
    let range = if cidr { &s["cidr"] } else { &s["subnet"] };
    m.push(("range".into(), Y::s(range.as_str().unwrap_or_default())));
    let fields: &[&str] = if cidr {
        &["gatewayIndex", "perNodeNetworkPrefix"]
    } else {
        &["gateway", "perNodeBlockSize"]
    };
    for f in fields {
        if !s[*f].is_null() {
            m.push(((*f).to_string(), Y::from_json(&s[*f])));
        }
    }
    if s["defaultGateway"] == true {
        m.push(("defaultGateway".into(), Y::Scalar(json!(true))));
    }
    if let Some(e) = s["exclusions"].as_array().filter(|e| !e.is_empty()) {
        let ranges = e
            .iter()
            .map(|r| Y::from_json(&json!({ "startIP": r["startIP"], "endIP": r["endIP"] })))
            .collect();
        m.push(("exclusions".into(), Y::List(ranges)));
    }
    if let Some(terms) = s["nodeSelector"]["nodeSelectorTerms"].as_array() {
        let picked: Vec<Y> = groups
            .iter()
            .filter(|g| selected(g, terms))
            .map(|g| Y::s(g.name.clone()))
            .collect();
        if !picked.is_empty() {
            m.push(("nodePools".into(), Y::List(picked)));
        }
    }
    let extra = keys_outside(
        s,
        &[
            "subnet",
            "cidr",
            "gateway",
            "gatewayIndex",
            "perNodeBlockSize",
            "perNodeNetworkPrefix",
            "defaultGateway",
            "exclusions",
            "nodeSelector",
        ],
    );
    if !extra.is_empty() {
        draft.warn(
            p,
            format!(
                "{} `{}` sets {}, which gpuctl does not render: keep them out of gpuctl's pool, or manage this pool outside the blueprint",
                o["kind"].as_str().unwrap_or_default(),
                name(o),
                extra.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            ),
        );
    }
    Y::Map(m)
}

/// `devicePlugin` from the policy's device plugin; the resource it advertises, its interfaces and
/// the fabric its link types name go to `fabric` and `rdma_resource`.
fn device_plugin(dp: &Plugin, fabric: &mut Fabric, rdma_resource: &mut Option<String>) -> Y {
    let mut d = vec![
        ("kind".to_string(), Y::s(dp.kind)),
        ("resourceName".to_string(), Y::s(dp.resource_name.clone())),
    ];
    if dp.kind == "rdma-shared"
        && let Some(h) = dp.hca_max
    {
        d.push(("hcaMax".into(), Y::Scalar(json!(h))));
    }
    if !dp.if_names.is_empty() {
        d.push((
            "ifNames".into(),
            Y::List(dp.if_names.iter().map(|s| Y::s(s.clone())).collect()),
        ));
    }
    *rdma_resource = Some(if dp.kind == "sriov" {
        format!("nvidia.com/{}", dp.resource_name)
    } else {
        format!("rdma/{}", dp.resource_name)
    });
    fabric.if_names = dp.if_names.clone();
    if dp
        .link_types
        .iter()
        .any(|l| l.eq_ignore_ascii_case("infiniband"))
    {
        fabric.kind = Some(("infiniband", true));
    } else if dp
        .link_types
        .iter()
        .any(|l| l.eq_ignore_ascii_case("ether"))
    {
        fabric.kind = Some(("roce", true));
    }
    Y::Map(d)
}

/// `topology.network` of each pool `fabric` names: the fabric, with GPUDirect RDMA its NICs per
/// node, the MTU.
fn pool_networks(
    groups: &[Group],
    fabric: &Fabric,
    rdma: Option<RdmaLive>,
    gpu_counts: &BTreeMap<String, u32>,
    draft: &mut Draft,
) -> BTreeMap<String, Y> {
    let mut pools = BTreeMap::new();
    let (kind, known) = fabric.kind.unwrap_or(("infiniband", false));
    for (i, g) in groups
        .iter()
        .enumerate()
        .filter(|(_, g)| fabric.pools.contains(&g.name))
    {
        let np = format!("spec.nodePools[{i}].topology");
        let np = np.as_str();
        let mut n = vec![("fabric".to_string(), Y::s(kind))];
        if !known {
            draft.warn(
                np,
                "the fabric is not recorded in the objects gpuctl reads (an IPoIB network means InfiniBand, a macvlan one RoCE); `infiniband` is a guess",
            );
        }
        if rdma.is_some() {
            let count = if fabric.if_names.is_empty() {
                let c = gpu_counts.get(&g.name).copied().unwrap_or(1);
                draft.warn(
                    np,
                    format!("the RDMA NICs per node are not recorded (the device plugin names no interfaces); {c}, one per GPU, is a guess for `nicsPerNode`"),
                );
                c as u64
            } else {
                fabric.if_names.len() as u64
            };
            n.push(("nicsPerNode".into(), Y::Scalar(json!(count))));
            n.push(("gpuDirectRDMA".into(), Y::Scalar(json!(true))));
        }
        if let Some(v) = fabric.mtu {
            n.push(("mtu".into(), Y::Scalar(json!(v))));
        }
        pools.insert(g.name.clone(), Y::Map(n));
    }
    pools
}

/// `gpuOperator.rdma` from the GPU Operator's settings, when some pool got an RDMA network.
fn gpu_operator_rdma(r: RdmaLive, no_pools: bool, draft: &mut Draft) -> Option<Y> {
    if no_pools {
        draft.warn(
            "spec.gpuOperator",
            "the GPU Operator is set up for GPUDirect RDMA, but no pool could be given an RDMA network, so `gpuOperator.rdma` would do nothing; the settings are kept as the release has them",
        );
        return None;
    }
    let mut m = vec![(
        "mechanism".to_string(),
        Y::s(if r.peermem {
            "nvidia-peermem"
        } else {
            "dma-buf"
        }),
    )];
    if r.host_mofed {
        m.push(("useHostMofed".into(), Y::Scalar(json!(true))));
    }
    Some(Y::Map(m))
}

/// `topology.levels` per pool: the levels of the Kueue Topology its ResourceFlavor names. Every
/// Topology no pool's flavor names is a warning.
pub(super) fn levels(
    all: &[&Value],
    groups: &[Group],
    draft: &mut Draft,
) -> BTreeMap<String, Vec<String>> {
    let topologies = of(all, "kueue.x-k8s.io", "Topology");
    let flavors = of(all, "kueue.x-k8s.io", "ResourceFlavor");
    let mut out = BTreeMap::new();
    let mut used = BTreeSet::new();
    for (i, g) in groups.iter().enumerate() {
        let np = format!("spec.nodePools[{i}].topology");
        let Some(flavor) = flavors.iter().find(|f| name(f) == g.name) else {
            continue;
        };
        let Some(t) = flavor["spec"]["topologyName"].as_str() else {
            continue;
        };
        let Some(topology) = topologies.iter().find(|o| name(o) == t) else {
            draft.warn(
                &np,
                format!("ResourceFlavor `{}` names Topology `{t}`, which does not exist; no levels were imported", g.name),
            );
            continue;
        };
        used.insert(t.to_string());
        let levels: Vec<String> = topology["spec"]["levels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["nodeLabel"].as_str().map(str::to_string))
            .collect();
        if t != g.name {
            draft.warn(
                &np,
                format!("pool `{}`'s flavor names Topology `{t}`; gpuctl names a pool's Topology after the pool, so the first apply creates Topology `{}` with the same levels and points the flavor at it", g.name, g.name),
            );
        }
        if !levels.is_empty() {
            out.insert(g.name.clone(), levels);
        }
    }
    let mut unmapped: Vec<String> = topologies
        .iter()
        .map(|t| name(t))
        .filter(|t| !used.contains(t))
        .collect();
    unmapped.sort();
    if !unmapped.is_empty() {
        draft.warn(
            "spec.nodePools",
            format!(
                "Kueue Topology {} is named by no ResourceFlavor of an imported pool, so it maps to no `topology.levels`; gpuctl neither changes nor prunes it",
                unmapped.join(", ")
            ),
        );
    }
    out
}

/// The keys of mapping `v` that are not in `known` (what gpuctl does not render), in map order.
fn keys_outside<'a>(v: &'a Value, known: &[&str]) -> Vec<&'a String> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .filter(|k| !known.contains(&k.as_str()))
        .collect()
}
