//! Provisioned pools (Karpenter): what keeps a provisioned GPU node from taking work.
//!
//! - GPU225: a Pending accelerator pod that a NodePool could take, while that NodePool is at its
//!   `spec.limits` (its `status.resources` plus the pod's request exceed them, or Karpenter said so
//!   in the pod's events): Karpenter launches nothing for it.
//! - GPU245: a Ready node still carrying the blueprint's readiness taint (`spec.nodeReadiness`)
//!   longer than the profile's grace (profiles/provisioning.yaml `readiness.startup_taint_grace_minutes`),
//!   naming the component that should have removed it.
//! - GPU246: a NodeClaim whose launch, registration or initialization failed (a lifecycle
//!   condition `False`, or `Unknown` with a reason that is not progress), or that Karpenter
//!   deleted after an `InsufficientCapacityError`.
//!
//! NodePools and NodeClaims are read only where Karpenter's CRDs are installed; without them these
//! checks find nothing (a kind not served is no finding, see `unread`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use serde_json::Value;

use super::{Ctx, Evidence, Findings, Layer, clean, finding, subject};
use crate::diagnostics::node_ready;
use gpuctl_model::blueprint::provisioning::{ProvisionerKind, ReadinessSignal};
use gpuctl_model::located::Severity;
use gpuctl_model::quantity::parse_count;

pub(crate) fn check(ctx: &Ctx<'_>, out: &mut Findings) {
    pools_at_limit(ctx, out);
    startup_taints(ctx, out);
    node_claims(ctx, out);
}

fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or_default()
}

/// `spec.limits` / `status.resources` entry of a NodePool as a count.
fn count(v: &Value) -> Option<u64> {
    v.as_str().and_then(|s| parse_count(s).ok()).or(v.as_u64())
}

