//! Which rule checks which blueprint field, and the field reference (docs/blueprint-reference.md,
//! `gpuctl explain --fields`) generated from the blueprint's JSON Schema with it.
//!
//! The rules declare the fields their findings are about here. The declaration is tested against
//! the rules' behaviour: every finding of every rule's table test must be at (or under) a field its
//! rule declares, every declared field must be in the schema, and every rule must declare one
//! (validate/tests.rs), so it cannot drift from what the rules report.

use std::fmt::Write;

use serde_json::Value;

use gpuctl_model::blueprint::schema::{self, Field};
use gpuctl_model::blueprint::yaml::{SourceTree, inline};

/// Rules that check every field's structure (syntax, unknown fields, types, required fields,
/// header): the reference says so once instead of on every row.
pub const STRUCTURAL: &[&str] = &["GPU001", "GPU002", "GPU003", "GPU004", "GPU005"];

/// Rules about overlays (`extends`, GPU180 and GPU181) and fleet files (the rest of GPU180–196): their findings
/// are at `extends`, a keyed list, or in a fleet file, not at a field of one blueprint; their
/// cases are in `blueprint/overlay/tests.rs` and `fleet/tests.rs`.
pub const OVERLAY_AND_FLEET: &[&str] = &[
    "GPU180", "GPU181", "GPU182", "GPU183", "GPU184", "GPU185", "GPU186", "GPU187", "GPU188",
    "GPU189", "GPU190", "GPU191", "GPU192", "GPU193", "GPU194", "GPU195", "GPU196",
];

