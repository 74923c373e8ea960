//! Reads a cluster into the plan layer's one [`LiveView`], executing the read table the plan hands
//! over ([`PlanReads`]) with as few round trips as it allows: discovery of every kind at once, one
//! LIST per kind for the ApplySet's members, the bulk LISTs the table asks for, the pools' node
//! LISTs, and single GETs only for the rest. A plan's view also holds the server-side dry-run
//! answers the table asks for ([`PlanReads::dry_run`]). What to read and every decision made from
//! it are the plan's; this module only sends requests.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use gpuctl_model::applyset::{self, ApplySetParent};
use gpuctl_model::names::UPGRADE_POOL_LABEL;
use gpuctl_model::object::{ObjectRef, TypeRef};
use gpuctl_pipeline::render::{HelmRelease, NodePatch, RenderedObject, RenderedSet};
use gpuctl_plan::journal::{DATA_KEY, Journal};
use gpuctl_plan::live::release::{LiveRelease, OwnedRelease};
use gpuctl_plan::live::workloads::{self, LiveDriverCr, LiveNode, LivePdb, LivePod, Workloads};
use gpuctl_plan::live::{DryRun, LiveView, Reading, Source};
use gpuctl_plan::plan::reads::{
    self, BulkReads, ObjectRead, ParentState, PlanReads, PoolNodes, uninstall_blockers,
    uninstall_reads,
};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::client::{ClusterError, Kube, Resolved, classify, retry};

/// Node LISTs (one per group of pools, [`PoolNodes::lists`]) sent at once.
const POOL_LIST_PARALLELISM: usize = 16;

/// What a read of a rendered set includes.
#[derive(Debug, Clone, Copy)]
pub struct Reads {
    /// Ask the server for the dry-runs a plan needs (plans; not snapshots).
    pub dry_run: bool,
    /// Concurrent requests.
    pub parallelism: usize,
}

/// Discovery results of the set's kinds.
type Kinds = BTreeMap<TypeRef, Option<Resolved>>;

/// The live state `set` touches, as [`PlanReads::of`] lists it: its objects, the ApplySet's
/// members, the pools' nodes, the operator's Helm release (`install: helm`), the upgrade journals
/// and the kinds served; with `reads.dry_run`, the dry-run answers the table asks for.
pub async fn rendered_set(
    k: &Kube,
    set: &RenderedSet,
    reads: Reads,
) -> Result<LiveView, ClusterError> {
    let table = PlanReads::of(set);
    let resolve_all = futures::future::try_join_all(table.kinds.iter().map(|t| async move {
        Ok::<_, ClusterError>((t.clone(), k.resolve(&t.api_version, &t.kind).await?))
    }));
    let (resolved, fingerprint) = futures::try_join!(resolve_all, k.fingerprint())?;
    let kinds: Kinds = resolved.into_iter().collect();
    let mut view = LiveView::empty(Source::Cluster {
        server: k.server.clone(),
        fingerprint,
    });
    view.served = Some(
        kinds
            .iter()
            .filter(|(_, r)| r.is_some())
            .map(|(t, _)| t.clone())
            .collect(),
    );
    // The members first: what they hold needs no other read (an unchanged cluster's plan reads
    // nothing else); the bulk reads are for the objects that are not members.
    let members_and_known = async {
        let members = members(k, &table.parent, &kinds).await?;
        let known = read_known(k, table.bulk(&members), &kinds).await?;
        Ok::<_, ClusterError>((members, known))
    };
    let ((members, known), nodes, journals, helm_release, releases, owned) = futures::try_join!(
        members_and_known,
        pool_nodes(k, &table.nodes),
        async { Ok(journals(k, table.journals_namespace).await) },
        async { Ok(helm_release(k, table.operator_release).await) },
        async { Ok(other_releases(k, &table.releases).await) },
        async { Ok(owned_releases(k, set).await) },
    )?;
    view.members = Some(members);
    view.nodes = Some(nodes);
    view.journals = journals;
    view.helm_release = helm_release;
    view.releases = releases;
    view.owned_releases = owned;
    view.migrating_pods = Some(migrating_pods(k, &set.node_patches, &view).await?);
    read_objects(k, &table, &kinds, &known, reads, &mut view).await?;
    Ok(view)
}

