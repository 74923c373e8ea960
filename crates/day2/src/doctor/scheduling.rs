//! Scheduling layer: Pending GPU pods with their real reason, pods the API server refused
//! (quota, LimitRange defaults, PriorityClass), Kueue Workloads not admitted, Volcano PodGroups
//! stuck, and fragmentation (free GPUs or MIG slices no pending request can use).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Event, Pod};
use serde_json::Value;

use super::fit::{NodeRoom, selects, taint_text, untolerated};
use super::{Ctx, Evidence, Findings, Layer, clean, finding, subject};
use crate::diagnostics::{event_time, pod_condition};
use gpuctl_model::located::Severity;

pub(super) fn check(ctx: &Ctx<'_>, out: &mut Findings) {
    pending_pods(ctx, out);
    refused_pods(ctx, out);
    refused_claims(ctx, out);
    unallocatable_claims(ctx, out);
    device_taints(ctx, out);
    workloads(ctx, out);
    pod_groups(ctx, out);
    priority_classes(ctx, out);
    mig_profiles_unused(ctx, out);
}

fn pod_id(p: &Pod) -> (String, String) {
    (
        p.metadata.namespace.clone().unwrap_or_default(),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

/// `job/ns/name` of the pod's controller, when it has one.
fn owner(p: &Pod) -> Option<String> {
    let o = p
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))?;
    Some(subject(&o.kind, p.metadata.namespace.as_deref(), &o.name))
}

/// The scheduler's Unschedulable condition and latest FailedScheduling event of `p`.
fn scheduler_evidence(ctx: &Ctx<'_>, p: &Pod) -> Vec<Evidence> {
    let (ns, name) = pod_id(p);
    let mut ev = Vec::new();
    if let Some(c) = pod_condition(p, "PodScheduled")
        && c.status == "False"
    {
        ev.push(Evidence {
            source: format!(
                "condition PodScheduled={} ({}) on pod/{ns}/{name}",
                c.status,
                c.reason.as_deref().unwrap_or("")
            ),
            text: clean(c.message.as_deref().unwrap_or("")),
            time: c.last_transition_time.as_ref().map(|t| t.0.to_string()),
        });
    }
    if let Some(e) = ctx
        .d
        .events_for("Pod", &ns, &name)
        .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
    {
        ev.push(event_evidence(e, &format!("pod/{ns}/{name}")));
    }
    ev
}

pub(super) fn event_evidence(e: &Event, about: &str) -> Evidence {
    let count = e
        .count
        .or_else(|| e.series.as_ref().and_then(|s| s.count))
        .filter(|c| *c > 1)
        .map(|c| format!(" (x{c})"))
        .unwrap_or_default();
    let t = event_time(e);
    Evidence {
        source: format!(
            "event {}{count} on {about}",
            e.reason.as_deref().unwrap_or("?")
        ),
        text: clean(e.message.as_deref().unwrap_or("")),
        time: (!t.is_empty()).then_some(t),
    }
}

/// Whether Kueue (or another queue) holds the pod back with a scheduling gate: the Workload
/// findings say why.
fn gated(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

/// Pool names of a set of nodes, sorted and unique.
fn pools_of(ctx: &Ctx<'_>, nodes: &[&NodeRoom<'_>]) -> String {
    let names: BTreeSet<&str> = nodes
        .iter()
        .map(|n| n.pool.map_or("(no pool)", |i| ctx.pool_name(i)))
        .collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}

/// A Pending accelerator pod as the checks below see it: who it is, what it asks for, and what
/// the scheduler said.
struct Pending<'a> {
    pod: &'a Pod,
    req: BTreeMap<String, u64>,
    ns: String,
    name: String,
    /// `pod/<ns>/<name>`.
    me: String,
    /// Its controller (`job/ns/name`), or the pod: one finding per group and reason.
    group: String,
    subjects: Vec<String>,
    evidence: Vec<Evidence>,
    /// `4 nvidia.com/gpu + 1 rdma/ib`.
    want: String,
}

impl Pending<'_> {
    /// The finding `id` about this pod under `key` (`<group>|<key>`).
    #[allow(clippy::too_many_arguments)]
    fn add(
        self,
        out: &mut Findings,
        key: &str,
        id: &'static str,
        severity: Severity,
        title: String,
        cause: String,
        fix: String,
    ) {
        out.add(
            format!("{}|{key}", self.group),
            finding(
                id,
                Layer::Scheduling,
                severity,
                title,
                self.subjects,
                self.evidence,
                cause,
                fix,
            ),
        );
    }
}

/// GPU200–GPU203, GPU213, GPU220: why each Pending accelerator pod has no node, decided the way
/// the scheduler's predicates decide, in the order an engineer would fix them.
fn pending_pods(ctx: &Ctx<'_>, out: &mut Findings) {
    for (p, req) in ctx.d.pending_accelerator_pods() {
        if gated(p) {
            continue;
        }
        let (ns, name) = pod_id(p);
        let me = format!("pod/{ns}/{name}");
        let mut subjects = vec![me.clone()];
        subjects.extend(owner(p));
        let want = req
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(" + ");
        let pending = Pending {
            pod: p,
            evidence: scheduler_evidence(ctx, p),
            group: owner(p).unwrap_or_else(|| me.clone()),
            req,
            ns,
            name,
            me,
            subjects,
            want,
        };
        pending_pod(ctx, pending, out);
    }
}

/// The first reason, in the scheduler's order, that `pending` has no node.
fn pending_pod(ctx: &Ctx<'_>, pending: Pending<'_>, out: &mut Findings) {
    let p = pending.pod;
    // 1. A resource no node advertises at all (a MIG profile or shared resource no pool has).
    let missing = pending.req.keys().find(|r| {
        !ctx.nodes
            .iter()
            .any(|n| n.allocatable.get(*r).is_some_and(|c| *c > 0))
    });
    if let Some(r) = missing.cloned() {
        return not_advertised(ctx, pending, &r, out);
    }
    // 2. Nodes that advertise everything it asks for, that it selects, whose taints it tolerates.
    let advertising: Vec<&NodeRoom<'_>> = ctx
        .nodes
        .iter()
        .filter(|n| {
            pending
                .req
                .keys()
                .all(|r| n.allocatable.get(r).is_some_and(|c| *c > 0))
        })
        .collect();
    let selected: Vec<&NodeRoom<'_>> = advertising
        .iter()
        .copied()
        .filter(|n| selects(p, n))
        .collect();
    if selected.is_empty() {
        return not_selected(ctx, pending, &advertising, out);
    }
    let tolerated: Vec<&NodeRoom<'_>> = selected
        .iter()
        .copied()
        .filter(|n| untolerated(p, n).is_empty())
        .collect();
    if tolerated.is_empty() {
        return not_tolerated(ctx, pending, &selected, out);
    }
    // 3. Room: does one node have all of it free now?
    no_room(ctx, pending, &tolerated, out);
}

