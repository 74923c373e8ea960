//! Container start and the GPU stack (operand pods per pool, ClusterPolicy and NVIDIADriver
//! status, MIG configuration, node driver against the blueprint and the tenants' CUDA), GPU pods
//! whose containers do not start, and the nodes of the pools (NotReady, no GPUs advertised).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::fit::NodeRoom;
use super::scheduling::cr_condition;
use super::{Ctx, Evidence, Findings, Layer, clean, finding};
use crate::diagnostics::pod_condition;
use gpuctl_model::located::Severity;
use gpuctl_model::names::{
    DRIVER_VERSION_LABEL, MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL, OPERAND_APPS,
    UPGRADE_POOL_LABEL,
};
use gpuctl_model::profiles::CudaSupport;
use gpuctl_model::version::{CudaVersion, DriverVersion};

pub(super) fn check(ctx: &Ctx<'_>, out: &mut Findings) {
    operand_pods(ctx, out);
    operator_crs(ctx, out);
    mig_failed(ctx, out);
    driver_versions(ctx, out);
    gpu_containers(ctx, out);
    pool_nodes(ctx, out);
}

/// What an operator pod is, from its `app` label or name.
fn operand(p: &Pod) -> Option<&'static str> {
    let app = p
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app"))
        .or(p.metadata.name.as_ref())?;
    OPERAND_APPS
        .iter()
        .find(|(prefix, _)| app.starts_with(prefix))
        .map(|(_, what)| *what)
}

/// Why a pod is not Ready: the first waiting or terminated container, with its restarts.
fn not_ready(p: &Pod) -> Option<Evidence> {
    let st = p.status.as_ref()?;
    let phase = st.phase.as_deref().unwrap_or("Unknown");
    if phase == "Succeeded" {
        return None;
    }
    let ready = pod_condition(p, "Ready").is_some_and(|c| c.status == "True");
    if ready && phase == "Running" {
        return None;
    }
    let ns = p.metadata.namespace.as_deref().unwrap_or_default();
    let name = p.metadata.name.as_deref().unwrap_or_default();
    let statuses = st
        .init_container_statuses
        .iter()
        .flatten()
        .chain(st.container_statuses.iter().flatten());
    for c in statuses {
        if c.ready {
            continue;
        }
        let state = c.state.as_ref();
        let waiting = state.and_then(|s| s.waiting.as_ref());
        let last = c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .or_else(|| state.and_then(|s| s.terminated.as_ref()));
        let mut text = match waiting {
            Some(w) => format!(
                "container {} waiting: {}{}",
                c.name,
                w.reason.as_deref().unwrap_or("?"),
                w.message
                    .as_deref()
                    .map(|m| format!(": {}", clean(m)))
                    .unwrap_or_default()
            ),
            None => format!("container {} not ready", c.name),
        };
        if c.restart_count > 0 {
            text.push_str(&format!(", {} restarts", c.restart_count));
        }
        if let Some(t) = last {
            text.push_str(&format!(
                "; last exit {} ({}){}",
                t.exit_code,
                t.reason.as_deref().unwrap_or("?"),
                t.message
                    .as_deref()
                    .map(|m| format!(": {}", clean(m.trim())))
                    .unwrap_or_default()
            ));
        }
        return Some(Evidence {
            source: format!("status of pod/{ns}/{name}"),
            text,
            time: last
                .and_then(|t| t.finished_at.as_ref())
                .map(|t| t.0.to_string()),
        });
    }
    Some(Evidence {
        source: format!("status of pod/{ns}/{name}"),
        text: format!(
            "phase {phase}{}",
            st.message
                .as_deref()
                .map(|m| format!(": {}", clean(m)))
                .unwrap_or_default()
        ),
        time: None,
    })
}

