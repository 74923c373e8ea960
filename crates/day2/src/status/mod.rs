//! `gpuctl status`: the blueprint's pools, tenants and queues side by side with what the cluster
//! reports, as plain data (printed by the binary as a table, JSON, Markdown or an SVG picture).
//!
//! Every figure is defined once, here and in `docs/status.md`:
//!
//! - per pool and GPU resource (`nvidia.com/gpu`, each `nvidia.com/mig-<profile>`,
//!   `nvidia.com/gpu.shared`), each unit of node **capacity** is exactly one of
//!   **allocated** (requested by a pod bound to a Ready node that has not finished),
//!   **free** (allocatable on a Ready, schedulable node and not allocated),
//!   **cordoned** (allocatable and not allocated, but on a cordoned node) or
//!   **unhealthy** (every unit of a NotReady node, and capacity minus allocatable on a Ready one:
//!   the device plugin withdraws a device it finds unhealthy from allocatable);
//!   so `capacity = allocated + free + cordoned + unhealthy`, and `allocatable` is the sum over
//!   Ready nodes;
//! - **fragmentation** of a pool's resource: `1 - L / P`, where `L` is the largest request one pod
//!   could place now (the most free units on one schedulable node) and `P` the largest it could
//!   place if the same free units were packed together (`min(free, the largest node's
//!   allocatable)`); 0 when nothing is free. Eight free GPUs as two on each of four 8-GPU nodes:
//!   `1 - 2/8 = 0.75`; sixteen free as two whole nodes: 0;
//! - per tenant namespace, each ResourceQuota's `status.used` against `status.hard` as
//!   kube-controller-manager and the API server report them;
//! - per Kueue ClusterQueue and flavor (= pool) and resource: nominal quota and limits from its
//!   spec, **used** and **borrowed** from `status.flavorsReservation` (the quota workloads hold,
//!   admitted or reserving), and **lent**, which Kueue does not report: the cohort's borrowed total
//!   shared among the cohort's queues in proportion to the unused quota each may lend
//!   (`min(nominal - used, lendingLimit)`), in whole units with the remainder to the largest
//!   shares (ties by name);
//! - per Volcano Queue: `status.allocated` against `deserved` and `capability`, and its PodGroups
//!   by phase.

pub mod input;
pub mod provisioner;
mod queues;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use gpuctl_model::blueprint::model::{Blueprint, NodePool, PartitionMode};
use gpuctl_model::blueprint::resources::{GPU, GPU_SHARED, per_node};
pub use input::{NodeFacts, PodFacts, QuotaFacts, StatusInput};
pub use queues::{ClusterQueueStatus, FlavorUse, VolcanoQueueStatus, VolcanoResource};

/// Version of the JSON status document (`gpuctl status -o json`); bumped on incompatible changes.
pub const STATUS_FORMAT_VERSION: u32 = 1;

/// What kind of unit a GPU resource counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnitKind {
    /// Whole GPUs.
    Gpu,
    /// MIG instances of one profile.
    Mig,
    /// Shared replicas of a GPU (time-slicing or MPS).
    Shared,
}

/// One GPU resource of a pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// Resource name (`nvidia.com/gpu`, `nvidia.com/mig-3g.40gb`, ...).
    pub resource: String,
    /// What a unit is.
    pub kind: UnitKind,
    /// The MIG profile (`3g.40gb`) for MIG resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// What the blueprint's nodes would advertise (nodes x per node).
    pub expected: u64,
    /// Sum of the nodes' `status.capacity`.
    pub capacity: u64,
    /// Sum of `status.allocatable` over Ready nodes.
    pub allocatable: u64,
    /// Requested by bound, unfinished pods on Ready nodes (at most each node's allocatable).
    pub allocated: u64,
    /// Allocatable, unallocated, on Ready schedulable nodes.
    pub free: u64,
    /// Allocatable, unallocated, on cordoned nodes.
    pub cordoned: u64,
    /// On NotReady nodes, or withdrawn from allocatable.
    pub unhealthy: u64,
    /// The largest request of this resource one pod could place now.
    pub largest_placeable: u64,
    /// The largest it could place if the free units were packed together.
    pub largest_packed: u64,
    /// `1 - largestPlaceable / largestPacked` (0 when nothing is free), to 4 decimals.
    pub fragmentation: f64,
}