/// GPU203: a resource no node advertises.
fn not_advertised(ctx: &Ctx<'_>, pending: Pending<'_>, r: &str, out: &mut Findings) {
    let offered = advertised_like(ctx, r);
    let group = &pending.group;
    let cause = format!(
        "no node advertises `{r}`, so the scheduler can never place it{}",
        if offered.is_empty() {
            String::new()
        } else {
            format!("; the pools advertise {}", offered.join(", "))
        }
    );
    let fix = if offered.is_empty() {
        format!(
            "request a resource a pool advertises (`kubectl get nodes -o json | jq '.items[].status.allocatable'`), or add `{r}` to a pool's partitioning in {} and run `gpuctl apply {}`",
            ctx.file, ctx.file
        )
    } else {
        format!(
            "change the request of {group} to one of {} (or add the profile to a pool's MIG layout in {} and run `gpuctl apply {}`)",
            offered.join(", "),
            ctx.file,
            ctx.file
        )
    };
    let title = format!("{} is Pending: no pool advertises `{r}`", pending.me);
    pending.add(out, r, "GPU203", Severity::Error, title, cause, fix);
}

/// GPU202: its node selector or affinity matches none of the nodes that have its resources.
fn not_selected(
    ctx: &Ctx<'_>,
    pending: Pending<'_>,
    advertising: &[&NodeRoom<'_>],
    out: &mut Findings,
) {
    let p = pending.pod;
    let title = format!(
        "{} is Pending: its node selector or affinity matches no node that has `{}`",
        pending.me, pending.want
    );
    let cause = format!(
        "the pod selects nodes by {}, but none of the nodes advertising its resources (pool {}) carries those labels",
        selector_text(p),
        pools_of(ctx, advertising)
    );
    let fix = format!(
        "fix the selector of {} to a pool's labels (`kubectl get nodes -L {}`), or submit through the tenant's LocalQueue so Kueue injects the pool's selector",
        pending.group,
        first_key(p).unwrap_or_else(|| "gpuctl.dev/pool".into())
    );
    pending.add(
        out,
        "selector",
        "GPU202",
        Severity::Error,
        title,
        cause,
        fix,
    );
}

/// GPU201: every node it selects carries a taint it does not tolerate.
fn not_tolerated(
    ctx: &Ctx<'_>,
    pending: Pending<'_>,
    selected: &[&NodeRoom<'_>],
    out: &mut Findings,
) {
    let p = pending.pod;
    let taints: BTreeSet<String> = selected
        .iter()
        .flat_map(|n| untolerated(p, n))
        .map(taint_text)
        .collect();
    let t0 = selected
        .iter()
        .flat_map(|n| untolerated(p, n))
        .next()
        .cloned();
    let tol = t0
        .map(|t| format!("{{key: {}, operator: Exists, effect: {}}}", t.key, t.effect))
        .unwrap_or_default();
    let title = format!(
        "{} is Pending: it does not tolerate the taint of pool {}",
        pending.me,
        pools_of(ctx, selected)
    );
    let cause = format!(
        "every node with `{}` that it selects carries {} and the pod has no matching toleration",
        pending.want,
        taints.into_iter().collect::<Vec<_>>().join(", ")
    );
    let fix = format!(
        "add `tolerations: [{tol}]` to the pod template of {}, or submit it through the tenant's LocalQueue so Kueue adds the pool's tolerations",
        pending.group
    );
    pending.add(out, "taint", "GPU201", Severity::Error, title, cause, fix);
}

/// GPU213 (a node has room: the scheduler refused it for another reason), GPU220 (enough free,
/// but spread over nodes) or GPU200 (not enough free), on the nodes it may use.
fn no_room(ctx: &Ctx<'_>, pending: Pending<'_>, tolerated: &[&NodeRoom<'_>], out: &mut Findings) {
    let usable: Vec<&NodeRoom<'_>> = tolerated.iter().copied().filter(|n| n.usable()).collect();
    let fits_one = usable
        .iter()
        .any(|n| pending.req.iter().all(|(r, k)| n.free(r) >= *k));
    if fits_one {
        // The predicates accept a node now: the scheduler said something else (or has not
        // retried yet). Say what it said.
        if !pending.evidence.is_empty() {
            let title = format!(
                "{} is Pending although a node has room for `{}` now",
                pending.me, pending.want
            );
            let fix = format!(
                "`kubectl describe pod -n {} {}` and read the scheduler's message above",
                pending.ns, pending.name
            );
            pending.add(
                out,
                "other",
                "GPU213",
                Severity::Warning,
                title,
                "the GPU predicates pass on at least one node, so the scheduler refused it for another reason (cpu, memory, pod affinity, topology spread, volumes) or has not retried since room appeared".into(),
                fix,
            );
        }
        return;
    }
    // Which resource does not fit, and is it only spread out?
    let mut spread = None;
    let mut short = None;
    for (r, k) in &pending.req {
        let total: u64 = usable.iter().map(|n| n.free(r)).sum();
        let most: u64 = usable.iter().map(|n| n.free(r)).max().unwrap_or(0);
        if most >= *k {
            continue;
        }
        if total >= *k {
            let holders = usable.iter().filter(|n| n.free(r) > 0).count();
            spread.get_or_insert((r.clone(), *k, total, most, holders));
        } else {
            short.get_or_insert((r.clone(), *k, total));
        }
    }
    let pools = pools_of(ctx, &usable);
    let (me, group) = (pending.me.clone(), pending.group.clone());
    if let Some((r, k, total, most, holders)) = spread {
        pending.add(
            out,
            &format!("spread|{r}"),
            "GPU220",
            Severity::Warning,
            format!("{me} is Pending: {total} `{r}` are free in pool {pools} but spread over {holders} nodes"),
            format!(
                "the pod needs {k} `{r}` on one node; {total} are free across {holders} nodes of pool {pools}, at most {most} on any one, so no node fits it (fragmentation)"
            ),
            format!(
                "split {group} into pods of at most {most} `{r}` each, or free one node: `kubectl get pods -A -o wide --field-selector spec.nodeName=NODE` on the nodes of pool {pools} and move their small jobs (with Kueue, topology-aware or `podset-required-topology` placement packs them)"
            ),
        );
        return;
    }
    let (r, k, total) = short.unwrap_or_default();
    let usable_text = if usable.len() == tolerated.len() {
        String::new()
    } else {
        format!(
            " ({} of the {} nodes it could use are NotReady or cordoned)",
            tolerated.len() - usable.len(),
            tolerated.len()
        )
    };
    pending.add(
        out,
        &format!("insufficient|{r}"),
        "GPU200",
        Severity::Error,
        format!("{me} is Pending: insufficient `{r}` (needs {k}, {total} free in pool {pools})"),
        format!(
            "the nodes the pod may use have {total} `{r}` free in all and it needs {k}{usable_text}"
        ),
        format!(
            "wait for running work to finish, lower the request of {group}, or add nodes to pool {pools} (raise `nodes` in {} and `gpuctl apply {}`); see who holds them: `kubectl get pods -A -o wide --field-selector status.phase=Running`",
            ctx.file, ctx.file
        ),
    );
}

/// Other resources of the same kind the nodes advertise: MIG profiles for a MIG profile,
/// `nvidia.com/gpu`-like shared names for a shared resource.
fn advertised_like(ctx: &Ctx<'_>, wanted: &str) -> Vec<String> {
    let mig = |r: &str| r.starts_with("nvidia.com/mig-");
    let mut out: BTreeSet<String> = BTreeSet::new();
    for n in &ctx.nodes {
        for (r, c) in &n.allocatable {
            if *c == 0 || r == wanted {
                continue;
            }
            let same_kind = if mig(wanted) {
                mig(r)
            } else {
                r.starts_with("nvidia.com/") && !mig(r)
            };
            if same_kind && wanted.starts_with("nvidia.com/") {
                let pool = n.pool.map_or("no pool", |i| ctx.pool_name(i));
                out.insert(format!("`{r}` (pool {pool})"));
            }
        }
    }
    out.into_iter().collect()
}

fn selector_text(p: &Pod) -> String {
    let mut parts = Vec::new();
    if let Some(sel) = p.spec.as_ref().and_then(|s| s.node_selector.as_ref()) {
        for (k, v) in sel {
            parts.push(format!("`{k}={v}`"));
        }
    }
    let affinity = p
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    if let Some(a) = affinity {
        for t in &a.node_selector_terms {
            for e in t.match_expressions.iter().flatten() {
                parts.push(format!(
                    "`{} {} [{}]`",
                    e.key,
                    e.operator,
                    e.values.clone().unwrap_or_default().join(",")
                ));
            }
        }
    }
    if parts.is_empty() {
        "its node affinity".into()
    } else {
        parts.join(", ")
    }
}

fn first_key(p: &Pod) -> Option<String> {
    p.spec
        .as_ref()?
        .node_selector
        .as_ref()?
        .keys()
        .next()
        .cloned()
}

/// GPU204, GPU205, GPU212 from what the API server refused: controllers' `FailedCreate` events
/// (`exceeded quota`, `must specify requests`, `no PriorityClass`), and ResourceQuotas of GPU
/// resources that are full while such refusals happen.
fn refused_pods(ctx: &Ctx<'_>, out: &mut Findings) {
    for e in &ctx.d.events {
        if e.reason.as_deref() != Some("FailedCreate") {
            continue;
        }
        let msg = e.message.as_deref().unwrap_or_default();
        let o = &e.involved_object;
        let about = subject(
            o.kind.as_deref().unwrap_or("object"),
            o.namespace.as_deref(),
            o.name.as_deref().unwrap_or_default(),
        );
        let ns = o.namespace.clone().unwrap_or_default();
        if let Some(rest) = msg.split("exceeded quota: ").nth(1) {
            let quota = rest.split(',').next().unwrap_or_default().trim();
            quota_exhausted(ctx, e, &about, &ns, quota, out);
        } else if msg.contains("must specify") {
            quota_needs_default(ctx, e, &about, &ns, msg, out);
        } else if msg.contains("no PriorityClass with name") {
            let pc = msg
                .split("no PriorityClass with name ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or_default()
                .to_string();
            priority_finding(ctx, out, &pc, vec![event_evidence(e, &about)], Some(about));
        }
    }
}

/// The status of ResourceQuota `ns/quota`: its accelerator and device-class keys, and every key
/// at its limit.
fn quota_evidence(ctx: &Ctx<'_>, ns: &str, quota: &str) -> Option<Evidence> {
    let q = ctx.d.resource_quotas.iter().find(|q| {
        q.metadata.namespace.as_deref() == Some(ns) && q.metadata.name.as_deref() == Some(quota)
    })?;
    let st = q.status.as_ref();
    let hard = st.and_then(|s| s.hard.clone()).unwrap_or_default();
    let used = st.and_then(|s| s.used.clone()).unwrap_or_default();
    let devices = &ctx.catalog.dra().kubernetes.quota;
    let full: Vec<String> = hard
        .iter()
        .filter_map(|(k, h)| {
            let u = used.get(k).map(|u| u.0.as_str()).unwrap_or("0");
            (k.contains("nvidia.com/")
                || k.contains("rdma/")
                || devices.class_of_key(k).is_some()
                || u == h.0)
                .then(|| format!("{k}: used {u} of {}", h.0))
        })
        .collect();
    Some(Evidence {
        source: format!("status of resourcequota/{ns}/{quota}"),
        text: full.join(", "),
        time: None,
    })
}

/// GPU214: the resourceclaim controller could not create a pod's claim from its template because
/// a ResourceQuota is used up (`FailedResourceClaimCreation ... exceeded quota`), and the pod still
/// has no claim of that name: it stays Pending, and no scheduler event says why.
fn refused_claims(ctx: &Ctx<'_>, out: &mut Findings) {
    for e in &ctx.d.events {
        if e.reason.as_deref() != Some("FailedResourceClaimCreation") {
            continue;
        }
        let msg = e.message.as_deref().unwrap_or_default();
        let Some(rest) = msg.split("exceeded quota: ").nth(1) else {
            continue;
        };
        let quota = rest.split(',').next().unwrap_or_default().trim();
        let o = &e.involved_object;
        let ns = o.namespace.clone().unwrap_or_default();
        let name = o.name.clone().unwrap_or_default();
        let claim = msg
            .strip_prefix("PodResourceClaim ")
            .and_then(|r| r.split(':').next())
            .unwrap_or_default();
        let Some(pod) = ctx
            .d
            .pods
            .iter()
            .find(|p| pod_id(p) == (ns.clone(), name.clone()))
        else {
            continue;
        };
        let has_claim = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .is_some_and(|l| {
                l.iter()
                    .any(|c| c.name == claim && c.resource_claim_name.is_some())
            });
        if has_claim
            || pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some()
        {
            continue;
        }
        let about = format!("pod/{ns}/{name}");
        let mut evidence = vec![event_evidence(e, &about)];
        evidence.extend(quota_evidence(ctx, &ns, quota));
        let fix = match tenant_of(ctx, &ns) {
            Some(t) => format!(
                "wait for the tenant's claims to be released (`kubectl get resourceclaims -n {ns}`), or raise tenant `{t}`'s `claims` in {} and run `gpuctl apply {}`",
                ctx.file, ctx.file
            ),
            None => format!(
                "`kubectl describe resourcequota -n {ns} {quota}`; free devices or raise `spec.hard`"
            ),
        };
        out.add(
            format!("{ns}/{name}/{claim}"),
            finding(
                "GPU214",
                Layer::Scheduling,
                Severity::Error,
                format!("ResourceQuota {ns}/{quota} refuses the claim `{claim}` of {about}: the pod stays Pending"),
                vec![about.clone(), format!("resourcequota/{ns}/{quota}")],
                evidence,
                "the resourceclaim controller creates a pod's claims from their templates; the API server refused this one because the namespace's device quota is used up, so no scheduler ever sees the pod".to_string(),
                fix,
            ),
        );
    }
}

/// GPU215: a Pending pod that claims devices through DRA and that the scheduler cannot place
/// because no node has devices its claims select (`cannot allocate all claims`), or a claim's
/// selector fails on the devices (`CEL runtime error`): the scheduler's own words, and what they
/// mean. A pod without its claim yet is GPU214's (or the controller's) business, not this one.
fn unallocatable_claims(ctx: &Ctx<'_>, out: &mut Findings) {
    for p in &ctx.d.pods {
        let claims_devices = p
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_ref())
            .is_some_and(|c| !c.is_empty());
        let pending = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
            && p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none();
        if !claims_devices || !pending {
            continue;
        }
        let Some(c) = pod_condition(p, "PodScheduled").filter(|c| c.status == "False") else {
            continue;
        };
        let message = c.message.as_deref().unwrap_or_default();
        let cause = if message.contains("CEL runtime error") {
            "a selector of its claim (or of the claim's DeviceClass) fails on the devices the driver publishes, usually by reading an attribute that device type does not have: no device can ever match until the selector is fixed"
        } else if message.contains("cannot allocate all claims") {
            "no node the pod may run on has free devices that every selector of its claims matches, together on one node (a claim's devices come from one node)"
        } else {
            continue;
        };
        let (ns, name) = pod_id(p);
        let me = format!("pod/{ns}/{name}");
        let mut subjects = vec![me.clone()];
        subjects.extend(owner(p));
        out.add(
            me.clone(),
            finding(
                "GPU215",
                Layer::Scheduling,
                Severity::Error,
                format!("{me} is Pending: the scheduler cannot allocate its DRA claims"),
                subjects,
                scheduler_evidence(ctx, p),
                cause.to_string(),
                format!(
                    "`kubectl get resourceclaims -n {ns}` and `kubectl get resourceslices -o wide` show what it asks for and what exists; relax the shape in {} (gpuctl only writes selectors on attributes the driver publishes) or free devices of it",
                    ctx.file
                ),
            ),
        );
    }
}

/// GPU204: the FailedCreate event `e` of `about` says ResourceQuota `ns/quota` is used up.
fn quota_exhausted(
    ctx: &Ctx<'_>,
    e: &Event,
    about: &str,
    ns: &str,
    quota: &str,
    out: &mut Findings,
) {
    let mut evidence = vec![event_evidence(e, about)];
    evidence.extend(quota_evidence(ctx, ns, quota));
    let tenant = tenant_of(ctx, ns);
    let fix = match &tenant {
        Some(t) => format!(
            "wait for the tenant's running pods (`kubectl get pods -n {ns} --field-selector status.phase=Running`), or raise tenant `{t}`'s quota in {} and run `gpuctl apply {}`",
            ctx.file, ctx.file
        ),
        None => format!(
            "`kubectl describe resourcequota -n {ns} {quota}`; free quota or raise `spec.hard`"
        ),
    };
    out.add(
        format!("{ns}/{quota}"),
        finding(
            "GPU204",
            Layer::Scheduling,
            Severity::Error,
            format!("ResourceQuota {ns}/{quota} is exhausted: pods of {about} are refused"),
            vec![format!("resourcequota/{ns}/{quota}"), about.to_string()],
            evidence,
            format!(
                "the namespace's quota is used up, so the API server refuses new pods before any scheduler sees them{}",
                tenant.map(|t| format!(" (tenant `{t}`)")).unwrap_or_default()
            ),
            fix,
        ),
    );
}

/// GPU205: the FailedCreate event `e` of `about` says a quota in `ns` needs requests no
/// LimitRange default gives (`msg`, the event's message).
fn quota_needs_default(
    ctx: &Ctx<'_>,
    e: &Event,
    about: &str,
    ns: &str,
    msg: &str,
    out: &mut Findings,
) {
    let has_default = ctx.d.limit_ranges.iter().any(|l| {
        l.metadata.namespace.as_deref() == Some(ns)
            && l.spec.as_ref().is_some_and(|s| {
                s.limits
                    .iter()
                    .any(|i| i.default_request.is_some() || i.default.is_some())
            })
    });
    let (what, containers) = must_specify(msg);
    let containers = if containers.is_empty() {
        String::new()
    } else {
        format!(" (missing in containers: {})", containers.join(", "))
    };
    out.add(
        format!("{ns}|{what}"),
        finding(
            "GPU205",
            Layer::Scheduling,
            Severity::Error,
            format!("pods of {about} are refused: the quota needs `{what}` and no LimitRange default gives it"),
            vec![about.to_string(), format!("namespace/{ns}")],
            vec![event_evidence(e, about)],
            format!(
                "a ResourceQuota in {ns} limits {what}, so every container must set it{containers}; {}",
                if has_default {
                    "the namespace's LimitRange has defaults, but not for this resource"
                } else {
                    "the namespace has no LimitRange with defaults"
                }
            ),
            match tenant_of(ctx, ns) {
                Some(t) => format!(
                    "set `defaults` of tenant `{t}` in {} (cpu, memory, GPU) and run `gpuctl apply {}`, or set the requests in the pod template of {about}",
                    ctx.file, ctx.file
                ),
                None => format!(
                    "add a LimitRange with `defaultRequest` for {what} to namespace {ns}, or set the requests in {about}"
                ),
            },
        ),
    );
}

/// The resources and the containers of the quota admission's `must specify R1 for: c1,c2; R2 for:
/// c1` (Kubernetes 1.27 and later; before, `must specify R1,R2`): `("R1, R2", [c1, c2])`.
fn must_specify(msg: &str) -> (String, Vec<String>) {
    let rest = msg.split("must specify ").nth(1).unwrap_or_default().trim();
    let mut resources: Vec<&str> = Vec::new();
    let mut containers: BTreeSet<&str> = BTreeSet::new();
    for part in rest.split(';') {
        let (r, cs) = part.split_once(" for: ").unwrap_or((part, ""));
        for r in r.split(',').map(str::trim) {
            let name = !r.is_empty()
                && r.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "./-_".contains(c));
            if name && !resources.contains(&r) {
                resources.push(r);
            }
        }
        containers.extend(cs.split(',').map(str::trim).filter(|c| !c.is_empty()));
    }
    (
        resources.join(", "),
        containers.into_iter().map(str::to_string).collect(),
    )
}

/// Tenant owning namespace `ns` in the blueprint.
fn tenant_of(ctx: &Ctx<'_>, ns: &str) -> Option<String> {
    ctx.bp
        .spec
        .tenants
        .iter()
        .find(|t| t.namespaces.iter().any(|n| n == ns))
        .map(|t| t.name.clone())
}

/// GPU212: a PriorityClass the blueprint declares (or a refused pod names) that the cluster lacks.
fn priority_classes(ctx: &Ctx<'_>, out: &mut Findings) {
    if !ctx.d.read(crate::diagnostics::DiagKind::PriorityClass) {
        return;
    }
    let have: BTreeSet<&str> = ctx
        .d
        .priority_classes
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    for pc in &ctx.bp.spec.priority_classes {
        if !have.contains(pc.name.as_str()) {
            priority_finding(ctx, out, &pc.name, vec![], None);
        }
    }
}

fn priority_finding(
    ctx: &Ctx<'_>,
    out: &mut Findings,
    pc: &str,
    evidence: Vec<Evidence>,
    about: Option<String>,
) {
    let declared = ctx.bp.spec.priority_classes.iter().any(|p| p.name == pc);
    let users: Vec<String> = ctx
        .bp
        .spec
        .tenants
        .iter()
        .filter(|t| t.priority_class.as_deref() == Some(pc))
        .map(|t| format!("tenant/{}", t.name))
        .collect();
    let mut subjects = vec![format!("priorityclass/{pc}")];
    subjects.extend(about);
    subjects.extend(users.iter().cloned());
    out.add(
        pc.to_string(),
        finding(
            "GPU212",
            Layer::Scheduling,
            Severity::Error,
            format!("PriorityClass `{pc}` does not exist in the cluster"),
            subjects,
            evidence,
            format!(
                "pods that name priorityClassName `{pc}` are refused by the API server{}",
                if users.is_empty() {
                    String::new()
                } else {
                    format!(" ({} use it)", users.join(", "))
                }
            ),
            if declared {
                format!(
                    "`gpuctl apply {}` creates it (the blueprint declares it)",
                    ctx.file
                )
            } else {
                format!(
                    "declare `{pc}` under spec.priorityClasses in {} and run `gpuctl apply {}`, or change the pods' priorityClassName",
                    ctx.file, ctx.file
                )
            },
        ),
    );
}

/// A condition of a CR (`status.conditions[type=..]`).
pub(super) fn cr_condition<'a>(v: &'a Value, t: &str) -> Option<&'a Value> {
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// GPU206–GPU210: Kueue Workloads not admitted, classified by the message the Kueue controller
/// wrote on their `QuotaReserved` condition (its texts: `profiles/queueing.yaml`,
/// `scheduling_messages.kueue`).
fn workloads(ctx: &Ctx<'_>, out: &mut Findings) {
    for w in &ctx.d.workloads {
        let Some(mut waiting) = waiting_workload(ctx, w) else {
            continue;
        };
        let (id, title, cause, fix) = classify_workload(ctx, &mut waiting);
        out.add(
            waiting.me.clone(),
            finding(
                id,
                Layer::Scheduling,
                Severity::Error,
                title,
                waiting.subjects,
                waiting.evidence,
                cause,
                fix,
            ),
        );
    }
}

/// A Kueue Workload whose quota is not reserved, with what the classification reads.
struct WaitingWorkload<'a> {
    ns: &'a str,
    name: &'a str,
    /// `workload/<ns>/<name>`.
    me: String,
    /// Its LocalQueue.
    queue: &'a str,
    /// Its ClusterQueue (empty when its LocalQueue is not found).
    cq_name: String,
    cohort: Option<String>,
    /// The other ClusterQueues of its cohort.
    peers: Vec<&'a Value>,
    /// The `QuotaReserved` condition's message and reason.
    msg: &'a str,
    reason: &'a str,
    /// The resource the message names (`nvidia.com/gpu`), or empty.
    resource: String,
    /// The blueprint's declaration of its ClusterQueue.
    blueprint_cq: Option<&'a gpuctl_model::blueprint::ClusterQueue>,
    subjects: Vec<String>,
    evidence: Vec<Evidence>,
}

