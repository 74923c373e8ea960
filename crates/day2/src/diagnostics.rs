//! Diagnostics: the Day-2 state `gpuctl doctor` and `gpuctl status` read, captured in one bounded
//! pass of LIST calls (the cluster crate) or stored in a snapshot (`gpuctl snapshot --diagnostics`).
//!
//! Everything here is plain data and pure functions. The cluster crate lists each kind of
//! [`DIAGNOSTIC_KINDS`] once and hands the items to [`Diagnostics::ingest`], which keeps what the
//! readers need (pods that request GPU, MIG, shared or RDMA resources, the events about them),
//! masks at capture (never a Secret; every Pod environment `value`; anything that looks like a
//! credential, through [`gpuctl_model::redact`]) and drops what only bloats (managedFields, node
//! image lists, `last-applied-configuration`). [`Diagnostics::finish`] sorts, so the same cluster
//! gives the same bytes.
//!
//! A kind that was not read is never silently empty: [`Diagnostics::unread`] says which kinds
//! were not served, forbidden, failed, or cut at their bound, so a reader can say "Kueue is not
//! installed" instead of "no Workload is pending".

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, LimitRange, Node, Pod, ResourceQuota};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use gpuctl_model::quantity::parse_count;
use gpuctl_model::redact::{MASK, redact_value};

/// Version of the diagnostics part of a snapshot (inside snapshot format 4 and later).
pub const DIAGNOSTICS_FORMAT_VERSION: u32 = 1;

/// Kinds whose events are kept whole (Karpenter's NodeClaim and NodePool events name failed
/// launches and limits).
const EVENT_KINDS: &[&str] = &["Node", "Workload", "PodGroup", "NodeClaim", "NodePool"];

/// The annotation `kubectl apply` leaves: a full copy of the object, env values included.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Each kind doctor and status read, in the order they are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DiagKind {
    /// core/v1 Node.
    Node,
    /// core/v1 Pod.
    Pod,
    /// core/v1 Event.
    Event,
    /// core/v1 ResourceQuota.
    ResourceQuota,
    /// core/v1 LimitRange.
    LimitRange,
    /// scheduling.k8s.io/v1 PriorityClass.
    PriorityClass,
    /// Kueue Workload.
    Workload,
    /// Kueue ClusterQueue.
    ClusterQueue,
    /// Kueue LocalQueue.
    LocalQueue,
    /// Kueue Cohort.
    Cohort,
    /// Volcano PodGroup.
    PodGroup,
    /// Volcano Queue.
    VolcanoQueue,
    /// GPU Operator ClusterPolicy.
    ClusterPolicy,
    /// GPU Operator NVIDIADriver.
    NvidiaDriver,
    /// resource.k8s.io/v1 ResourceClaim (DRA).
    ResourceClaim,
    /// resource.k8s.io/v1 ResourceSlice (DRA: what a driver publishes per node).
    ResourceSlice,
    /// resource.k8s.io DeviceTaintRule (v1beta2 on 1.36, v1alpha3 on 1.35: devices taken out of service).
    DeviceTaintRule,
    /// Karpenter NodePool (`karpenter.sh/v1`: limits, `status.resources`, template).
    NodePool,
    /// Karpenter NodeClaim (`karpenter.sh/v1`: one node being launched, with its conditions).
    NodeClaim,
}