/// How many of a pool's nodes are in which state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    /// Nodes the blueprint expects.
    pub expected: u64,
    /// Nodes the pool's selector matches.
    pub total: u64,
    /// Ready (cordoned or not).
    pub ready: u64,
    /// Ready and cordoned.
    pub cordoned: u64,
    /// Not Ready.
    pub not_ready: u64,
}

/// A pod's hold on one node's resource (for the picture and `-o json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// The tenant owning the namespace (by the blueprint), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Units held.
    pub amount: u64,
}

/// One resource on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResource {
    /// `status.capacity`.
    pub capacity: u64,
    /// `status.allocatable`.
    pub allocatable: u64,
    /// Pods holding units, sorted by namespace and name.
    pub holders: Vec<Holder>,
}

/// One node of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// Name.
    pub name: String,
    /// Ready.
    pub ready: bool,
    /// Cordoned.
    pub cordoned: bool,
    /// GPU resources by name.
    pub resources: BTreeMap<String, NodeResource>,
}

/// One pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// Pool name.
    pub name: String,
    /// GPU model (blueprint).
    pub model: String,
    /// Physical GPUs per node (blueprint).
    pub gpus_per_node: u32,
    /// `none`, `mig`, `time-slicing` or `mps` (blueprint).
    pub partitioning: String,
    /// MIG layout per GPU index (blueprint; empty without MIG): profile -> instances.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mig_layout: Vec<Option<BTreeMap<String, u32>>>,
    /// Node states.
    pub nodes: NodeCounts,
    /// Physical GPUs on the pool's nodes (nodes x GPUs per node).
    pub gpus: u64,
    /// Per GPU resource, sorted by name.
    pub resources: Vec<ResourceStatus>,
    /// The highest fragmentation among the pool's resources.
    pub fragmentation: f64,
    /// A pool a provisioner scales: its bounds and (Karpenter) NodeClaims; absent for `static`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provisioner: Option<provisioner::ProvisionerStatus>,
    /// Every node, sorted by name.
    pub node_list: Vec<NodeStatus>,
}

/// One resource of one ResourceQuota.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaUse {
    /// Quota key (`requests.nvidia.com/gpu`, `pods`, ...).
    pub resource: String,
    /// `status.used` as written (`0` when the controller has not counted it yet).
    pub used: String,
    /// `status.hard` as written.
    pub hard: String,
    /// used / hard (`None` when either is not a quantity, or hard is 0).
    pub ratio: Option<f64>,
}

/// One ResourceQuota of a tenant namespace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaStatus {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// kube-controller-manager has written `status.used`.
    pub counted: bool,
    /// Per quota key, sorted.
    pub resources: Vec<QuotaUse>,
}

/// One tenant.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    /// Tenant name.
    pub name: String,
    /// Its namespaces (blueprint).
    pub namespaces: Vec<String>,
    /// Its queue (blueprint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// GPU units its pods hold, per resource.
    pub allocated: BTreeMap<String, u64>,
    /// The ResourceQuotas in its namespaces, sorted by namespace and name.
    pub quotas: Vec<QuotaStatus>,
    /// Namespaces with no ResourceQuota although the blueprint sets a quota.
    pub namespaces_without_quota: Vec<String>,
}

/// GPU nodes no pool selects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unpooled {
    /// How many.
    pub nodes: u64,
    /// The first 20 names, sorted.
    pub names: Vec<String>,
}

