//! Plans: what applying a rendered set would change, object by object and field by field, against a
//! live cluster (server-side dry-run), a snapshot file, or nothing (offline). A plan is a versioned
//! JSON document that `apply` can execute later, refusing it when the cluster moved since.

pub mod diff;
pub mod redact;

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::applyset::{self, ApplySetParent};
use crate::cluster::{ClusterError, FIELD_MANAGER, Kube, Resolved, snapshot::Snapshot};
use crate::render::{NodePatch, Phase, RenderedObject, RenderedSet};
use diff::Change;

/// Version of the plan JSON format (docs/plan-apply.md). 2: printed plans are masked and say so
/// (`redacted`, and `apply` refuses them); an older gpuctl, which knows only version 1, must
/// refuse them too rather than apply `(sensitive)` as a password.
pub const PLAN_FORMAT_VERSION: u32 = 2;

/// Kinds never pruned without `--prune-protected`: losing one loses everything inside or above it.
pub const PROTECTED_KINDS: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "PriorityClass",
    "Node",
];

/// Where the live state came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A live API server, with server-side dry-run.
    Live,
    /// A snapshot file.
    Snapshot,
    /// No live state: everything is a create.
    Offline,
}

/// What happens to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActionKind {
    /// Created.
    Create,
    /// Created once its CRD is installed (the kind is not served yet).
    CreateAfterCrd,
    /// Fields change.
    Update,
    /// Pruned: a member of the set the blueprint no longer declares.
    Delete,
    /// A field gpuctl would set is owned by another manager.
    Conflict,
    /// Nothing to do.
    NoOp,
}

/// One object's action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// What happens.
    pub action: ActionKind,
    /// Apply phase (absent for prunes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// resourceVersion of the live object when planned (absent: it did not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Field changes (update, delete: what goes away), credentials masked (`redact`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// Why (conflicts name the other manager and fields; protected prunes say so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The manifest to apply (create, update, conflict); masked only in a printed plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Value>,
}

impl Action {
    /// `Kind/ns/name`.
    pub fn id(&self) -> String {
        crate::cluster::display_id(&self.kind, self.namespace.as_deref(), &self.name)
    }
}

/// Label and taint changes on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeAction {
    /// Pool.
    pub pool: String,
    /// Node name.
    pub node: String,
    /// resourceVersion when planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Label changes (`labels."key"`).
    pub labels: Vec<Change>,
    /// Taints added (`key=value:Effect`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<String>,
}

/// Something the plan noticed about the live cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFinding {
    /// `warning` or `error`.
    pub severity: String,
    /// What.
    pub message: String,
}

/// Counts per action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Creates (including after-CRD).
    pub create: usize,
    /// Updates.
    pub update: usize,
    /// Deletes.
    pub delete: usize,
    /// Conflicts.
    pub conflict: usize,
    /// Unchanged.
    pub unchanged: usize,
    /// Nodes with label or taint changes.
    pub nodes: usize,
    /// 1 when the operator's Helm release would be installed or upgraded.
    #[serde(default)]
    pub helm: usize,
}

impl Summary {
    /// Whether applying would change anything.
    pub fn has_changes(&self) -> bool {
        self.create + self.update + self.delete + self.conflict + self.nodes + self.helm > 0
    }
}

/// What `helm upgrade --install` would do to the operator's release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HelmAction {
    /// No release yet.
    Install,
    /// Another chart version, other values, or a release not in `deployed` state.
    Upgrade,
    /// Same chart version and values, deployed: apply skips helm.
    NoOp,
}

/// The operator release's part of a plan (`install: helm` only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelmPlan {
    /// What happens.
    pub action: HelmAction,
    /// Live revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// Live Helm status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Live chart version, when it differs from the blueprint's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_version_before: Option<String>,
    /// Value changes (every value for an install), credentials masked (`redact`).
    pub changes: Vec<Change>,
}

/// A whole plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Format version.
    pub format_version: u32,
    /// gpuctl version that made it.
    pub gpuctl_version: String,
    /// Blueprint name.
    pub blueprint: String,
    /// Live, snapshot or offline.
    pub mode: Mode,
    /// Cluster fingerprint (live and snapshot modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_fingerprint: Option<String>,
    /// Server URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// ApplySet id.
    pub applyset: String,
    /// Object actions, in apply order (prunes last).
    pub actions: Vec<Action>,
    /// Node label/taint actions.
    pub nodes: Vec<NodeAction>,
    /// Live-state findings (node counts, GPU models, drivers).
    pub findings: Vec<PlanFinding>,
    /// The operator's Helm release step.
    pub helm: crate::render::HelmRelease,
    /// What that step would change, from the live release (live and snapshot modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_release: Option<HelmPlan>,
    /// Node patches as rendered (apply re-reads nodes).
    pub node_patches: Vec<NodePatch>,
    /// Totals.
    pub summary: Summary,
    /// Credentials in `helm.values` and manifests are masked: the plan can be shown, not applied.
    #[serde(default)]
    pub redacted: bool,
}

/// Options that shape a plan.
#[derive(Debug, Clone, Copy)]
pub struct PlanOptions {
    /// Plan deletion of protected kinds too.
    pub prune_protected: bool,
    /// Concurrent requests.
    pub parallelism: usize,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            prune_protected: false,
            parallelism: usize::from(crate::cluster::DEFAULT_PARALLELISM),
        }
    }
}

