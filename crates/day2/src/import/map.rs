//! The mapping itself: live objects to blueprint fields, section by section.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::emit::Y;
use super::network::{self, NetworkImport};
use super::pools::{self, Group, NodeView};
use super::releases::{Chart, Chosen};
use super::{Draft, ImportContext, ImportOptions, labels};
use gpuctl_model::names::{
    DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL, OPERAND_DEPLOY_LABEL_PREFIX,
    TENANT_LABEL, VOLCANO_QUEUE_ANNOTATION,
};
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::render::{
    DCGM_METRICS_CONFIGMAP, DEVICE_PLUGIN_CONFIGMAP, LOCAL_QUEUE, MIG_PARTED_CONFIGMAP,
};
use gpuctl_plan::live::LiveView;

/// The operator namespace when nothing says otherwise.
const DEFAULT_OPERATOR_NAMESPACE: &str = "gpu-operator";

/// Live objects by kind, in key order (deterministic).
struct Objects<'a> {
    all: Vec<&'a Value>,
}

impl<'a> Objects<'a> {
    fn new(live: &'a LiveView) -> Objects<'a> {
        Objects {
            all: live.objects.values().collect(),
        }
    }

    /// Objects of `kind` in `group`.
    fn of(&self, group: &str, kind: &str) -> Vec<&'a Value> {
        self.all
            .iter()
            .copied()
            .filter(|o| {
                o["kind"] == kind
                    && gpuctl_model::object::group_of(o["apiVersion"].as_str().unwrap_or_default())
                        == group
            })
            .collect()
    }

    fn named(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<&'a Value> {
        self.of(group, kind).into_iter().find(|o| {
            o["metadata"]["name"] == name && o["metadata"]["namespace"].as_str() == namespace
        })
    }
}

fn name(o: &Value) -> String {
    o["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn ns(o: &Value) -> String {
    o["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A map of quantities (`{cpu: "10"}`) as a flow map of strings.
fn quantities(v: &Value) -> Y {
    Y::Map(
        v.as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), Y::s(quantity_text(v)?))))
            .collect(),
    )
}

/// The whole draft blueprint.
pub(super) fn blueprint(
    live: &LiveView,
    ctx: &ImportContext,
    catalog: &Catalog,
    opts: &ImportOptions,
    chosen: &Chosen<'_>,
    draft: &mut Draft,
) -> Y {
    let objects = Objects::new(live);
    let op_ns = operator_namespace(ctx, &objects);
    let release = chosen.gpu_operator;
    let values = release.map_or(Value::Null, |r| r.release.values.clone());

    let nodes: Vec<NodeView> = live.nodes.iter().flatten().map(NodeView::of).collect();
    let (karpenter_pools, static_nodes, karpenter_nodes) =
        split_karpenter_nodes(&objects, &nodes, catalog);
    let groups = pool_groups(&objects, &static_nodes, draft);

    // The cluster driver: the default NVIDIADriver CR, the chart values, or the nodes' driver.
    let drivers = objects.of("nvidia.com", "NVIDIADriver");
    let default_cr = drivers
        .iter()
        .find(|d| name(d) == gpuctl_model::names::DEFAULT_DRIVER_CR)
        .or_else(|| drivers.iter().find(|d| d["spec"]["default"] == true))
        .copied();
    let cluster_policy = objects.of("nvidia.com", "ClusterPolicy").into_iter().next();
    let strategy = upgrade_strategy(&groups, &drivers);
    let counts: BTreeMap<String, u32> = groups
        .iter()
        .filter_map(|g| Some((g.name.clone(), gpu_count(&g.nodes[0])?)))
        .collect();
    let net = network::network(
        &objects.all,
        chosen.network_operator,
        network::rdma_live(&values, default_cr, cluster_policy),
        &groups,
        &counts,
        catalog,
        draft,
    );
    let levels = network::levels(&objects.all, &groups, draft);

    let mut spec: Vec<(String, Y)> = Vec::new();
    spec.push(("kubernetes".into(), kubernetes(ctx, &nodes, draft)));
    spec.push((
        "gpuOperator".into(),
        operator(
            release,
            &values,
            &op_ns,
            default_cr,
            cluster_policy,
            &nodes,
            net.rdma.clone(),
            catalog,
            draft,
        ),
    ));
    let cluster_driver = default_cr
        .and_then(|d| d["spec"]["version"].as_str().map(str::to_string))
        .or_else(|| values["driver"]["version"].as_str().map(str::to_string));
    let mut pool_names: BTreeSet<String> = groups.iter().map(|g| g.name.clone()).collect();
    let (pools, provisioned) = node_pools(
        &groups,
        &objects,
        &values,
        &op_ns,
        cluster_driver.as_deref(),
        &drivers,
        (&net, &levels),
        catalog,
        (&karpenter_pools, &karpenter_nodes),
        draft,
    );
    pool_names.extend(provisioned.names.iter().cloned());
    spec.extend(node_readiness(provisioned.readiness_key, &objects, draft));
    spec.push(("nodePools".into(), pools));
    let pcs = priority_classes(&objects, draft);
    if matches!(&pcs, Y::List(l) if !l.is_empty()) {
        spec.push(("priorityClasses".into(), pcs));
    }
    let (scheduling, queueing) = scheduling(&objects, catalog, &pool_names, chosen, draft);
    spec.push(("scheduling".into(), scheduling));
    let tenants = tenants(&objects, &queueing, net.rdma_resource.as_deref(), draft);
    if matches!(&tenants, Y::List(l) if !l.is_empty()) {
        spec.push(("tenants".into(), tenants));
    }
    if let Some(no) = net.operator {
        spec.push(("networkOperator".into(), no));
    }
    if let Some(m) = monitoring(&objects, &op_ns, draft) {
        spec.push(("monitoring".into(), m));
    }
    spec.push((
        "upgrades".into(),
        Y::Map(vec![(
            "strategy".into(),
            Y::s(match strategy {
                gpuctl_model::blueprint::UpgradeStrategy::BlueGreen => "blue-green",
                gpuctl_model::blueprint::UpgradeStrategy::Rolling => "rolling",
            }),
        )]),
    ));
    draft.comment(
        "spec.upgrades.strategy",
        "from the names of the pools' NVIDIADriver CRs (`pool-<pool>` is rolling); blue-green when no pool has its own",
    );
    Y::Map(vec![
        ("apiVersion".into(), Y::s("gpuctl.dev/v1alpha1")),
        ("kind".into(), Y::s("ClusterBlueprint")),
        (
            "metadata".into(),
            Y::Map(vec![(
                "name".into(),
                Y::s(blueprint_name(&objects, opts, draft)),
            )]),
        ),
        ("spec".into(), Y::Map(spec)),
    ])
}

/// The Karpenter NodePools, the nodes none of them made, and how many each NodePool has (their
/// nodes belong to the pools imported from them, super::karpenter).
fn split_karpenter_nodes<'a>(
    objects: &Objects<'a>,
    nodes: &[NodeView],
    catalog: &Catalog,
) -> (Vec<&'a Value>, Vec<NodeView>, BTreeMap<String, usize>) {
    let karpenter_pools = objects.of("karpenter.sh", "NodePool");
    let mut karpenter_nodes: BTreeMap<String, usize> = BTreeMap::new();
    let static_nodes: Vec<NodeView> = nodes
        .iter()
        .filter(|n| {
            match super::karpenter::node_pool_of(&n.labels, catalog)
                .filter(|np| karpenter_pools.iter().any(|o| name(o) == *np))
            {
                Some(np) => {
                    *karpenter_nodes.entry(np.to_string()).or_default() += 1;
                    false
                }
                None => true,
            }
        })
        .cloned()
        .collect();
    (karpenter_pools, static_nodes, karpenter_nodes)
}

/// `spec.nodeReadiness` from the Karpenter NodePools' startup taint.
fn node_readiness(
    key: Option<String>,
    objects: &Objects<'_>,
    draft: &mut Draft,
) -> Option<(String, Y)> {
    let key = key?;
    let mut r = vec![("taintKey".to_string(), Y::s(key))];
    if objects
        .of("readiness.node.x-k8s.io", "NodeReadinessRule")
        .is_empty()
    {
        r.push(("signal".into(), Y::s("external")));
        draft.comment(
            "spec.nodeReadiness.signal",
            "no NodeReadinessRule found: something else removes the startup taint",
        );
    }
    draft.comment(
        "spec.nodeReadiness",
        "the startup taint of the Karpenter NodePools",
    );
    Some(("nodeReadiness".into(), Y::Map(r)))
}