/// GPU230: GPU Operator operand pods that are not Ready, per operand and pool.
fn operand_pods(ctx: &Ctx<'_>, out: &mut Findings) {
    let ns = ctx.d.operator_namespace.as_str();
    for p in ctx.d.operator_pods() {
        let Some(what) = operand(p) else { continue };
        let Some(ev) = not_ready(p) else { continue };
        let name = p.metadata.name.as_deref().unwrap_or_default();
        let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let pool = node.and_then(|n| ctx.pool_of(n));
        let pool_name = pool.map_or("(no pool)", |i| ctx.pool_name(i));
        let mut subjects = vec![format!("pod/{ns}/{name}")];
        subjects.extend(node.map(|n| format!("node/{n}")));
        if pool.is_some() {
            subjects.push(format!("pool/{pool_name}"));
        }
        let crash = ev.text.contains("CrashLoopBackOff");
        let effect = match what {
            "device plugin" | "device plugin (MPS)" => {
                "the node advertises no GPUs to the scheduler, so GPU pods cannot be placed there"
            }
            "driver" => "no driver is loaded, so nothing else of the stack starts on the node",
            "container toolkit" => {
                "containers cannot get GPUs injected, so GPU pods fail at container creation"
            }
            "MIG manager" => "the pool's MIG layout is not applied",
            "GPU Feature Discovery" => "the node's GPU labels are stale or missing",
            "DCGM exporter" | "DCGM" => "the node's GPU metrics and health are not reported",
            _ => "the node's GPU stack is not validated, so later operands wait",
        };
        out.add(
            format!("{what}|{pool_name}"),
            finding(
                "GPU230",
                Layer::ContainerStart,
                Severity::Error,
                format!(
                    "{what} pods are not Ready on pool {pool_name}{}",
                    if crash { " (CrashLoopBackOff)" } else { "" }
                ),
                subjects,
                vec![ev],
                format!("the GPU Operator's {what} does not run on these nodes: {effect}"),
                format!(
                    "`kubectl logs -n {ns} {name} --all-containers --previous` for why it exits; `kubectl describe pod -n {ns} {name}`"
                ),
            ),
        );
    }
}

/// GPU231, GPU232: ClusterPolicy and NVIDIADriver CRs that are not ready.
fn operator_crs(ctx: &Ctx<'_>, out: &mut Findings) {
    let ns = &ctx.d.operator_namespace;
    for (list, kind, id) in [
        (&ctx.d.cluster_policies, "ClusterPolicy", "GPU231"),
        (&ctx.d.nvidia_drivers, "NVIDIADriver", "GPU232"),
    ] {
        for cr in list.iter() {
            let state = cr["status"]["state"].as_str().unwrap_or_default();
            if matches!(state, "ready" | "ignored" | "disabled" | "") {
                continue;
            }
            let name = cr["metadata"]["name"].as_str().unwrap_or_default();
            let me = format!("{}/{name}", kind.to_lowercase());
            let mut evidence = vec![Evidence {
                source: format!("status.state of {me}"),
                text: state.to_string(),
                time: None,
            }];
            for t in ["Error", "Ready"] {
                if let Some(c) = cr_condition(cr, t)
                    && !c["message"].as_str().unwrap_or_default().is_empty()
                {
                    evidence.push(Evidence {
                        source: format!(
                            "condition {t}={} ({}) on {me}",
                            c["status"].as_str().unwrap_or_default(),
                            c["reason"].as_str().unwrap_or_default()
                        ),
                        text: clean(c["message"].as_str().unwrap_or_default()),
                        time: c["lastTransitionTime"].as_str().map(str::to_string),
                    });
                }
            }
            out.add(
                me.clone(),
                finding(
                    id,
                    Layer::ContainerStart,
                    Severity::Error,
                    format!("{kind} {name} is {state}"),
                    vec![me.clone()],
                    evidence,
                    format!(
                        "the GPU Operator reports {kind} `{name}` as {state}: one of its operands is not running or its spec is refused"
                    ),
                    format!(
                        "`kubectl get {} {name} -o jsonpath='{{.status.conditions}}'`; `kubectl get pods -n {ns} -o wide` and the logs of the pods that are not Running",
                        kind.to_lowercase()
                    ),
                ),
            );
        }
    }
}