/// One kind to list: `(kind, group, Kind, versions tried in order, field selector)`; the cluster
/// crate falls back to the group's preferred version when none of `versions` is served. The field
/// selector is sent with the LIST: Pods that have `Succeeded` are left on the server, since they
/// hold no devices and no check of doctor or status reads them (see [`unfinished_pods`]; `Failed`
/// pods are read: doctor explains them).
pub const DIAGNOSTIC_KINDS: &[(DiagKind, &str, &str, &[&str], &str)] = &[
    (DiagKind::Node, "", "Node", &["v1"], ""),
    (DiagKind::Pod, "", "Pod", &["v1"], "status.phase!=Succeeded"),
    (DiagKind::Event, "", "Event", &["v1"], ""),
    (DiagKind::ResourceQuota, "", "ResourceQuota", &["v1"], ""),
    (DiagKind::LimitRange, "", "LimitRange", &["v1"], ""),
    (
        DiagKind::PriorityClass,
        "scheduling.k8s.io",
        "PriorityClass",
        &["v1"],
        "",
    ),
    (
        DiagKind::Workload,
        "kueue.x-k8s.io",
        "Workload",
        gpuctl_model::profiles::KUEUE_API_VERSIONS,
        "",
    ),
    (
        DiagKind::ClusterQueue,
        "kueue.x-k8s.io",
        "ClusterQueue",
        gpuctl_model::profiles::KUEUE_API_VERSIONS,
        "",
    ),
    (
        DiagKind::LocalQueue,
        "kueue.x-k8s.io",
        "LocalQueue",
        gpuctl_model::profiles::KUEUE_API_VERSIONS,
        "",
    ),
    (
        DiagKind::Cohort,
        "kueue.x-k8s.io",
        "Cohort",
        gpuctl_model::profiles::KUEUE_API_VERSIONS_FROM_ALPHA,
        "",
    ),
    (
        DiagKind::PodGroup,
        "scheduling.volcano.sh",
        "PodGroup",
        &["v1beta1"],
        "",
    ),
    (
        DiagKind::VolcanoQueue,
        "scheduling.volcano.sh",
        "Queue",
        &["v1beta1"],
        "",
    ),
    (
        DiagKind::ClusterPolicy,
        "nvidia.com",
        "ClusterPolicy",
        &["v1"],
        "",
    ),
    (
        DiagKind::NvidiaDriver,
        "nvidia.com",
        "NVIDIADriver",
        &["v1alpha1"],
        "",
    ),
    (
        DiagKind::ResourceClaim,
        "resource.k8s.io",
        "ResourceClaim",
        &["v1"],
        "",
    ),
    (
        DiagKind::ResourceSlice,
        "resource.k8s.io",
        "ResourceSlice",
        &["v1"],
        "",
    ),
    (
        DiagKind::DeviceTaintRule,
        "resource.k8s.io",
        "DeviceTaintRule",
        &["v1beta2", "v1alpha3"],
        "",
    ),
    (DiagKind::NodePool, "karpenter.sh", "NodePool", &["v1"], ""),
    (
        DiagKind::NodeClaim,
        "karpenter.sh",
        "NodeClaim",
        &["v1"],
        "",
    ),
];

/// The kinds each Day-2 command reads, and nothing else: a kind a command leaves out is neither
/// listed nor reported as unread. `gpuctl doctor` (and `gpuctl snapshot --diagnostics`, which
/// serves both doctor and status) reads every kind; `gpuctl status` draws nodes, GPU pods,
/// ResourceQuotas, ClusterQueues and Volcano Queues (`status::StatusInput::from_diagnostics`).
pub const DOCTOR_READS: &[DiagKind] = &[
    DiagKind::Node,
    DiagKind::Pod,
    DiagKind::Event,
    DiagKind::ResourceQuota,
    DiagKind::LimitRange,
    DiagKind::PriorityClass,
    DiagKind::Workload,
    DiagKind::ClusterQueue,
    DiagKind::LocalQueue,
    DiagKind::Cohort,
    DiagKind::PodGroup,
    DiagKind::VolcanoQueue,
    DiagKind::ClusterPolicy,
    DiagKind::NvidiaDriver,
    DiagKind::ResourceClaim,
    DiagKind::ResourceSlice,
    DiagKind::DeviceTaintRule,
    DiagKind::NodePool,
    DiagKind::NodeClaim,
];

/// What `gpuctl status` reads (see [`DOCTOR_READS`]).
pub const STATUS_READS: &[DiagKind] = &[
    DiagKind::Node,
    DiagKind::Pod,
    DiagKind::ResourceQuota,
    DiagKind::ClusterQueue,
    DiagKind::VolcanoQueue,
    DiagKind::ResourceClaim,
    DiagKind::ResourceSlice,
    DiagKind::NodeClaim,
];

impl DiagKind {
    /// `Kind.group` (`Workload.kueue.x-k8s.io`, `Pod`), as messages and [`Unread::kind`] name it.
    pub fn name(self) -> String {
        let (_, group, kind, _, _) = DIAGNOSTIC_KINDS
            .iter()
            .find(|(k, ..)| *k == self)
            .copied()
            .unwrap_or((self, "", "?", &[], ""));
        if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        }
    }

    /// At most this many objects of the kind are kept (events: the newest); past it the reading
    /// is marked [`UnreadWhy::Truncated`], so memory and snapshot size stay bounded.
    pub fn limit(self) -> usize {
        match self {
            DiagKind::Node => 20_000,
            DiagKind::Pod => 200_000,
            DiagKind::Event => 50_000,
            _ => 20_000,
        }
    }
}

/// Why a kind is missing from (or incomplete in) a [`Diagnostics`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnreadWhy {
    /// The cluster does not serve the kind (its CRD is not installed).
    NotServed,
    /// The credentials may not list it (HTTP 403).
    Forbidden,
    /// Listing failed for another reason (the message says which).
    Failed,
    /// More objects than [`DiagKind::limit`]: the rest were dropped.
    Truncated,
}