/// Whether `pod` tolerates the NodePool's template taints (not its startup taints: Karpenter
/// ignores those when provisioning) and its node selector does not contradict the template's
/// labels and requirements.
fn could_use(pod: &Pod, np: &Value) -> bool {
    let t = &np["spec"]["template"];
    let taints: Vec<Taint> =
        serde_json::from_value(t["spec"]["taints"].clone()).unwrap_or_default();
    let spec = pod.spec.as_ref();
    let tolerations: &[Toleration] = spec
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    let untolerated = taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .any(|t| !tolerations.iter().any(|tol| super::fit::tolerates(tol, t)));
    if untolerated {
        return false;
    }
    let labels = &t["metadata"]["labels"];
    let reqs = t["spec"]["requirements"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let selector = spec.and_then(|s| s.node_selector.as_ref());
    selector.into_iter().flatten().all(|(k, v)| {
        if let Some(l) = labels[k.as_str()].as_str() {
            return l == v;
        }
        reqs.iter().filter(|r| r["key"] == k.as_str()).all(|r| {
            let values: Vec<&str> = r["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match r["operator"].as_str() {
                Some("In") => values.contains(&v.as_str()),
                Some("NotIn") => !values.contains(&v.as_str()),
                Some("DoesNotExist") => false,
                _ => true,
            }
        })
    })
}

/// Whether Karpenter's message `m` says NodePool `name` is at its limits: the name right after
/// `limit_message`, as Karpenter writes it (`... exceed limits for nodepool (NodePool=NAME)`, the
/// error's structured values) or quoted. An aggregated message names other NodePools for other
/// reasons (`incompatible with nodepool "x"`): only the limit's own is read.
fn limit_names(m: &str, limit_message: &str, name: &str) -> bool {
    m.match_indices(limit_message).any(|(i, _)| {
        let tail = &m[i + limit_message.len()..];
        let seg = tail.split([')', ';', ',']).next().unwrap_or_default();
        let seg = seg.trim().trim_start_matches(['(', ':', ' ']);
        let seg = seg.rsplit('=').next().unwrap_or(seg);
        seg.trim().trim_matches('"') == name
    })
}

/// GPU225.
fn pools_at_limit(ctx: &Ctx<'_>, out: &mut Findings) {
    let k = &ctx.catalog.provisioning().karpenter;
    for (pod, requests) in ctx.d.pending_accelerator_pods() {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        let at_limit = |e: &&k8s_openapi::api::core::v1::Event| {
            e.message
                .as_deref()
                .is_some_and(|m| m.contains(&k.limit_message))
        };
        // Karpenter's newest word on the pod (events are newest first): nominated to a node or
        // NodeClaim already there, the pod waits for that node, not for room under the limits.
        let nominated = ctx
            .d
            .events_for("Pod", ns, pod_name)
            .find(|e| at_limit(e) || e.reason.as_deref() == Some(k.nominated_reason.as_str()))
            .is_some_and(|e| !at_limit(&e));
        if nominated {
            continue;
        }
        let said: Vec<_> = ctx
            .d
            .events_for("Pod", ns, pod_name)
            .filter(at_limit)
            .collect();
        for np in &ctx.d.node_pools {
            let np_name = name(np);
            let limits = np["spec"]["limits"].as_object();
            let event = said.iter().find(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| limit_names(m, &k.limit_message, np_name))
            });
            if !could_use(pod, np) && event.is_none() {
                continue;
            }
            // The resources the pod asks for that the pool limits, with (limit, used, asked).
            let mut over: Vec<(String, u64, u64, u64)> = Vec::new();
            for (r, asked) in &requests {
                let Some(limit) = limits.and_then(|l| l.get(r)).and_then(count) else {
                    continue;
                };
                let used = count(&np["status"]["resources"][r.as_str()]).unwrap_or(0);
                if used + asked > limit || event.is_some() {
                    over.push((r.clone(), limit, used, *asked));
                }
            }
            if over.is_empty() {
                continue;
            }
            let pool = ctx.bp.spec.node_pools.iter().find(|p| p.name == np_name);
            let (r, limit, used, asked) = over[0].clone();
            let mut evidence = vec![Evidence {
                source: format!("nodepool/{np_name} spec.limits and status.resources"),
                text: over
                    .iter()
                    .map(|(r, l, u, a)| format!("`{r}`: limit {l}, in use {u}, the pod asks {a}"))
                    .collect::<Vec<_>>()
                    .join("; "),
                time: ctx.d.read_at.clone(),
            }];
            if let Some(e) = event {
                evidence.push(Evidence {
                    source: format!(
                        "event {} on pod/{ns}/{pod_name}",
                        e.reason.as_deref().unwrap_or_default()
                    ),
                    text: clean(e.message.as_deref().unwrap_or_default()),
                    time: Some(crate::diagnostics::event_time(e)).filter(|t| !t.is_empty()),
                });
            }
            let mut subjects = vec![
                subject("Pod", Some(ns), pod_name),
                format!("nodepool/{np_name}"),
            ];
            if pool.is_some() {
                subjects.push(format!("pool/{np_name}"));
            }
            let fix = match pool {
                Some(p) if p.provisioner.kind == ProvisionerKind::Karpenter => format!(
                    "raise `provisioner.maxNodes` of pool `{np_name}` (now {}) in {} and `gpuctl apply {}` (gpuctl renders the NodePool's limits from it), or wait for the pool's pods to finish; `kubectl get nodepool {np_name} -o jsonpath='{{.spec.limits}} {{.status.resources}}'`",
                    p.max_nodes(),
                    ctx.file,
                    ctx.file
                ),
                _ => format!(
                    "raise `spec.limits.{r}` of NodePool `{np_name}` (no pool of the blueprint renders it), or wait for its pods to finish; `kubectl get nodepool {np_name} -o jsonpath='{{.spec.limits}} {{.status.resources}}'`"
                ),
            };
            out.add(
                format!("{np_name}|{r}"),
                finding(
                    "GPU225",
                    Layer::Scheduling,
                    Severity::Error,
                    format!(
                        "pods are Pending: NodePool {np_name} is at its limit of {limit} `{r}` ({used} in use)"
                    ),
                    subjects,
                    evidence,
                    format!(
                        "Karpenter launches no node for pod/{ns}/{pod_name}: NodePool `{np_name}` may hold {limit} `{r}` (spec.limits), its nodes already have {used} (status.resources) and the pod asks {asked}, so every instance type exceeds what is left"
                    ),
                    fix,
                ),
            );
        }
    }
}