/// Where live state comes from.
pub enum Live<'a> {
    /// A live cluster.
    Cluster(&'a Kube),
    /// A snapshot.
    Snapshot(&'a Snapshot),
    /// Nothing.
    Offline,
}

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The cluster failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The driver upgrade journals could not be read (snapshot capture).
    #[error("cannot read the driver upgrade journals: {0}")]
    Journals(String),
    /// The rendered set is empty: gpuctl never plans pruning everything.
    #[error("the rendered set is empty; refusing to plan a prune of every member of ApplySet {0}")]
    EmptySet(String),
}

/// The GroupKind string of the ApplySet annotation: `Kind.group`, or `Kind` for core.
pub fn group_kind(api_version: &str, kind: &str) -> String {
    match api_version.rsplit_once('/') {
        Some((group, _)) => format!("{kind}.{group}"),
        None => kind.to_string(),
    }
}

fn obj_key(kind: &str, namespace: Option<&str>, name: &str) -> (String, String, String) {
    (
        kind.to_string(),
        namespace.unwrap_or("").to_string(),
        name.to_string(),
    )
}

/// The ApplySet parent of a rendered set.
pub fn parent_of(set: &RenderedSet) -> ApplySetParent {
    ApplySetParent::for_blueprint(&set.blueprint, &set.helm.namespace)
}