/// A kind that was not read, or not read whole.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Unread {
    /// The kind, `Kind.group` (see [`DiagKind::name`]).
    pub kind: String,
    /// Why.
    pub why: UnreadWhy,
    /// The server's message, or what was dropped.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The Day-2 state of a cluster, read once (see the module documentation). Lists are sorted by
/// namespace and name (events by time, newest first); every object keeps its own
/// `metadata.namespace` and `metadata.name`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diagnostics {
    /// [`DIAGNOSTICS_FORMAT_VERSION`] at capture time.
    pub format_version: u32,
    /// When the lists were read (RFC 3339, UTC): the "now" event ages and idle windows are
    /// measured against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<String>,
    /// The GPU Operator's namespace: all of its pods are kept (driver, toolkit, device plugin,
    /// MIG manager, GFD, DCGM exporter), whatever they request.
    #[serde(default)]
    pub operator_namespace: String,
    /// Every Node, whole: labels (GFD's `nvidia.com/gpu.product`, `nvidia.com/cuda.driver.*`,
    /// `nvidia.com/mig.config.state`, ...), taints, `status.capacity` / `allocatable`,
    /// `conditions` and `nodeInfo` (without `status.images` and managedFields).
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// Pods that request (or limit) any `nvidia.com/*` or `rdma/*` resource in a container or init
    /// container, pods that claim devices through DRA (`spec.resourceClaims`), and every pod of
    /// [`Self::operator_namespace`]. Spec (node selector, affinity,
    /// tolerations, resources, priority class), status (phase, conditions with the scheduler's
    /// `Unschedulable` message, container states and restart counts). Environment values are
    /// replaced by `(sensitive)`; credentials anywhere else are masked.
    ///
    /// Pods that have `Succeeded` are not listed (the Pod row of [`DIAGNOSTIC_KINDS`] has a field
    /// selector), and reading a snapshot skips those an older capture kept (see
    /// [`unfinished_pods`]): they hold no devices and no check of doctor or status reads them.
    #[serde(default, deserialize_with = "unfinished_pods")]
    pub pods: Vec<Pod>,
    /// core/v1 Events about kept Pods, Nodes, Workloads and PodGroups (`FailedScheduling`,
    /// `BackOff`, `Pending` from Kueue, ...), and every `FailedCreate` (a controller's pod refused
    /// by quota, LimitRange or PriorityClass admission), newest first, messages masked.
    #[serde(default)]
    pub events: Vec<Event>,
    /// Every ResourceQuota with `spec.hard` and `status.used`.
    #[serde(default)]
    pub resource_quotas: Vec<ResourceQuota>,
    /// Every LimitRange (defaults that give GPU pods their requests).
    #[serde(default)]
    pub limit_ranges: Vec<LimitRange>,
    /// Every PriorityClass.
    #[serde(default)]
    pub priority_classes: Vec<PriorityClass>,
    /// Kueue Workloads with status (`conditions`: QuotaReserved, Admitted, Evicted, ...).
    #[serde(default)]
    pub workloads: Vec<Value>,
    /// Kueue ClusterQueues with status (`flavorsUsage`, `pendingWorkloads`, conditions).
    #[serde(default)]
    pub cluster_queues: Vec<Value>,
    /// Kueue LocalQueues.
    #[serde(default)]
    pub local_queues: Vec<Value>,
    /// Kueue Cohorts.
    #[serde(default)]
    pub cohorts: Vec<Value>,
    /// Volcano PodGroups with status (phase, conditions).
    #[serde(default)]
    pub pod_groups: Vec<Value>,
    /// Volcano Queues with status.
    #[serde(default)]
    pub volcano_queues: Vec<Value>,
    /// GPU Operator ClusterPolicies with `status.state` and conditions.
    #[serde(default)]
    pub cluster_policies: Vec<Value>,
    /// GPU Operator NVIDIADriver CRs with `status.state` and conditions.
    #[serde(default)]
    pub nvidia_drivers: Vec<Value>,
    /// DRA ResourceClaims that are allocated, trimmed to what status counts: namespace, name,
    /// `status.allocation.devices.results` (driver, pool, device) and `status.reservedFor` (the
    /// spec, with any opaque driver configuration, is not kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<Value>,
    /// DRA ResourceSlices, trimmed to the driver, node, pool and each device's name, `type` and
    /// `profile` attributes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_slices: Vec<Value>,
    /// DeviceTaintRules (DRA device taints set by an admin or by gpuctl's maintenance entries):
    /// name, `spec.deviceSelector` and `spec.taint`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_taint_rules: Vec<Value>,
    /// Karpenter NodePools (when Karpenter's CRDs are installed; not served is no error): spec
    /// (template labels, requirements, taints, startupTaints, limits, disruption) and status
    /// (`resources`, `nodes`, conditions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_pools: Vec<Value>,
    /// Karpenter NodeClaims: spec (requirements, `resources.requests`, taints) and status
    /// (`nodeName`, capacity, the `Launched`/`Registered`/`Initialized` conditions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_claims: Vec<Value>,
    /// Kinds not read (or not read whole) and why, sorted by kind.
    #[serde(default)]
    pub unread: Vec<Unread>,
}