/// The GPU Operator's namespace: its Helm release's, else the one holding the ConfigMaps gpuctl
/// renders for it, else the default.
fn operator_namespace(ctx: &ImportContext, objects: &Objects<'_>) -> String {
    ctx.operator_namespace
        .clone()
        .or_else(|| {
            objects
                .of("", "ConfigMap")
                .iter()
                .find(|c| {
                    [
                        MIG_PARTED_CONFIGMAP,
                        DEVICE_PLUGIN_CONFIGMAP,
                        DCGM_METRICS_CONFIGMAP,
                    ]
                    .contains(&name(c).as_str())
                })
                .map(|c| ns(c))
        })
        .unwrap_or_else(|| DEFAULT_OPERATOR_NAMESPACE.to_string())
}

/// The node pools: groups of alike nodes (by the Kueue ResourceFlavors where they pick them), in
/// the order gpuctl's NVIDIADriver CRs list them, the rest by name.
fn pool_groups(objects: &Objects<'_>, nodes: &[NodeView], draft: &mut Draft) -> Vec<Group> {
    let flavors: Vec<(String, BTreeMap<String, String>)> = objects
        .of("kueue.x-k8s.io", "ResourceFlavor")
        .iter()
        .map(|f| {
            (
                name(f),
                f["spec"]["nodeLabels"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                            .collect()
                    })
                    .unwrap_or_default(),
            )
        })
        .collect();
    let mut groups = pools::groups(nodes, &flavors, draft);
    // Pools in the order gpuctl's NVIDIADriver CRs list them (the blueprint's order, which render
    // follows in lists built from several pools), the rest by name.
    let listed = listed_pools(objects);
    groups.sort_by_key(|g| {
        (
            listed
                .iter()
                .position(|p| *p == g.name)
                .unwrap_or(usize::MAX),
            g.name.clone(),
        )
    });
    groups
}

/// The pools in the order gpuctl's NVIDIADriver CRs list them (the blueprint's order).
fn listed_pools(objects: &Objects<'_>) -> Vec<String> {
    let mut crs = objects.of("nvidia.com", "NVIDIADriver");
    crs.sort_by_key(|d| (name(d) != gpuctl_model::names::DEFAULT_DRIVER_CR, name(d)));
    crs.iter()
        .filter_map(|d| d["metadata"]["annotations"]["gpuctl.dev/pools"].as_str())
        .flat_map(|a| a.split(','))
        .map(str::to_string)
        .collect()
}

/// The blueprint's name: as asked, else the one gpuctl's alerts or ApplySet parent record, else
/// `imported`.
fn blueprint_name(objects: &Objects<'_>, opts: &ImportOptions, draft: &mut Draft) -> String {
    if let Some(n) = &opts.name {
        return n.clone();
    }
    let from_rules = objects
        .of("monitoring.coreos.com", "PrometheusRule")
        .iter()
        .filter(|r| name(r) == "gpuctl-gpu-alerts")
        .flat_map(|r| r["spec"]["groups"].as_array().into_iter().flatten())
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .find_map(|r| r["labels"]["blueprint"].as_str().map(str::to_string));
    let from_parent = || {
        objects
            .of("", "ConfigMap")
            .iter()
            .find_map(|c| name(c).strip_prefix("gpuctl-applyset-").map(str::to_string))
    };
    match from_rules.or_else(from_parent) {
        Some(n) => {
            draft.comment(
                "metadata.name",
                "the name gpuctl's own objects in the cluster already carry",
            );
            n
        }
        None => {
            draft.comment(
                "metadata.name",
                "names the blueprint's ApplySet; choose it with `gpuctl import --name`",
            );
            "imported".to_string()
        }
    }
}

fn upgrade_strategy(
    groups: &[Group],
    drivers: &[&Value],
) -> gpuctl_model::blueprint::UpgradeStrategy {
    let names: BTreeSet<String> = drivers.iter().map(|d| name(d)).collect();
    let rolling = groups
        .iter()
        .any(|g| names.contains(&format!("pool-{}", g.name)));
    if rolling {
        gpuctl_model::blueprint::UpgradeStrategy::Rolling
    } else {
        gpuctl_model::blueprint::UpgradeStrategy::BlueGreen
    }
}

fn kubernetes(ctx: &ImportContext, nodes: &[NodeView], draft: &mut Draft) -> Y {
    let from_nodes = nodes
        .iter()
        .filter_map(|n| n.info["kubeletVersion"].as_str())
        .min()
        .map(str::to_string);
    let version = ctx.kubernetes_version.clone().or(from_nodes);
    let version = match version {
        Some(v) => {
            let v = v.trim_start_matches('v');
            // `1.34.2-eks-abc`, `1.35.0+k3s1`: the release only.
            v.split(['-', '+']).next().unwrap_or(v).to_string()
        }
        None => {
            draft.warn(
                "spec.kubernetes.version",
                "the API server's version was not read; set the control-plane version you run",
            );
            "1.34.0".to_string()
        }
    };
    Y::Map(vec![("version".into(), Y::s(version))])
}

#[allow(clippy::too_many_arguments)]
fn operator(
    release: Option<&gpuctl_plan::live::release::NamedRelease>,
    values: &Value,
    op_ns: &str,
    default_cr: Option<&Value>,
    cluster_policy: Option<&Value>,
    nodes: &[NodeView],
    rdma: Option<Y>,
    catalog: &Catalog,
    draft: &mut Draft,
) -> Y {
    let p = "spec.gpuOperator";
    let mut m: Vec<(String, Y)> = Vec::new();
    release_and_install(release, op_ns, cluster_policy, catalog, &mut m, draft);
    // Where the cluster records no driver version: the chart default of the imported release
    // (profiles/gpu-operator.yaml), else of the newest release gpuctl knows; with a warning.
    let chart_default = m
        .iter()
        .find_map(|(k, v)| match (k.as_str(), v) {
            ("version", Y::Scalar(Value::String(s))) => {
                s.parse::<gpuctl_model::version::OperatorVersion>().ok()
            }
            _ => None,
        })
        .and_then(|v| catalog.operator_release(&v))
        .or_else(|| catalog.operator_releases().last())
        .map(|r| r.default_driver.to_string())
        .unwrap_or_default();
    let driver = driver(
        values,
        default_cr,
        cluster_policy,
        nodes,
        &chart_default,
        draft,
    );
    m.push(("driver".into(), driver));
    if let Some(r) = rdma {
        m.push(("rdma".into(), r));
        draft.comment(
            &format!("{p}.rdma"),
            "GPUDirect RDMA as the operator was told it (`driver.rdma`; `enabled: false` is DMA-BUF)",
        );
    }

    if let Some(d) = dcgm_exporter(values) {
        m.push(("dcgmExporter".into(), d));
    }

    // An image mirror: every image repository of the chart moved under one registry.
    if let Some(images) = images(values, &m, catalog) {
        m.push(("images".into(), images));
        draft.comment(
            &format!("{p}.images"),
            "every image repository of the release points at this registry",
        );
    }
    Y::Map(m)
}

/// `version`, `namespace` and `install`: the operator's Helm release, if gpuctl can manage it.
fn release_and_install(
    release: Option<&gpuctl_plan::live::release::NamedRelease>,
    op_ns: &str,
    cluster_policy: Option<&Value>,
    catalog: &Catalog,
    m: &mut Vec<(String, Y)>,
    draft: &mut Draft,
) {
    let p = "spec.gpuOperator";
    let version = match release {
        Some(r) => super::releases::blueprint_version(&r.release.chart_version),
        None => {
            // The newest release whose chart gpuctl can render values for. The embedded key
            // trees are never empty (profiles::chart's tests load them); were they, the empty
            // version written here would fail validation rather than name an invented release.
            let newest = catalog
                .chart_versions()
                .last()
                .copied()
                .unwrap_or_default()
                .to_string();
            draft.warn(
                &format!("{p}.version"),
                format!(
                    "no Helm release of the GPU Operator was found{}; {newest} is a guess: set the release you run",
                    if cluster_policy.is_some() { " (a ClusterPolicy exists: the operator was installed another way)" } else { "" }
                ),
            );
            newest
        }
    };
    m.push(("version".into(), Y::s(version)));
    m.push(("namespace".into(), Y::s(op_ns)));
    let managed = release.filter(|r| r.name == Chart::GpuOperator.release_name());
    let install = if managed.is_some() { "helm" } else { "none" };
    m.push(("install".into(), Y::s(install)));
    match (release, managed) {
        (None, _) => draft.comment(
            &format!("{p}.install"),
            "`none`: gpuctl leaves the operator's installation alone (switch to `helm` to let apply manage the release)",
        ),
        (Some(r), None) => draft.warn(
            &format!("{p}.install"),
            format!(
                "the GPU Operator was installed by Helm as release `{}/{}` (chart {} {}); gpuctl's helm mode manages a release named `{}`, so gpuctl leaves this one alone (`install: none`): with `helm` the first apply would install a second operator",
                r.namespace,
                r.name,
                r.release.chart,
                r.release.chart_version,
                Chart::GpuOperator.release_name()
            ),
        ),
        (Some(r), Some(_)) if r.release.status != "deployed" => draft.warn(
            &format!("{p}.install"),
            format!(
                "the Helm release is `{}`, not `deployed`: the first apply upgrades it",
                r.release.status
            ),
        ),
        _ => {}
    }
}