/// The nodes of the pools moving to DRA and the pods on the nodes that move, read now (apply's
/// check under its lock).
pub async fn migration_view(k: &Kube, patches: &[NodePatch]) -> Result<LiveView, ClusterError> {
    let moving: Vec<NodePatch> = patches
        .iter()
        .filter(|p| p.dra_switch.is_some())
        .cloned()
        .collect();
    let mut view = LiveView::empty(Source::Cluster {
        server: k.server.clone(),
        fingerprint: String::new(),
    });
    view.nodes = Some(pool_nodes(k, &PoolNodes::of(&moving)).await?);
    view.migrating_pods = Some(migrating_pods(k, &moving, &view).await?);
    Ok(view)
}

/// The pods on each node a plan moves from the device plugin to DRA
/// ([`reads::moving_nodes`]); no pool moving: nothing is read.
async fn migrating_pods(
    k: &Kube,
    patches: &[NodePatch],
    view: &LiveView,
) -> Result<BTreeMap<String, Vec<LivePod>>, ClusterError> {
    let mut out = BTreeMap::new();
    for name in reads::moving_nodes(patches, view) {
        let pods = pods_on(k, &name).await?;
        out.insert(name, pods);
    }
    Ok(out)
}

/// The `gpuctl upgrade` journals in `namespace`; a failure is kept in the view (a plan says it
/// cannot tell whether an upgrade is moving a pool; a snapshot refuses to be written without them).
pub async fn journals(k: &Kube, namespace: &str) -> Reading<Vec<Journal>> {
    match journal_list(k, Some(namespace), None).await {
        Ok(j) => Reading::Read(j),
        Err(e) => Reading::Failed(e.to_string()),
    }
}

/// Why the upgrade journals could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JournalsError {
    /// The cluster failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A journal ConfigMap does not hold a journal this gpuctl can read.
    #[error("the upgrade journal {name} cannot be read: {message}")]
    Corrupt {
        /// ConfigMap.
        name: String,
        /// Why.
        message: String,
    },
}

/// The journal a journal ConfigMap holds.
pub fn journal_of(name: &str, cm: &ConfigMap) -> Result<Journal, JournalsError> {
    let text = cm.data.as_ref().and_then(|d| d.get(DATA_KEY));
    Journal::parse(text.map(String::as_str)).map_err(|message| JournalsError::Corrupt {
        name: name.to_string(),
        message,
    })
}

/// Every journal in the cluster (or in `namespace`), optionally only `pool`'s, sorted by pool.
pub async fn journal_list(
    k: &Kube,
    namespace: Option<&str>,
    pool: Option<&str>,
) -> Result<Vec<Journal>, JournalsError> {
    let api: Api<ConfigMap> = match namespace {
        Some(ns) => Api::namespaced(k.client(), ns),
        None => Api::all(k.client()),
    };
    let selector = match pool {
        Some(p) => format!("{UPGRADE_POOL_LABEL}={p}"),
        None => UPGRADE_POOL_LABEL.to_string(),
    };
    let lp = ListParams::default().labels(&selector);
    let items = retry(|| api.list(&lp))
        .await
        .map_err(|e| classify("list upgrade journals", e))?;
    let mut out = Vec::new();
    for cm in items
        .items
        .iter()
        .filter(|c| c.data.as_ref().is_some_and(|d| d.contains_key(DATA_KEY)))
    {
        out.push(journal_of(
            cm.metadata.name.as_deref().unwrap_or_default(),
            cm,
        )?);
    }
    out.sort_by(|a, b| (&a.pool, &a.namespace).cmp(&(&b.pool, &b.namespace)));
    Ok(out)
}

/// A release gpuctl installs with helm, read from Helm's storage (a failure is kept: the plan says
/// it cannot tell, a snapshot refuses to be written without it); `None`: not read.
async fn helm_release(k: &Kube, release: Option<&HelmRelease>) -> Reading<Option<LiveRelease>> {
    let Some(release) = release else {
        return Reading::NotRead;
    };
    match crate::release::read_release(k, &release.namespace, &release.release).await {
        Ok(r) => Reading::Read(r),
        Err(e) => Reading::Failed(e.to_string()),
    }
}