/// A Workload's finding: id, title, cause, fix.
type WorkloadVerdict = (&'static str, String, String, String);

/// `w` when it is waiting for quota (not admitted, not finished, active, `QuotaReserved=False`).
fn waiting_workload<'a>(ctx: &Ctx<'a>, w: &'a Value) -> Option<WaitingWorkload<'a>> {
    let texts = &ctx.catalog.queueing().messages.kueue;
    let admitted = cr_condition(w, "Admitted").is_some_and(|c| c["status"] == "True");
    let finished = cr_condition(w, "Finished").is_some_and(|c| c["status"] == "True");
    if admitted || finished || w["spec"]["active"] == false {
        return None;
    }
    let c = cr_condition(w, "QuotaReserved").filter(|c| c["status"] == "False")?;
    let d = ctx.d;
    let ns = str_of(&w["metadata"]["namespace"]);
    let name = str_of(&w["metadata"]["name"]);
    let me = format!("workload/{ns}/{name}");
    let queue = str_of(&w["spec"]["queueName"]);
    let cq_name = d
        .local_queues
        .iter()
        .find(|l| l["metadata"]["namespace"] == ns && l["metadata"]["name"] == queue)
        .map(|l| str_of(&l["spec"]["clusterQueue"]).to_string())
        .unwrap_or_default();
    let msg = str_of(&c["message"]);
    let reason = str_of(&c["reason"]);
    let mut evidence = vec![Evidence {
        source: format!("condition QuotaReserved=False ({reason}) on {me}"),
        text: clean(msg),
        time: c["lastTransitionTime"].as_str().map(str::to_string),
    }];
    for e in d.events_for("Workload", ns, name).take(1) {
        evidence.push(event_evidence(e, &me));
    }
    let cq_obj = d
        .cluster_queues
        .iter()
        .find(|q| q["metadata"]["name"] == cq_name.as_str());
    let cohort = cq_obj.and_then(cohort_of).map(str::to_string);
    if let Some(q) = cq_obj {
        let usage = flavor_usage(q);
        if !usage.is_empty() {
            evidence.push(Evidence {
                source: format!("status.flavorsUsage of clusterqueue/{cq_name}"),
                text: usage,
                time: None,
            });
        }
    }
    // The cohort's other queues: what they use is what they cannot lend.
    let peers: Vec<&Value> = match &cohort {
        Some(c) => d
            .cluster_queues
            .iter()
            .filter(|q| {
                q["metadata"]["name"] != cq_name.as_str() && cohort_of(q) == Some(c.as_str())
            })
            .collect(),
        None => vec![],
    };
    let mut subjects = vec![me.clone()];
    if let Some(o) = w["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|o| o.first())
    {
        subjects.push(subject(str_of(&o["kind"]), Some(ns), str_of(&o["name"])));
    }
    if !cq_name.is_empty() {
        subjects.push(format!("clusterqueue/{cq_name}"));
    }
    let blueprint_cq = ctx
        .bp
        .spec
        .scheduling
        .kueue
        .as_ref()
        .and_then(|k| k.cluster_queues.iter().find(|q| q.name == cq_name));
    let resource = msg
        .split(texts.resource_after.as_str())
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    Some(WaitingWorkload {
        ns,
        name,
        me,
        queue,
        cq_name,
        cohort,
        peers,
        msg,
        reason,
        resource,
        blueprint_cq,
        subjects,
        evidence,
    })
}

/// Which of GPU206–GPU210 the Workload's message says, in the order the texts are told apart.
fn classify_workload(ctx: &Ctx<'_>, w: &mut WaitingWorkload<'_>) -> WorkloadVerdict {
    let texts = &ctx.catalog.queueing().messages.kueue;
    let says = |msg: &str, t: &[String]| gpuctl_model::profiles::KueueMessages::says(msg, t);
    let (me, ns, cq_name, msg) = (&w.me, w.ns, &w.cq_name, w.msg);
    if let Some(form) = ctx
        .catalog
        .dra()
        .kueue
        .refused
        .iter()
        .find(|r| says(msg, std::slice::from_ref(&r.message)))
    {
        dra_claim_refused(ctx, w, &form.form)
    } else if says(msg, std::slice::from_ref(&texts.namespace_mismatch)) {
        (
            "GPU208",
            format!(
                "{me} is not admitted: namespace {ns} is not selected by ClusterQueue {cq_name}"
            ),
            format!(
                "ClusterQueue `{cq_name}`'s namespaceSelector does not match namespace {ns}'s labels, so Kueue never considers the workload"
            ),
            format!(
                "label the namespace as the ClusterQueue selects (`kubectl get clusterqueue {cq_name} -o jsonpath='{{.spec.namespaceSelector}}'`; `kubectl label namespace {ns} KEY=VALUE`), or list {ns} under the tenant of queue {cq_name} in {} and run `gpuctl apply {}`",
                ctx.file, ctx.file
            ),
        )
    } else if let Some(r) = texts.resource_uncovered.name_in(msg) {
        (
            "GPU209",
            format!("{me} is not admitted: ClusterQueue {cq_name} does not cover `{r}`"),
            format!(
                "the workload requests `{r}`, which ClusterQueue `{cq_name}` has no quota for, and Kueue's BlockUndeclared quota check keeps it pending"
            ),
            format!(
                "add `{r}` to the quota of queue `{cq_name}` in {} (or `excludeResourcePrefixes` it in the Kueue config) and run `gpuctl apply {}`; or drop the request from the job",
                ctx.file, ctx.file
            ),
        )
    } else if says(msg, &texts.quota_in_use_cohort)
        || (w.cohort.is_some() && says(msg, &texts.quota_in_use))
    {
        waiting_on_cohort(ctx, w)
    } else if says(msg, &texts.quota_in_use) || says(msg, &texts.request_above_quota) {
        let resource = &w.resource;
        let nominal = w
            .blueprint_cq
            .and_then(|q| q.resources.iter().find_map(|f| f.quota.get(resource)))
            .map(|q| format!(" (nominal quota {})", q.0))
            .unwrap_or_default();
        (
            "GPU206",
            format!("{me} is not admitted: ClusterQueue {cq_name} has no room for `{resource}`"),
            if says(msg, &texts.request_above_quota) {
                format!(
                    "the workload asks for more `{resource}` than ClusterQueue `{cq_name}` can ever give{nominal}, so it is never admitted"
                )
            } else {
                format!(
                    "ClusterQueue `{cq_name}`'s quota for `{resource}` is in use by admitted workloads{nominal}, so it waits for them"
                )
            },
            format!(
                "`kubectl get workloads -n {ns}` to see what holds `{cq_name}`; raise its quota in {} and `gpuctl apply {}`, or lower the job's request",
                ctx.file, ctx.file
            ),
        )
    } else if w.reason == texts.inadmissible_reason
        || says(msg, &texts.queue_unusable)
        || texts.queue_not_found.whole(msg)
    {
        let queue = w.queue;
        (
            "GPU210",
            format!("{me} is inadmissible: {}", clean(msg)),
            format!(
                "Kueue cannot consider the workload at all: its LocalQueue `{queue}` or ClusterQueue{} is missing, stopped or inactive",
                if cq_name.is_empty() {
                    String::new()
                } else {
                    format!(" `{cq_name}`")
                }
            ),
            format!(
                "`kubectl get localqueue -n {ns} {queue} -o yaml` and `kubectl get clusterqueues` (look at the Active condition); `gpuctl apply {}` creates the queues the blueprint declares",
                ctx.file
            ),
        )
    } else {
        (
            "GPU206",
            format!("{me} is not admitted: {}", clean(msg)),
            format!("Kueue keeps the workload pending in ClusterQueue `{cq_name}`"),
            format!("`kubectl describe workload -n {ns} {}`", w.name),
        )
    }
}

/// GPU216: Kueue refuses the form of the Workload's DRA claims (profiles/dra.yaml `kueue.refused`):
/// it stays inadmissible whatever the quota, and only the Workload's condition says why.
fn dra_claim_refused(ctx: &Ctx<'_>, w: &WaitingWorkload<'_>, form: &str) -> WorkloadVerdict {
    let (me, ns, msg) = (&w.me, w.ns, w.msg);
    let fix = match form {
        "unmapped_class" => format!(
            "claim through the tenant's ResourceClaimTemplates (`kubectl get resourceclaimtemplates -n {ns}`: their classes are the shapes gpuctl maps in Kueue's `resources.deviceClassMappings`), or declare the device as a shape in `spec.dra.shapes` of {} and `gpuctl apply {}`",
            ctx.file, ctx.file
        ),
        "direct_claim" => "name a ResourceClaimTemplate in the pod (`resourceClaims[].resourceClaimTemplateName`) instead of a ResourceClaim: Kueue admits claims made from templates only".to_string(),
        "first_available" => "ask for one device class (`exactly`) instead of a prioritized list (`firstAvailable`), e.g. through the tenant's ResourceClaimTemplates".to_string(),
        "admin_access" => "drop `adminAccess` from the claim: Kueue admits no admin-access claims (run such pods outside Kueue's queues)".to_string(),
        _ => "ask for an exact count (`allocationMode: ExactCount`) instead of `All`, e.g. through the tenant's ResourceClaimTemplates".to_string(),
    };
    (
        "GPU216",
        format!("{me} is inadmissible: Kueue refuses its DRA claims"),
        format!(
            "Kueue v0.19 cannot charge this form of claim to a ClusterQueue, so it never admits the workload: {}",
            clean(msg)
        ),
        fix,
    )
}

/// GPU207: its ClusterQueue is past its own quota and the cohort has nothing left to lend (the
/// peers' usage is added to the evidence, the cohort to the subjects).
fn waiting_on_cohort(ctx: &Ctx<'_>, w: &mut WaitingWorkload<'_>) -> WorkloadVerdict {
    for q in &w.peers {
        let usage = flavor_usage(q);
        if !usage.is_empty() {
            w.evidence.push(Evidence {
                source: format!(
                    "status.flavorsUsage of clusterqueue/{} (same cohort)",
                    str_of(&q["metadata"]["name"])
                ),
                text: usage,
                time: None,
            });
        }
    }
    let (me, cq_name, resource) = (&w.me, &w.cq_name, &w.resource);
    let cohort_text = w.cohort.clone().unwrap_or_else(|| "its cohort".into());
    let borrow = w
        .blueprint_cq
        .and_then(|q| {
            q.resources
                .iter()
                .find_map(|f| f.borrowing_limit.get(resource))
        })
        .map(|l| format!(" (its borrowing limit for `{resource}` is {})", l.0))
        .unwrap_or_default();
    if let Some(c) = &w.cohort {
        w.subjects.push(format!("cohort/{c}"));
    }
    (
        "GPU207",
        format!(
            "{me} is waiting on cohort {cohort_text}: not enough unused `{resource}` to borrow"
        ),
        format!(
            "ClusterQueue `{cq_name}` is past its own quota and the other queues of cohort `{cohort_text}` use what they could lend{borrow}, so the workload waits until they finish or are reclaimed"
        ),
        format!(
            "see who holds the cohort's quota: `kubectl get clusterqueues -o custom-columns=NAME:.metadata.name,COHORT:.spec.cohortName,PENDING:.status.pendingWorkloads,ADMITTED:.status.admittedWorkloads`; raise `{cq_name}`'s own quota or borrowing limit in {} and `gpuctl apply {}`, or give it reclaimWithinCohort",
            ctx.file, ctx.file
        ),
    )
}

/// The cohort of a ClusterQueue (`spec.cohortName` in v1beta2, `spec.cohort` before).
fn cohort_of(q: &Value) -> Option<&str> {
    q["spec"]["cohortName"]
        .as_str()
        .or(q["spec"]["cohort"].as_str())
        .filter(|c| !c.is_empty())
}

/// `flavor/resource: total` of a ClusterQueue's `status.flavorsUsage`, for evidence.
fn flavor_usage(q: &Value) -> String {
    let mut parts = Vec::new();
    for f in q["status"]["flavorsUsage"].as_array().into_iter().flatten() {
        for r in f["resources"].as_array().into_iter().flatten() {
            let total = r["total"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| r["total"].to_string());
            let borrowed = r["borrowed"].as_str().filter(|b| *b != "0");
            parts.push(format!(
                "{}/{}: {total} in use{}",
                str_of(&f["name"]),
                str_of(&r["name"]),
                borrowed
                    .map(|b| format!(" ({b} borrowed)"))
                    .unwrap_or_default()
            ));
        }
    }
    parts.join(", ")
}

/// GPU211: Volcano PodGroups that stay Pending or Inqueue with an Unschedulable condition.
fn pod_groups(ctx: &Ctx<'_>, out: &mut Findings) {
    let names = &ctx.catalog.queueing().messages.volcano;
    for g in &ctx.d.pod_groups {
        let phase = str_of(&g["status"]["phase"]);
        if !names.waiting_phases.iter().any(|p| p == phase) {
            continue;
        }
        let Some(c) =
            cr_condition(g, &names.unschedulable_condition).filter(|c| c["status"] == "True")
        else {
            continue;
        };
        let ns = str_of(&g["metadata"]["namespace"]);
        let name = str_of(&g["metadata"]["name"]);
        let me = format!("podgroup/{ns}/{name}");
        let queue = g["spec"]["queue"].as_str().unwrap_or("default");
        let min = g["spec"]["minMember"].as_i64().unwrap_or(0);
        let running = g["status"]["running"].as_i64().unwrap_or(0);
        let mut evidence = vec![Evidence {
            source: format!("condition Unschedulable on {me} (phase {phase})"),
            text: clean(str_of(&c["message"])),
            time: c["lastTransitionTime"].as_str().map(str::to_string),
        }];
        for e in ctx.d.events_for("PodGroup", ns, name).take(1) {
            evidence.push(event_evidence(e, &me));
        }
        out.add(
            me.clone(),
            finding(
                "GPU211",
                Layer::Scheduling,
                Severity::Error,
                format!("{me} is stuck in {phase}: {running} of {min} members running"),
                vec![me.clone(), format!("queue/{queue}")],
                evidence,
                format!(
                    "Volcano cannot place all {min} members of the gang at once (queue `{queue}` capacity or node room), so none of them runs"
                ),
                format!(
                    "`kubectl get queue {queue} -o yaml` (allocated against capability) and `kubectl describe podgroup -n {ns} {name}`; lower minMember or free room in queue `{queue}`"
                ),
            ),
        );
    }
}

/// GPU221: free MIG slices of a profile no pending request asks for, while pending requests want
/// a profile the pool does not have free.
fn mig_profiles_unused(ctx: &Ctx<'_>, out: &mut Findings) {
    let pending: Vec<(&Pod, BTreeMap<String, u64>)> = ctx
        .d
        .pending_accelerator_pods()
        .filter(|(p, _)| !gated(p))
        .collect();
    let wanted: BTreeSet<&String> = pending
        .iter()
        .flat_map(|(_, r)| r.keys())
        .filter(|r| r.starts_with("nvidia.com/mig-"))
        .collect();
    if wanted.is_empty() {
        return;
    }
    for room in super::fit::pool_rooms(ctx) {
        for (r, (free, _)) in &room.free {
            if !r.starts_with("nvidia.com/mig-") || *free == 0 || wanted.contains(r) {
                continue;
            }
            let want_list = wanted
                .iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let pods: Vec<String> = pending
                .iter()
                .filter(|(_, req)| req.keys().any(|k| k.starts_with("nvidia.com/mig-")))
                .map(|(p, _)| {
                    let (ns, n) = pod_id(p);
                    format!("pod/{ns}/{n}")
                })
                .take(5)
                .collect();
            let mut subjects = vec![format!("pool/{}", room.pool)];
            subjects.extend(pods);
            out.add(
                format!("{}|{r}", room.pool),
                finding(
                    "GPU221",
                    Layer::Scheduling,
                    Severity::Warning,
                    format!("{free} free `{r}` slices in pool {} that no pending request can use", room.pool),
                    subjects,
                    vec![Evidence {
                        source: format!("allocatable minus requests on the nodes of pool/{}", room.pool),
                        text: format!("{free} `{r}` free; pending pods ask for {want_list}"),
                        time: None,
                    }],
                    format!(
                        "the pool's MIG layout offers `{r}` but the pending pods ask for {want_list}, so the slices sit idle while they wait"
                    ),
                    format!(
                        "request `{r}` in those pods, or change pool `{}`'s MIG layout in {} to the profiles the tenants use and run `gpuctl apply {}`",
                        room.pool, ctx.file, ctx.file
                    ),
                ),
            );
        }
    }
}

/// A device taint in force: the node (pool) and device, the taint, and who set it (a
/// DeviceTaintRule's name, or `None`: the driver, in the ResourceSlice).
struct DeviceTaint<'a> {
    node: String,
    device: String,
    key: &'a str,
    value: &'a str,
    effect: &'a str,
    rule: Option<&'a str>,
}

impl DeviceTaint<'_> {
    fn text(&self) -> String {
        let who = match self.rule {
            Some(r) => format!("DeviceTaintRule {r}"),
            None => "its DRA driver (in the ResourceSlice)".to_string(),
        };
        format!(
            "device {} of node {} tainted {}={}:{} by {who}",
            self.device, self.node, self.key, self.value, self.effect
        )
    }
}