/// `driver`: its version from the Helm values, the default NVIDIADriver CR, the ClusterPolicy or
/// the nodes' label (in that order), its kernel modules and upgrade policy.
fn driver(
    values: &Value,
    default_cr: Option<&Value>,
    cluster_policy: Option<&Value>,
    nodes: &[NodeView],
    chart_default: &str,
    draft: &mut Draft,
) -> Y {
    let p = "spec.gpuOperator";
    let dv = &values["driver"];
    let cr = default_cr.map(|d| &d["spec"]);
    let version = dv["version"]
        .as_str()
        .map(str::to_string)
        .or_else(|| cr.and_then(|c| c["version"].as_str().map(str::to_string)))
        .or_else(|| {
            cluster_policy.and_then(|c| c["spec"]["driver"]["version"].as_str().map(str::to_string))
        })
        .or_else(|| {
            nodes.iter().find_map(|n| {
                n.labels
                    .get(gpuctl_model::names::DRIVER_VERSION_LABEL)
                    .cloned()
            })
        });
    let mut driver: Vec<(String, Y)> = Vec::new();
    match version {
        Some(v) => driver.push(("version".into(), Y::s(v))),
        None => {
            draft.warn(
                &format!("{p}.driver.version"),
                "no driver version was found (no Helm value, NVIDIADriver CR, ClusterPolicy or node label); set the driver you run",
            );
            driver.push(("version".into(), Y::s(chart_default)));
        }
    }
    if let Some(k) = dv["kernelModuleType"]
        .as_str()
        .or_else(|| cr.and_then(|c| c["kernelModuleType"].as_str()))
    {
        driver.push(("kernelModuleType".into(), Y::s(k)));
    }
    if let Some(b) = dv["usePrecompiled"]
        .as_bool()
        .or_else(|| cr.and_then(|c| c["usePrecompiled"].as_bool()))
        && b
    {
        driver.push(("usePrecompiled".into(), Y::Scalar(json!(true))));
    }
    let policy = if dv["upgradePolicy"].is_object() {
        Some(&dv["upgradePolicy"])
    } else {
        cr.map(|c| &c["upgradePolicy"]).filter(|v| v.is_object())
    };
    if let Some(u) = policy.and_then(upgrade_policy) {
        driver.push(("upgradePolicy".into(), u));
    }
    Y::Map(driver)
}

/// `driver.upgradePolicy` from the operator's (chart or CR) upgrade policy `up`.
fn upgrade_policy(up: &Value) -> Option<Y> {
    let mut u: Vec<(String, Y)> = Vec::new();
    if let Some(n) = up["maxParallelUpgrades"].as_u64() {
        u.push(("maxParallelUpgrades".into(), Y::Scalar(json!(n))));
    }
    match &up["maxUnavailable"] {
        Value::String(s) => u.push(("maxUnavailable".into(), Y::s(s.clone()))),
        Value::Number(n) => u.push(("maxUnavailable".into(), Y::Scalar(Value::Number(n.clone())))),
        _ => {}
    }
    if up["drain"].is_object() {
        let mut d = vec![(
            "enable".to_string(),
            Y::Scalar(json!(up["drain"]["enable"].as_bool().unwrap_or(false))),
        )];
        if let Some(t) = up["drain"]["timeoutSeconds"].as_u64() {
            d.push(("timeoutSeconds".into(), Y::Scalar(json!(t))));
        }
        u.push(("drain".into(), Y::Map(d)));
    }
    if up["waitForCompletion"].is_object() {
        let w = &up["waitForCompletion"];
        u.push((
            "waitForCompletion".into(),
            Y::Map(vec![
                (
                    "podSelector".into(),
                    Y::s(w["podSelector"].as_str().unwrap_or_default()),
                ),
                (
                    "timeoutSeconds".into(),
                    Y::Scalar(json!(w["timeoutSeconds"].as_u64().unwrap_or(0))),
                ),
            ]),
        ));
    }
    (!u.is_empty()).then_some(Y::Map(u))
}