/// The other stacks' releases gpuctl installs with helm, by (namespace, release).
async fn other_releases(
    k: &Kube,
    releases: &[&HelmRelease],
) -> BTreeMap<(String, String), Reading<Option<LiveRelease>>> {
    let mut out = BTreeMap::new();
    for r in releases {
        out.insert(
            (r.namespace.clone(), r.release.clone()),
            helm_release(k, Some(r)).await,
        );
    }
    out
}

/// The releases gpuctl installed for the set's blueprint (a failure is kept: the plan says it
/// cannot tell), with the objects of their stack's API groups for those the blueprint dropped
/// ([`reads::uninstall_reads`]).
async fn owned_releases(k: &Kube, set: &RenderedSet) -> Reading<Vec<OwnedRelease>> {
    let mut owned = match crate::release::owned_releases(k, &set.blueprint).await {
        Ok(o) => o,
        Err(e) => return Reading::Failed(e.to_string()),
    };
    for read in uninstall_reads(set, &owned) {
        let objects = match crate::release::objects_in_groups(k, &read.groups).await {
            Ok(o) => Reading::Read(uninstall_blockers(&owned[read.index], o)),
            Err(e) => Reading::Failed(e.to_string()),
        };
        owned[read.index].objects = objects;
    }
    Reading::Read(owned)
}

/// Each rendered object's live state (members and bulk reads first, single GETs for the rest) and,
/// for a plan, the dry-runs the table asks for, a bounded number at a time.
async fn read_objects(
    k: &Kube,
    table: &PlanReads<'_>,
    kinds: &Kinds,
    known: &Known,
    reads: Reads,
    view: &mut LiveView,
) -> Result<(), ClusterError> {
    let view_ref = &*view;
    let results: Vec<Result<ObjectReadResult, ClusterError>> =
        futures::stream::iter(&table.objects)
            .map(|o| async move {
                let Some(r) = kinds.get(&o.type_ref).and_then(Option::as_ref) else {
                    return Ok((o.id.clone(), None, None));
                };
                // A member is in the view already: read it there, not copied (a 64-pool plan has
                // 4,000 of them); only what is read here is kept.
                let read = match view_ref.get(&o.id) {
                    Some(_) => None,
                    None => known.current(k, r, o.object).await?,
                };
                let current = view_ref.get(&o.id).or(read.as_ref());
                let dry_run = match reads.dry_run {
                    true => {
                        let parent_live =
                            parent_state(k, kinds, known, view_ref, o, current).await?;
                        let parent = match &parent_live {
                            ParentLive::NotAsked => ParentState::NotAsked,
                            ParentLive::NotServed => ParentState::NotServed,
                            ParentLive::Read(v) => ParentState::Read(v.as_ref()),
                        };
                        match table.dry_run(o, current, parent) {
                            Some(manifest) => Some(dry_run(k, r, &manifest).await?),
                            None => None,
                        }
                    }
                    false => None,
                };
                Ok((o.id.clone(), read, dry_run))
            })
            .buffered(reads.parallelism.max(1))
            .collect()
            .await;
    for result in results {
        let (id, current, dry_run) = result?;
        if let Some(d) = dry_run {
            view.dry_run.insert(id.clone(), d);
        }
        if let Some(v) = current {
            view.objects.insert(id, v);
        }
    }
    Ok(())
}

/// An in-set parent's live state, owned (read here or copied from the view).
enum ParentLive {
    NotAsked,
    NotServed,
    Read(Option<Value>),
}

/// The live state of `o`'s in-set parent when `o` does not exist yet (a dry-run of a child whose
/// parent this apply creates first is refused by admission).
async fn parent_state(
    k: &Kube,
    kinds: &Kinds,
    known: &Known,
    view: &LiveView,
    o: &ObjectRead<'_>,
    current: Option<&Value>,
) -> Result<ParentLive, ClusterError> {
    let Some(parent) = o.parent.filter(|_| current.is_none()) else {
        return Ok(ParentLive::NotAsked);
    };
    let Some(pr) = kinds.get(&parent.type_ref()).and_then(Option::as_ref) else {
        return Ok(ParentLive::NotServed);
    };
    Ok(ParentLive::Read(match view.get(&parent.object_ref()) {
        Some(v) => Some(v.clone()),
        None => known.current(k, pr, parent).await?,
    }))
}