/// The whole status.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// [`STATUS_FORMAT_VERSION`].
    pub format_version: u32,
    /// The blueprint's name.
    pub blueprint: String,
    /// Where the state came from (`cluster https://...`, `snapshot FILE (captured ...)`).
    pub source: String,
    /// Per pool, in blueprint order.
    pub pools: Vec<PoolStatus>,
    /// GPU nodes outside every pool.
    pub unpooled: Unpooled,
    /// GPU pods not bound to a node yet.
    pub pending_gpu_pods: u64,
    /// Per tenant, in blueprint order.
    pub tenants: Vec<TenantStatus>,
    /// Kueue ClusterQueues (blueprint's and live ones), sorted by name; `None`: not read.
    pub cluster_queues: Option<Vec<ClusterQueueStatus>>,
    /// Volcano Queues, sorted by name; `None`: not read.
    pub volcano_queues: Option<Vec<VolcanoQueueStatus>>,
    /// The last hour's GPU use per pool (`status --prometheus`); absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_hour: Option<LastHour>,
}

/// The last hour's GPU use per pool, computed as `gpuctl report --by pool` computes it from the
/// accounting rules' expressions (docs/report.md): GPU-hours over one hour, so each figure is
/// also the average number of GPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastHour {
    /// Start (RFC 3339, UTC).
    pub from: String,
    /// End (RFC 3339, UTC).
    pub until: String,
    /// Per pool, in blueprint order (every pool, zeros where nothing ran).
    pub pools: Vec<PoolHour>,
}

/// One pool's hour.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolHour {
    /// Pool name.
    pub pool: String,
    /// GPUs held by running pods (MIG slices and shared replicas weighted).
    pub allocated: f64,
    /// Of those, engine-active.
    pub used: f64,
    /// Allocated and not active, where activity is known.
    pub idle: f64,
    /// Allocated with no activity data (a scrape gap, no dcgm-exporter): never counted as idle.
    pub unknown: f64,
}

impl LastHour {
    /// The hour `[from, until)` of `bp`'s pools from `(pool, allocated, used, idle, unknown)` rows
    /// (pools the rows do not name are zero; rows of pools `bp` does not have are left out).
    pub fn of(
        bp: &Blueprint,
        from: String,
        until: String,
        rows: &[(String, f64, f64, f64, f64)],
    ) -> LastHour {
        let pools = bp
            .spec
            .node_pools
            .iter()
            .map(|p| {
                let r = rows.iter().find(|r| r.0 == p.name);
                let f =
                    |pick: fn(&(String, f64, f64, f64, f64)) -> f64| round4(r.map_or(0.0, pick));
                PoolHour {
                    pool: p.name.clone(),
                    allocated: f(|r| r.1),
                    used: f(|r| r.2),
                    idle: f(|r| r.3),
                    unknown: f(|r| r.4),
                }
            })
            .collect();
        LastHour { from, until, pools }
    }
}

/// Rounds to 4 decimals, so JSON and tables show the same stable figure.
pub(crate) fn round4(x: f64) -> f64 {
    if x.is_finite() {
        (x * 10_000.0).round() / 10_000.0
    } else {
        0.0
    }
}

fn unit_kind(resource: &str, mode: PartitionMode) -> (UnitKind, Option<String>) {
    if let Some(p) = resource.strip_prefix("nvidia.com/mig-") {
        (UnitKind::Mig, Some(p.to_string()))
    } else if resource == GPU_SHARED
        || (resource == GPU && matches!(mode, PartitionMode::TimeSlicing | PartitionMode::Mps))
    {
        (UnitKind::Shared, None)
    } else {
        (UnitKind::Gpu, None)
    }
}

fn mode_name(mode: PartitionMode) -> &'static str {
    match mode {
        PartitionMode::None => "none",
        PartitionMode::Mig => "mig",
        PartitionMode::TimeSlicing => "time-slicing",
        PartitionMode::Mps => "mps",
    }
}

/// Per resource over a pool's nodes, and the fragmentation inputs.
#[derive(Default)]
struct Tally {
    capacity: u64,
    allocatable: u64,
    allocated: u64,
    free: u64,
    cordoned: u64,
    unhealthy: u64,
    largest_allocatable: u64,
}