/// `dcgmExporter`: whether it is off and its collection interval.
fn dcgm_exporter(values: &Value) -> Option<Y> {
    let dcgm = &values["dcgmExporter"];
    let mut d: Vec<(String, Y)> = Vec::new();
    if dcgm["enabled"] == false {
        d.push(("enabled".into(), Y::Scalar(json!(false))));
    }
    let interval_ms = dcgm["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "DCGM_EXPORTER_INTERVAL")
        .and_then(|e| quantity_text(&e["value"]))
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(ms) = interval_ms {
        d.push((
            "interval".into(),
            Y::s(if ms % 1000 == 0 {
                format!("{}s", ms / 1000)
            } else {
                format!("{ms}ms")
            }),
        ));
    }
    (!d.is_empty()).then_some(Y::Map(d))
}

fn images(values: &Value, op: &[(String, Y)], catalog: &Catalog) -> Option<Y> {
    let version = op.iter().find_map(|(k, v)| match (k.as_str(), v) {
        ("version", Y::Scalar(Value::String(s))) => Some(s.clone()),
        _ => None,
    })?;
    let chart = catalog.chart_release(&version)?;
    let mut registry: Option<String> = None;
    let mut seen = 0;
    for (path, default) in chart.image_repositories() {
        let pointer = format!("/{}", path.replace('.', "/"));
        let Some(live) = values.pointer(&pointer).and_then(Value::as_str) else {
            continue;
        };
        let rest = match default.split_once('/') {
            Some((host, rest))
                if host.contains('.') || host.contains(':') || host == "localhost" =>
            {
                rest
            }
            _ => default,
        };
        let r = live.strip_suffix(&format!("/{rest}"))?;
        match &registry {
            None => registry = Some(r.to_string()),
            Some(x) if x == r => {}
            Some(_) => return None,
        }
        seen += 1;
    }
    let registry = registry.filter(|_| seen > 1)?;
    let mut m = vec![("registry".to_string(), Y::s(registry))];
    let secrets: Vec<Y> = values["driver"]["imagePullSecrets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(Y::s))
        .collect();
    if !secrets.is_empty() {
        m.push(("pullSecrets".into(), Y::List(secrets)));
    }
    Some(Y::Map(m))
}

/// The data of ConfigMap `name` in `namespace`, each key parsed as YAML.
fn config_data(objects: &Objects<'_>, namespace: &str, name: &str) -> BTreeMap<String, Value> {
    objects
        .named("", "ConfigMap", Some(namespace), name)
        .and_then(|c| c["data"].as_object())
        .map(|d| {
            d.iter()
                .filter_map(|(k, v)| {
                    Some((
                        k.clone(),
                        serde_saphyr::from_str::<Value>(v.as_str()?).ok()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What every pool of `node_pools` is read against: the chart values, the NVIDIADrivers, the
/// MIG and device-plugin configurations, the network and topology found.
struct PoolSources<'a> {
    values: &'a Value,
    cluster_driver: Option<&'a str>,
    drivers: &'a [&'a Value],
    net: &'a NetworkImport,
    levels: &'a BTreeMap<String, Vec<String>>,
    catalog: &'a Catalog,
    mig_configs: Value,
    dp_configs: BTreeMap<String, Value>,
    mig_strategy: Option<String>,
}

#[allow(clippy::too_many_arguments)]
fn node_pools(
    groups: &[Group],
    objects: &Objects<'_>,
    values: &Value,
    op_ns: &str,
    cluster_driver: Option<&str>,
    drivers: &[&Value],
    (net, levels): (&NetworkImport, &BTreeMap<String, Vec<String>>),
    catalog: &Catalog,
    (karpenter_pools, karpenter_nodes): (&[&Value], &BTreeMap<String, usize>),
    draft: &mut Draft,
) -> (Y, super::karpenter::Imported) {
    let provisioned = !karpenter_pools.is_empty();
    let mig_cm = values["migManager"]["config"]["name"]
        .as_str()
        .unwrap_or(MIG_PARTED_CONFIGMAP);
    let dp_cm = values["devicePlugin"]["config"]["name"]
        .as_str()
        .unwrap_or(DEVICE_PLUGIN_CONFIGMAP);
    let mig_configs = config_data(objects, op_ns, mig_cm)
        .into_values()
        .next()
        .unwrap_or(Value::Null);
    let dp_configs = config_data(objects, op_ns, dp_cm);
    let mig_strategy = values["mig"]["strategy"].as_str().map(str::to_string);
    if groups.is_empty() && !provisioned {
        draft.warn(
            "spec.nodePools",
            "no node carries `nvidia.com/gpu.product` (GPU Feature Discovery's label): no pool was imported",
        );
    }
    let sources = PoolSources {
        values,
        cluster_driver,
        drivers,
        net,
        levels,
        catalog,
        mig_configs,
        dp_configs,
        mig_strategy,
    };
    // Static pools and Karpenter pools together, in the order gpuctl's NVIDIADriver CRs list
    // them (the blueprint's), the rest after them (static first, as found).
    let listed = listed_pools(objects);
    let mut names: Vec<String> = groups.iter().map(|g| g.name.clone()).collect();
    let mut np_names: Vec<String> = karpenter_pools.iter().map(|o| name(o)).collect();
    np_names.sort();
    names.extend(np_names);
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by_key(|&i| {
        (
            listed
                .iter()
                .position(|p| *p == names[i])
                .unwrap_or(usize::MAX),
            i,
        )
    });
    let index: BTreeMap<String, usize> = order
        .iter()
        .enumerate()
        .map(|(at, &i)| (names[i].clone(), at))
        .collect();
    let mut slots: Vec<Option<Y>> = vec![None; names.len()];
    for g in groups {
        let at = index[&g.name];
        slots[at] = Some(sources.pool(at, g, draft));
    }
    // Karpenter pools: their partitioning from the labels render puts on the NodePool's
    // template (MIG and device-plugin config), read against the same ConfigMaps.
    let k = super::karpenter::pools(
        karpenter_pools,
        &objects.of("karpenter.sh", "NodeOverlay"),
        karpenter_nodes,
        catalog,
        &|n: &str| index.get(n).copied().unwrap_or(usize::MAX),
        &mut |labels: &Value, p: &str, draft: &mut Draft| {
            sources.partitioning(
                &NodeView::of(&json!({"metadata": {"labels": labels}})),
                p,
                draft,
            )
        },
        draft,
    );
    for (n, y) in k.names.iter().zip(&k.pools) {
        if let Some(&at) = index.get(n) {
            slots[at] = Some(y.clone());
        }
    }
    (Y::List(slots.into_iter().flatten().collect()), k)
}

impl PoolSources<'_> {
    /// `spec.nodePools[i]`, the pool of the nodes in `g`.
    fn pool(&self, i: usize, g: &Group, draft: &mut Draft) -> Y {
        let p = format!("spec.nodePools[{i}]");
        let first = &g.nodes[0];
        let mut m: Vec<(String, Y)> = vec![("name".into(), Y::s(g.name.clone()))];
        m.push(("selector".into(), Y::from_json(&json!(g.selector))));
        if g.from_flavor {
            draft.comment(
                &format!("{p}.selector"),
                format!("the node labels of ResourceFlavor `{}`", g.name),
            );
        } else {
            draft.comment(
                &format!("{p}.selector"),
                "the smallest set of the nodes' shared labels that picks exactly them",
            );
        }
        if !g.overlaps.is_empty() {
            draft.warn(
                &format!("{p}.selector"),
                format!("no shared label set picks exactly this pool's nodes; this selector also picks {}", g.overlaps.join(", ")),
            );
        }
        m.push(("nodes".into(), Y::Scalar(json!(g.nodes.len()))));
        m.push(("gpu".into(), self.gpu(g, &p, draft)));
        if let Some(os) = os(&g.nodes) {
            m.push(("os".into(), os));
        }
        if let Some(topology) = self.topology(g, &p, draft) {
            m.push(("topology".into(), topology));
        }
        if let Some(driver) = self.driver(first, &p, draft) {
            m.push(("driver".into(), driver));
        }
        if let Some(part) = self.partitioning(first, &p, draft) {
            m.push(("partitioning".into(), part));
        }
        if let Some(operands) = operands(first) {
            m.push(("operands".into(), operands));
        }
        if !first.taints.is_empty() {
            m.push((
                "taints".into(),
                Y::List(
                    first
                        .taints
                        .iter()
                        .map(|(k, v, e)| {
                            let mut t = vec![("key".to_string(), Y::s(k.clone()))];
                            if let Some(v) = v {
                                t.push(("value".into(), Y::s(v.clone())));
                            }
                            t.push(("effect".into(), Y::s(e.clone())));
                            Y::Map(t)
                        })
                        .collect(),
                ),
            ));
        }
        draft.comment(
            &p,
            format!(
                "{} node(s): {}",
                g.nodes.len(),
                if g.nodes.len() <= 6 {
                    g.nodes
                        .iter()
                        .map(|n| n.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                } else {
                    format!(
                        "{}, ... {}",
                        g.nodes[0].name,
                        g.nodes[g.nodes.len() - 1].name
                    )
                }
            ),
        );
        draft.comment(&p, "role is not recorded in the cluster: check it");
        Y::Map(m)
    }

    /// `gpu`: the catalog model of the nodes' product and the GPUs per node.
    fn gpu(&self, g: &Group, p: &str, draft: &mut Draft) -> Y {
        let catalog = self.catalog;
        let first = &g.nodes[0];
        let product = first.product().unwrap_or_default();
        let model = match catalog.gpu_by_product(product) {
            Some(gpu) => gpu.key.clone(),
            None => {
                draft.warn(
                    &format!("{p}.gpu.model"),
                    format!("GPU product `{product}` is not in gpuctl's catalog (`gpuctl profiles`); name the catalog model"),
                );
                product.to_string()
            }
        };
        let count = gpu_count(first).unwrap_or_else(|| {
            draft.warn(
                &format!("{p}.gpu.count"),
                "no `nvidia.com/gpu.count` label: the GPU count per node is a guess",
            );
            1
        });
        Y::from_json(&json!({"model": model, "count": count}))
    }

    /// `topology`: the network and the Kueue topology levels found for the pool.
    fn topology(&self, g: &Group, p: &str, draft: &mut Draft) -> Option<Y> {
        let mut topology: Vec<(String, Y)> = Vec::new();
        if let Some(n) = self.net.pools.get(&g.name) {
            topology.push(("network".into(), n.clone()));
        }
        if let Some(l) = self.levels.get(&g.name) {
            topology.push((
                "levels".into(),
                Y::List(l.iter().map(|x| Y::s(x.clone())).collect()),
            ));
            draft.comment(
                &format!("{p}.topology.levels"),
                format!(
                    "the levels of the Kueue Topology ResourceFlavor `{}` names",
                    g.name
                ),
            );
        }
        draft.comment(
            &if topology.is_empty() {
                p.to_string()
            } else {
                format!("{p}.topology")
            },
            "topology: `interconnect` and `numaNodes` are not recorded in the cluster; the kubelet's NUMA policy (`kubelet`) cannot be read through the API server (it lives in each node's kubelet configuration: `kubectl get --raw /api/v1/nodes/NODE/proxy/configz`): add them",
        );
        (!topology.is_empty()).then_some(Y::Map(topology))
    }

    /// `driver`: the pool's own NVIDIADriver CR, which the nodes name.
    fn driver(&self, first: &NodeView, p: &str, draft: &mut Draft) -> Option<Y> {
        let cr_name = first.labels.get(DRIVER_LABEL)?;
        if cr_name == gpuctl_model::names::DEFAULT_DRIVER_CR {
            return None;
        }
        match self.drivers.iter().find(|d| name(d) == *cr_name) {
            Some(cr) => {
                let v = cr["spec"]["version"].as_str().unwrap_or_default();
                let mut d = vec![("version".to_string(), Y::s(v))];
                if let Some(k) = cr["spec"]["kernelModuleType"].as_str()
                    && Some(k) != self.values["driver"]["kernelModuleType"].as_str()
                {
                    d.push(("kernelModuleType".into(), Y::s(k)));
                }
                if Some(v) == self.cluster_driver {
                    draft.comment(
                        &format!("{p}.driver"),
                        "the pool has its own NVIDIADriver CR",
                    );
                }
                Some(Y::Map(d))
            }
            None => {
                draft.warn(
                    &format!("{p}.driver"),
                    format!("the nodes name NVIDIADriver `{cr_name}` (label {DRIVER_LABEL}), which does not exist"),
                );
                None
            }
        }
    }

    /// `partitioning`: the MIG configuration the nodes' label names, else their device-plugin
    /// configuration (time-slicing, MPS).
    fn partitioning(&self, first: &NodeView, p: &str, draft: &mut Draft) -> Option<Y> {
        let l = |k: &str| first.labels.get(k).cloned();
        let mig_label = l(MIG_CONFIG_LABEL);
        let dp_label = l(DEVICE_PLUGIN_CONFIG_LABEL);
        let mut part: Option<Y> = None;
        if let Some(cfg) = mig_label.as_deref().filter(|c| *c != "all-disabled") {
            // The chart's `mig.strategy`, else what GPU Feature Discovery reports on the node.
            let strategy = self
                .mig_strategy
                .clone()
                .or_else(|| l("nvidia.com/mig.strategy"));
            part = mig(
                &self.mig_configs["mig-configs"][cfg],
                cfg,
                strategy.as_deref(),
                p,
                draft,
            );
        }
        if part.is_none()
            && let Some(key) = &dp_label
        {
            part = sharing(self.dp_configs.get(key), key, p, draft);
        }
        part
    }
}

/// `operands`: the operands the nodes' deploy labels switch off.
fn operands(first: &NodeView) -> Option<Y> {
    let l = |k: &str| first.labels.get(k).cloned();
    let mut operands: Vec<(String, Y)> = Vec::new();
    for (label, field) in [
        ("driver", "driver"),
        ("container-toolkit", "containerToolkit"),
        ("device-plugin", "devicePlugin"),
        ("gpu-feature-discovery", "gpuFeatureDiscovery"),
        ("dcgm", "dcgm"),
        ("dcgm-exporter", "dcgmExporter"),
        ("mig-manager", "migManager"),
        ("node-status-exporter", "nodeStatusExporter"),
        ("operator-validator", "operatorValidator"),
    ] {
        if let Some(v) = l(&format!("{OPERAND_DEPLOY_LABEL_PREFIX}{label}"))
            && v == "false"
        {
            operands.push((field.into(), Y::Scalar(json!(false))));
        }
    }
    (!operands.is_empty()).then_some(Y::Map(operands))
}

/// GPUs per node: GPU Feature Discovery's count label, else the node's capacity.
fn gpu_count(n: &NodeView) -> Option<u32> {
    n.labels
        .get("nvidia.com/gpu.count")
        .and_then(|c| c.parse::<u32>().ok())
        .or_else(|| quantity_text(&n.capacity["nvidia.com/gpu"]).and_then(|c| c.parse().ok()))
}

fn os(nodes: &[NodeView]) -> Option<Y> {
    let read = |n: &NodeView| -> Option<(String, String, Option<String>)> {
        let id = n
            .labels
            .get("feature.node.kubernetes.io/system-os_release.ID")?
            .clone();
        let version = n
            .labels
            .get("feature.node.kubernetes.io/system-os_release.VERSION_ID")?
            .clone();
        let kernel = n
            .labels
            .get("feature.node.kubernetes.io/kernel-version.full")
            .cloned()
            .or_else(|| n.info["kernelVersion"].as_str().map(str::to_string));
        Some((id, version, kernel))
    };
    let first = read(&nodes[0])?;
    if nodes.iter().any(|n| read(n).as_ref() != Some(&first)) {
        return None;
    }
    let mut m = vec![
        ("id".to_string(), Y::s(first.0)),
        ("version".to_string(), Y::s(first.1)),
    ];
    if let Some(k) = first.2 {
        m.push(("kernel".into(), Y::s(k)));
    }
    Some(Y::Map(m))
}

/// `partitioning` of a MIG pool from its mig-parted config entries.
fn mig(
    entries: &Value,
    cfg: &str,
    strategy: Option<&str>,
    p: &str,
    draft: &mut Draft,
) -> Option<Y> {
    let Some(list) = entries.as_array().filter(|l| !l.is_empty()) else {
        draft.warn(
            &format!("{p}.partitioning"),
            format!("the nodes ask for MIG config `{cfg}`, which the MIG Manager's ConfigMap does not define (a config built into the operator?); the layout is not imported"),
        );
        return None;
    };
    let layout = |e: &Value| -> Option<BTreeMap<String, u32>> {
        e["mig-devices"].as_object().map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), u32::try_from(v.as_u64()?).ok()?)))
                .collect()
        })
    };
    let mut mig: Vec<(String, Y)> = Vec::new();
    match strategy {
        Some(s) => mig.push(("strategy".into(), Y::s(s))),
        None => {
            draft.comment(
                &format!("{p}.partitioning.mig.strategy"),
                "neither the operator's values nor the nodes say which MIG strategy the device plugin uses; `mixed` serves any layout",
            );
            mig.push(("strategy".into(), Y::s("mixed")));
        }
    }
    if list.len() == 1 && list[0]["devices"] == "all" && list[0]["mig-enabled"] == true {
        mig.push(("layout".into(), Y::from_json(&json!(layout(&list[0])?))));
    } else {
        let mut devices = Vec::new();
        for e in list {
            let gpus: Vec<u64> = match &e["devices"] {
                Value::Array(a) => a.iter().filter_map(Value::as_u64).collect(),
                _ => vec![],
            };
            if e["mig-enabled"] != true || gpus.is_empty() {
                draft.warn(
                    &format!("{p}.partitioning"),
                    format!("MIG config `{cfg}` has per-GPU entries gpuctl cannot map (MIG off on some GPUs, or `devices: all` beside others); the layout is not imported"),
                );
                return None;
            }
            devices.push(Y::Map(vec![
                ("gpus".into(), Y::from_json(&json!(gpus))),
                ("layout".into(), Y::from_json(&json!(layout(e)?))),
            ]));
        }
        mig.push(("devices".into(), Y::List(devices)));
    }
    Some(Y::Map(vec![
        ("mode".into(), Y::s("mig")),
        ("mig".into(), Y::Map(mig)),
    ]))
}

/// `partitioning` of a pool that shares GPUs, from its device-plugin config.
fn sharing(cfg: Option<&Value>, key: &str, p: &str, draft: &mut Draft) -> Option<Y> {
    let Some(cfg) = cfg else {
        if key != gpuctl_pipeline::render::DEVICE_PLUGIN_DEFAULT {
            draft.warn(
                &format!("{p}.partitioning"),
                format!("the nodes name device-plugin config `{key}`, which the device-plugin ConfigMap does not hold"),
            );
        }
        return None;
    };
    for (mode, field) in [("timeSlicing", "timeSlicing"), ("mps", "mps")] {
        let s = &cfg["sharing"][mode];
        if !s.is_object() {
            continue;
        }
        let resources = s["resources"].as_array().cloned().unwrap_or_default();
        if resources.len() != 1 || resources[0]["name"] != "nvidia.com/gpu" {
            draft.warn(
                &format!("{p}.partitioning"),
                format!("device-plugin config `{key}` shares other resources than `nvidia.com/gpu` alone; gpuctl cannot express it"),
            );
            return None;
        }
        let mut m = vec![(
            "replicas".to_string(),
            Y::Scalar(json!(resources[0]["replicas"].as_u64().unwrap_or(2))),
        )];
        if s["renameByDefault"] == true {
            m.push(("renameByDefault".into(), Y::Scalar(json!(true))));
        }
        if mode == "timeSlicing" && s["failRequestsGreaterThanOne"] == true {
            m.push(("failRequestsGreaterThanOne".into(), Y::Scalar(json!(true))));
        }
        return Some(Y::Map(vec![
            (
                "mode".into(),
                Y::s(if mode == "mps" { "mps" } else { "time-slicing" }),
            ),
            (field.into(), Y::Map(m)),
        ]));
    }
    None
}

fn priority_classes(objects: &Objects<'_>, draft: &mut Draft) -> Y {
    let mut out = Vec::new();
    for pc in objects.of("scheduling.k8s.io", "PriorityClass") {
        let n = name(pc);
        if n.starts_with("system-") {
            continue;
        }
        let mut m = vec![
            ("name".to_string(), Y::s(n.clone())),
            ("value".to_string(), Y::Scalar(pc["value"].clone())),
        ];
        m.push((
            "preemptionPolicy".into(),
            Y::s(
                pc["preemptionPolicy"]
                    .as_str()
                    .unwrap_or("PreemptLowerPriority"),
            ),
        ));
        if pc["globalDefault"] == true {
            m.push(("globalDefault".into(), Y::Scalar(json!(true))));
        }
        if let Some(d) = pc["description"].as_str().filter(|d| !d.is_empty()) {
            m.push(("description".into(), Y::s(d)));
        }
        out.push(Y::Map(m));
    }
    if !out.is_empty() {
        draft.comment(
            "spec.priorityClasses",
            "every PriorityClass but the `system-` ones",
        );
    }
    Y::List(out)
}

/// Which queueing system the cluster uses, and its queues' names.
pub(super) struct Queueing {
    kind: &'static str,
    queues: BTreeSet<String>,
}

fn newest_release(system: &gpuctl_model::profiles::QueueSystem) -> Option<String> {
    // The newest release serving the API version gpuctl renders; else the newest listed (the
    // version is a guess either way, and the warning says so).
    let line = system
        .releases
        .iter()
        .rev()
        .find(|r| r.serves.contains(&system.renders))
        .or_else(|| system.releases.last())?;
    Some(
        line.newest_patch
            .clone()
            .unwrap_or_else(|| format!("{}.0", line.line)),
    )
}

fn scheduling(
    objects: &Objects<'_>,
    catalog: &Catalog,
    pools: &BTreeSet<String>,
    chosen: &Chosen<'_>,
    draft: &mut Draft,
) -> (Y, Queueing) {
    let cqs = objects.of("kueue.x-k8s.io", "ClusterQueue");
    let vqs: Vec<&Value> = objects
        .of("scheduling.volcano.sh", "Queue")
        .into_iter()
        .filter(|q| !["root", "default"].contains(&name(q).as_str()))
        .collect();
    let p = "spec.scheduling";
    if !cqs.is_empty() {
        if !vqs.is_empty() {
            draft.warn(p, "the cluster has both Kueue ClusterQueues and Volcano queues; gpuctl manages one queueing system: Kueue was imported");
        }
        return kueue(objects, &cqs, catalog, pools, chosen.kueue, draft);
    }
    if !vqs.is_empty() {
        return volcano(&vqs, catalog, chosen.volcano, draft);
    }
    (
        Y::Map(vec![("queueing".into(), Y::s("none"))]),
        Queueing {
            kind: "none",
            queues: BTreeSet::new(),
        },
    )
}

/// `scheduling.kueue`: the release, the cohorts and the ClusterQueues.
fn kueue(
    objects: &Objects<'_>,
    cqs: &[&Value],
    catalog: &Catalog,
    pools: &BTreeSet<String>,
    kueue_release: Option<&gpuctl_plan::live::release::NamedRelease>,
    draft: &mut Draft,
) -> (Y, Queueing) {
    let p = "spec.scheduling";
    let system = &catalog.queueing().kueue;
    let version = match kueue_release {
        Some(r) => {
            draft.comment(
                &format!("{p}.kueue.version"),
                format!(
                    "the chart version of Helm release {}/{}; `install` stays `none`: with `helm`, gpuctl would upgrade the release with the values it renders",
                    r.namespace, r.name
                ),
            );
            super::releases::blueprint_version(&r.release.chart_version)
        }
        None => {
            let version = newest_release(system).unwrap_or_default();
            draft.warn(
                &format!("{p}.kueue.version"),
                format!("Kueue's objects do not record its release (no Helm release of its chart was found); {version} (the newest gpuctl knows) is a guess: set the one you run"),
            );
            version
        }
    };
    let mut k: Vec<(String, Y)> = vec![("version".into(), Y::s(version))];
    let cohorts: Vec<Y> = objects
        .of("kueue.x-k8s.io", "Cohort")
        .iter()
        .map(|c| {
            let mut m = vec![("name".to_string(), Y::s(name(c)))];
            if let Some(parent) = c["spec"]["parentName"].as_str() {
                m.push(("parent".into(), Y::s(parent)));
            }
            if let Some(w) = quantity_text(&c["spec"]["fairSharing"]["weight"]) {
                m.push(("fairSharingWeight".into(), Y::s(w)));
            }
            Y::Map(m)
        })
        .collect();
    if !cohorts.is_empty() {
        k.push(("cohorts".into(), Y::List(cohorts)));
    }
    let queues: BTreeSet<String> = cqs.iter().map(|cq| name(cq)).collect();
    let list = cqs
        .iter()
        .enumerate()
        .map(|(i, cq)| cluster_queue(i, cq, pools, draft))
        .collect();
    k.push(("clusterQueues".into(), Y::List(list)));
    (
        Y::Map(vec![
            ("queueing".into(), Y::s("kueue")),
            ("kueue".into(), Y::Map(k)),
        ]),
        Queueing {
            kind: "kueue",
            queues,
        },
    )
}

/// `scheduling.kueue.clusterQueues[i]`: the ClusterQueue `cq`, its quotas on the flavors that
/// are GPU pools.
fn cluster_queue(i: usize, cq: &Value, pools: &BTreeSet<String>, draft: &mut Draft) -> Y {
    let p = "spec.scheduling";
    let qp = format!("{p}.kueue.clusterQueues[{i}]");
    let n = name(cq);
    let s = &cq["spec"];
    let mut m = vec![("name".to_string(), Y::s(n.clone()))];
    if let Some(c) = s["cohortName"].as_str().or_else(|| s["cohort"].as_str()) {
        m.push(("cohort".into(), Y::s(c)));
    }
    if let Some(w) = quantity_text(&s["fairSharing"]["weight"]) {
        m.push(("fairSharingWeight".into(), Y::s(w)));
    }
    let pre = &s["preemption"];
    let mut pm: Vec<(String, Y)> = Vec::new();
    for (live, field) in [
        ("withinClusterQueue", "withinClusterQueue"),
        ("reclaimWithinCohort", "reclaimWithinCohort"),
    ] {
        if let Some(v) = pre[live].as_str() {
            pm.push((field.into(), Y::s(v)));
        }
    }
    if let Some(v) = pre["borrowWithinCohort"]["policy"].as_str() {
        pm.push(("borrowWithinCohort".into(), Y::s(v)));
    }
    if !pm.is_empty() {
        m.push(("preemption".into(), Y::Map(pm)));
    }
    let mut resources = Vec::new();
    let groups = s["resourceGroups"].as_array().cloned().unwrap_or_default();
    let mut seen_flavors = BTreeSet::new();
    for g in &groups {
        for f in g["flavors"].as_array().into_iter().flatten() {
            let flavor = f["name"].as_str().unwrap_or_default().to_string();
            if !pools.contains(&flavor) {
                draft.warn(
                    &format!("{qp}.resources"),
                    format!("ClusterQueue `{n}` quotas ResourceFlavor `{flavor}`, which selects no GPU node pool; gpuctl cannot express it and leaves it out"),
                );
                continue;
            }
            if !seen_flavors.insert(flavor.clone()) {
                draft.warn(
                    &format!("{qp}.resources"),
                    format!("ClusterQueue `{n}` uses flavor `{flavor}` in two resource groups; gpuctl writes one entry per pool"),
                );
                continue;
            }
            resources.push(flavor_resources(f, flavor));
        }
    }
    if groups.len() > 1 {
        draft.comment(
            &format!("{qp}.resources"),
            format!("ClusterQueue `{n}` has {} resource groups; gpuctl groups flavors that quota the same resources, so check the plan", groups.len()),
        );
    }
    m.push(("resources".into(), Y::List(resources)));
    Y::Map(m)
}

/// One flavor's quotas of a ClusterQueue, as the entry of pool `flavor`.
fn flavor_resources(f: &Value, flavor: String) -> Y {
    let mut quota = serde_json::Map::new();
    let mut borrow = serde_json::Map::new();
    let mut lend = serde_json::Map::new();
    for r in f["resources"].as_array().into_iter().flatten() {
        let rn = r["name"].as_str().unwrap_or_default().to_string();
        if let Some(q) = quantity_text(&r["nominalQuota"]) {
            quota.insert(rn.clone(), json!(q));
        }
        if let Some(q) = quantity_text(&r["borrowingLimit"]) {
            borrow.insert(rn.clone(), json!(q));
        }
        if let Some(q) = quantity_text(&r["lendingLimit"]) {
            lend.insert(rn, json!(q));
        }
    }
    let mut e = vec![
        ("pool".to_string(), Y::s(flavor)),
        ("quota".to_string(), quantities(&Value::Object(quota))),
    ];
    if !borrow.is_empty() {
        e.push(("borrowingLimit".into(), quantities(&Value::Object(borrow))));
    }
    if !lend.is_empty() {
        e.push(("lendingLimit".into(), quantities(&Value::Object(lend))));
    }
    Y::Map(e)
}

/// `scheduling.volcano`: the release (the chart version of Volcano's Helm release; without one,
/// the newest gpuctl knows, said to be a guess) and the queues.
fn volcano(
    vqs: &[&Value],
    catalog: &Catalog,
    release: Option<&gpuctl_plan::live::release::NamedRelease>,
    draft: &mut Draft,
) -> (Y, Queueing) {
    let p = "spec.scheduling";
    let system = &catalog.queueing().volcano;
    let version = match release {
        Some(r) => {
            draft.comment(
                &format!("{p}.volcano.version"),
                format!(
                    "the chart version of Helm release {}/{}; `install` stays `none`: with `helm`, gpuctl would upgrade the release with the values the blueprint gives",
                    r.namespace, r.name
                ),
            );
            super::releases::blueprint_version(&r.release.chart_version)
        }
        None => {
            let version = newest_release(system).unwrap_or_default();
            draft.warn(
                &format!("{p}.volcano.version"),
                format!("Volcano's queues do not record its release (no Helm release of its chart was found); {version} (the newest gpuctl knows) is a guess: set the one you run"),
            );
            version
        }
    };
    let mut queues = BTreeSet::new();
    let list = vqs
        .iter()
        .map(|q| {
            let n = name(q);
            queues.insert(n.clone());
            let s = &q["spec"];
            let mut m = vec![("name".to_string(), Y::s(n))];
            if let Some(parent) = s["parent"].as_str() {
                m.push(("parent".into(), Y::s(parent)));
            }
            if let Some(w) = s["weight"].as_u64() {
                m.push(("weight".into(), Y::Scalar(json!(w))));
            }
            if s["capability"].is_object() {
                m.push(("capability".into(), quantities(&s["capability"])));
            }
            if s["deserved"].is_object() {
                m.push(("deserved".into(), quantities(&s["deserved"])));
            }
            if s["guarantee"]["resource"].is_object() {
                m.push(("guarantee".into(), quantities(&s["guarantee"]["resource"])));
            }
            if let Some(r) = s["reclaimable"].as_bool() {
                m.push(("reclaimable".into(), Y::Scalar(json!(r))));
            }
            Y::Map(m)
        })
        .collect();
    (
        Y::Map(vec![
            ("queueing".into(), Y::s("volcano")),
            (
                "volcano".into(),
                Y::Map(vec![
                    ("version".into(), Y::s(version)),
                    ("queues".into(), Y::List(list)),
                ]),
            ),
        ]),
        Queueing {
            kind: "volcano",
            queues,
        },
    )
}

/// One namespace's tenant-shaped state.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Shape {
    tenant: Option<String>,
    quota_name: Option<String>,
    quota: BTreeMap<String, String>,
    defaults: BTreeMap<String, String>,
    queue: Option<String>,
}