pub use gpuctl_plan::plan::KueueConfigReading;

/// The running Kueue's configuration: its manager ConfigMap's key (`profiles/queueing.yaml`).
pub async fn kueue_config(k: &Kube) -> KueueConfigReading {
    let cm = &gpuctl_model::profiles::Catalog::embedded()
        .queueing()
        .kueue_configuration
        .config_map;
    let r = match k.resolve("v1", "ConfigMap").await {
        Ok(Some(r)) => r,
        Ok(None) => return KueueConfigReading::Failed("ConfigMaps are not served".into()),
        Err(e) => return KueueConfigReading::Failed(e.to_string()),
    };
    match k.get(&r, Some(&cm.namespace), &cm.name).await {
        Ok(None) => KueueConfigReading::Missing,
        Ok(Some(v)) => match v["data"][cm.key.as_str()].as_str() {
            Some(text) => KueueConfigReading::Read(text.to_string()),
            None => KueueConfigReading::Missing,
        },
        Err(e) => KueueConfigReading::Failed(e.to_string()),
    }
}

/// An object's identity, live state and dry-run answer.
type ObjectReadResult = (ObjectRef, Option<Value>, Option<DryRun>);

async fn dry_run(k: &Kube, r: &Resolved, manifest: &Value) -> Result<DryRun, ClusterError> {
    match k.apply(r, manifest, true, false).await {
        Ok(v) => Ok(DryRun::Applied(v)),
        Err(ClusterError::Conflict { message, .. }) => Ok(DryRun::Conflict(message)),
        Err(e) => Err(e),
    }
}

/// Live state read in bulk before reading object by object.
#[derive(Default)]
struct Known {
    /// Names of existing namespaces.
    namespaces: Option<BTreeSet<String>>,
    /// Kinds listed in full: an object of such a kind absent from `objects` does not exist.
    listed: BTreeSet<TypeRef>,
    /// Objects of listed kinds.
    objects: BTreeMap<ObjectRef, Value>,
}

impl Known {
    /// The live object of `o`, from the bulk reads when they decide it, else one GET.
    async fn current(
        &self,
        k: &Kube,
        r: &Resolved,
        o: &RenderedObject,
    ) -> Result<Option<Value>, ClusterError> {
        if self.listed.contains(&o.type_ref()) {
            return Ok(self.objects.get(&o.object_ref()).cloned());
        }
        let namespace_missing = o.namespace.as_ref().is_some_and(|ns| {
            self.namespaces
                .as_ref()
                .is_some_and(|all| !all.contains(ns))
        });
        if namespace_missing {
            return Ok(None);
        }
        k.get(r, o.namespace.as_deref(), &o.name).await
    }
}

/// The bulk reads the table asks for ([`PlanReads::bulk`]), all at once: one LIST of namespace
/// names and one LIST per cluster-scoped kind with many objects left to read (a first plan of
/// 5,000 objects otherwise costs 5,000 GETs). The namespace names come from the Namespace LIST
/// when there is one.
async fn read_known(k: &Kube, bulk: BulkReads, kinds: &Kinds) -> Result<Known, ClusterError> {
    let namespaces = async {
        if !bulk.namespace_names {
            return Ok(None);
        }
        match k.resolve("v1", "Namespace").await? {
            Some(r) => Ok::<_, ClusterError>(Some(names(&k.list(&r, "").await?))),
            None => Ok(None),
        }
    };
    let listed = futures::future::try_join_all(
        bulk.lists
            .into_iter()
            .filter_map(|t| Some((kinds.get(&t)?.as_ref()?, t)))
            .map(|(r, t)| async move { Ok::<_, ClusterError>((t, k.list(r, "").await?)) }),
    );
    let (namespaces, listed) = futures::try_join!(namespaces, listed)?;
    let mut known = Known {
        namespaces,
        ..Known::default()
    };
    for (t, items) in listed {
        if t.api_version == "v1" && t.kind == "Namespace" {
            known.namespaces = Some(names(&items));
        }
        for v in items {
            let v = with_type(v, &t);
            if let Some(id) = ObjectRef::of(&v) {
                known.objects.insert(id, v);
            }
        }
        known.listed.insert(t);
    }
    Ok(known)
}