/// GPU233: nodes whose MIG Manager reports `nvidia.com/mig.config.state=failed`.
fn mig_failed(ctx: &Ctx<'_>, out: &mut Findings) {
    let ns = &ctx.d.operator_namespace;
    for n in &ctx.nodes {
        if n.label(MIG_CONFIG_STATE_LABEL) != Some("failed") {
            continue;
        }
        let config = n.label(MIG_CONFIG_LABEL).unwrap_or("?");
        let pool = n.pool.map_or("(no pool)", |i| ctx.pool_name(i));
        let mut subjects = vec![format!("node/{}", n.name)];
        if n.pool.is_some() {
            subjects.push(format!("pool/{pool}"));
        }
        out.add(
            pool.to_string(),
            finding(
                "GPU233",
                Layer::ContainerStart,
                Severity::Error,
                format!("MIG configuration `{config}` failed on pool {pool}"),
                subjects,
                vec![Evidence {
                    source: format!("labels of node/{}", n.name),
                    text: format!("{MIG_CONFIG_LABEL}={config}, {MIG_CONFIG_STATE_LABEL}=failed"),
                    time: None,
                }],
                format!(
                    "MIG Manager could not apply `{config}` (GPUs busy, an unknown profile in the MIG ConfigMap, or a reset that needs a reboot), so the pool does not offer its MIG slices"
                ),
                format!(
                    "`kubectl logs -n {ns} -l app=nvidia-mig-manager --tail=50`; after fixing, re-apply: `kubectl label node {} {MIG_CONFIG_LABEL}={config} --overwrite`",
                    n.name
                ),
            ),
        );
    }
}

/// The driver the blueprint gives pool `i` (the pool's own, else the cluster's).
fn pool_driver(ctx: &Ctx<'_>, i: usize) -> Option<(String, DriverVersion)> {
    let pool = &ctx.bp.spec.node_pools[i];
    let text = pool
        .driver
        .as_ref()
        .map(|d| d.version.clone())
        .unwrap_or_else(|| ctx.bp.spec.gpu_operator.driver.version.clone());
    let v = text.parse().ok()?;
    Some((text, v))
}