/// The fields each rule's findings are about, in the reference's path form (`[]` for list items;
/// a field covers everything under it, e.g. the entries of a `quota` mapping).
pub static RULE_FIELDS: &[(&str, &[&str])] = &[
    ("GPU009", &["spec.tenants[].namespaces"]),
    (
        "GPU010",
        &[
            "metadata.name",
            "spec.gpuOperator.namespace",
            "spec.nodePools[].name",
            "spec.priorityClasses[].name",
            "spec.scheduling.kueue.cohorts[].name",
            "spec.scheduling.kueue.clusterQueues[].name",
            "spec.scheduling.volcano.queues[].name",
            "spec.tenants[].name",
            "spec.tenants[].namespaces",
        ],
    ),
    (
        "GPU011",
        &[
            "spec.nodePools[].name",
            "spec.nodePools[].taints",
            "spec.priorityClasses[].name",
            "spec.scheduling.kueue.cohorts[].name",
            "spec.scheduling.kueue.clusterQueues[].name",
            "spec.scheduling.volcano.queues[].name",
            "spec.tenants[].name",
            "spec.tenants[].namespaces",
        ],
    ),
    (
        "GPU012",
        &[
            "spec.tenants[].priorityClass",
            "spec.tenants[].queue",
            "spec.scheduling.kueue.cohorts[].parent",
            "spec.scheduling.kueue.clusterQueues[].cohort",
            "spec.scheduling.kueue.clusterQueues[].resources[].pool",
            "spec.scheduling.volcano.queues[].parent",
        ],
    ),
    ("GPU013", &["spec.nodePools[].selector"]),
    (
        "GPU014",
        &[
            "spec.nodePools[].selector",
            "spec.nodePools[].labels",
            "spec.nodePools[].taints",
        ],
    ),
    ("GPU015", &["spec.nodePools[].gpu.model"]),
    (
        "GPU016",
        &[
            "spec.scheduling.queueing",
            "spec.scheduling.kueue",
            "spec.scheduling.kueue.version",
            "spec.scheduling.volcano",
            "spec.scheduling.volcano.version",
            "spec.tenants[].queue",
        ],
    ),
    ("GPU017", &["spec.nodePools[].name"]),
    (
        "GPU018",
        &[
            "spec.nodePools[].nodes",
            "spec.nodePools[].gpu.count",
            "spec.nodePools[].partitioning.timeSlicing.replicas",
            "spec.nodePools[].partitioning.mps.replicas",
        ],
    ),
    (
        "GPU019",
        &["spec.gpuOperator.version", "spec.gpuOperator.values"],
    ),
    (
        "GPU020",
        &[
            "spec.gpuOperator.driver.version",
            "spec.nodePools[].driver.version",
        ],
    ),
    ("GPU021", &["spec.tenants[].cuda"]),
    ("GPU022", &["spec.tenants[].cuda"]),
    (
        "GPU023",
        &[
            "spec.gpuOperator.driver.version",
            "spec.nodePools[].driver.version",
        ],
    ),
    (
        "GPU024",
        &[
            "spec.gpuOperator.driver.kernelModuleType",
            "spec.nodePools[].driver.kernelModuleType",
        ],
    ),
    (
        "GPU025",
        &[
            "spec.gpuOperator.driver.version",
            "spec.nodePools[].driver.version",
        ],
    ),
    (
        "GPU026",
        &[
            "spec.gpuOperator.driver.version",
            "spec.nodePools[].driver.version",
        ],
    ),
    (
        "GPU027",
        &["spec.gpuOperator.version", "spec.kubernetes.version"],
    ),
    (
        "GPU028",
        &[
            "spec.gpuOperator.version",
            "spec.gpuOperator.driver.version",
            "spec.nodePools[].driver.version",
        ],
    ),
    ("GPU029", &["spec.nodePools[].gpu.model"]),
    ("GPU030", &["spec.nodePools[].partitioning.mode"]),
    (
        "GPU031",
        &[
            "spec.nodePools[].partitioning.mig.layout",
            "spec.nodePools[].partitioning.mig.devices",
        ],
    ),
    (
        "GPU032",
        &[
            "spec.nodePools[].partitioning.mig.layout",
            "spec.nodePools[].partitioning.mig.devices",
        ],
    ),
    (
        "GPU033",
        &[
            "spec.nodePools[].partitioning.mig.strategy",
            "spec.nodePools[].partitioning.mig.layout",
            "spec.nodePools[].partitioning.mig.devices",
        ],
    ),
    (
        "GPU034",
        &[
            "spec.nodePools[].partitioning",
            "spec.nodePools[].partitioning.mode",
            "spec.nodePools[].partitioning.mig",
            "spec.nodePools[].partitioning.mig.devices",
            "spec.nodePools[].partitioning.mig.devices[].gpus",
        ],
    ),
    (
        "GPU035",
        &[
            "spec.nodePools[].partitioning.mode",
            "spec.nodePools[].partitioning.mig.strategy",
        ],
    ),
    (
        "GPU036",
        &[
            "spec.gpuOperator.version",
            "spec.nodePools[].gpu.model",
            "spec.nodePools[].partitioning.mode",
        ],
    ),
    ("GPU037", &["spec.nodePools[].os"]),
    ("GPU038", &["spec.nodePools[].os.kernel"]),
    (
        "GPU040",
        &[
            "spec.nodePools[].partitioning.mode",
            "spec.nodePools[].partitioning.timeSlicing.replicas",
            "spec.nodePools[].partitioning.mps.replicas",
        ],
    ),
    ("GPU041", &["spec.nodePools[].partitioning.mode"]),
    (
        "GPU042",
        &[
            "spec.nodePools[].partitioning",
            "spec.nodePools[].partitioning.timeSlicing",
            "spec.nodePools[].partitioning.mps",
        ],
    ),
    ("GPU050", &["spec.tenants[].quota"]),
    (
        "GPU051",
        &[
            "spec.tenants[].quota",
            "spec.tenants[].defaults",
            "spec.scheduling.kueue.clusterQueues[].resources[].quota",
            "spec.scheduling.kueue.clusterQueues[].resources[].borrowingLimit",
            "spec.scheduling.kueue.clusterQueues[].resources[].lendingLimit",
            "spec.scheduling.volcano.queues[].capability",
            "spec.scheduling.volcano.queues[].deserved",
            "spec.scheduling.volcano.queues[].guarantee",
        ],
    ),
    (
        "GPU052",
        &[
            "spec.tenants[].quota",
            "spec.tenants[].defaults",
            "spec.scheduling.kueue.clusterQueues[].resources[].quota",
            "spec.scheduling.volcano.queues[].capability",
            "spec.scheduling.volcano.queues[].deserved",
            "spec.scheduling.volcano.queues[].guarantee",
        ],
    ),
    (
        "GPU053",
        &[
            "spec.tenants[].quota",
            "spec.scheduling.kueue.clusterQueues[].resources[].quota",
        ],
    ),
    ("GPU054", &["spec.tenants[].defaults"]),
    (
        "GPU055",
        &[
            "spec.tenants[].quota",
            "spec.scheduling.kueue.clusterQueues[].resources[].quota",
        ],
    ),
    (
        "GPU056",
        &[
            "spec.tenants[].quota",
            "spec.tenants[].defaults",
            "spec.scheduling.kueue.clusterQueues[].resources[].quota",
            "spec.scheduling.volcano.queues[].capability",
        ],
    ),
    ("GPU060", &["spec.priorityClasses[].value"]),
    ("GPU061", &["spec.priorityClasses[].name"]),
    ("GPU062", &["spec.priorityClasses[].globalDefault"]),
    (
        "GPU070",
        &[
            "spec.scheduling.kueue.cohorts[].fairSharingWeight",
            "spec.scheduling.kueue.clusterQueues[].fairSharingWeight",
            "spec.scheduling.kueue.clusterQueues[].resources",
            "spec.scheduling.kueue.clusterQueues[].resources[].pool",
            "spec.scheduling.kueue.clusterQueues[].resources[].quota",
        ],
    ),
    (
        "GPU071",
        &["spec.scheduling.kueue.clusterQueues[].resources[].borrowingLimit"],
    ),
    (
        "GPU072",
        &["spec.scheduling.kueue.clusterQueues[].resources[].lendingLimit"],
    ),
    ("GPU073", &["spec.scheduling.kueue.cohorts[].parent"]),
    ("GPU074", &["spec.tenants[]", "spec.tenants[].queue"]),
    (
        "GPU075",
        &[
            "spec.scheduling.kueue.clusterQueues[].resources",
            "spec.tenants[].quota",
            "spec.tenants[].defaults",
            "spec.tenants[].queue",
        ],
    ),
    (
        "GPU076",
        &[
            "spec.scheduling.kueue.version",
            "spec.scheduling.kueue.config.resources.quotaCheckStrategy",
            "spec.scheduling.kueue.config.resources.excludeResourcePrefixes",
        ],
    ),
    ("GPU080", &["spec.scheduling.volcano.queues[].weight"]),
    (
        "GPU081",
        &[
            "spec.scheduling.volcano.queues[].capability",
            "spec.scheduling.volcano.queues[].deserved",
            "spec.scheduling.volcano.queues[].guarantee",
        ],
    ),
    ("GPU082", &["spec.scheduling.volcano.queues[].parent"]),
    ("GPU083", &["spec.tenants[].queue"]),
    ("GPU084", &["spec.scheduling.volcano.version"]),
    ("GPU090", &["spec.gpuOperator.dcgmExporter.interval"]),
    (
        "GPU091",
        &["spec.monitoring", "spec.gpuOperator.dcgmExporter.enabled"],
    ),
    ("GPU092", &["spec.monitoring.alerts.temperatureC"]),
    (
        "GPU095",
        &[
            "spec.gpuOperator.driver.upgradePolicy.maxUnavailable",
            "spec.upgrades.blueGreen.colorLabel",
            "spec.upgrades.blueGreen.batch",
            "spec.upgrades.blueGreen.drainTimeout",
        ],
    ),
    (
        "GPU100",
        &[
            "spec.gpuOperator.chart",
            "spec.gpuOperator.chart.repository",
            "spec.gpuOperator.chart.oci",
            "spec.gpuOperator.chart.path",
            "spec.scheduling.kueue.chart",
            "spec.scheduling.kueue.chart.repository",
            "spec.scheduling.kueue.chart.oci",
            "spec.scheduling.kueue.chart.path",
            "spec.scheduling.volcano.chart",
            "spec.scheduling.volcano.chart.repository",
            "spec.scheduling.volcano.chart.oci",
            "spec.scheduling.volcano.chart.path",
            "spec.networkOperator.chart",
            "spec.networkOperator.chart.repository",
            "spec.networkOperator.chart.oci",
            "spec.networkOperator.chart.path",
        ],
    ),
    (
        "GPU101",
        &[
            "spec.gpuOperator.images.registry",
            "spec.gpuOperator.images.pullSecrets[]",
        ],
    ),
    (
        "GPU102",
        &[
            "spec.gpuOperator.chart",
            "spec.gpuOperator.images",
            "spec.scheduling.kueue.chart",
            "spec.scheduling.volcano.chart",
            "spec.networkOperator.chart",
        ],
    ),
    (
        "GPU110",
        &[
            "spec.scheduling.volcano.queues[].deserved",
            "spec.scheduling.volcano.queues[].guarantee",
            "spec.scheduling.volcano.queues[].parent",
        ],
    ),
    (
        "GPU111",
        &["spec.scheduling.kueue.clusterQueues[].preemption.borrowWithinCohort"],
    ),
    ("GPU112", &["spec.tenants[].quota"]),
    ("GPU113", &["spec.tenants[].quota"]),
    (
        "GPU114",
        &[
            "spec.scheduling.kueue.clusterQueues[].resources[].borrowingLimit",
            "spec.scheduling.kueue.clusterQueues[].resources[].lendingLimit",
        ],
    ),
    (
        "GPU115",
        &[
            "spec.scheduling.kueue.cohorts[].fairSharingWeight",
            "spec.scheduling.kueue.clusterQueues[].fairSharingWeight",
        ],
    ),
    (
        "GPU116",
        &[
            "spec.scheduling.kueue",
            "spec.scheduling.kueue.install",
            "spec.scheduling.kueue.config",
        ],
    ),
    ("GPU117", &["spec.tenants[].quota"]),
    (
        "GPU118",
        &[
            "spec.scheduling.volcano.install",
            "spec.scheduling.volcano.values",
        ],
    ),
    (
        "GPU130",
        &["spec.nodePools[].topology.network.gpuDirectRDMA"],
    ),
    (
        "GPU131",
        &["spec.nodePools[].topology.network.gpuDirectRDMA"],
    ),
    (
        "GPU132",
        &[
            "spec.gpuOperator.driver.kernelModuleType",
            "spec.nodePools[].driver.kernelModuleType",
            "spec.nodePools[].gpu.model",
        ],
    ),
    ("GPU133", &["spec.nodePools[].os.kernel"]),
    ("GPU134", &["spec.gpuOperator.version"]),
    (
        "GPU135",
        &[
            "spec.gpuOperator.driver.version",
            "spec.nodePools[].driver.version",
        ],
    ),
    (
        "GPU136",
        &[
            "spec.gpuOperator.rdma.mechanism",
            "spec.gpuOperator.rdma.useHostMofed",
        ],
    ),
    ("GPU137", &["spec.gpuOperator.rdma"]),
    ("GPU140", &["spec.nodePools[].topology.levels"]),
    ("GPU141", &["spec.nodePools[].topology.levels"]),
    ("GPU142", &["spec.nodePools[].topology.levels"]),
    (
        "GPU143",
        &["spec.nodePools[].topology.kubelet.topologyManagerPolicy"],
    ),
    (
        "GPU145",
        &["spec.nodePools[].topology.kubelet.cpuManagerPolicy"],
    ),
    (
        "GPU146",
        &["spec.nodePools[].topology.kubelet.cpuManagerPolicy"],
    ),
    (
        "GPU147",
        &[
            "spec.nodePools[].topology.kubelet.memoryManagerPolicy",
            "spec.nodePools[].topology.kubelet.reservedMemory",
        ],
    ),
    (
        "GPU148",
        &["spec.nodePools[].topology.kubelet.topologyManagerPolicy"],
    ),
    (
        "GPU149",
        &["spec.nodePools[].topology.kubelet.topologyManagerScope"],
    ),
    ("GPU150", &["spec.networkOperator.version"]),
    (
        "GPU151",
        &[
            "spec.networkOperator.nicDriver",
            "spec.networkOperator.nicDriver.version",
        ],
    ),
    ("GPU152", &["spec.networkOperator.secondaryNetwork.kind"]),
    ("GPU153", &["spec.networkOperator"]),
    (
        "GPU154",
        &[
            "spec.tenants[].quota",
            "spec.scheduling.kueue.clusterQueues[].resources[].quota",
        ],
    ),
    (
        "GPU155",
        &[
            "spec.networkOperator.namespace",
            "spec.networkOperator.devicePlugin.resourceName",
            "spec.networkOperator.devicePlugin.hcaMax",
            "spec.networkOperator.secondaryNetwork.name",
            "spec.networkOperator.secondaryNetwork.networkNamespace",
            "spec.networkOperator.secondaryNetwork.master",
        ],
    ),
    (
        "GPU156",
        &[
            "spec.networkOperator.version",
            "spec.networkOperator.values",
        ],
    ),
    ("GPU157", &["spec.dra.driver.featureGates"]),
    (
        "GPU160",
        &[
            "spec.kubernetes.podCIDR",
            "spec.kubernetes.serviceCIDR",
            "spec.networkOperator.ipPools[].range",
            "spec.networkOperator.ipPools[].exclusions",
            "spec.networkOperator.secondaryNetwork.range",
        ],
    ),
    (
        "GPU161",
        &[
            "spec.networkOperator.ipPools[].gateway",
            "spec.networkOperator.ipPools[].gatewayIndex",
            "spec.networkOperator.ipPools[].defaultGateway",
        ],
    ),
    (
        "GPU162",
        &[
            "spec.networkOperator.ipPools[].perNodeBlockSize",
            "spec.networkOperator.ipPools[].perNodeNetworkPrefix",
            "spec.networkOperator.secondaryNetwork.perNodeBlockSize",
        ],
    ),
    ("GPU170", &["spec.kubernetes.version"]),
    (
        "GPU171",
        &[
            "spec.dra.shapes",
            "spec.dra.shapes[].name",
            "spec.dra.shapes[].count",
            "spec.dra.shapes[].gpu",
            "spec.dra.shapes[].gpu.model",
            "spec.dra.shapes[].mig",
            "spec.dra.shapes[].mig.profile",
            "spec.dra.shapes[].mig.model",
            "spec.dra.shapes[].minMemory",
            "spec.dra.shapes[].minComputeCapability",
            "spec.dra.shapes[].minDriver",
        ],
    ),
    (
        "GPU172",
        &[
            "spec.dra.shapes",
            "spec.dra.shapes[].count",
            "spec.dra.shapes[].gpu.model",
            "spec.dra.shapes[].mig.profile",
            "spec.dra.shapes[].minMemory",
            "spec.dra.shapes[].minComputeCapability",
            "spec.dra.shapes[].minDriver",
        ],
    ),
    ("GPU173", &["spec.tenants[].claims", "spec.dra.shapes"]),
    ("GPU174", &["spec.tenants[].quota"]),
    (
        "GPU1500",
        &[
            "spec.dra.shapes[]",
            "spec.dra.shapes[].firstAvailable",
            "spec.dra.shapes[].firstAvailable[]",
            "spec.kubernetes.version",
            "spec.tenants[].claims",
            "spec.scheduling.queueing",
        ],
    ),
    (
        "GPU1501",
        &[
            "spec.dra.shapes[].memoryShare",
            "spec.dra.shapes[].gpu.model",
            "spec.dra.shapes[].mig",
            "spec.kubernetes.version",
        ],
    ),
    (
        "GPU1502",
        &[
            "spec.tenants[].claims",
            "spec.dra.shapes[].memoryShare",
            "spec.dra.shapes[].firstAvailable",
            "spec.scheduling.queueing",
        ],
    ),
    (
        "GPU175",
        &[
            "spec.dra.driver.deployment",
            "spec.dra.driver.version",
            "spec.dra.driver.featureGates",
            "spec.gpuOperator.driver.version",
            "spec.nodePools[].driver.version",
        ],
    ),
    (
        "GPU165",
        &[
            "spec.dra.driver",
            "spec.kubernetes.version",
            "spec.nodePools[].gpuPlugin",
            "spec.nodePools[].partitioning.mode",
            "spec.gpuOperator.driver.version",
            "spec.nodePools[].driver.version",
        ],
    ),
    (
        "GPU158",
        &[
            "spec.dra.extendedResources",
            "spec.kubernetes.version",
            "spec.dra.driver",
            "spec.nodePools[].gpuPlugin",
            "spec.scheduling.kueue.version",
        ],
    ),
    (
        "GPU159",
        &[
            "spec.dra.maintenance",
            "spec.dra.maintenance[].name",
            "spec.dra.maintenance[].node",
            "spec.tenants[].deviceTolerations",
            "spec.kubernetes.version",
        ],
    ),
    (
        "GPU166",
        &[
            "spec.nodePools[].operands.devicePlugin",
            "spec.nodePools[].labels",
        ],
    ),
    ("GPU167", &["spec.nodePools[].partitioning.mode"]),
    ("GPU168", &["spec.dra.driver.deployment"]),
    ("GPU169", &["spec.dra.shapes"]),
    ("GPU176", &["spec.nodePools[].partitioning.mode"]),
    ("GPU177", &["spec.nodePools[].partitioning.mode"]),
    ("GPU178", &["spec.tenants[].namespaces"]),
    ("GPU197", &["spec.accounting"]),
    (
        "GPU1400",
        &[
            "spec.nodeReadiness.taintKey",
            "spec.nodePools[].taints",
            "spec.nodePools[].provisioner.platform",
            "spec.gpuOperator.values",
        ],
    ),
    (
        "GPU1401",
        &[
            "spec.nodePools[].provisioner.nodeOverlay",
            "spec.nodePools[].provisioner.minNodes",
            "spec.nodePools[].partitioning",
        ],
    ),
    ("GPU1402", &["spec.nodePools[].provisioner.minNodes"]),
    (
        "GPU1403",
        &[
            "spec.nodePools[].provisioner.driver",
            "spec.nodePools[].operands.driver",
            "spec.nodePools[].operands.containerToolkit",
        ],
    ),
    ("GPU1404", &["spec.nodePools[].provisioner.instanceTypes"]),
    ("GPU1405", &["spec.nodePools[].taints"]),
    (
        "GPU1406",
        &["spec.scheduling.kueue.clusterQueues[].resources[].quota"],
    ),
    (
        "GPU1407",
        &[
            "spec.nodePools[].provisioner.disruption",
            "spec.nodePools[].provisioner.expireAfter",
        ],
    ),
    (
        "GPU1408",
        &["spec.nodePools[].provisioner", "spec.nodePools[].nodes"],
    ),
    (
        "GPU198",
        &[
            "spec.accounting.idle.for",
            "spec.gpuOperator.dcgmExporter.enabled",
            "spec.nodePools[].operands.dcgmExporter",
        ],
    ),
    (
        "GPU179",
        &[
            "spec.tenants[].computeDomains",
            "spec.dra.driver.computeDomains",
            "spec.nodePools[].topology.levels",
            "spec.gpuOperator.driver.version",
            "spec.nodePools[].driver.version",
        ],
    ),
    (
        "GPU163",
        &[
            "spec.networkOperator.ipPools[].range",
            "spec.networkOperator.secondaryNetwork.range",
        ],
    ),
    (
        "GPU164",
        &[
            "spec.networkOperator.ipPools[].name",
            "spec.networkOperator.ipPools[].nodePools",
            "spec.networkOperator.ipPools[].gateway",
            "spec.networkOperator.ipPools[].gatewayIndex",
            "spec.networkOperator.ipPools[].perNodeBlockSize",
            "spec.networkOperator.ipPools[].perNodeNetworkPrefix",
            "spec.networkOperator.secondaryNetwork",
            "spec.networkOperator.secondaryNetwork.name",
            "spec.networkOperator.secondaryNetwork.ipPool",
            "spec.networkOperator.secondaryNetwork.perNodeBlockSize",
        ],
    ),
];