/// The names of listed objects.
fn names(items: &[Value]) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Lists omit apiVersion/kind on items; put them back.
fn with_type(mut v: Value, t: &TypeRef) -> Value {
    v["apiVersion"] = json!(t.api_version);
    v["kind"] = json!(t.kind);
    v
}

/// The current members of the ApplySet: one label-selected LIST per kind the set has now, plus the
/// kinds the parent recorded earlier (they may hold members the blueprint dropped).
async fn members(
    k: &Kube,
    parent: &ApplySetParent,
    kinds: &Kinds,
) -> Result<BTreeMap<ObjectRef, Value>, ClusterError> {
    let selector = format!("{}={}", applyset::PART_OF, parent.id());
    let mut resolved: Vec<Resolved> = kinds.values().flatten().cloned().collect();
    for gk in parent_group_kinds(k, parent).await? {
        let (kind, group) = gk.split_once('.').unwrap_or((gk.as_str(), ""));
        if resolved
            .iter()
            .any(|r| r.resource.kind == kind && r.resource.group == group)
        {
            continue;
        }
        if let Some(r) = k.resolve_group_kind(group, kind).await? {
            resolved.push(r);
        }
    }
    let lists = futures::future::try_join_all(resolved.iter().map(|r| {
        let selector = &selector;
        async move { Ok::<_, ClusterError>((r, k.list(r, selector).await?)) }
    }))
    .await?;
    let mut out = BTreeMap::new();
    for (r, items) in lists {
        let t = TypeRef::new(&r.resource.api_version, &r.resource.kind);
        for v in items {
            let v = with_type(v, &t);
            if let Some(id) = ObjectRef::of(&v) {
                out.insert(id, v);
            }
        }
    }
    Ok(out)
}