/// Whether a pod has finished successfully (`status.phase` `Succeeded`): it holds no devices.
pub fn succeeded(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
}

/// Deserialises [`Diagnostics::pods`] one pod at a time, keeping those that have not
/// [`succeeded`]. Issue 16's cluster holds 17,000 finished Job pods of 21,000; a typed `Pod` takes
/// about 13 KB, so holding them all put reading the snapshot over its 300 MB bound while nothing
/// reads them (doctor's room and crash checks and status's allocation all skip finished pods).
fn unfinished_pods<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Pod>, D::Error> {
    struct Pods;
    impl<'de> serde::de::Visitor<'de> for Pods {
        type Value = Vec<Pod>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of pods")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Pod>, A::Error> {
            let mut out = Vec::new();
            while let Some(p) = seq.next_element::<Pod>()? {
                if !succeeded(&p) {
                    out.push(p);
                }
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Pods)
}

/// Whether a resource name is one doctor follows: `nvidia.com/*` (GPUs, MIG slices, shared
/// replicas) or `rdma/*` (RDMA shared devices).
pub fn is_accelerator_resource(name: &str) -> bool {
    name.starts_with("nvidia.com/") || name.starts_with("rdma/")
}

/// `namespace/name` of an object's metadata.
fn ns_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn value_ns_name(v: &Value) -> (String, String) {
    (
        v["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// The accelerator resources a pod asks for, as the scheduler counts them: per resource, the
/// larger of the containers' sum and the largest init container (a request defaults to the limit
/// for extended resources). Quantities that are not whole counts are skipped.
pub fn pod_requests(pod: &Pod) -> BTreeMap<String, u64> {
    let mut sum: BTreeMap<String, u64> = BTreeMap::new();
    let mut init: BTreeMap<String, u64> = BTreeMap::new();
    let Some(spec) = &pod.spec else {
        return sum;
    };
    let each = |c: &k8s_openapi::api::core::v1::Container| -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        let Some(r) = &c.resources else { return out };
        for map in [r.limits.as_ref(), r.requests.as_ref()]
            .into_iter()
            .flatten()
        {
            for (k, q) in map {
                if is_accelerator_resource(k)
                    && let Ok(n) = parse_count(&q.0)
                {
                    out.insert(k.clone(), n);
                }
            }
        }
        out
    };
    for c in &spec.containers {
        for (k, n) in each(c) {
            *sum.entry(k).or_default() += n;
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, n) in each(c) {
            let e = init.entry(k).or_default();
            *e = (*e).max(n);
        }
    }
    for (k, n) in init {
        let e = sum.entry(k).or_default();
        *e = (*e).max(n);
    }
    sum.retain(|_, n| *n > 0);
    sum
}

/// Whether a node's `Ready` condition is `True`.
pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A node's allocatable (else capacity) accelerator resources as whole counts.
pub fn node_allocatable(node: &Node) -> BTreeMap<String, u64> {
    let Some(status) = &node.status else {
        return BTreeMap::new();
    };
    let map = status.allocatable.as_ref().or(status.capacity.as_ref());
    map.into_iter()
        .flatten()
        .filter(|(k, _)| is_accelerator_resource(k))
        .filter_map(|(k, q)| Some((k.clone(), parse_count(&q.0).ok()?)))
        .collect()
}

/// A pod's condition of `type_` (`PodScheduled`, `Ready`, ...).
pub fn pod_condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

impl Diagnostics {
    /// An empty reading of the cluster whose GPU Operator lives in `operator_namespace`.
    pub fn new(operator_namespace: &str, read_at: Option<String>) -> Diagnostics {
        Diagnostics {
            format_version: DIAGNOSTICS_FORMAT_VERSION,
            read_at,
            operator_namespace: operator_namespace.to_string(),
            ..Diagnostics::default()
        }
    }

    /// Records that `kind` was not read (or not read whole); the first record of a kind and
    /// reason stays.
    pub fn mark_unread(&mut self, kind: DiagKind, why: UnreadWhy, message: impl Into<String>) {
        let kind = kind.name();
        if self.unread.iter().any(|u| u.kind == kind && u.why == why) {
            return;
        }
        self.unread.push(Unread {
            kind,
            why,
            message: message.into(),
        });
    }

    /// Why `kind` was not read, when it was not (or not whole).
    pub fn unread(&self, kind: DiagKind) -> Option<&Unread> {
        let name = kind.name();
        self.unread.iter().find(|u| u.kind == name)
    }

    /// Whether `kind` was read whole (served, allowed, not cut).
    pub fn read(&self, kind: DiagKind) -> bool {
        self.unread(kind).is_none()
    }

    /// Takes one kind's listed items (JSON as the API server returns them): keeps what readers
    /// need, masks, and bounds. Call [`Self::finish`] after the last kind (events are kept only
    /// for pods already ingested, so ingest Pods before Events). Items that do not parse as the
    /// kind are skipped and counted in an [`UnreadWhy::Failed`] entry.
    pub fn ingest(&mut self, kind: DiagKind, items: Vec<Value>) {
        let mut bad = 0usize;
        let mut over = 0usize;
        let limit = kind.limit();
        let kept_pods: std::collections::HashSet<(String, String)> = if kind == DiagKind::Event {
            self.pods.iter().map(|p| ns_name(&p.metadata)).collect()
        } else {
            Default::default()
        };
        for mut v in items {
            if !trim(kind, &mut v) {
                continue;
            }
            macro_rules! typed {
                ($vec:expr) => {{
                    if $vec.len() >= limit {
                        over += 1;
                        continue;
                    }
                    redact_value(&mut v);
                    match serde_json::from_value(v) {
                        Ok(o) => $vec.push(o),
                        Err(_) => bad += 1,
                    }
                }};
            }
            macro_rules! untyped {
                ($vec:expr) => {{
                    if $vec.len() >= limit {
                        over += 1;
                        continue;
                    }
                    if !v.is_object() || !v["metadata"]["name"].is_string() {
                        bad += 1;
                        continue;
                    }
                    redact_value(&mut v);
                    $vec.push(v)
                }};
            }
            match kind {
                DiagKind::Node => {
                    if let Some(s) = v.get_mut("status").and_then(Value::as_object_mut) {
                        s.remove("images");
                    }
                    typed!(self.nodes)
                }
                DiagKind::Pod => {
                    mask_env(&mut v);
                    let keep = v["metadata"]["namespace"] == self.operator_namespace.as_str()
                        || requests_accelerators(&v)
                        || claims_devices(&v);
                    if keep {
                        typed!(self.pods)
                    }
                }
                DiagKind::Event => {
                    let about = &v["involvedObject"];
                    // Controllers' refusals (quota, LimitRange, PriorityClass) are kept
                    // whatever they are about: the pod they could not create does not exist.
                    let refused = v["reason"] == "FailedCreate";
                    let keep = refused
                        || match about["kind"].as_str() {
                            Some(k) if EVENT_KINDS.contains(&k) => true,
                            Some("Pod") => kept_pods.contains(&(
                                about["namespace"].as_str().unwrap_or_default().to_string(),
                                about["name"].as_str().unwrap_or_default().to_string(),
                            )),
                            _ => false,
                        };
                    if keep {
                        redact_value(&mut v);
                        match serde_json::from_value(v) {
                            Ok(o) => self.events.push(o),
                            Err(_) => bad += 1,
                        }
                    }
                }
                DiagKind::ResourceQuota => typed!(self.resource_quotas),
                DiagKind::LimitRange => typed!(self.limit_ranges),
                DiagKind::PriorityClass => typed!(self.priority_classes),
                DiagKind::Workload => untyped!(self.workloads),
                DiagKind::ClusterQueue => untyped!(self.cluster_queues),
                DiagKind::LocalQueue => untyped!(self.local_queues),
                DiagKind::Cohort => untyped!(self.cohorts),
                DiagKind::PodGroup => untyped!(self.pod_groups),
                DiagKind::VolcanoQueue => untyped!(self.volcano_queues),
                DiagKind::ClusterPolicy => untyped!(self.cluster_policies),
                DiagKind::NvidiaDriver => untyped!(self.nvidia_drivers),
                DiagKind::ResourceClaim => untyped!(self.resource_claims),
                DiagKind::ResourceSlice => untyped!(self.resource_slices),
                DiagKind::DeviceTaintRule => untyped!(self.device_taint_rules),
                DiagKind::NodePool => untyped!(self.node_pools),
                DiagKind::NodeClaim => untyped!(self.node_claims),
            }
        }
        if kind == DiagKind::Event && self.events.len() > limit {
            self.sort_events();
            self.events.truncate(limit);
            self.mark_unread(
                kind,
                UnreadWhy::Truncated,
                format!("only the newest {limit} events were kept"),
            );
        }
        if bad > 0 {
            self.mark_unread(
                kind,
                UnreadWhy::Failed,
                format!("{bad} object(s) did not have the kind's shape and were skipped"),
            );
        }
        if over > 0 {
            self.mark_unread(
                kind,
                UnreadWhy::Truncated,
                format!("{over} object(s) past the first {limit} were dropped"),
            );
        }
    }

    /// Newest first, then by namespace and name.
    fn sort_events(&mut self) {
        self.events
            .sort_by_cached_key(|e| (std::cmp::Reverse(event_time(e)), ns_name(&e.metadata)));
    }

    /// Sorts every list (objects by namespace and name; events newest first, then by name) and
    /// the unread kinds, so the same cluster gives the same bytes.
    pub fn finish(&mut self) {
        self.nodes.sort_by_key(|o| ns_name(&o.metadata));
        self.pods.sort_by_key(|o| ns_name(&o.metadata));
        self.resource_quotas.sort_by_key(|o| ns_name(&o.metadata));
        self.limit_ranges.sort_by_key(|o| ns_name(&o.metadata));
        self.priority_classes.sort_by_key(|o| ns_name(&o.metadata));
        for v in [
            &mut self.workloads,
            &mut self.cluster_queues,
            &mut self.local_queues,
            &mut self.cohorts,
            &mut self.pod_groups,
            &mut self.volcano_queues,
            &mut self.cluster_policies,
            &mut self.nvidia_drivers,
            &mut self.resource_claims,
            &mut self.resource_slices,
            &mut self.device_taint_rules,
            &mut self.node_pools,
            &mut self.node_claims,
        ] {
            v.sort_by_key(value_ns_name);
        }
        self.sort_events();
        self.unread.sort();
        self.unread.dedup();
    }

    /// Pods whose accelerator requests satisfy `want` (e.g. `|r| r.contains_key("nvidia.com/gpu")`),
    /// with those requests.
    pub fn pods_requesting<'a>(
        &'a self,
        want: impl Fn(&BTreeMap<String, u64>) -> bool + 'a,
    ) -> impl Iterator<Item = (&'a Pod, BTreeMap<String, u64>)> + 'a {
        self.pods.iter().filter_map(move |p| {
            let r = pod_requests(p);
            (!r.is_empty() && want(&r)).then_some((p, r))
        })
    }

    /// Pending pods that request accelerator resources and are not bound to a node, with their
    /// requests.
    pub fn pending_accelerator_pods(
        &self,
    ) -> impl Iterator<Item = (&Pod, BTreeMap<String, u64>)> + '_ {
        self.pods_requesting(|_| true).filter(|(p, _)| {
            let st = p.status.as_ref();
            st.and_then(|s| s.phase.as_deref()) == Some("Pending")
                && p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none()
                && p.metadata.deletion_timestamp.is_none()
        })
    }

    /// The operator namespace's pods.
    pub fn operator_pods(&self) -> impl Iterator<Item = &Pod> + '_ {
        self.pods
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(self.operator_namespace.as_str()))
    }

    /// Events about the object `kind` `namespace`/`name` (namespace empty for cluster-scoped
    /// objects), newest first.
    pub fn events_for<'a>(
        &'a self,
        kind: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Event> + 'a {
        self.events.iter().filter(move |e| {
            let o = &e.involved_object;
            o.kind.as_deref() == Some(kind)
                && o.name.as_deref() == Some(name)
                && o.namespace.as_deref().unwrap_or_default() == namespace
        })
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
    }
}