/// Every device taint in force: those the drivers publish in their slices, and each
/// DeviceTaintRule's taint on the slices' devices its selector matches (driver, pool, device).
fn taints_in_force<'a>(ctx: &Ctx<'a>) -> Vec<DeviceTaint<'a>> {
    let mut out = Vec::new();
    let s = |v: &'a Value| v.as_str().unwrap_or_default();
    for slice in &ctx.d.resource_slices {
        let spec = &slice["spec"];
        let node = s(&spec["nodeName"]).to_string();
        let pool = s(&spec["pool"]["name"]);
        let driver = s(&spec["driver"]);
        for d in spec["devices"].as_array().into_iter().flatten() {
            let device = s(&d["name"]);
            for t in d["taints"].as_array().into_iter().flatten() {
                out.push(DeviceTaint {
                    node: node.clone(),
                    device: device.to_string(),
                    key: s(&t["key"]),
                    value: s(&t["value"]),
                    effect: s(&t["effect"]),
                    rule: None,
                });
            }
            for r in &ctx.d.device_taint_rules {
                let sel = &r["spec"]["deviceSelector"];
                let matches =
                    |field: &str, have: &str| sel[field].as_str().is_none_or(|w| w == have);
                if matches("driver", driver) && matches("pool", pool) && matches("device", device) {
                    let t = &r["spec"]["taint"];
                    out.push(DeviceTaint {
                        node: node.clone(),
                        device: device.to_string(),
                        key: s(&t["key"]),
                        value: s(&t["value"]),
                        effect: s(&t["effect"]),
                        rule: r["metadata"]["name"].as_str(),
                    });
                }
            }
        }
    }
    out
}