/// Whether a finding's path (`spec.tenants[2].quota."nvidia.com/gpu"`) is at or under a field
/// (`spec.tenants[].quota`).
pub fn covers(field: &str, finding_path: &str) -> bool {
    let p = schema::field_path(finding_path);
    p == field
        || p.strip_prefix(field)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// The rules whose findings are about `field` itself (not a field under it), sorted.
pub fn rules_for(field: &str) -> Vec<&'static str> {
    let mut out: Vec<&str> = RULE_FIELDS
        .iter()
        .filter(|(_, fields)| {
            fields
                .iter()
                .any(|f| *f == field || f.strip_suffix("[]") == Some(field))
        })
        .map(|(rule, _)| *rule)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The field reference in Markdown. `examples` are (name, text) of shipped blueprints: a field
/// without an example in the model takes its first value in them.
pub fn reference_markdown(examples: &[(&str, &str)]) -> String {
    let trees: Vec<Value> = examples
        .iter()
        .filter_map(|(_, text)| SourceTree::parse(text).ok().map(|t| t.value))
        .collect();
    let fields = schema::fields();
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "# Blueprint field reference (`{}`)\n\n\
         <!-- Generated by `gpuctl explain --fields` from the blueprint's JSON Schema (`gpuctl schema`);\n     \
         tests/offline/cli.rs fails when this file is stale. Do not edit by hand. -->\n\n\
         Every field of a blueprint: its type, whether it is required, its default, the values it \
         accepts, the rules that check it (`gpuctl explain RULE`, `docs/rules.md`) and an example. \
         Paths use `[]` for the items of a list. How the file is read, and what each partitioning \
         advertises, is in [blueprint.md](blueprint.md).\n\n\
         Every field is also checked for its structure, all at once in one run: unknown fields \
         (GPU002), values of the wrong type or outside the accepted set (GPU003), missing required \
         fields (GPU004), and `apiVersion` / `kind` (GPU005).\n",
        gpuctl_model::blueprint::API_VERSION
    );
    let _ = writeln!(
        w,
        "## Skeleton\n\nThe required fields, with example values:\n"
    );
    let _ = writeln!(w, "```yaml\n{}```\n", skeleton(&fields, &trees));
    // One table per mapping, in the order the mappings first appear (depth first).
    let mut groups: Vec<(String, Vec<&Field>)> = Vec::new();
    for f in &fields {
        let parent = f.path.rsplit_once('.').map(|(p, _)| p).unwrap_or_default();
        match groups.iter_mut().find(|(p, _)| p == parent) {
            Some((_, members)) => members.push(f),
            None => groups.push((parent.to_string(), vec![f])),
        }
    }
    for (parent, members) in &groups {
        let title = if parent.is_empty() {
            "Top level".to_string()
        } else {
            format!("`{parent}`")
        };
        let _ = writeln!(
            w,
            "## {title}\n\n| field | type | required / default | rules | description | example |\n|---|---|---|---|---|---|"
        );
        for f in members {
            row(w, f, &trees);
        }
        let _ = writeln!(w);
    }
    s
}