/// How long `d` is, as `1h5m` / `17m` / `40s`.
fn span(secs: i64) -> String {
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

fn parse_time(t: &str) -> Option<jiff::Timestamp> {
    t.parse().ok()
}

/// When a node became Ready (its Ready condition's last transition), else when it was created.
fn ready_since(n: &Node) -> Option<jiff::Timestamp> {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
        .or_else(|| n.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// GPU245.
fn startup_taints(ctx: &Ctx<'_>, out: &mut Findings) {
    let Some(readiness) = ctx.bp.spec.node_readiness.as_ref() else {
        return;
    };
    let Some(now) = ctx.d.read_at.as_deref().and_then(parse_time) else {
        return;
    };
    let facts = ctx.catalog.provisioning();
    let grace = i64::from(facts.readiness.startup_taint_grace_minutes) * 60;
    let key = &readiness.taint_key;
    for n in &ctx.d.nodes {
        let node = n.metadata.name.as_deref().unwrap_or_default();
        let Some(taint) = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .and_then(|t| t.iter().find(|t| &t.key == key))
        else {
            continue;
        };
        if !node_ready(n) {
            continue;
        }
        let Some(since) = ready_since(n) else {
            continue;
        };
        let age = now.as_second() - since.as_second();
        if age <= grace {
            continue;
        }
        let labels = n.metadata.labels.clone().unwrap_or_default();
        let pool_index = ctx.pool_of(node);
        let pool = pool_index
            .map(|i| ctx.pool_name(i).to_string())
            .or_else(|| labels.get(&facts.karpenter.nodepool_label).cloned());
        let pool_text = pool
            .as_deref()
            .map(|p| format!("pool `{p}`"))
            .unwrap_or_else(|| "no pool of the blueprint".into());
        let condition = &facts.readiness.condition;
        let gpu_ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| &c.type_ == condition));
        let (remover, fix) = remover(ctx, pool_index, node, key);
        let mut evidence = vec![Evidence {
            source: format!("spec.taints and condition Ready of node/{node}"),
            text: format!(
                "{} on a node Ready since {since} ({} ago)",
                super::fit::taint_text(taint),
                span(age)
            ),
            time: Some(since.to_string()),
        }];
        evidence.push(Evidence {
            source: format!("condition {condition} on node/{node}"),
            text: match gpu_ready {
                Some(c) => format!(
                    "{} ({}): {}",
                    c.status,
                    c.reason.as_deref().unwrap_or_default(),
                    clean(c.message.as_deref().unwrap_or_default())
                ),
                None => "absent".into(),
            },
            time: gpu_ready
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0.to_string()),
        });
        let mut subjects = vec![format!("node/{node}")];
        if let Some(p) = &pool {
            subjects.push(format!("pool/{p}"));
        }
        out.add(
            format!("{}|{node}", pool.clone().unwrap_or_default()),
            finding(
                "GPU245",
                Layer::NodeHardware,
                Severity::Error,
                format!(
                    "node {node} of {pool_text} is Ready but still carries the startup taint {key} after {}",
                    span(age)
                ),
                subjects,
                evidence,
                format!(
                    "the readiness taint `{key}` keeps GPU work off node {node} ({pool_text}) {} after it became Ready (more than the {} min a provisioner waits for a new node, profiles/provisioning.yaml); on this platform it is removed by {remover}",
                    span(age),
                    facts.readiness.startup_taint_grace_minutes
                ),
                fix,
            ),
        );
    }
}

/// Who removes the readiness taint `key` from `node` on its pool's platform, and what to check.
fn remover(ctx: &Ctx<'_>, pool_index: Option<usize>, node: &str, key: &str) -> (String, String) {
    let facts = ctx.catalog.provisioning();
    let readiness = ctx.bp.spec.node_readiness.as_ref();
    let signal = readiness.map(|r| r.signal).unwrap_or_default();
    let condition = &facts.readiness.condition;
    let bp_pool = pool_index.map(|i| &ctx.bp.spec.node_pools[i]);
    let platform = bp_pool.and_then(|p| p.provisioner.platform);
    let managed_without = bp_pool.is_some_and(|p| p.provisioner.kind == ProvisionerKind::Managed)
        && platform.is_some_and(|p| {
            facts
                .readiness
                .managed_without_readiness_prefix
                .iter()
                .any(|m| m == p.as_str())
        });
    if managed_without {
        (
            format!(
                "nothing on {}: its managed autoscaler honours only `{}` keys, which the Node Readiness Controller refuses (GPU1400)",
                platform.map(|p| p.as_str()).unwrap_or_default(),
                facts.readiness.managed_autoscaler_prefix
            ),
            format!(
                "remove the taint by hand once the GPU stack is up (`kubectl taint node {node} {key}-`) and leave `spec.nodeReadiness` off this pool's platform"
            ),
        )
    } else {
        match signal {
            ReadinessSignal::External => (
                "the component the cluster runs for it (`spec.nodeReadiness.signal: external`: gpuctl renders only the taint)".to_string(),
                format!(
                    "check the component that removes `{key}` on this cluster; once the GPU stack is up on the node (`kubectl get pods -n {} -o wide --field-selector spec.nodeName={node}`) it should remove the taint",
                    ctx.d.operator_namespace
                ),
            ),
            ReadinessSignal::NodeReadinessController => (
                format!(
                    "the Node Readiness Controller (gpuctl's NodeReadinessRule `nvidia-gpu-readiness`), once Node Problem Detector reports `{condition}=True`"
                ),
                format!(
                    "`kubectl get node {node} -o jsonpath='{{.status.conditions[?(@.type==\"{condition}\")]}}'`: absent, Node Problem Detector's GPU monitor is not running there; False, the GPU stack is not up (`kubectl get pods -n {} -o wide --field-selector spec.nodeName={node}`); True, the Node Readiness Controller is not running or its rule does not select the node (`kubectl get nodereadinessrules`)",
                    ctx.d.operator_namespace
                ),
            ),
        }
    }
}