/// GPU217: devices NVIDIA's DRA driver tainted after an Xid (`gpu.nvidia.com/xid=<Xid>`), with
/// what the Xid catalog says it is and what to do; the taint stays until the kubelet plugin
/// restarts. GPU218: a Pending pod whose DRA devices the scheduler cannot allocate while devices
/// of the nodes it may use are tainted (NoSchedule/NoExecute): each taint and who set it.
fn device_taints(ctx: &Ctx<'_>, out: &mut Findings) {
    let taints = taints_in_force(ctx);
    if taints.is_empty() {
        return;
    }
    xid_taints(ctx, &taints, out);
    pending_on_taints(ctx, &taints, out);
}

/// GPU217 for each device the driver tainted after an Xid (not the informational ones).
fn xid_taints(ctx: &Ctx<'_>, taints: &[DeviceTaint<'_>], out: &mut Findings) {
    let xid_key = &ctx.catalog.dra().kubernetes.device_taints.xid_taint_key;
    // Informational taints (effect None) keep the device in service: not reported.
    for t in taints
        .iter()
        .filter(|t| t.rule.is_none() && t.key == xid_key.as_str() && t.effect != "None")
    {
        let xid: Option<u32> = t.value.parse().ok();
        let code = xid.and_then(|x| ctx.catalog.dcgm().xid.code(x));
        let (what, fix) = match code {
            Some(c) => (
                format!("Xid {} ({}: {})", c.xid, c.mnemonic, c.text),
                format!(
                    "NVIDIA's action for Xid {}: {} (if it recurs: {}); the driver keeps the taint until its kubelet plugin on {} restarts: restart it once the GPU is recovered",
                    c.xid, c.immediate, c.investigatory, t.node
                ),
            ),
            None => (
                format!("Xid {}", t.value),
                format!(
                    "look the Xid up in NVIDIA's Xid catalog; the driver keeps the taint until its kubelet plugin on {} restarts",
                    t.node
                ),
            ),
        };
        let subject = format!("node/{}/{}", t.node, t.device);
        out.add(
            subject.clone(),
            finding(
                "GPU217",
                Layer::Scheduling,
                Severity::Warning,
                format!(
                    "{subject}: NVIDIA's DRA driver tainted the device after {what} ({}={}:{})",
                    t.key, t.value, t.effect
                ),
                vec![subject.clone(), format!("node/{}", t.node)],
                vec![Evidence {
                    source: format!("ResourceSlice device {} of node {}", t.device, t.node),
                    text: t.text(),
                    time: None,
                }],
                "the scheduler allocates the device to no claim that does not tolerate the taint"
                    .to_string(),
                fix,
            ),
        );
    }
}