/// Fragmentation as defined in the module docs: `(L, P, 1 - L/P)`.
pub fn fragmentation(free_per_node: &[u64], largest_allocatable: u64) -> (u64, u64, f64) {
    let total: u64 = free_per_node.iter().fold(0u64, |a, b| a.saturating_add(*b));
    let largest = free_per_node.iter().copied().max().unwrap_or(0);
    let packed = total.min(largest_allocatable.max(largest));
    if packed == 0 {
        return (largest, packed, 0.0);
    }
    (
        largest,
        packed,
        round4(1.0 - largest as f64 / packed as f64),
    )
}

/// Computes the status of `bp`'s pools, tenants and queues from `input`; `source` says where the
/// input came from.
pub fn compute(bp: &Blueprint, input: &StatusInput, source: &str) -> StatusReport {
    let tenant_of: BTreeMap<&str, &str> = bp
        .spec
        .tenants
        .iter()
        .flat_map(|t| t.namespaces.iter().map(|n| (n.as_str(), t.name.as_str())))
        .collect();
    let (pool_nodes, mut unpooled) = nodes_by_pool(bp, input);
    let (pods_on, pending) = pods_by_node(input);
    let pools = bp
        .spec
        .node_pools
        .iter()
        .zip(pool_nodes)
        .map(|(pool, nodes)| {
            let mut s = pool_status(pool, nodes, &pods_on, &tenant_of);
            s.provisioner = provisioner::of(pool, s.nodes.total, input.node_claims.as_deref());
            s
        })
        .collect();

    unpooled.sort_unstable();
    let unpooled = Unpooled {
        nodes: unpooled.len() as u64,
        names: unpooled.iter().take(20).map(|s| s.to_string()).collect(),
    };

    let tenants = bp
        .spec
        .tenants
        .iter()
        .map(|t| tenant_status(t, input))
        .collect();

    StatusReport {
        format_version: STATUS_FORMAT_VERSION,
        blueprint: bp.metadata.name.clone(),
        source: source.to_string(),
        pools,
        unpooled,
        pending_gpu_pods: pending,
        tenants,
        cluster_queues: input
            .cluster_queues
            .as_ref()
            .map(|cqs| queues::cluster_queues(bp, cqs)),
        volcano_queues: input
            .volcano_queues
            .as_ref()
            .map(|qs| queues::volcano_queues(bp, qs)),
        last_hour: None,
    }
}

/// Nodes to pools: the first pool (blueprint order) whose selector matches; the GPU nodes no pool
/// selects.
fn nodes_by_pool<'a>(
    bp: &Blueprint,
    input: &'a StatusInput,
) -> (Vec<Vec<&'a NodeFacts>>, Vec<&'a str>) {
    // Nodes to pools: the first pool (blueprint order) whose selector matches.
    let mut pool_nodes: Vec<Vec<&NodeFacts>> = vec![Vec::new(); bp.spec.node_pools.len()];
    let mut unpooled: Vec<&str> = Vec::new();
    for n in &input.nodes {
        let pool = bp.spec.node_pools.iter().position(|p| {
            !p.selector.is_empty()
                && p.selector
                    .iter()
                    .all(|(k, v)| n.labels.get(k).is_some_and(|x| x == v))
        });
        match pool {
            Some(i) => pool_nodes[i].push(n),
            None if !n.capacity.is_empty() || !n.allocatable.is_empty() => unpooled.push(&n.name),
            None => {}
        }
    }

    (pool_nodes, unpooled)
}

/// The pods holding devices on each node (sorted by namespace and name), and how many GPU pods
/// wait for a node.
fn pods_by_node(input: &StatusInput) -> (BTreeMap<&str, Vec<&PodFacts>>, u64) {
    let mut pods_on: BTreeMap<&str, Vec<&PodFacts>> = BTreeMap::new();
    let mut pending = 0u64;
    for p in &input.pods {
        if p.node.is_empty() {
            if p.phase == "Pending" {
                pending += 1;
            }
        } else if p.holds_devices() {
            pods_on.entry(p.node.as_str()).or_default().push(p);
        }
    }
    for v in pods_on.values_mut() {
        v.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    }

    (pods_on, pending)
}