/// GPU234 (node driver differs from the blueprint) and GPU235 (node driver too old for a tenant's
/// CUDA: "CUDA driver version is insufficient for CUDA runtime version").
fn driver_versions(ctx: &Ctx<'_>, out: &mut Findings) {
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let nodes: Vec<&NodeRoom<'_>> = ctx.nodes.iter().filter(|n| n.pool == Some(i)).collect();
        let declared = pool_driver(ctx, i);
        // Nodes by the driver they run (GFD's label), skipping nodes a driver upgrade is moving.
        let mut by_driver: BTreeMap<String, Vec<&NodeRoom<'_>>> = BTreeMap::new();
        for n in nodes.iter().copied() {
            if n.label(UPGRADE_POOL_LABEL).is_some() {
                continue;
            }
            if let Some(v) = n.label(DRIVER_VERSION_LABEL) {
                by_driver.entry(v.to_string()).or_default().push(n);
            }
        }
        for (running, ns) in &by_driver {
            let Ok(rv) = running.parse::<DriverVersion>() else {
                continue;
            };
            let subjects = |extra: Vec<String>| {
                let mut s: Vec<String> = ns.iter().map(|n| format!("node/{}", n.name)).collect();
                s.push(format!("pool/{}", pool.name));
                s.extend(extra);
                s
            };
            let evidence = vec![Evidence {
                source: format!(
                    "label {DRIVER_VERSION_LABEL} on {} node(s) of pool/{}",
                    ns.len(),
                    pool.name
                ),
                text: format!("{DRIVER_VERSION_LABEL}={running} (node/{})", ns[0].name),
                time: None,
            }];
            if let Some((text, want)) = &declared
                && *want != rv
            {
                out.add(
                    format!("{}|{running}", pool.name),
                    finding(
                        "GPU234",
                        Layer::ContainerStart,
                        Severity::Warning,
                        format!("pool {} runs driver {running}; the blueprint says {text}", pool.name),
                        subjects(vec![]),
                        evidence.clone(),
                        format!(
                            "{} node(s) of pool `{}` run a driver other than the one the blueprint declares, so what was validated is not what runs",
                            ns.len(),
                            pool.name
                        ),
                        format!(
                            "`gpuctl upgrade driver {} --pool {} --to {text}` (or `gpuctl plan {}` to see the drift)",
                            ctx.file, pool.name, ctx.file
                        ),
                    ),
                );
            }
            // Tenants whose work lands on this pool and the CUDA versions they build for.
            for t in &ctx.bp.spec.tenants {
                if !tenant_uses_pool(ctx, t, &pool.name) {
                    continue;
                }
                for c in &t.cuda {
                    let Ok(cv) = c.parse::<CudaVersion>() else {
                        continue;
                    };
                    let Some(req) = ctx.catalog.cuda(&cv) else {
                        continue;
                    };
                    let support = req.support(&rv);
                    if support == CudaSupport::Full {
                        continue;
                    }
                    let mvc = support == CudaSupport::MinorVersionCompatibility;
                    let mut ev = evidence.clone();
                    if !mvc {
                        ev.extend(cuda_failures(ctx, t, ns));
                    }
                    let target = declared
                        .as_ref()
                        .filter(|(_, d)| req.support(d) == CudaSupport::Full)
                        .map(|(t, _)| t.clone())
                        .unwrap_or_else(|| req.min_driver.to_string());
                    out.add(
                        format!("{}|{running}|{}|{c}", pool.name, t.name),
                        finding(
                            "GPU235",
                            Layer::ContainerStart,
                            if mvc { Severity::Warning } else { Severity::Error },
                            format!(
                                "driver {running} on pool {} is {} tenant {}'s CUDA {c}",
                                pool.name,
                                if mvc { "older than the toolkit driver of" } else { "too old for" },
                                t.name
                            ),
                            subjects(vec![format!("tenant/{}", t.name)]),
                            ev,
                            if mvc {
                                format!(
                                    "CUDA {c}'s toolkit driver is {} and pool `{}` runs {running}: tenant `{}`'s images run only through minor-version compatibility (no PTX JIT, some APIs fail)",
                                    req.min_driver, pool.name, t.name
                                )
                            } else {
                                format!(
                                    "CUDA {c} needs driver {} or newer and pool `{}` runs {running}, so tenant `{}`'s containers fail with \"CUDA driver version is insufficient for CUDA runtime version\"",
                                    req.min_driver, pool.name, t.name
                                )
                            },
                            format!(
                                "`gpuctl upgrade driver {} --pool {} --to {target}`; until then run CUDA {c} images elsewhere",
                                ctx.file, pool.name
                            ),
                        ),
                    );
                }
            }
        }
    }
}

/// Whether tenant `t`'s work lands on pool `pool`: the pools of its ClusterQueue under Kueue,
/// every pool otherwise.
fn tenant_uses_pool(ctx: &Ctx<'_>, t: &gpuctl_model::blueprint::Tenant, pool: &str) -> bool {
    let cq = ctx
        .bp
        .spec
        .scheduling
        .kueue
        .as_ref()
        .filter(|_| ctx.bp.spec.scheduling.queueing == gpuctl_model::blueprint::Queueing::Kueue)
        .and_then(|k| {
            k.cluster_queues
                .iter()
                .find(|q| Some(&q.name) == t.queue.as_ref())
        });
    match cq {
        Some(q) => q.resources.iter().any(|r| r.pool == pool),
        None => true,
    }
}