fn is_gpu_quota(hard: &serde_json::Map<String, Value>) -> bool {
    hard.keys().any(|k| k.contains("nvidia.com/"))
}

/// Lossy parts of a namespace's quota, limits and queue: `(namespace, what gpuctl cannot write)`.
type Lost = Vec<(String, String)>;

fn tenants(
    objects: &Objects<'_>,
    queueing: &Queueing,
    rdma_resource: Option<&str>,
    draft: &mut Draft,
) -> Y {
    let namespaces: BTreeMap<String, &Value> = objects
        .of("", "Namespace")
        .into_iter()
        .map(|n| (name(n), n))
        .collect();
    let mut lost = Lost::new();
    let mut by_ns = quota_shapes(objects, &namespaces, rdma_resource, &mut lost);
    add_limit_ranges(objects, &mut by_ns, &mut lost);
    add_queues(objects, queueing, &namespaces, &mut by_ns, &mut lost);
    let order = tenant_namespaces(objects, &by_ns);
    let out = order
        .iter()
        .enumerate()
        .map(|(i, (tenant, namespaces))| {
            tenant_entry(i, tenant, namespaces, &by_ns, &lost, queueing, draft)
        })
        .collect();
    Y::List(out)
}

/// The namespaces with a GPU ResourceQuota, each with its quota, its tenant label and what of the
/// quota gpuctl cannot write (`lost`).
fn quota_shapes(
    objects: &Objects<'_>,
    namespaces: &BTreeMap<String, &Value>,
    rdma_resource: Option<&str>,
    lost: &mut Lost,
) -> BTreeMap<String, Shape> {
    let quotas = objects.of("", "ResourceQuota");
    let mut by_ns: BTreeMap<String, Shape> = BTreeMap::new();
    for q in &quotas {
        let hard = q["spec"]["hard"].as_object().cloned().unwrap_or_default();
        if !is_gpu_quota(&hard) {
            continue;
        }
        let n = ns(q);
        if by_ns.contains_key(&n) {
            lost.push((n.clone(), format!("namespace `{n}` has more than one GPU ResourceQuota; `{}` was imported, `{}` was not", by_ns[&n].quota_name.clone().unwrap_or_default(), name(q))));
            continue;
        }
        if q["spec"]["scopes"].is_array() || q["spec"]["scopeSelector"].is_object() {
            lost.push((n.clone(), format!("ResourceQuota {n}/{} is scoped (scopes or scopeSelector); gpuctl writes unscoped quotas", name(q))));
        }
        let mut quota = BTreeMap::new();
        for (k, v) in &hard {
            let Some(v) = quantity_text(v) else { continue };
            if let Some(r) = k.strip_prefix("limits.")
                && gpuctl_model::blueprint::resources::is_extended_resource(r)
            {
                lost.push((n.clone(), format!("`{k}` in ResourceQuota {n}/{} is accepted by the API server but never enforced; gpuctl does not write it", name(q))));
                continue;
            }
            let bare = k
                .strip_prefix("requests.")
                .filter(|r| gpuctl_model::blueprint::resources::is_extended_resource(r));
            match bare {
                Some(r) if !r.starts_with("nvidia.com/") && Some(r) != rdma_resource => {
                    lost.push((n.clone(), format!("`{k}: {v}` in ResourceQuota {n}/{} quotas a resource no GPU pool provides; gpuctl cannot express it", name(q))));
                }
                Some(r) => {
                    quota.insert(r.to_string(), v);
                }
                None => {
                    quota.insert(k.clone(), v);
                }
            }
        }
        let tenant = namespaces
            .get(&n)
            .and_then(|o| labels(o).get(TENANT_LABEL).cloned());
        by_ns.insert(
            n.clone(),
            Shape {
                tenant,
                quota_name: Some(name(q)),
                quota,
                defaults: BTreeMap::new(),
                queue: None,
            },
        );
    }
    by_ns
}