/// GPU218 for each Pending pod the scheduler cannot place while devices of its nodes are tainted.
fn pending_on_taints(ctx: &Ctx<'_>, taints: &[DeviceTaint<'_>], out: &mut Findings) {
    let blocking: Vec<&DeviceTaint<'_>> = taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .collect();
    if blocking.is_empty() {
        return;
    }
    for p in &ctx.d.pods {
        let pending = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
            && p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none();
        if !pending {
            continue;
        }
        let Some(c) = pod_condition(p, "PodScheduled").filter(|c| c.status == "False") else {
            continue;
        };
        let message = c.message.as_deref().unwrap_or_default();
        if !message.contains("cannot allocate all claims") && !message.contains("taint") {
            continue;
        }
        // The nodes the pod may use: those its nodeSelector matches (all without one).
        let selector = p
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default();
        let eligible = |node: &str| {
            ctx.d.node(node).is_some_and(|n| {
                let labels = n.metadata.labels.clone().unwrap_or_default();
                selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
        };
        let here: Vec<&&DeviceTaint<'_>> = blocking.iter().filter(|t| eligible(&t.node)).collect();
        if here.is_empty() {
            continue;
        }
        let (ns, name) = pod_id(p);
        let me = format!("pod/{ns}/{name}");
        let mut subjects = vec![me.clone()];
        let mut rule_subjects: Vec<String> = here
            .iter()
            .filter_map(|t| t.rule.map(|r| format!("devicetaintrule/{r}")))
            .collect();
        rule_subjects.sort();
        rule_subjects.dedup();
        subjects.extend(rule_subjects);
        let mut evidence = scheduler_evidence(ctx, p);
        evidence.extend(here.iter().map(|t| Evidence {
            source: match t.rule {
                Some(r) => format!("DeviceTaintRule {r}"),
                None => format!("ResourceSlice device {} of node {}", t.device, t.node),
            },
            text: t.text(),
            time: None,
        }));
        let rules: Vec<String> = {
            let mut r: Vec<String> = here
                .iter()
                .filter_map(|t| t.rule.map(str::to_string))
                .collect();
            r.sort();
            r.dedup();
            r
        };
        let first = here[0];
        out.add(
            me.clone(),
            finding(
                "GPU218",
                Layer::Scheduling,
                Severity::Error,
                format!(
                    "{me} is Pending: devices it could use are tainted ({}{})",
                    first.text(),
                    if here.len() > 1 { format!(", and {} more", here.len() - 1) } else { String::new() }
                ),
                subjects,
                evidence,
                "the scheduler allocates no tainted device to a claim that does not tolerate the taint (a DeviceTaintRule's, or the driver's after an Xid); the pod waits for untainted devices".to_string(),
                if rules.is_empty() {
                    "recover the GPU and restart the DRA kubelet plugin on its node (the driver's taint stays until then), or let the tenant tolerate the taint (`tenants[].deviceTolerations`)".to_string()
                } else {
                    format!(
                        "when the maintenance is over remove the entry from `spec.dra.maintenance` and run `gpuctl apply {}` (it deletes DeviceTaintRule {}), or let the tenant tolerate the taint (`tenants[].deviceTolerations`)",
                        ctx.file,
                        rules.join(", ")
                    )
                },
            ),
        );
    }
}