/// Messages of the tenant's containers on `nodes` that died of an old driver.
fn cuda_failures(
    ctx: &Ctx<'_>,
    t: &gpuctl_model::blueprint::Tenant,
    nodes: &[&NodeRoom<'_>],
) -> Vec<Evidence> {
    ctx.d
        .pods
        .iter()
        .filter(|p| {
            p.metadata
                .namespace
                .as_ref()
                .is_some_and(|ns| t.namespaces.contains(ns))
                && p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| nodes.iter().any(|r| r.name == n))
        })
        .filter_map(|p| {
            let e = not_ready(p)?;
            let t = e.text.to_lowercase();
            (t.contains("driver version is insufficient")
                || t.contains("cuda_error_system_driver_mismatch")
                || t.contains("libcudart")
                || t.contains("failed to initialize nvml"))
            .then_some(e)
        })
        .take(2)
        .collect()
}

/// GPU236: GPU pods bound to a node whose containers do not start (runtime or toolkit problems)
/// or crash at once; driver/CUDA crashes are GPU235's, but are also shown here with their node.
fn gpu_containers(ctx: &Ctx<'_>, out: &mut Findings) {
    const START: &[&str] = &[
        "CreateContainerError",
        "CreateContainerConfigError",
        "RunContainerError",
        "StartError",
        "ContainerCannotRun",
    ];
    for (p, _) in ctx.d.pods_requesting(|_| true) {
        if p.metadata.namespace.as_deref() == Some(ctx.d.operator_namespace.as_str()) {
            continue;
        }
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        let Some(ev) = not_ready(p) else { continue };
        let start = START.iter().any(|r| ev.text.contains(r));
        let gpu_crash = ev.text.contains("CrashLoopBackOff") && {
            let t = ev.text.to_lowercase();
            t.contains("cuda") || t.contains("nvml") || t.contains("nvidia")
        };
        if !start && !gpu_crash {
            continue;
        }
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        let name = p.metadata.name.as_deref().unwrap_or_default();
        let pool = ctx.pool_of(node).map_or("(no pool)", |i| ctx.pool_name(i));
        let op = &ctx.d.operator_namespace;
        out.add(
            format!("{pool}|{}", if start { "start" } else { "crash" }),
            finding(
                "GPU236",
                Layer::ContainerStart,
                Severity::Error,
                if start {
                    format!("GPU containers do not start on pool {pool}")
                } else {
                    format!("GPU containers crash at start on pool {pool}")
                },
                vec![format!("pod/{ns}/{name}"), format!("node/{node}")],
                vec![ev],
                if start {
                    "the container runtime cannot create GPU containers on the node: the NVIDIA Container Toolkit's runtime is missing or misconfigured, or the device the device plugin allocated is not visible".into()
                } else {
                    "the containers exit with a CUDA/NVML error as soon as they touch the GPU: the driver on the node does not match the image's CUDA, or is not loaded".into()
                },
                format!(
                    "`kubectl describe pod -n {ns} {name}`; `kubectl logs -n {op} -l app=nvidia-container-toolkit-daemonset --tail=50`; on the node: `nvidia-smi` and `crictl info | grep -A5 runtimes`"
                ),
            ),
        );
    }
}