/// One field's row of its mapping's table.
fn row(w: &mut String, f: &Field, trees: &[Value]) {
    let req = match (&f.required, &f.default) {
        (true, _) => "**required**".to_string(),
        // A section's default is its fields' defaults, listed with them.
        (false, Some(_)) if f.has_fields && !f.ty.starts_with("list") => {
            "optional (defaults below)".to_string()
        }
        (false, Some(d)) if !d.is_null() => format!("default `{}`", inline(d)),
        (false, _) => "optional".to_string(),
    };
    let rules = rules_for(&f.path).join(", ");
    let mut description = f.description.replace('\n', " ");
    if !f.allowed.is_empty() {
        let values: Vec<String> = f
            .allowed
            .iter()
            .map(|(v, d)| {
                let d = d.trim_end_matches('.');
                if d.is_empty() {
                    format!("`{v}`")
                } else {
                    format!("`{v}`: {}", lower_first(d))
                }
            })
            .collect();
        let _ = write!(description, " One of: {}.", values.join("; "));
    }
    if f.has_fields {
        let item = if f.ty.starts_with("list") { "[]" } else { "" };
        let _ = write!(description, " Fields: `{}{item}` below.", f.path);
    }
    if !f.merge_keys.is_empty() {
        let keys: Vec<String> = f.merge_keys.iter().map(|k| format!("`{k}`")).collect();
        let _ = write!(
            description,
            " Overlays merge items by {} (`$patch: delete` removes one).",
            keys.join(" and ")
        );
    } else if f.ty.starts_with("list") {
        let _ = write!(description, " Overlays replace the list whole.");
    }
    let example = example(f, trees)
        .map(|e| format!("`{}: {}`", f.name, e))
        .unwrap_or_default();
    let _ = writeln!(
        w,
        "| `{}` | {} | {} | {} | {} | {} |",
        f.path,
        f.ty,
        req,
        rules,
        description.trim().replace('|', "\\|"),
        example.replace('|', "\\|"),
    );
}