/// Each tenant namespace's container defaults, from its LimitRanges.
fn add_limit_ranges(objects: &Objects<'_>, by_ns: &mut BTreeMap<String, Shape>, lost: &mut Lost) {
    for lr in objects.of("", "LimitRange") {
        let n = ns(lr);
        let Some(shape) = by_ns.get_mut(&n) else {
            continue;
        };
        for item in lr["spec"]["limits"].as_array().into_iter().flatten() {
            if item["type"] != "Container" {
                lost.push((
                    n.clone(),
                    format!(
                        "LimitRange {n}/{} has a `{}` limit; gpuctl writes container defaults only",
                        name(lr),
                        item["type"].as_str().unwrap_or("?")
                    ),
                ));
                continue;
            }
            for field in ["max", "min", "maxLimitRequestRatio"] {
                if item[field].is_object() {
                    lost.push((n.clone(), format!("LimitRange {n}/{} sets `{field}`; gpuctl writes container defaults only", name(lr))));
                }
            }
            if item["default"] != item["defaultRequest"] && item["defaultRequest"].is_object() {
                lost.push((n.clone(), format!("LimitRange {n}/{} has a defaultRequest other than its default; gpuctl writes them equal", name(lr))));
            }
            for (k, v) in item["default"].as_object().into_iter().flatten() {
                if let Some(v) = quantity_text(v) {
                    shape.defaults.insert(k.clone(), v);
                }
            }
        }
    }
}