/// GPU240 (a pool node is NotReady) and GPU241 (a Ready pool node advertises none of the GPU
/// resources its pool should).
fn pool_nodes(ctx: &Ctx<'_>, out: &mut Findings) {
    let op = &ctx.d.operator_namespace;
    for n in &ctx.nodes {
        let Some(i) = n.pool else { continue };
        let pool = ctx.pool_name(i);
        if !n.ready {
            let c = n
                .node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
            out.add(
                pool.to_string(),
                finding(
                    "GPU240",
                    Layer::NodeHardware,
                    Severity::Error,
                    format!("nodes of pool {pool} are NotReady"),
                    vec![format!("node/{}", n.name), format!("pool/{pool}")],
                    vec![Evidence {
                        source: format!("condition Ready on node/{}", n.name),
                        text: c
                            .map(|c| {
                                format!(
                                    "{} ({}): {}",
                                    c.status,
                                    c.reason.as_deref().unwrap_or(""),
                                    clean(c.message.as_deref().unwrap_or(""))
                                )
                            })
                            .unwrap_or_else(|| "no Ready condition".into()),
                        time: c
                            .and_then(|c| c.last_transition_time.as_ref())
                            .map(|t| t.0.to_string()),
                    }],
                    format!("the kubelet of these nodes does not report Ready, so their GPUs are lost to pool `{pool}`"),
                    format!("`kubectl describe node {}` (conditions, events); on the node: `journalctl -u kubelet --since -1h` and `dmesg | grep -i -e xid -e nvrm`", n.name),
                ),
            );
            continue;
        }
        if ctx.bp.spec.node_pools[i].gpu.count == 0 || n.allocatable.values().any(|c| *c > 0) {
            continue;
        }
        // A pool served by DRA advertises its GPUs in ResourceSlices, not in allocatable.
        if gpuctl_pipeline::extended::dra_pool(ctx.bp, i) {
            let published = ctx.d.resource_slices.iter().any(|s| {
                s["spec"]["nodeName"] == n.name
                    && s["spec"]["devices"]
                        .as_array()
                        .is_some_and(|d| !d.is_empty())
            });
            if !published {
                no_slice(ctx, n, pool, out);
            }
            continue;
        }
        no_gpus(
            n,
            pool,
            out,
            Evidence {
                source: format!("status.allocatable of node/{}", n.name),
                text: "no nvidia.com/* resource".into(),
                time: None,
            },
            format!(
                "the node is Ready but its device plugin has registered no GPU resource, so the scheduler sees no GPUs on it (pool `{pool}` expects {} per node)",
                ctx.bp.spec.node_pools[i].gpu.count
            ),
            format!(
                "`kubectl get pods -n {op} -o wide --field-selector spec.nodeName={}` (device plugin, driver, toolkit); `kubectl logs -n {op} -l app=nvidia-device-plugin-daemonset --tail=50`",
                n.name
            ),
        );
    }
}

/// GPU241 on a pool served by DRA: a Ready node whose DRA driver published no devices, so no
/// claim (and no extended-resource request) is ever allocated on it.
fn no_slice(ctx: &Ctx<'_>, n: &NodeRoom<'_>, pool: &str, out: &mut Findings) {
    no_gpus(
        n,
        pool,
        out,
        Evidence {
            source: format!("ResourceSlices with spec.nodeName={}", n.name),
            text: "no ResourceSlice with devices".into(),
            time: None,
        },
        format!(
            "the node is Ready but the DRA driver's kubelet plugin has published no ResourceSlice for it, so the scheduler allocates none of its GPUs (pool `{pool}` is served by DRA and expects {} per node)",
            ctx.bp.spec.node_pools[n.pool.unwrap_or_default()].gpu.count
        ),
        format!(
            "`kubectl get resourceslices --field-selector spec.nodeName={}`; `kubectl get pods -A -o wide --field-selector spec.nodeName={} | grep -i dra` (the driver's kubelet plugin) and its logs; on the node: `nvidia-smi`",
            n.name, n.name
        ),
    );
}

/// GPU241, once per pool: a Ready node of `pool` with no GPU the scheduler can use, with what
/// shows it (`evidence`), why it matters and what to run.
fn no_gpus(
    n: &NodeRoom<'_>,
    pool: &str,
    out: &mut Findings,
    evidence: Evidence,
    why: String,
    fix: String,
) {
    out.add(
        format!("{pool}|nogpu"),
        finding(
            "GPU241",
            Layer::NodeHardware,
            Severity::Error,
            format!("nodes of pool {pool} advertise no GPUs"),
            vec![format!("node/{}", n.name), format!("pool/{pool}")],
            vec![evidence],
            why,
            fix,
        ),
    );
}