/// The time an event last happened (`lastTimestamp`, else `eventTime`, else its series' last
/// observation, else `firstTimestamp`), as RFC 3339 text for ordering.
pub fn event_time(e: &Event) -> String {
    if let Some(t) = &e.last_timestamp {
        return t.0.to_string();
    }
    if let Some(t) = &e.series.as_ref().and_then(|s| s.last_observed_time.clone()) {
        return t.0.to_string();
    }
    if let Some(t) = &e.event_time {
        return t.0.to_string();
    }
    e.first_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

/// Removes what readers never use and what would make captures large or leak: managedFields and
/// the `last-applied-configuration` annotation.
/// What is kept of an object before it is stored ([`strip`]; DRA claims and slices trimmed to
/// what status counts); `false`: not kept (a claim that is not allocated).
fn trim(kind: DiagKind, v: &mut Value) -> bool {
    strip(v);
    match kind {
        DiagKind::ResourceClaim => match trim_claim(v) {
            Some(t) => *v = t,
            None => return false,
        },
        DiagKind::ResourceSlice => *v = trim_slice(v),
        DiagKind::DeviceTaintRule => {
            *v = serde_json::json!({
                "apiVersion": v["apiVersion"], "kind": v["kind"],
                "metadata": {"name": v["metadata"]["name"]},
                "spec": {"deviceSelector": v["spec"]["deviceSelector"], "taint": v["spec"]["taint"]},
            })
        }
        _ => {}
    }
    true
}

fn strip(v: &mut Value) {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(LAST_APPLIED);
        }
    }
}