/// Each tenant namespace's queue: its Kueue LocalQueue's ClusterQueue, or its Volcano queue
/// annotation.
fn add_queues(
    objects: &Objects<'_>,
    queueing: &Queueing,
    namespaces: &BTreeMap<String, &Value>,
    by_ns: &mut BTreeMap<String, Shape>,
    lost: &mut Lost,
) {
    match queueing.kind {
        "kueue" => {
            for lq in objects.of("kueue.x-k8s.io", "LocalQueue") {
                let n = ns(lq);
                let Some(shape) = by_ns.get_mut(&n) else {
                    continue;
                };
                if name(lq) != LOCAL_QUEUE {
                    lost.push((n.clone(), format!("LocalQueue {n}/{} is not named `{LOCAL_QUEUE}`; gpuctl makes one `{LOCAL_QUEUE}` LocalQueue per tenant namespace", name(lq))));
                    if shape.queue.is_some() {
                        continue;
                    }
                }
                shape.queue = lq["spec"]["clusterQueue"].as_str().map(str::to_string);
            }
        }
        "volcano" => {
            for (n, shape) in by_ns.iter_mut() {
                shape.queue = namespaces
                    .get(n)
                    .and_then(|o| o["metadata"]["annotations"][VOLCANO_QUEUE_ANNOTATION].as_str())
                    .map(str::to_string);
            }
        }
        _ => {}
    }
}