/// The pods of each node, by node name.
type PodsOn<'a> = BTreeMap<&'a str, Vec<&'a PodFacts>>;

/// One pool's nodes, resources and fragmentation.
fn pool_status(
    pool: &NodePool,
    mut nodes: Vec<&NodeFacts>,
    pods_on: &PodsOn<'_>,
    tenant_of: &BTreeMap<&str, &str>,
) -> PoolStatus {
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mode = pool.partitioning.mode;
    let expected_per_node = per_node(pool);
    let mut names: BTreeSet<String> = expected_per_node.keys().cloned().collect();
    let mut counts = NodeCounts {
        expected: u64::from(pool.nodes),
        ..NodeCounts::default()
    };
    let mut node_list = Vec::with_capacity(nodes.len());
    for n in &nodes {
        names.extend(n.capacity.keys().cloned());
        names.extend(n.allocatable.keys().cloned());
        for p in pods_on.get(n.name.as_str()).into_iter().flatten() {
            names.extend(p.gpus.keys().cloned());
        }
    }
    let mut tallies: BTreeMap<&str, Tally> = names
        .iter()
        .map(|r| (r.as_str(), Tally::default()))
        .collect();
    let mut free_lists: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for n in &nodes {
        counts.total += 1;
        if n.ready {
            counts.ready += 1;
            if n.unschedulable {
                counts.cordoned += 1;
            }
        } else {
            counts.not_ready += 1;
        }
        let pods = pods_on
            .get(n.name.as_str())
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let resources = node_resources(n, pods, &names, tenant_of, &mut tallies, &mut free_lists);
        node_list.push(NodeStatus {
            name: n.name.clone(),
            ready: n.ready,
            cordoned: n.unschedulable,
            resources,
        });
    }
    let resources = resource_statuses(pool, &expected_per_node, &tallies, &free_lists);
    let fragmentation = resources
        .iter()
        .map(|r| r.fragmentation)
        .fold(0.0, f64::max);
    PoolStatus {
        name: pool.name.clone(),
        model: pool.gpu.model.clone(),
        gpus_per_node: pool.gpu.count,
        partitioning: mode_name(mode).to_string(),
        mig_layout: if mode == PartitionMode::Mig {
            gpuctl_model::blueprint::resources::mig_layout_per_gpu(pool)
        } else {
            Vec::new()
        },
        nodes: counts,
        gpus: counts.total.saturating_mul(u64::from(pool.gpu.count)),
        resources,
        fragmentation,
        provisioner: None,
        node_list,
    }
}

/// What each resource of `names` on node `n` is: its capacity, what it can allocate and who holds
/// it; the pool's tallies and free lists count it.
fn node_resources<'n>(
    n: &NodeFacts,
    pods: &[&PodFacts],
    names: &'n BTreeSet<String>,
    tenant_of: &BTreeMap<&str, &str>,
    tallies: &mut BTreeMap<&'n str, Tally>,
    free_lists: &mut BTreeMap<&'n str, Vec<u64>>,
) -> BTreeMap<String, NodeResource> {
    let mut resources = BTreeMap::new();
    for r in names {
        let alloc = n.allocatable.get(r).copied().unwrap_or(0);
        let cap = n.capacity.get(r).copied().unwrap_or(0).max(alloc);
        let holders: Vec<Holder> = pods
            .iter()
            .filter_map(|p| {
                p.gpus.get(r).filter(|a| **a > 0).map(|a| Holder {
                    namespace: p.namespace.clone(),
                    pod: p.name.clone(),
                    tenant: tenant_of.get(p.namespace.as_str()).map(|t| t.to_string()),
                    amount: *a,
                })
            })
            .collect();
        let requested = holders.iter().fold(0u64, |a, h| a.saturating_add(h.amount));
        let t = tallies.get_mut(r.as_str()).expect("every name has a tally");
        t.capacity = t.capacity.saturating_add(cap);
        if n.ready {
            let used = requested.min(alloc);
            let left = alloc - used;
            t.allocatable = t.allocatable.saturating_add(alloc);
            t.unhealthy = t.unhealthy.saturating_add(cap - alloc);
            t.allocated = t.allocated.saturating_add(used);
            if n.unschedulable {
                t.cordoned = t.cordoned.saturating_add(left);
            } else {
                t.free = t.free.saturating_add(left);
                t.largest_allocatable = t.largest_allocatable.max(alloc);
                free_lists.entry(r.as_str()).or_default().push(left);
            }
        } else {
            t.unhealthy = t.unhealthy.saturating_add(cap);
        }
        if cap > 0 || !holders.is_empty() {
            resources.insert(
                r.clone(),
                NodeResource {
                    capacity: cap,
                    allocatable: alloc,
                    holders,
                },
            );
        }
    }
    resources
}