/// Group-kinds recorded on the live ApplySet parent.
pub async fn parent_group_kinds(
    k: &Kube,
    parent: &ApplySetParent,
) -> Result<Vec<String>, ClusterError> {
    let Some(r) = k.resolve("v1", "ConfigMap").await? else {
        return Ok(vec![]);
    };
    let Some(cm) = k.get(&r, Some(&parent.namespace), &parent.name).await? else {
        return Ok(vec![]);
    };
    Ok(
        cm["metadata"]["annotations"][applyset::CONTAINS_GROUP_KINDS]
            .as_str()
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// The nodes of every pool, each node once: the table's LISTs ([`PoolNodes::lists`]: pools
/// that select by the same label keys share one, so a 64-pool blueprint costs one LIST, not 64),
/// a bounded number at a time, keeping the nodes some pool selects.
async fn pool_nodes(k: &Kube, pools: &PoolNodes<'_>) -> Result<Vec<Value>, ClusterError> {
    let r = k
        .resolve("v1", "Node")
        .await?
        .ok_or_else(|| ClusterError::Unreadable {
            object: "Nodes".into(),
            message: "the API server does not serve v1 Node".into(),
        })?;
    let lists: Vec<Result<Vec<Value>, ClusterError>> = futures::stream::iter(&pools.lists)
        .map(|selector| {
            let r = &r;
            async move { k.list(r, selector).await }
        })
        .buffered(POOL_LIST_PARALLELISM)
        .collect()
        .await;
    let mut by_name: BTreeMap<String, Value> = BTreeMap::new();
    for list in lists {
        for n in list?.into_iter().filter(|n| pools.keeps(n)) {
            let name = n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            by_name.insert(name, n);
        }
    }
    Ok(by_name.into_values().collect())
}

/// A planned object's type, whether it is served, and the object now.
type PlannedRead = (TypeRef, bool, Option<Value>);

/// What a saved plan is about, read again for `apply`'s stale check: the kinds it uses, its
/// objects (a bounded number at a time: a saved plan of 5,000 objects read one by one takes
/// minutes against a remote server), the nodes it changes and, when it planned the Helm step, the
/// operator's release.
pub async fn planned(
    k: &Kube,
    plan: &gpuctl_plan::plan::Plan,
    parallelism: usize,
) -> Result<LiveView, ClusterError> {
    let mut view = LiveView::empty(Source::Cluster {
        server: k.server.clone(),
        fingerprint: plan.cluster_fingerprint.clone().unwrap_or_default(),
    });
    let actions = plan
        .actions
        .iter()
        .filter(|a| a.action != gpuctl_plan::plan::ActionKind::CreateAfterCrd);
    let reads: Vec<Result<PlannedRead, ClusterError>> = futures::stream::iter(actions)
        .map(|a| async move {
            let t = TypeRef::new(&a.api_version, &a.kind);
            let Some(r) = k.resolve(&a.api_version, &a.kind).await? else {
                return Ok((t, false, None));
            };
            let now = k.get(&r, a.namespace.as_deref(), &a.name).await?;
            Ok((t, true, now))
        })
        .buffered(parallelism.max(1))
        .collect()
        .await;
    let mut served = BTreeSet::new();
    for read in reads {
        let (t, is_served, now) = read?;
        if is_served {
            served.insert(t);
        }
        if let Some(v) = now.and_then(|v| Some((ObjectRef::of(&v)?, v))) {
            view.objects.insert(v.0, v.1);
        }
    }
    // The set's members now: one that joined since the plan (another apply added it) is a change
    // the plan did not see, and its prune list would miss.
    let mut kinds = Kinds::new();
    for t in &served {
        kinds.insert(t.clone(), k.resolve(&t.api_version, &t.kind).await?);
    }
    let parent = gpuctl_model::applyset::ApplySetParent::for_blueprint(
        &plan.blueprint,
        &plan.helm.namespace,
    );
    view.members = Some(members(k, &parent, &kinds).await?);
    view.served = Some(served);
    let mut nodes = Vec::new();
    if let Some(r) = k.resolve("v1", "Node").await? {
        for n in &plan.nodes {
            nodes.extend(k.get(&r, None, &n.node).await?);
        }
    }
    view.nodes = Some(nodes);
    if plan.helm_release.is_some() {
        let release =
            crate::release::read_release(k, &plan.helm.namespace, &plan.helm.release).await?;
        view.helm_release = Reading::Read(release);
    }
    for step in plan.releases.iter().filter(|r| r.plan.is_some()) {
        let r = &step.release;
        let release = crate::release::read_release(k, &r.namespace, &r.release).await?;
        view.releases.insert(
            (r.namespace.clone(), r.release.clone()),
            Reading::Read(release),
        );
    }
    Ok(view)
}

/// One pool's workloads for an upgrade: the nodes matching `selector`, their pods, the PDBs
/// covering them and the driver CRs.
pub async fn pool_workloads(
    k: &Kube,
    selector: &BTreeMap<String, String>,
) -> Result<LiveView, ClusterError> {
    let nodes = read_nodes(k, selector).await?;
    let mut pods = Vec::new();
    for n in &nodes {
        pods.extend(pods_on(k, &n.name).await?);
    }
    let pdbs = read_pdbs(k, &pods).await?;
    let driver_crs = read_driver_crs(k).await?;
    let device_taint_rule_api = k
        .resolve_group_kind("resource.k8s.io", "DeviceTaintRule")
        .await?
        .map(|r| r.resource.api_version);
    let mut view = LiveView::empty(Source::Cluster {
        server: k.server.clone(),
        fingerprint: k.fingerprint().await?,
    });
    view.workloads = Some(Workloads {
        nodes,
        pods,
        pdbs,
        driver_crs,
        device_taint_rule_api,
    });
    Ok(view)
}

/// The nodes matching `selector`, sorted by name.
pub async fn read_nodes(
    k: &Kube,
    selector: &BTreeMap<String, String>,
) -> Result<Vec<LiveNode>, ClusterError> {
    let api: Api<Node> = Api::all(k.client());
    let lp = ListParams::default().labels(&workloads::selector_text(selector));
    let list = retry(|| api.list(&lp))
        .await
        .map_err(|e| classify("list Nodes", e))?;
    let mut nodes: Vec<LiveNode> = list.items.iter().map(workloads::live_node).collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(nodes)
}

/// One node by name (`None` when it is gone).
pub async fn read_node(k: &Kube, name: &str) -> Result<Option<LiveNode>, ClusterError> {
    let api: Api<Node> = Api::all(k.client());
    let node = retry(|| api.get_opt(name))
        .await
        .map_err(|e| classify(&format!("Node/{name}"), e))?;
    Ok(node.as_ref().map(workloads::live_node))
}

/// Every pod on `node`, in every namespace.
pub async fn pods_on(k: &Kube, node: &str) -> Result<Vec<LivePod>, ClusterError> {
    let api: Api<Pod> = Api::all(k.client());
    let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let list = retry(|| api.list(&lp))
        .await
        .map_err(|e| classify(&format!("list Pods on {node}"), e))?;
    let mut pods: Vec<LivePod> = list.items.iter().map(workloads::live_pod).collect();
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(pods)
}

/// PDBs in the namespaces of `pods` that cover at least one of them.
pub async fn read_pdbs(k: &Kube, pods: &[LivePod]) -> Result<Vec<LivePdb>, ClusterError> {
    let mut namespaces: Vec<&str> = pods.iter().map(|p| p.namespace.as_str()).collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let mut out = Vec::new();
    for ns in namespaces {
        let api: Api<PodDisruptionBudget> = Api::namespaced(k.client(), ns);
        let lp = ListParams::default();
        let list = retry(|| api.list(&lp))
            .await
            .map_err(|e| classify(&format!("list PodDisruptionBudgets in {ns}"), e))?;
        out.extend(
            list.items
                .iter()
                .map(|pdb| workloads::live_pdb(ns, pdb))
                .filter(|live| pods.iter().any(|p| live.covers(p))),
        );
    }
    out.sort_by_key(LivePdb::id);
    Ok(out)
}

/// Every NVIDIADriver CR (`None` when the CRD is not served).
pub async fn read_driver_crs(k: &Kube) -> Result<Option<Vec<LiveDriverCr>>, ClusterError> {
    let Some(r) = k.resolve("nvidia.com/v1alpha1", "NVIDIADriver").await? else {
        return Ok(None);
    };
    let items = k.list(&r, "").await?;
    let mut crs: Vec<LiveDriverCr> = items.iter().map(workloads::live_driver_cr).collect();
    crs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Some(crs))
}

/// Why a live plan or snapshot could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The cluster failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The rendered set cannot be planned.
    #[error(transparent)]
    Plan(#[from] gpuctl_plan::plan::PlanError),
    /// The live state cannot be kept as a snapshot.
    #[error(transparent)]
    Capture(#[from] gpuctl_day2::snapshot::CaptureError),
}

/// The plan of `set` against the cluster: an empty set is refused before anything is read, then
/// the live view is read (with the dry-runs the core asks for) and the core decides.
pub async fn plan(
    k: &Kube,
    set: &RenderedSet,
    opts: gpuctl_plan::plan::PlanOptions,
    parallelism: usize,
) -> Result<gpuctl_plan::plan::Plan, LiveError> {
    gpuctl_plan::plan::refuse_empty(set)?;
    let reads = Reads {
        dry_run: true,
        parallelism,
    };
    let view = rendered_set(k, set, reads).await?;
    Ok(gpuctl_plan::plan::plan(set, &view, opts)?)
}

/// The snapshot of what `set` touches in the cluster (no dry-runs).
pub async fn snapshot(
    k: &Kube,
    set: &RenderedSet,
) -> Result<gpuctl_day2::snapshot::Snapshot, LiveError> {
    let reads = Reads {
        dry_run: false,
        parallelism: usize::from(crate::client::DEFAULT_PARALLELISM),
    };
    let view = rendered_set(k, set, reads).await?;
    Ok(gpuctl_day2::snapshot::Snapshot::capture(&view, set)?)
}