/// The tenants, each named and with its namespaces, in the blueprint's order.
fn tenant_namespaces(
    objects: &Objects<'_>,
    by_ns: &BTreeMap<String, Shape>,
) -> Vec<(String, Vec<String>)> {
    // Namespaces with the same tenant label, or (without one) the same quota, defaults and queue,
    // are one tenant.
    let mut tenants: BTreeMap<(Option<String>, Shape), Vec<String>> = BTreeMap::new();
    for (n, shape) in by_ns {
        let key = match &shape.tenant {
            Some(t) => (
                Some(t.clone()),
                Shape {
                    tenant: Some(t.clone()),
                    quota_name: None,
                    quota: BTreeMap::new(),
                    defaults: BTreeMap::new(),
                    queue: None,
                },
            ),
            None => (
                None,
                Shape {
                    quota_name: None,
                    ..shape.clone()
                },
            ),
        };
        tenants.entry(key).or_default().push(n.clone());
    }
    let mut used = BTreeSet::new();
    let mut order: Vec<(String, Vec<String>)> = Vec::new();
    for ((label, _), namespaces) in tenants {
        let shape = &by_ns[&namespaces[0]];
        let from_quota = shape
            .quota_name
            .as_deref()
            .and_then(|q| q.strip_suffix("-quota"))
            .map(str::to_string);
        let base = label
            .or(from_quota)
            .unwrap_or_else(|| namespaces[0].clone());
        let mut name = base.clone();
        let mut i = 2;
        while !used.insert(name.clone()) {
            name = format!("{base}-{i}");
            i += 1;
        }
        order.push((name, namespaces));
    }
    // Tenants in the order their ClusterQueue's namespace selector lists them (the blueprint's
    // order, which render follows there), the rest by name.
    let cqs = objects.of("kueue.x-k8s.io", "ClusterQueue");
    let position = |tenant: &str| -> usize {
        cqs.iter()
            .flat_map(|cq| {
                cq["spec"]["namespaceSelector"]["matchExpressions"]
                    .as_array()
                    .into_iter()
                    .flatten()
            })
            .filter(|e| e["key"] == TENANT_LABEL)
            .find_map(|e| e["values"].as_array()?.iter().position(|v| v == tenant))
            .unwrap_or(usize::MAX)
    };
    order.sort_by_cached_key(|(t, _)| (position(t), t.clone()));
    order
}

/// The blueprint entry of tenant `tenant` (the `i`th) and the warnings about it.
fn tenant_entry(
    i: usize,
    tenant: &str,
    namespaces: &[String],
    by_ns: &BTreeMap<String, Shape>,
    lost: &Lost,
    queueing: &Queueing,
    draft: &mut Draft,
) -> Y {
    let p = format!("spec.tenants[{i}]");
    let shape = &by_ns[&namespaces[0]];
    for n in &namespaces[1..] {
        if by_ns[n].quota != shape.quota
            || by_ns[n].defaults != shape.defaults
            || by_ns[n].queue != shape.queue
        {
            draft.warn(&p, format!("namespace `{n}` carries tenant `{tenant}`'s label but another quota, defaults or queue than `{}`; the first namespace's are imported", namespaces[0]));
        }
    }
    let mut m = vec![
        ("name".to_string(), Y::s(tenant)),
        (
            "namespaces".to_string(),
            Y::List(namespaces.iter().map(|n| Y::s(n.clone())).collect()),
        ),
    ];
    if let Some(q) = &shape.queue {
        if queueing.queues.contains(q) {
            m.push(("queue".into(), Y::s(q.clone())));
        } else {
            draft.warn(
                &format!("{p}.queue"),
                format!("the tenant's queue `{q}` is not an imported queue"),
            );
        }
    }
    m.push(("quota".into(), Y::from_json(&json!(shape.quota))));
    if !shape.defaults.is_empty() {
        m.push(("defaults".into(), Y::from_json(&json!(shape.defaults))));
    }
    for n in namespaces {
        let expected = gpuctl_pipeline::render::quota_name(tenant);
        if by_ns[n].quota_name.as_deref() != Some(expected.as_str()) {
            draft.warn(
                &format!("{p}.quota"),
                format!(
                    "gpuctl names the tenant's quota `{expected}`; the plan creates it in `{n}` beside the live `{}` (remove that one by hand once gpuctl's is in place)",
                    by_ns[n].quota_name.clone().unwrap_or_default()
                ),
            );
        }
    }
    for (ns, message) in lost {
        if namespaces.contains(ns) {
            draft.warn(&format!("{p}.quota"), message.clone());
        }
    }
    draft.comment(
        &p,
        "priorityClass and cuda are not recorded in the cluster: add them",
    );
    Y::Map(m)
}

fn monitoring(objects: &Objects<'_>, op_ns: &str, draft: &mut Draft) -> Option<Y> {
    let monitors = objects.of("monitoring.coreos.com", "ServiceMonitor");
    let scrapes_exporter = monitors
        .iter()
        .any(|m| m["spec"]["selector"]["matchLabels"]["app"] == "nvidia-dcgm-exporter");
    let rules = objects.of("monitoring.coreos.com", "PrometheusRule");
    let ours = rules
        .iter()
        .find(|r| name(r) == "gpuctl-gpu-alerts" && ns(r) == op_ns);
    let mut m: Vec<(String, Y)> = Vec::new();
    if scrapes_exporter {
        m.push(("serviceMonitor".into(), Y::Scalar(json!(true))));
        if !monitors.iter().any(|s| name(s) == "gpuctl-dcgm-exporter") {
            draft.warn(
                "spec.monitoring.serviceMonitor",
                "a ServiceMonitor scrapes dcgm-exporter; gpuctl renders its own (`gpuctl-dcgm-exporter`) beside it: remove yours once it is in place",
            );
        }
    }
    let alerts: BTreeSet<String> = rules
        .iter()
        .flat_map(|r| r["spec"]["groups"].as_array().into_iter().flatten())
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    let mut a: Vec<(String, Y)> = Vec::new();
    if alerts.contains("GPUXidError") {
        a.push(("xid".into(), Y::Scalar(json!(true))));
    }
    if alerts.contains("GPUUncorrectableECCError") {
        a.push(("eccErrors".into(), Y::Scalar(json!(true))));
    }
    let temp = rules
        .iter()
        .flat_map(|r| r["spec"]["groups"].as_array().into_iter().flatten())
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .find(|r| r["alert"] == "GPUTemperatureHigh")
        .and_then(|r| r["expr"].as_str())
        .and_then(|e| e.rsplit('>').next())
        .and_then(|t| t.trim().parse::<u64>().ok());
    if let Some(t) = temp {
        a.push(("temperatureC".into(), Y::Scalar(json!(t))));
    }
    if !a.is_empty() {
        m.push(("alerts".into(), Y::Map(a)));
    }
    let foreign: Vec<String> = rules
        .iter()
        .filter(|r| Some(*r) != ours)
        .filter(|r| r.to_string().contains("DCGM_"))
        .map(|r| format!("{}/{}", ns(r), name(r)))
        .collect();
    if !foreign.is_empty() {
        draft.warn(
            "spec.monitoring",
            format!("PrometheusRule(s) {} alert on DCGM metrics with rules gpuctl does not write; they are left alone", foreign.join(", ")),
        );
    }
    (!m.is_empty()).then_some(Y::Map(m))
}