/// Replaces every environment `value` of every container, init and ephemeral container by
/// [`MASK`] (names and `valueFrom` references stay: they say which Secret a pod reads).
fn mask_env(pod: &mut Value) {
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(cs) = pod["spec"].get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs {
            let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) else {
                continue;
            };
            for e in env {
                if let Some(val) = e.get_mut("value")
                    && !val.is_null()
                {
                    *val = Value::from(MASK);
                }
            }
        }
    }
}

/// Whether a pod (JSON) requests or limits an accelerator resource in any container.
/// Whether a pod claims devices through Dynamic Resource Allocation (`spec.resourceClaims`).
/// An allocated ResourceClaim as status keeps it (`None`: not allocated, nothing to count).
fn trim_claim(v: &Value) -> Option<Value> {
    let results = v["status"]["allocation"]["devices"]["results"].as_array()?;
    let results: Vec<Value> = results
        .iter()
        .map(|r| serde_json::json!({"driver": r["driver"], "pool": r["pool"], "device": r["device"], "request": r["request"]}))
        .collect();
    let reserved: Vec<Value> = v["status"]["reservedFor"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| serde_json::json!({"resource": r["resource"], "name": r["name"]}))
                .collect()
        })
        .unwrap_or_default();
    Some(serde_json::json!({
        "apiVersion": v["apiVersion"], "kind": v["kind"],
        "metadata": {"namespace": v["metadata"]["namespace"], "name": v["metadata"]["name"]},
        "status": {"allocation": {"devices": {"results": results}}, "reservedFor": reserved},
    }))
}