/// "Whole GPUs" -> "whole GPUs"; "NVSwitch fabric" and "PCIe only" stay as they are.
fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if second.is_lowercase() && first.is_uppercase() => {
            format!("{}{}", first.to_lowercase(), &s[first.len_utf8()..])
        }
        _ => s.to_string(),
    }
}

/// An example value of a field, written inline: the model's example, else the first value in the
/// shipped blueprints, else its default or first accepted value. None for mappings with fields
/// (their fields have examples).
fn example(f: &Field, trees: &[Value]) -> Option<String> {
    if f.has_fields {
        return None;
    }
    if let Some(e) = f.examples.first() {
        return Some(inline(e));
    }
    trees
        .iter()
        .find_map(|t| first_at(t, &f.path))
        .filter(|v| !v.is_null())
        .map(inline)
        .or_else(|| f.default.as_ref().filter(|d| !d.is_null()).map(inline))
        .or_else(|| f.allowed.first().map(|(v, _)| v.clone()))
}

/// The first value at a reference path (`[]` takes each item until one has it).
fn first_at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let (head, rest) = match path.find(['.', '[']) {
        Some(i) => (&path[..i], &path[i..]),
        None => (path, ""),
    };
    let v = if head.is_empty() { v } else { v.get(head)? };
    if let Some(rest) = rest.strip_prefix("[]") {
        let rest = rest.strip_prefix('.').unwrap_or(rest);
        return v.as_array()?.iter().find_map(|item| {
            if rest.is_empty() {
                Some(item)
            } else {
                first_at(item, rest).filter(|v| !v.is_null())
            }
        });
    }
    match rest.strip_prefix('.') {
        Some(rest) => first_at(v, rest),
        None => Some(v),
    }
}

/// The required fields as a YAML skeleton, with example values.
fn skeleton(fields: &[Field], trees: &[Value]) -> String {
    let mut out = String::new();
    for f in fields {
        // Required all the way up: a required field of an optional section is not in the skeleton.
        let chain_required = fields
            .iter()
            .filter(|g| covers(&g.path, &f.path))
            .all(|g| g.required);
        if !chain_required {
            continue;
        }
        let depth = f.path.matches('.').count();
        let indent = "  ".repeat(depth);
        let value = if f.has_fields {
            String::new()
        } else if f.path == "apiVersion" {
            format!(" {}", gpuctl_model::blueprint::API_VERSION)
        } else if f.path == "kind" {
            format!(" {}", gpuctl_model::blueprint::KIND)
        } else {
            example(f, trees)
                .map(|e| format!(" {e}"))
                .unwrap_or_default()
        };
        let _ = writeln!(out, "{indent}{}:{value}", f.name);
    }
    out
}