/// Each resource's totals, what one pod can place and the fragmentation, from the tallies.
fn resource_statuses(
    pool: &NodePool,
    expected_per_node: &BTreeMap<String, u64>,
    tallies: &BTreeMap<&str, Tally>,
    free_lists: &BTreeMap<&str, Vec<u64>>,
) -> Vec<ResourceStatus> {
    let mode = pool.partitioning.mode;
    tallies
        .iter()
        .map(|(r, t)| {
            let free = free_lists.get(r).map(Vec::as_slice).unwrap_or(&[]);
            let (largest_placeable, largest_packed, fragmentation) =
                fragmentation(free, t.largest_allocatable);
            let (kind, profile) = unit_kind(r, mode);
            ResourceStatus {
                resource: r.to_string(),
                kind,
                profile,
                expected: expected_per_node
                    .get(*r)
                    .copied()
                    .unwrap_or(0)
                    .saturating_mul(u64::from(pool.nodes)),
                capacity: t.capacity,
                allocatable: t.allocatable,
                allocated: t.allocated,
                free: t.free,
                cordoned: t.cordoned,
                unhealthy: t.unhealthy,
                largest_placeable,
                largest_packed,
                fragmentation,
            }
        })
        .collect()
}

/// used / hard, when both are quantities and hard is not 0.
pub(crate) fn ratio(used: &str, hard: &str) -> Option<f64> {
    let u = gpuctl_model::quantity::parse_milli(used).ok()?;
    let h = gpuctl_model::quantity::parse_milli(hard).ok()?;
    (h > 0).then(|| round4(u as f64 / h as f64))
}

fn tenant_status(t: &gpuctl_model::blueprint::model::Tenant, input: &StatusInput) -> TenantStatus {
    let mut allocated: BTreeMap<String, u64> = BTreeMap::new();
    for p in &input.pods {
        if p.holds_devices() && t.namespaces.contains(&p.namespace) {
            for (r, n) in &p.gpus {
                let e = allocated.entry(r.clone()).or_default();
                *e = e.saturating_add(*n);
            }
        }
    }
    let mut quotas: Vec<QuotaStatus> = input
        .quotas
        .iter()
        .filter(|q| t.namespaces.contains(&q.namespace))
        .map(|q| QuotaStatus {
            namespace: q.namespace.clone(),
            name: q.name.clone(),
            counted: !q.used.is_empty(),
            resources: q
                .hard
                .iter()
                .map(|(r, hard)| {
                    let used = q.used.get(r).cloned().unwrap_or_else(|| "0".into());
                    QuotaUse {
                        resource: r.clone(),
                        ratio: ratio(&used, hard),
                        used,
                        hard: hard.clone(),
                    }
                })
                .collect(),
        })
        .collect();
    quotas.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let namespaces_without_quota = if t.quota.is_empty() {
        Vec::new()
    } else {
        t.namespaces
            .iter()
            .filter(|n| !quotas.iter().any(|q| &q.namespace == *n))
            .cloned()
            .collect()
    };
    TenantStatus {
        name: t.name.clone(),
        namespaces: t.namespaces.clone(),
        queue: t.queue.clone(),
        allocated,
        quotas,
        namespaces_without_quota,
    }
}