/// Builds the plan.
pub async fn plan(set: &RenderedSet, live: Live<'_>, opts: PlanOptions) -> Result<Plan, PlanError> {
    let parent = parent_of(set);
    let id = parent.id();
    if set.objects.is_empty() {
        return Err(PlanError::EmptySet(id));
    }
    // Kinds: served or not. One discovery request per kind, all at once: on a remote cluster a
    // sequence of round trips is what makes a plan slow, not the work behind each.
    let kind_keys: BTreeSet<(String, String)> = set
        .objects
        .iter()
        .map(|o| (o.api_version.clone(), o.kind.clone()))
        .collect();
    let resolve_all = futures::future::try_join_all(kind_keys.iter().map(|(api_version, kind)| {
        let live = &live;
        async move {
            let r = match live {
                Live::Cluster(k) => k.resolve(api_version, kind).await?,
                _ => None,
            };
            let is_served = match live {
                Live::Cluster(_) => r.is_some(),
                Live::Snapshot(s) => s.serves(api_version, kind),
                Live::Offline => true,
            };
            Ok::<_, ClusterError>(((api_version.clone(), kind.clone()), r, is_served))
        }
    }));
    let fingerprint = async {
        Ok::<_, ClusterError>(match &live {
            Live::Cluster(k) => (Some(k.fingerprint().await?), Some(k.server.clone())),
            Live::Snapshot(s) => (s.fingerprint.clone(), s.server.clone()),
            Live::Offline => (None, None),
        })
    };
    let (resolved, (fingerprint, server)) = futures::try_join!(resolve_all, fingerprint)?;
    let mut kinds: BTreeMap<(String, String), Option<Resolved>> = BTreeMap::new();
    let mut served: BTreeMap<(String, String), bool> = BTreeMap::new();
    for (key, r, is_served) in resolved {
        served.insert(key.clone(), is_served);
        kinds.insert(key, r);
    }

    let desired_keys: BTreeSet<(String, String, String)> = set
        .objects
        .iter()
        .map(|o| obj_key(&o.kind, o.namespace.as_deref(), &o.name))
        .collect();
    let namespaces_created: BTreeSet<&str> = set
        .objects
        .iter()
        .filter(|o| o.kind == "Namespace")
        .map(|o| o.name.as_str())
        .collect();

    // Bulk reads, concurrently: the current members of the set (for prune), what exists among the
    // rendered objects, and the pools' nodes.
    let (members, known, (nodes, node_findings, cr_moves), upgrades) = futures::try_join!(
        list_members(&live, &parent, &kinds),
        read_known(&live, set, &kinds),
        async {
            plan_nodes(&live, &set.node_patches)
                .await
                .map_err(PlanError::from)
        },
        async {
            Ok(match &live {
                Live::Cluster(k) => {
                    upgrade_findings_by_pool(
                        k,
                        &set.blueprint,
                        &set.helm.namespace,
                        &set.node_patches,
                    )
                    .await
                }
                Live::Snapshot(s) => journal_findings(
                    &s.upgrade_journals,
                    &set.blueprint,
                    &set.helm.namespace,
                    &set.node_patches,
                ),
                Live::Offline => vec![],
            })
        },
    )?;
    let (helm_release, helm_findings) = plan_helm(&live, &set.helm).await;

    let live_ref = &live;
    let kinds_ref = &kinds;
    let served_ref = &served;
    let members_ref = &members;
    let known_ref = &known;
    let ns_created = &namespaces_created;
    let set_id = id.as_str();
    let actions: Vec<Result<Action, PlanError>> = futures::stream::iter(set.objects.iter())
        .map(|o| async move {
            let is_served = served_ref[&(o.api_version.clone(), o.kind.clone())];
            if !is_served {
                return Ok(action(
                    ActionKind::CreateAfterCrd,
                    o,
                    None,
                    vec![],
                    Some(format!(
                        "{} {} is not served yet; it is created once its CRD is installed",
                        o.api_version, o.kind
                    )),
                ));
            }
            let key = obj_key(&o.kind, o.namespace.as_deref(), &o.name);
            let current = match members_ref.get(&key) {
                Some(v) => Some(v.clone()),
                None if known_ref
                    .listed
                    .contains(&(o.api_version.clone(), o.kind.clone())) =>
                {
                    known_ref.objects.get(&key).cloned()
                }
                None if o.namespace.as_ref().is_some_and(|ns| {
                    known_ref
                        .namespaces
                        .as_ref()
                        .is_some_and(|all| !all.contains(ns))
                }) =>
                {
                    None
                }
                None => get_live(live_ref, kinds_ref, o).await?,
            };
            plan_object(live_ref, kinds_ref, o, current, ns_created, set_id).await
        })
        .buffered(opts.parallelism.max(1))
        .collect()
        .await;
    let mut actions: Vec<Action> = actions.into_iter().collect::<Result<_, _>>()?;

    // Prune: members the blueprint no longer declares.
    let mut findings = Vec::new();
    for ((kind, ns, name), obj) in &members {
        if desired_keys.contains(&(kind.clone(), ns.clone(), name.clone())) {
            continue;
        }
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let protected = PROTECTED_KINDS.contains(&kind.as_str());
        if protected && !opts.prune_protected {
            findings.push(PlanFinding {
                severity: "warning".into(),
                message: format!(
                    "{} is no longer in the blueprint but is kept: {kind} objects are pruned only with --prune-protected",
                    crate::cluster::display_id(kind, (!ns.is_empty()).then_some(ns.as_str()), name)
                ),
            });
            continue;
        }
        actions.push(Action {
            action: ActionKind::Delete,
            phase: None,
            api_version,
            kind: kind.clone(),
            namespace: (!ns.is_empty()).then(|| ns.clone()),
            name: name.clone(),
            resource_version: obj["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
            changes: vec![],
            reason: Some("no longer declared by the blueprint".into()),
            manifest: None,
        });
    }

    let explained: BTreeSet<&str> = upgrades.iter().filter_map(|(p, _)| p.as_deref()).collect();
    findings.extend(
        cr_moves
            .into_iter()
            .filter(|(pool, _)| !explained.contains(pool.as_str()))
            .flat_map(|(_, f)| f),
    );
    findings.extend(upgrades.into_iter().map(|(_, f)| f));
    findings.extend(helm_findings);
    findings.extend(node_findings);

    let mut summary = Summary::default();
    for a in &actions {
        match a.action {
            ActionKind::Create | ActionKind::CreateAfterCrd => summary.create += 1,
            ActionKind::Update => summary.update += 1,
            ActionKind::Delete => summary.delete += 1,
            ActionKind::Conflict => summary.conflict += 1,
            ActionKind::NoOp => summary.unchanged += 1,
        }
    }
    summary.nodes = nodes.len();
    summary.helm = usize::from(
        helm_release
            .as_ref()
            .is_some_and(|h| h.action != HelmAction::NoOp),
    );
    Ok(Plan {
        format_version: PLAN_FORMAT_VERSION,
        gpuctl_version: env!("CARGO_PKG_VERSION").to_string(),
        blueprint: set.blueprint.clone(),
        mode: match live {
            Live::Cluster(_) => Mode::Live,
            Live::Snapshot(_) => Mode::Snapshot,
            Live::Offline => Mode::Offline,
        },
        cluster_fingerprint: fingerprint,
        server,
        applyset: id,
        actions,
        nodes,
        findings,
        helm: set.helm.clone(),
        helm_release,
        node_patches: set.node_patches.clone(),
        summary,
        redacted: false,
    })
}

/// Built-in API groups: their schemas are fixed by the Kubernetes version and gpuctl's manifests
/// for them are round-trip tested against k8s-openapi, so creates of these kinds are not dry-run
/// at plan time (custom resources are: the installed CRD version may differ from the one gpuctl
/// targets).
const BUILT_IN_GROUPS: &[&str] = &["", "scheduling.k8s.io"];

/// Cluster-scoped kinds with at least this many objects in the set are listed once instead of read
/// one by one.
const LIST_THRESHOLD: usize = 8;

/// Live state read in bulk before planning object by object.
#[derive(Default)]
struct Known {
    /// Names of existing namespaces (live mode).
    namespaces: Option<BTreeSet<String>>,
    /// Kinds listed in full: an object of such a kind absent from `objects` does not exist.
    listed: BTreeSet<(String, String)>,
    /// Objects of listed kinds.
    objects: BTreeMap<(String, String, String), Value>,
}

/// Findings from `gpuctl upgrade` journals of this blueprint's pools (in the operator namespace):
/// an unfinished upgrade owns its pool's driver labels, colours and taints, so an apply would
/// fight it; a completed one moved the pool to a driver the blueprint must now declare, or an
/// apply would move every node back. Both are errors, so `apply` refuses and says what to do.
pub async fn upgrade_findings(
    k: &Kube,
    blueprint: &str,
    namespace: &str,
    patches: &[NodePatch],
) -> Vec<PlanFinding> {
    upgrade_findings_by_pool(k, blueprint, namespace, patches)
        .await
        .into_iter()
        .map(|(_, f)| f)
        .collect()
}

/// [`upgrade_findings`] with the pool each is about (`None`: about every pool).
async fn upgrade_findings_by_pool(
    k: &Kube,
    blueprint: &str,
    namespace: &str,
    patches: &[NodePatch],
) -> Vec<(Option<String>, PlanFinding)> {
    let error = |message: String| PlanFinding {
        severity: "error".into(),
        message,
    };
    match crate::upgrade::journal::list(k, Some(namespace), None).await {
        Ok(journals) => journal_findings(&journals, blueprint, namespace, patches),
        Err(e) => vec![(
            None,
            error(format!(
                "cannot read the driver upgrade journals in namespace {namespace} ({e}); gpuctl does not apply while it cannot tell whether an upgrade is moving a pool"
            )),
        )],
    }
}

/// [`upgrade_findings`] for journals already read (live, or captured in a snapshot).
fn journal_findings(
    journals: &[crate::upgrade::journal::Journal],
    blueprint: &str,
    namespace: &str,
    patches: &[NodePatch],
) -> Vec<(Option<String>, PlanFinding)> {
    let error = |message: String| PlanFinding {
        severity: "error".into(),
        message,
    };
    let mut out = Vec::new();
    for j in journals.iter().filter(|j| j.blueprint == blueprint) {
        let journal = format!(
            "ConfigMap {namespace}/{}",
            crate::upgrade::journal::object_name(&j.pool)
        );
        if !j.phase.is_final() {
            out.push((Some(j.pool.clone()), error(format!(
                "pool `{}` has a driver upgrade {} ({} -> {}, journal {journal}); applying now would move the labels it manages. Finish it with `gpuctl upgrade driver --resume --pool {0}`, or undo it with `gpuctl upgrade rollback --pool {0}`, then plan again",
                j.pool,
                j.phase.describe(),
                j.from_version,
                j.to_version,
            ))));
            continue;
        }
        if j.phase != crate::upgrade::journal::JournalPhase::Completed {
            continue;
        }
        let Some(p) = patches.iter().find(|p| p.pool == j.pool) else {
            continue;
        };
        if !same_driver(&p.expected_driver, &j.to_version) {
            out.push((Some(j.pool.clone()), error(format!(
                "pool `{}` was upgraded to driver {} by `gpuctl upgrade` (journal {journal}), but the blueprint declares {}: applying it would move every node back. Make the edit the upgrade asked for ({}), then plan again",
                j.pool, j.to_version, p.expected_driver, j.blueprint_change
            ))));
        }
    }
    out
}

/// Driver versions compare as versions (`580.95.05` and `580.95.5` are one driver) when both
/// parse, else as text.
fn same_driver(a: &str, b: &str) -> bool {
    match (
        a.parse::<crate::version::DriverVersion>(),
        b.parse::<crate::version::DriverVersion>(),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// The operator release's plan: the live release (read from Helm's storage, or from the
/// snapshot) against the rendered chart version and values. Reading failures are warnings: the
/// release step still runs `helm upgrade --install`, which is right whatever the live state.
async fn plan_helm(
    live: &Live<'_>,
    helm: &crate::render::HelmRelease,
) -> (Option<HelmPlan>, Vec<PlanFinding>) {
    if helm.install != "helm" {
        return (None, vec![]);
    }
    let current = match live {
        Live::Offline => return (None, vec![]),
        Live::Snapshot(s) if s.format_version < 2 => return (None, vec![]),
        Live::Snapshot(s) => s.helm_release.clone(),
        Live::Cluster(k) => {
            match crate::cluster::helm::read_release(k, &helm.namespace, &helm.release).await {
                Ok(r) => r,
                Err(e) => {
                    return (
                        None,
                        vec![PlanFinding {
                            severity: "warning".into(),
                            message: format!(
                                "cannot read the live Helm release {}/{} ({e}); the plan cannot say whether `helm upgrade --install` changes it",
                                helm.namespace, helm.release
                            ),
                        }],
                    );
                }
            }
        }
    };
    helm_plan(helm, current.as_ref())
}

/// [`plan_helm`] once the live release is known.
pub fn helm_plan(
    helm: &crate::render::HelmRelease,
    current: Option<&crate::cluster::helm::LiveRelease>,
) -> (Option<HelmPlan>, Vec<PlanFinding>) {
    let mut findings = Vec::new();
    let Some(cur) = current else {
        let mut changes = flatten_create(diff::diff(&Value::Null, &helm.values));
        redact::redact_changes(&mut changes, &Value::Null, &helm.values);
        return (
            Some(HelmPlan {
                action: HelmAction::Install,
                revision: None,
                status: None,
                chart_version_before: None,
                changes,
            }),
            findings,
        );
    };
    let chart = helm
        .chart
        .rsplit_once('/')
        .map_or(helm.chart.as_str(), |(_, c)| c);
    if !cur.chart.is_empty() && cur.chart != chart {
        findings.push(PlanFinding {
            severity: "warning".into(),
            message: format!(
                "Helm release {}/{} is chart `{}`, the blueprint installs `{chart}` under that name: the upgrade replaces one chart with the other",
                helm.namespace, helm.release, cur.chart
            ),
        });
    }
    let version_changes =
        cur.chart_version.trim_start_matches('v') != helm.version.trim_start_matches('v');
    // Diffed raw, masked after: two different passwords must still make an upgrade.
    let mut changes = diff::diff(&cur.values, &helm.values);
    redact::redact_changes(&mut changes, &cur.values, &helm.values);
    let deployed = cur.status == "deployed";
    if !deployed {
        findings.push(PlanFinding {
            severity: "warning".into(),
            message: format!(
                "Helm release {}/{} revision {} is `{}`, not `deployed`: apply runs `helm upgrade --install` again; if a helm operation is still running, wait for it (`helm history {} -n {}`)",
                helm.namespace, helm.release, cur.revision, cur.status, helm.release, helm.namespace
            ),
        });
    }
    let action = if version_changes || !changes.is_empty() || !deployed {
        HelmAction::Upgrade
    } else {
        HelmAction::NoOp
    };
    (
        Some(HelmPlan {
            action,
            revision: Some(cur.revision),
            status: Some(cur.status.clone()),
            chart_version_before: version_changes.then(|| cur.chart_version.clone()),
            changes,
        }),
        findings,
    )
}

/// What exists among the rendered objects, found with few requests: one LIST of namespace names
/// (an object in a namespace that does not exist cannot exist either) and one LIST per
/// cluster-scoped kind with many objects, all at once. Only the rest is read one by one; a first
/// plan of 5,000 objects otherwise costs 5,000 GETs.
async fn read_known(
    live: &Live<'_>,
    set: &RenderedSet,
    kinds: &BTreeMap<(String, String), Option<Resolved>>,
) -> Result<Known, PlanError> {
    let mut known = Known::default();
    let Live::Cluster(k) = live else {
        return Ok(known);
    };
    let namespaces = async {
        match k.resolve("v1", "Namespace").await? {
            Some(r) => Ok::<_, ClusterError>(Some(
                k.list(&r, "")
                    .await?
                    .iter()
                    .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
                    .collect::<BTreeSet<String>>(),
            )),
            None => Ok(None),
        }
    };
    let mut per_kind: BTreeMap<(String, String), usize> = BTreeMap::new();
    for o in set.objects.iter().filter(|o| o.namespace.is_none()) {
        *per_kind
            .entry((o.api_version.clone(), o.kind.clone()))
            .or_default() += 1;
    }
    let listed = futures::future::try_join_all(
        per_kind
            .into_iter()
            .filter(|(_, count)| *count >= LIST_THRESHOLD)
            .filter_map(|(key, _)| match kinds.get(&key) {
                Some(Some(r)) => Some((key, r)),
                _ => None,
            })
            .map(|(key, r)| async move {
                let items = k.list(r, "").await?;
                Ok::<_, ClusterError>((key, r, items))
            }),
    );
    let (namespaces, listed) = futures::try_join!(namespaces, listed)?;
    known.namespaces = namespaces;
    for (key, r, items) in listed {
        for mut v in items {
            v["apiVersion"] = json!(r.resource.api_version);
            v["kind"] = json!(r.resource.kind);
            let name = v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            known.objects.insert(obj_key(&key.1, None, &name), v);
        }
        known.listed.insert(key);
    }
    Ok(known)
}

fn action(
    kind: ActionKind,
    o: &RenderedObject,
    rv: Option<String>,
    changes: Vec<Change>,
    reason: Option<String>,
) -> Action {
    Action {
        action: kind,
        phase: Some(o.phase),
        api_version: o.api_version.clone(),
        kind: o.kind.clone(),
        namespace: o.namespace.clone(),
        name: o.name.clone(),
        resource_version: rv,
        changes,
        reason,
        manifest: Some(o.manifest.clone()),
    }
}

async fn get_live(
    live: &Live<'_>,
    kinds: &BTreeMap<(String, String), Option<Resolved>>,
    o: &RenderedObject,
) -> Result<Option<Value>, PlanError> {
    Ok(match live {
        Live::Cluster(k) => match &kinds[&(o.api_version.clone(), o.kind.clone())] {
            Some(r) => k.get(r, o.namespace.as_deref(), &o.name).await?,
            None => None,
        },
        Live::Snapshot(s) => s
            .get(&o.api_version, &o.kind, o.namespace.as_deref(), &o.name)
            .cloned(),
        Live::Offline => None,
    })
}

async fn plan_object(
    live: &Live<'_>,
    kinds: &BTreeMap<(String, String), Option<Resolved>>,
    o: &RenderedObject,
    current: Option<Value>,
    namespaces_created: &BTreeSet<&str>,
    set_id: &str,
) -> Result<Action, PlanError> {
    let desired = &o.manifest;
    let Some(current) = current else {
        // Validate creates against the server where possible: strict field validation catches a
        // bad manifest at plan time instead of half-way through apply.
        if let Live::Cluster(k) = live
            && let Some(r) = &kinds[&(o.api_version.clone(), o.kind.clone())]
            && o.namespace
                .as_deref()
                .is_none_or(|ns| !namespaces_created.contains(ns))
            && !BUILT_IN_GROUPS.contains(&o.group())
        {
            match k.apply(r, desired, true, false).await {
                Ok(_) => {}
                Err(ClusterError::Conflict { message, .. }) => {
                    return Ok(action(ActionKind::Conflict, o, None, vec![], Some(message)));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut changes = flatten_create(diff::diff(&Value::Null, &strip_for_display(desired)));
        redact::redact_changes(&mut changes, &Value::Null, desired);
        return Ok(action(ActionKind::Create, o, None, changes, None));
    };
    let rv = current["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    // A member of another ApplySet (another blueprint, or another tool's set) is not adopted
    // silently: applying would move it out of that set, whose next prune or plan would then fight
    // this one over it (KEP-3659 asks tools not to take over other sets' objects).
    let labels = &current["metadata"]["labels"];
    if let Some(other) = labels[applyset::PART_OF].as_str()
        && other != set_id
    {
        let owner = match labels[applyset::BLUEPRINT_LABEL].as_str() {
            Some(bp) => format!("blueprint `{bp}` (ApplySet {other})"),
            None => format!("ApplySet {other}"),
        };
        return Ok(action(
            ActionKind::Conflict,
            o,
            rv,
            vec![],
            Some(format!(
                "already managed by {owner}; two blueprints must not declare the same object: remove it from one of them, or apply with --force-conflicts to move it to this blueprint"
            )),
        ));
    }
    let mut removed = diff::removed_fields(&current, desired, FIELD_MANAGER);
    redact::redact_changes(&mut removed, &current, &Value::Null);
    let before = diff::project(&current, desired);
    // Fast path: the live object already carries every field exactly as declared and gpuctl
    // dropped nothing, so a server-side apply would be a no-op: skip the dry-run round trip.
    if before == *desired && removed.is_empty() {
        return Ok(action(ActionKind::NoOp, o, rv, vec![], None));
    }
    let after = match live {
        Live::Cluster(k) => {
            let r = kinds[&(o.api_version.clone(), o.kind.clone())]
                .as_ref()
                .expect("served kind is resolved");
            match k.apply(r, desired, true, false).await {
                Ok(v) => diff::project(&v, desired),
                Err(ClusterError::Conflict { message, .. }) => {
                    let mut changes = diff::diff(&before, desired);
                    redact::redact_changes(&mut changes, &before, desired);
                    return Ok(action(ActionKind::Conflict, o, rv, changes, Some(message)));
                }
                Err(e) => return Err(e.into()),
            }
        }
        // Without a server to normalise the object, assume what the API server does for every
        // `omitempty` field: a false / zero / empty value gpuctl declares is not stored.
        _ => diff::without_absent_zero_values(desired, &current),
    };
    let mut changes = diff::diff(&before, &after);
    redact::redact_changes(&mut changes, &before, &after);
    changes.extend(removed);
    let kind = if changes.is_empty() {
        ActionKind::NoOp
    } else {
        ActionKind::Update
    };
    Ok(action(kind, o, rv, changes, None))
}

/// A new object shown without apiVersion/kind noise.
fn strip_for_display(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

fn flatten_create(changes: Vec<Change>) -> Vec<Change> {
    // A create is one change at the root; show its fields as additions.
    match changes.into_iter().next() {
        Some(Change { after: Some(v), .. }) => {
            let mut out = Vec::new();
            leaves("", &v, &mut out);
            out
        }
        _ => vec![],
    }
}

fn leaves(path: &str, v: &Value, out: &mut Vec<Change>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(&diff::join(path, k), x, out);
            }
        }
        _ => out.push(Change {
            path: path.to_string(),
            before: None,
            after: Some(v.clone()),
        }),
    }
}

async fn list_members(
    live: &Live<'_>,
    parent: &ApplySetParent,
    kinds: &BTreeMap<(String, String), Option<Resolved>>,
) -> Result<BTreeMap<(String, String, String), Value>, PlanError> {
    let id = parent.id();
    let mut out = BTreeMap::new();
    let mut insert = |v: Value| {
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        let ns = v["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        out.insert((kind, ns, name), v);
    };
    match live {
        Live::Offline => {}
        Live::Snapshot(s) => s.members(&id).into_iter().cloned().for_each(&mut insert),
        Live::Cluster(k) => {
            let selector = format!("{}={id}", applyset::PART_OF);
            // Kinds the set has now, plus kinds the parent recorded earlier (they may hold members
            // the blueprint dropped).
            let mut resolved: Vec<Resolved> = kinds.values().flatten().cloned().collect();
            let parent_kinds = parent_group_kinds(k, parent).await?;
            for gk in parent_kinds {
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
            for (r, items) in lists {
                for mut v in items {
                    // Lists omit apiVersion/kind on items.
                    v["apiVersion"] = json!(r.resource.api_version);
                    v["kind"] = json!(r.resource.kind);
                    insert(v);
                }
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

/// Label selector string of a pool.
pub fn selector_string(selector: &BTreeMap<String, String>) -> String {
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn node_matches(node: &Value, selector: &BTreeMap<String, String>) -> bool {
    selector
        .iter()
        .all(|(k, v)| node["metadata"]["labels"][k] == *v)
}

/// Live nodes of every pool, by pool name.
pub async fn pool_nodes(
    live: &Live<'_>,
    patches: &[NodePatch],
) -> Result<BTreeMap<String, Vec<Value>>, ClusterError> {
    let lists: Vec<Result<(String, Vec<Value>), ClusterError>> = futures::stream::iter(patches)
        .map(|p| async move {
            let nodes = match live {
                Live::Offline => vec![],
                Live::Snapshot(s) => s
                    .nodes
                    .iter()
                    .filter(|n| node_matches(n, &p.selector))
                    .cloned()
                    .collect(),
                Live::Cluster(k) => {
                    let r = k
                        .resolve("v1", "Node")
                        .await?
                        .expect("every cluster serves Nodes");
                    k.list(&r, &selector_string(&p.selector)).await?
                }
            };
            Ok((p.pool.clone(), nodes))
        })
        // One label-selected LIST per pool, a bounded number at a time: a 64-pool blueprint
        // otherwise waits for 64 round trips in a row.
        .buffered(POOL_LIST_PARALLELISM)
        .collect()
        .await;
    lists.into_iter().collect()
}

/// Node names for a message: all of up to three, else the first two and the last.
fn shown_names(names: &[String]) -> String {
    if names.len() > 3 {
        format!("{}, ... {}", names[..2].join(", "), names[names.len() - 1])
    } else {
        names.join(", ")
    }
}

/// Pools whose nodes are listed at once.
const POOL_LIST_PARALLELISM: usize = 16;

/// GFD's driver version label, or the deprecated triple.
pub fn node_driver(node: &Value) -> Option<String> {
    let l = &node["metadata"]["labels"];
    if let Some(full) = l["nvidia.com/cuda.driver-version.full"].as_str() {
        return Some(full.to_string());
    }
    let (ma, mi, rev) = (
        l["nvidia.com/cuda.driver.major"].as_str()?,
        l["nvidia.com/cuda.driver.minor"].as_str()?,
        l["nvidia.com/cuda.driver.rev"].as_str().unwrap_or(""),
    );
    Some(if rev.is_empty() {
        format!("{ma}.{mi}")
    } else {
        format!("{ma}.{mi}.{rev}")
    })
}

fn taint_string(key: &str, value: Option<&str>, effect: &str) -> String {
    match value {
        Some(v) => format!("{key}={v}:{effect}"),
        None => format!("{key}:{effect}"),
    }
}

/// Node actions, findings, and the findings about nodes moving between NVIDIADriver CRs by pool
/// (kept apart: a pool an upgrade journal already explains gets that finding instead).
type NodePlan = (
    Vec<NodeAction>,
    Vec<PlanFinding>,
    BTreeMap<String, Vec<PlanFinding>>,
);

async fn plan_nodes(live: &Live<'_>, patches: &[NodePatch]) -> Result<NodePlan, ClusterError> {
    let mut actions = Vec::new();
    let mut findings = Vec::new();
    let mut moves: BTreeMap<String, Vec<PlanFinding>> = BTreeMap::new();
    if matches!(live, Live::Offline) {
        return Ok((actions, findings, moves));
    }
    let by_pool = pool_nodes(live, patches).await?;
    for p in patches {
        let nodes = &by_pool[&p.pool];
        if nodes.len() != p.expected_nodes as usize {
            findings.push(PlanFinding {
                severity: "warning".into(),
                message: format!(
                    "pool `{}` expects {} nodes but {} match `{}`",
                    p.pool,
                    p.expected_nodes,
                    nodes.len(),
                    selector_string(&p.selector)
                ),
            });
        }
        // Nodes on another driver, grouped so a 64-node pool gives one finding, not 64.
        let mut old_drivers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        // Nodes that would leave one NVIDIADriver CR for another, by (from, to).
        let mut cr_moves: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for n in nodes {
            let name = n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let labels = &n["metadata"]["labels"];
            if let Some(product) = labels["nvidia.com/gpu.product"].as_str()
                && !p.expected_products.is_empty()
                && !p
                    .expected_products
                    .iter()
                    .any(|e| product == e || product.starts_with(&format!("{e}-")))
            {
                findings.push(PlanFinding {
                    severity: "error".into(),
                    message: format!(
                        "node `{name}` of pool `{}` reports GPU `{product}`; the blueprint says {}",
                        p.pool,
                        p.expected_products.join(" or ")
                    ),
                });
            }
            if let Some(driver) = node_driver(n)
                && driver != p.expected_driver
            {
                old_drivers.entry(driver).or_default().push(name.clone());
            }
            let mut label_changes = Vec::new();
            for (k, v) in &p.labels {
                let current = labels[k].as_str();
                if k == crate::render::DRIVER_LABEL
                    && let Some(from) = current
                    && from != v
                {
                    cr_moves
                        .entry((from.to_string(), v.clone()))
                        .or_default()
                        .push(name.clone());
                }
                if current != Some(v.as_str()) {
                    label_changes.push(Change {
                        path: diff::join("labels", k),
                        before: current.map(|c| json!(c)),
                        after: Some(json!(v)),
                    });
                }
            }
            let taints: Vec<String> = p
                .taints
                .iter()
                .filter(|t| {
                    let same = n["spec"]["taints"].as_array().and_then(|ts| {
                        ts.iter().find(|x| {
                            x["key"] == t.key.as_str() && x["effect"] == t.effect.as_str()
                        })
                    });
                    match same {
                        None => true,
                        Some(x) => x["value"].as_str() != t.value.as_deref(),
                    }
                })
                .map(|t| taint_string(&t.key, t.value.as_deref(), &t.effect))
                .collect();
            if !label_changes.is_empty() || !taints.is_empty() {
                actions.push(NodeAction {
                    pool: p.pool.clone(),
                    node: name,
                    resource_version: n["metadata"]["resourceVersion"]
                        .as_str()
                        .map(str::to_string),
                    labels: label_changes,
                    taints,
                });
            }
        }
        for ((from, to), names) in cr_moves {
            let shown = shown_names(&names);
            let what = format!(
                "{} node(s) of pool `{}` ({shown}) would move from NVIDIADriver `{from}` to `{to}` all at once: the driver pod on every one of them restarts, and nothing cordons or drains them first",
                names.len(),
                p.pool
            );
            moves.entry(p.pool.clone()).or_default().push(if p.blue_green {
                PlanFinding {
                    severity: "error".into(),
                    message: format!(
                        "{what}. The blueprint upgrades drivers blue-green: move them with `gpuctl upgrade driver BLUEPRINT --pool {} --to VERSION` (batched, drained, resumable; if the blueprint already names the new version, put the old one back until the upgrade finishes), or set `upgrades.strategy: rolling` to let the operator replace drivers in place",
                        p.pool
                    ),
                }
            } else {
                PlanFinding {
                    severity: "warning".into(),
                    message: format!("{what}; apply when the pool can take that"),
                }
            });
        }
        for (driver, names) in old_drivers {
            let shown = shown_names(&names);
            findings.push(PlanFinding {
                severity: "warning".into(),
                message: format!(
                    "{} node(s) of pool `{}` run driver {driver} ({shown}); the blueprint says {}: the GPU Operator moves them after apply (or use `gpuctl upgrade driver` for a blue-green rollout)",
                    names.len(),
                    p.pool,
                    p.expected_driver
                ),
            });
        }
    }
    Ok((actions, findings, moves))
}

impl Plan {
    /// Versioned JSON for people and CI logs (`--format json`; pretty, trailing newline):
    /// credentials in Helm values, manifests and changes are masked, and `redacted` is true, so
    /// `apply` refuses it.
    pub fn to_json(&self) -> String {
        let mut shown = self.clone();
        shown.redact();
        to_pretty(&shown)
    }

    /// Versioned JSON for `apply` (`--out`): the Helm values and manifests as rendered, which
    /// apply sends, so credentials in them are in the clear (changes stay masked). Written with
    /// owner-only permissions; never printed.
    pub fn to_saved_json(&self) -> String {
        to_pretty(self)
    }

    /// Masks credentials everywhere in the plan (changes are masked when planned; this also
    /// covers the values and manifests apply needs, and hand-made plans).
    pub fn redact(&mut self) {
        redact::redact_value(&mut self.helm.values);
        for a in &mut self.actions {
            if let Some(m) = &mut a.manifest {
                redact::redact_value(m);
            }
            redact::redact_change_values(&mut a.changes);
        }
        if let Some(h) = &mut self.helm_release {
            redact::redact_change_values(&mut h.changes);
        }
        self.redacted = true;
    }

    /// Reads a saved plan, refusing unknown format versions and masked plans.
    pub fn from_json(text: &str) -> Result<Plan, String> {
        let not_a_plan = |e: &dyn std::fmt::Display| {
            format!(
                "not a gpuctl plan ({e}); save one with `gpuctl plan BLUEPRINT --out FILE`, or apply the blueprint"
            )
        };
        let v: Value = serde_json::from_str(text).map_err(|e| not_a_plan(&e))?;
        match v["format_version"].as_u64() {
            Some(n) if n == u64::from(PLAN_FORMAT_VERSION) => {}
            Some(n) => {
                return Err(format!(
                    "plan format version {n} is not {PLAN_FORMAT_VERSION}; re-run `gpuctl plan` with this gpuctl"
                ));
            }
            None => return Err(not_a_plan(&"no `format_version`")),
        }
        if v["redacted"] == true {
            return Err("this plan was printed with its credentials masked (`--format json`) and cannot be applied; save one with `gpuctl plan --out FILE`".into());
        }
        serde_json::from_value(v).map_err(|e| not_a_plan(&e))
    }
}

fn to_pretty(plan: &Plan) -> String {
    let mut s = serde_json::to_string_pretty(plan).unwrap_or_default();
    s.push('\n');
    s
}

/// Captures the live state a rendered set touches: its objects, the set's members, the pools'
/// nodes and the kinds the cluster serves.
pub async fn capture(k: &Kube, set: &RenderedSet) -> Result<Snapshot, PlanError> {
    let mut snap = Snapshot {
        format_version: crate::cluster::snapshot::SNAPSHOT_FORMAT_VERSION,
        fingerprint: Some(k.fingerprint().await?),
        server: Some(k.server.clone()),
        ..Snapshot::default()
    };
    let mut kinds: BTreeMap<(String, String), Option<Resolved>> = BTreeMap::new();
    for o in &set.objects {
        let key = (o.api_version.clone(), o.kind.clone());
        if let std::collections::btree_map::Entry::Vacant(slot) = kinds.entry(key) {
            let r = k.resolve(&o.api_version, &o.kind).await?;
            if r.is_some() {
                snap.served_kinds
                    .push(format!("{}|{}", o.api_version, o.kind));
            }
            slot.insert(r);
        }
    }
    let live = Live::Cluster(k);
    let (live_ref, kinds_ref) = (&live, &kinds);
    let objects: Vec<Result<Option<(String, Value)>, PlanError>> =
        futures::stream::iter(set.objects.iter())
            .map(|o| async move {
                Ok(get_live(live_ref, kinds_ref, o).await?.map(|v| {
                    let key = crate::cluster::snapshot::key(
                        &o.api_version,
                        &o.kind,
                        o.namespace.as_deref(),
                        &o.name,
                    );
                    (key, v)
                }))
            })
            .buffered(usize::from(crate::cluster::DEFAULT_PARALLELISM))
            .collect()
            .await;
    for o in objects {
        if let Some((key, v)) = o? {
            snap.objects.insert(key, v);
        }
    }
    snap.upgrade_journals = crate::upgrade::journal::list(k, Some(&set.helm.namespace), None)
        .await
        .map_err(|e| {
            PlanError::Journals(format!(
                "{e}; a snapshot records them so CI plans see driver upgrades: gpuctl needs to list ConfigMaps labelled `{}` in namespace {}",
                crate::upgrade::UPGRADE_POOL_LABEL,
                set.helm.namespace
            ))
        })?
        .into_iter()
        .filter(|j| j.blueprint == set.blueprint)
        .collect();
    if set.helm.install == "helm" {
        snap.helm_release =
            crate::cluster::helm::read_release(k, &set.helm.namespace, &set.helm.release).await?;
    }
    for ((kind, ns, name), v) in list_members(&live, &parent_of(set), &kinds).await? {
        let api_version = v["apiVersion"].as_str().unwrap_or_default().to_string();
        snap.objects.insert(
            crate::cluster::snapshot::key(
                &api_version,
                &kind,
                (!ns.is_empty()).then_some(ns.as_str()),
                &name,
            ),
            v,
        );
    }
    for (_, nodes) in pool_nodes(&live, &set.node_patches).await? {
        for mut n in nodes {
            // Keep what plans read: metadata (labels) and taints; drop status (heartbeats, images).
            if let Some(m) = n.as_object_mut() {
                m.remove("status");
            }
            snap.nodes.push(n);
        }
    }
    snap.nodes.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    snap.nodes.dedup();
    Ok(snap)
}