/// The first lifecycle condition of a NodeClaim that failed: (type, status, reason, message, time).
fn failed_condition<'a>(
    claim: &'a Value,
    order: &[String],
    progress: &[String],
) -> Option<(&'a str, &'a str, &'a str, &'a str, Option<&'a str>)> {
    let conds = claim["status"]["conditions"].as_array()?;
    for t in order {
        let Some(c) = conds.iter().find(|c| c["type"] == t.as_str()) else {
            continue;
        };
        let status = c["status"].as_str().unwrap_or_default();
        let reason = c["reason"].as_str().unwrap_or_default();
        let failed =
            status == "False" || (status == "Unknown" && !progress.iter().any(|p| p == reason));
        if failed {
            return Some((
                c["type"].as_str().unwrap_or_default(),
                status,
                reason,
                c["message"].as_str().unwrap_or_default(),
                c["lastTransitionTime"].as_str(),
            ));
        }
    }
    None
}

/// The values of a NodeClaim's (or NodePool template's) requirement on `key`.
fn requirement_values(spec: &Value, key: &str) -> Vec<String> {
    spec["requirements"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["key"] == key)
        .flat_map(|r| r["values"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// GPU246.
fn node_claims(ctx: &Ctx<'_>, out: &mut Findings) {
    let k = &ctx.catalog.provisioning().karpenter;
    let mut failed: BTreeSet<String> = BTreeSet::new();
    for c in &ctx.d.node_claims {
        if !c["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let Some((ty, status, reason, message, time)) =
            failed_condition(c, &k.nodeclaim_conditions, &k.nodeclaim_progress_reasons)
        else {
            continue;
        };
        let claim = name(c);
        failed.insert(claim.to_string());
        let pool = c["metadata"]["labels"][k.nodepool_label.as_str()]
            .as_str()
            .unwrap_or_default();
        let types = requirement_values(&c["spec"], &k.instance_type_label);
        let mut subjects = vec![format!("nodeclaim/{claim}")];
        if !pool.is_empty() {
            subjects.push(format!("nodepool/{pool}"));
        }
        let stage = match ty {
            "Launched" => "failed to launch",
            "Registered" => "launched but its node did not register",
            _ => "registered but did not initialize",
        };
        out.add(
            format!("{pool}|{claim}"),
            finding(
                "GPU246",
                Layer::NodeHardware,
                Severity::Error,
                format!("NodeClaim {claim} of NodePool {pool} {stage}: {reason}"),
                subjects,
                vec![Evidence {
                    source: format!("condition {ty} on nodeclaim/{claim}"),
                    text: format!("{status} ({reason}): {}", clean(message)),
                    time: time.map(str::to_string),
                }],
                format!(
                    "Karpenter could not bring up a node for NodeClaim `{claim}` (NodePool `{pool}`, instance types {}): {ty} is {status} with reason {reason}, so the pods it was made for stay Pending",
                    if types.is_empty() {
                        "not constrained".to_string()
                    } else {
                        types.join(", ")
                    }
                ),
                format!(
                    "`kubectl describe nodeclaim {claim}` and Karpenter's log for it; check the NodePool's instance types are offered and catalogued (`gpuctl validate {}`, GPU1404) and its NodeClass is Ready (`kubectl get nodepool {pool} -o jsonpath='{{.status.conditions}}'`)",
                    ctx.file
                ),
            ),
        );
    }
    // NodeClaims Karpenter deleted after the provider had no capacity: only their events remain.
    for e in &ctx.d.events {
        let o = &e.involved_object;
        if o.kind.as_deref() != Some("NodeClaim")
            || e.reason.as_deref() != Some(k.insufficient_capacity_reason.as_str())
        {
            continue;
        }
        let claim = o.name.as_deref().unwrap_or_default();
        if failed.contains(claim) {
            continue;
        }
        out.add(
            format!("ice|{claim}"),
            finding(
                "GPU246",
                Layer::NodeHardware,
                Severity::Error,
                format!("NodeClaim {claim} failed to launch: {}", k.insufficient_capacity_reason),
                vec![format!("nodeclaim/{claim}")],
                vec![Evidence {
                    source: format!("event {} on nodeclaim/{claim}", k.insufficient_capacity_reason),
                    text: clean(e.message.as_deref().unwrap_or_default()),
                    time: Some(crate::diagnostics::event_time(e)).filter(|t| !t.is_empty()),
                }],
                format!(
                    "the cloud provider had no capacity for NodeClaim `{claim}` and Karpenter deleted it; it retries with the offerings left, and the pods stay Pending while none has capacity"
                ),
                "widen the pool's instance types or zones (`provisioner.instanceTypes`), or allow another capacity type; `kubectl get events --field-selector involvedObject.kind=NodeClaim`".to_string(),
            ),
        );
    }
}

#[cfg(test)]
#[path = "provisioning_tests.rs"]
mod tests;