/// A ResourceSlice as status keeps it: driver, node, pool, and per device its name, the `type`
/// and `profile` attributes (NVIDIA's driver: `gpu` or `mig`, and the MIG profile) and its taints.
fn trim_slice(v: &Value) -> Value {
    let devices: Vec<Value> = v["spec"]["devices"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| {
                    let attrs = &d["attributes"];
                    let mut dev = serde_json::json!({
                        "name": d["name"],
                        "attributes": {"type": attrs["type"], "profile": attrs["profile"]},
                    });
                    // The driver's device taints (an Xid, by NVIDIA's health check): key, value, effect.
                    if let Some(taints) = d["taints"].as_array().filter(|t| !t.is_empty()) {
                        dev["taints"] = Value::Array(
                            taints
                                .iter()
                                .map(|t| serde_json::json!({"key": t["key"], "value": t["value"], "effect": t["effect"]}))
                                .collect(),
                        );
                    }
                    dev
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "apiVersion": v["apiVersion"], "kind": v["kind"],
        "metadata": {"name": v["metadata"]["name"]},
        "spec": {"driver": v["spec"]["driver"], "nodeName": v["spec"]["nodeName"], "pool": v["spec"]["pool"], "devices": devices},
    })
}

fn claims_devices(pod: &Value) -> bool {
    pod["spec"]["resourceClaims"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
}

fn requests_accelerators(pod: &Value) -> bool {
    ["containers", "initContainers"].iter().any(|list| {
        pod["spec"][list].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                ["requests", "limits"].iter().any(|r| {
                    c["resources"][r]
                        .as_object()
                        .is_some_and(|m| m.keys().any(|k| is_accelerator_resource(k)))
                })
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ns: &str, name: &str, res: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name,
                "managedFields": [{"manager": "x"}],
                "annotations": {LAST_APPLIED: "{\"env\": \"hunter2\"}", "keep": "me"}},
            "spec": {"containers": [{"name": "c", "image": "img",
                "args": ["--token=abcdefgh12345678"],
                "env": [{"name": "PLAIN", "value": "hello"},
                        {"name": "FROM", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                "resources": res}]},
            "status": {"phase": "Pending"}
        })
    }

    #[test]
    fn keeps_accelerator_and_operator_pods_masked() {
        let mut d = Diagnostics::new("gpu-operator", None);
        d.ingest(
            DiagKind::Pod,
            vec![
                pod(
                    "team-a",
                    "train",
                    json!({"limits": {"nvidia.com/gpu": "4"}}),
                ),
                pod("team-a", "web", json!({"requests": {"cpu": "1"}})),
                pod(
                    "team-b",
                    "rdma",
                    json!({"requests": {"rdma/rdma_shared_device_a": "1"}}),
                ),
                pod("gpu-operator", "nvidia-device-plugin-x", json!({})),
            ],
        );
        d.finish();
        let names: Vec<_> = d
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["nvidia-device-plugin-x", "train", "rdma"]);
        let text = serde_json::to_string(&d).unwrap();
        assert!(!text.contains("hello"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("abcdefgh12345678"), "{text}");
        assert!(!text.contains("managedFields"), "{text}");
        assert!(text.contains("secretKeyRef") && text.contains("\"keep\":\"me\""));
        let train = &d.pods[1];
        assert_eq!(
            pod_requests(train),
            BTreeMap::from([("nvidia.com/gpu".to_string(), 4)])
        );
        assert_eq!(d.pending_accelerator_pods().count(), 2);
    }

    #[test]
    fn events_follow_kept_pods_and_are_newest_first() {
        let mut d = Diagnostics::new("gpu-operator", None);
        d.ingest(
            DiagKind::Pod,
            vec![pod("a", "p", json!({"limits": {"nvidia.com/gpu": "1"}}))],
        );
        let ev = |name: &str, kind: &str, obj: &str, t: &str| {
            json!({"metadata": {"namespace": "a", "name": name},
                "involvedObject": {"kind": kind, "namespace": "a", "name": obj},
                "reason": "FailedScheduling", "message": "m", "lastTimestamp": t})
        };
        d.ingest(
            DiagKind::Event,
            vec![
                ev("e1", "Pod", "p", "2026-12-01T10:00:00Z"),
                ev("e2", "Pod", "other", "2026-12-01T10:00:00Z"),
                ev("e3", "Pod", "p", "2026-12-01T11:00:00Z"),
                ev("e4", "ConfigMap", "p", "2026-12-01T11:00:00Z"),
            ],
        );
        d.finish();
        let names: Vec<_> = d
            .events_for("Pod", "a", "p")
            .map(|e| e.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["e3", "e1"]);
        assert_eq!(d.events.len(), 2);
    }

    #[test]
    fn reading_skips_pods_that_succeeded() {
        let mut d = Diagnostics::new("gpu-operator", None);
        let gpu = json!({"limits": {"nvidia.com/gpu": "1"}});
        let mut done = pod("a", "done", gpu.clone());
        done["status"]["phase"] = json!("Succeeded");
        let mut failed = pod("a", "failed", gpu.clone());
        failed["status"]["phase"] = json!("Failed");
        d.ingest(DiagKind::Pod, vec![done, failed, pod("a", "waiting", gpu)]);
        d.finish();
        assert_eq!(d.pods.len(), 3, "a capture keeps every GPU pod");
        let read: Diagnostics = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        let names: Vec<_> = read
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["failed", "waiting"]);
        assert!(
            serde_json::from_str::<Diagnostics>(r#"{"format_version": 1, "pods": 5}"#)
                .unwrap_err()
                .to_string()
                .contains("expected a list of pods")
        );
    }

    #[test]
    fn bad_items_and_bounds_are_recorded_as_unread() {
        let mut d = Diagnostics::new("gpu-operator", None);
        d.ingest(
            DiagKind::Workload,
            vec![json!(5), json!({"metadata": {"name": "w"}})],
        );
        d.mark_unread(DiagKind::Cohort, UnreadWhy::NotServed, "");
        d.finish();
        assert_eq!(d.workloads.len(), 1);
        assert_eq!(d.unread(DiagKind::Workload).unwrap().why, UnreadWhy::Failed);
        assert_eq!(
            d.unread(DiagKind::Cohort).unwrap().kind,
            "Cohort.kueue.x-k8s.io"
        );
        assert!(d.read(DiagKind::Pod));
    }

    #[test]
    fn doctor_reads_every_kind_in_table_order_and_pods_before_events() {
        let table: Vec<DiagKind> = DIAGNOSTIC_KINDS.iter().map(|row| row.0).collect();
        assert_eq!(DOCTOR_READS, table.as_slice());
        let at = |k| table.iter().position(|x| *x == k).unwrap();
        assert!(
            at(DiagKind::Pod) < at(DiagKind::Event),
            "events follow kept pods"
        );
        for want in [DOCTOR_READS, STATUS_READS] {
            let mut sorted = want.to_vec();
            sorted.sort_by_key(|k| at(*k));
            assert_eq!(sorted, want, "a reading lists in table order");
        }
        let pods = DIAGNOSTIC_KINDS.iter().find(|r| r.0 == DiagKind::Pod);
        assert_eq!(pods.map(|r| r.4), Some("status.phase!=Succeeded"));
    }

    #[test]
    fn init_containers_count_as_the_scheduler_counts_them() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
                "containers": [
                    {"name": "a", "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1"}}},
                    {"name": "b", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "3"}}}
                ]
            }
        }))
        .unwrap();
        assert_eq!(
            pod_requests(&p),
            BTreeMap::from([
                ("nvidia.com/gpu".to_string(), 2),
                ("nvidia.com/mig-1g.10gb".to_string(), 3)
            ])
        );
    }
}
