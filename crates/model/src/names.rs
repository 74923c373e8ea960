//! Every label, annotation, taint and object name gpuctl writes or reads on live objects, in one
//! place: render, plan, upgrade planning and the cluster crate agree on them by using these.

use crate::blueprint::UpgradeStrategy;

/// A DNS-1123 label (apimachinery `IsDNS1123Label`): lower-case alphanumerics and `-`,
/// alphanumeric at both ends, 1..=`max` characters (`max`: the catalog's
/// `kubernetes_names.dns1123_label_max_length`; a subdomain's parts have no limit of their own).
/// Validation and the binary's `import --name` check names with this one function.
pub fn is_dns_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Field manager of everything `gpuctl apply` writes (server-side apply).
pub const FIELD_MANAGER: &str = "gpuctl";
/// Field manager of everything an upgrade writes (distinct from `gpuctl`: an apply never takes
/// over the labels an upgrade in progress owns; `upgrade/mod.rs` explains).
pub const UPGRADE_FIELD_MANAGER: &str = "gpuctl-upgrade";
/// Field manager of a fleet's revision stamp on each cluster's ApplySet parent (not `gpuctl`: a
/// plain `gpuctl apply` keeps the two annotations below).
pub const FLEET_FIELD_MANAGER: &str = "gpuctl-fleet";
/// Field manager of the MultiKueue credential Secrets `fleet apply` writes on the manager.
pub const MULTIKUEUE_FIELD_MANAGER: &str = "gpuctl-multikueue";
/// Annotation on a cluster's ApplySet parent: the revision `fleet apply` last applied there.
pub const FLEET_REVISION_ANNOTATION: &str = "gpuctl.dev/fleet-revision";
/// Annotation on a cluster's ApplySet parent: when that revision was applied (RFC 3339, UTC).
pub const FLEET_APPLIED_AT_ANNOTATION: &str = "gpuctl.dev/fleet-applied-at";

// Labels and annotations gpuctl renders.

/// Node label naming the mig-parted config MIG Manager applies.
pub const MIG_CONFIG_LABEL: &str = "nvidia.com/mig.config";
/// Node label naming the device-plugin config key a node uses.
pub const DEVICE_PLUGIN_CONFIG_LABEL: &str = "nvidia.com/device-plugin.config";
/// Node label (gpuctl's) naming the NVIDIADriver CR that owns a pool's nodes. Equality node selectors
/// cannot say "every GPU node except these pools", so each pool's nodes carry the name of their CR
/// and every CR selects exactly one value: the selectors are disjoint by construction.
pub const DRIVER_LABEL: &str = "gpuctl.dev/driver";
/// Label on the nodes of provisioned pools whose new nodes wait for the GPU readiness taint to be
/// removed (`spec.nodeReadiness`): the NodeReadinessRule selects them by it.
pub const READINESS_GATED_LABEL: &str = "gpuctl.dev/gpu-readiness";
/// Namespace label naming the tenant that owns it; Kueue ClusterQueues select tenants by it.
pub const TENANT_LABEL: &str = "gpuctl.dev/tenant";
/// Namespace annotation Volcano reads as the default queue of the namespace's pods and PodGroups.
pub const VOLCANO_QUEUE_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";

/// Label gpuctl gives a Helm release it installs (`helm upgrade --install --labels`, stored on
/// the release's storage Secrets beside [`crate::applyset::BLUEPRINT_LABEL`]), naming the stack
/// (`gpu-operator`, `network-operator`, `kueue`): how a plan knows which releases gpuctl installed
/// for a blueprint, so that dropping a stack from it plans the release's uninstall.
pub const STACK_LABEL: &str = "gpuctl.dev/stack";

// Labels the GPU Operator, GPU Feature Discovery, MIG Manager and Kueue set, which gpuctl reads.

/// The operator's driver-upgrade state label (gpu-operator.md §2.4).
pub const UPGRADE_STATE_LABEL: &str = "nvidia.com/gpu-driver-upgrade-state";
/// Final state of the operator's upgrade state machine.
pub const UPGRADE_DONE: &str = "upgrade-done";
/// Failed state of the operator's upgrade state machine.
pub const UPGRADE_FAILED: &str = "upgrade-failed";
/// The CR that owns a node, as the operator (v26.7 on) labels it (gpu-operator.md §2.2).
pub const DRIVER_OWNER_LABEL: &str = "nvidia.com/gpu-operator.driver.owner";
/// The full driver version GPU Feature Discovery publishes (gpu-operator.md §5).
pub const DRIVER_VERSION_LABEL: &str = "nvidia.com/cuda.driver-version.full";
/// MIG Manager's reconfiguration state (gpu-operator.md §3.3).
pub const MIG_CONFIG_STATE_LABEL: &str = "nvidia.com/mig.config.state";
/// Whether the node's GPUs can run MIG (GFD).
pub const MIG_CAPABLE_LABEL: &str = "nvidia.com/mig.capable";
/// Pods the driver-upgrade controller never drains; gpuctl's drain honours it too (§2.4).
pub const DRAIN_SKIP_LABEL: &str = "nvidia.com/gpu-driver-upgrade-drain.skip";
/// Label selector of the operator's validator pods (the state `validation-required` waits for them).
pub const VALIDATOR_SELECTOR: &str = "app=nvidia-operator-validator";
/// Kueue's pod label naming the LocalQueue a workload was submitted to.
pub const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// The taint that steers new work away from nodes still waiting for the new driver.
/// `PreferNoSchedule` only: it never makes a pod unschedulable, it makes the scheduler prefer
/// nodes that already run the target driver, so fewer new jobs land where a drain comes next.
pub const PENDING_TAINT_KEY: &str = "gpuctl.dev/driver-upgrade";
/// Value of [`PENDING_TAINT_KEY`].
pub const PENDING_TAINT_VALUE: &str = "pending";
/// Effect of [`PENDING_TAINT_KEY`].
pub const PENDING_TAINT_EFFECT: &str = "PreferNoSchedule";

// A driver upgrade's own labels and taint.

pub use crate::blueprint::DEFAULT_COLOR_LABEL;
/// Label on the journal ConfigMap and Lease (value: the pool), and on a green CR the upgrade made.
pub const UPGRADE_POOL_LABEL: &str = "gpuctl.dev/upgrade-pool";
/// GFD's label of the GPU model.
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

/// Prefix of the node labels that place each GPU Operator operand on a node:
/// `nvidia.com/gpu.deploy.<operand>` for `driver`, `container-toolkit`, `device-plugin`,
/// `gpu-feature-discovery`, `dcgm`, `dcgm-exporter`, `mig-manager`, `node-status-exporter` and
/// `operator-validator`. The operator sets each to `true` on GPU nodes unless it is already set,
/// and an operand's DaemonSet selects `<label>=true`, so `false` keeps the operand off the node
/// (NVIDIA/gpu-operator controllers/state_manager.go, gpuStateLabels; GPU Operator docs, "Common
/// chart customization options": per-node operand labels).
pub const OPERAND_DEPLOY_LABEL_PREFIX: &str = "nvidia.com/gpu.deploy.";

/// The node label that places the operator's validator on a node (`false`: no validator expected).
pub const VALIDATOR_DEPLOY_LABEL: &str = "nvidia.com/gpu.deploy.operator-validator";

// Object names.

/// Name of the cluster-default NVIDIADriver CR. Not `default`: the chart's own default CR has that
/// name, and Helm would delete ours when the chart stops deploying its own.
pub const DEFAULT_DRIVER_CR: &str = "cluster-default";

/// Name of the NVIDIADriver CR of a pool that overrides the driver with `version` (the version as
/// the blueprint writes it), which is also the value of the pool's nodes' [`DRIVER_LABEL`].
///
/// - `blue-green`: `pool-<pool>-<version slug>` (`pool-h100-train-595-91-07`; the slug is the
///   version in lower-case ASCII alphanumerics, anything else `-`). A CR's version never changes:
///   a driver upgrade creates the CR of the target version beside the pool's CR and moves the
///   nodes over in batches, and that green CR is exactly what render gives once the blueprint
///   declares the target, so `gpuctl apply` agrees with the nodes afterwards.
/// - `rolling`: `pool-<pool>`, whatever the version: the operator upgrades the CR in place under its
///   upgradePolicy, and a new name per version would move every node at once. This is also the
///   name every pool's own CR had before blue-green names carried the version.
///
/// Driver upgrades name their green CR with this function; validation (GPU017) checks that the
/// name fits a label value.
pub fn pool_driver_cr_name(pool: &str, version: &str, strategy: UpgradeStrategy) -> String {
    match strategy {
        UpgradeStrategy::Rolling => format!("pool-{pool}"),
        UpgradeStrategy::BlueGreen => format!("pool-{pool}-{}", slug(version)),
    }
}

/// `text` as a name part: ASCII letters and digits lower-cased, every other character `-`
/// (`580.105.08` -> `580-105-08`, `NVIDIA-H100-80GB-HBM3` -> `nvidia-h100-80gb-hbm3`). Used for
/// driver CR names and for the pool names import derives from GPU products.
pub fn slug(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// Name of the Lease that lets one `gpuctl apply` of `blueprint` run at a time: the ApplySet
/// parent's name, in its namespace, so `kubectl get configmap,lease NAME` shows both.
pub fn apply_lock_name(blueprint: &str) -> String {
    crate::applyset::ApplySetParent::for_blueprint(blueprint, "").name
}

/// Name of the journal ConfigMap and of the Lease for `pool`.
pub fn journal_name(pool: &str) -> String {
    format!("gpuctl-upgrade-{pool}")
}

/// Name of a tenant's ResourceQuota in each of its namespaces (render writes it; validation names
/// it in findings).
pub fn quota_name(tenant: &str) -> String {
    format!("{tenant}-quota")
}

/// Suffix of the DeviceClass gpuctl renders for a DRA device shape (`h100.shapes.gpuctl.dev`):
/// under gpuctl's own domain, so it never collides with a class the driver's chart creates.
pub const DRA_SHAPE_CLASS_SUFFIX: &str = ".shapes.gpuctl.dev";

/// The ClusterRole aggregated into `admin` and `edit` that lets tenants manage ComputeDomains.
pub const COMPUTE_DOMAIN_ROLE: &str = "gpuctl-compute-domains-edit";

/// The DeviceClass of DRA device shape `shape`.
pub fn dra_shape_class(shape: &str) -> String {
    format!("{shape}{DRA_SHAPE_CLASS_SUFFIX}")
}

/// Name of the DeviceTaintRule of `spec.dra.maintenance[]` entry `name`.
pub fn dra_maintenance_rule(name: &str) -> String {
    format!("gpuctl-maintenance-{name}")
}

/// The key of the device taint gpuctl's maintenance DeviceTaintRules put on devices (the entry's
/// name is its value).
pub const MAINTENANCE_TAINT_KEY: &str = "gpuctl.dev/maintenance";

/// Name of the ResourceQuota on DRA device classes in each namespace of a tenant with claims
/// (apart from its `quota`, which it leaves as written).
pub fn dra_quota_name(tenant: &str) -> String {
    format!("{tenant}-dra-quota")
}

/// The GPU Operator's operand pods by the prefix of their `app` label (or, without one, of their
/// name), and what each is, for `gpuctl doctor`. From the operator's DaemonSet manifests
/// (`assets/state-*/0500_daemonset.yaml`, `manifests/state-driver/0500_daemonset.yaml`: the
/// driver DaemonSets of NVIDIADriver CRs are `nvidia-gpu-driver-<os>-<hash>`), as the rendered
/// troubleshooting runbook's `kubectl ... -l app=...` commands name them.
pub const OPERAND_APPS: &[(&str, &str)] = &[
    ("nvidia-driver-daemonset", "driver"),
    ("nvidia-gpu-driver-", "driver"),
    ("nvidia-container-toolkit-daemonset", "container toolkit"),
    ("nvidia-device-plugin-daemonset", "device plugin"),
    (
        "nvidia-device-plugin-mps-control-daemon",
        "device plugin (MPS)",
    ),
    ("nvidia-mig-manager", "MIG manager"),
    ("gpu-feature-discovery", "GPU Feature Discovery"),
    ("nvidia-dcgm-exporter", "DCGM exporter"),
    ("nvidia-dcgm", "DCGM"),
    ("nvidia-operator-validator", "operator validator"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_as_the_api_server_checks_them() {
        for (name, max, ok) in [
            ("train-prod", 63, true),
            ("a", 63, true),
            ("0lab9", 63, true),
            ("", 63, false),
            ("-lab", 63, false),
            ("lab-", 63, false),
            ("Lab", 63, false),
            ("lab.prod", 63, false),
            ("lab_prod", 63, false),
            ("abcd", 3, false),
            ("abc", 3, true),
        ] {
            assert_eq!(is_dns_label(name, max), ok, "{name:?} (at most {max})");
        }
    }

    #[test]
    fn blue_green_pool_crs_are_named_after_their_version_rolling_ones_not() {
        let bg = UpgradeStrategy::BlueGreen;
        assert_eq!(
            pool_driver_cr_name("h100-train", "595.91.07", bg),
            "pool-h100-train-595-91-07"
        );
        assert_eq!(
            pool_driver_cr_name("a", "580.105.08", bg),
            "pool-a-580-105-08"
        );
        // Anything but ASCII alphanumerics becomes `-`, upper case becomes lower case.
        assert_eq!(pool_driver_cr_name("a", "R580_x", bg), "pool-a-r580-x");
        for v in ["580.105.08", "595.91.07"] {
            assert_eq!(
                pool_driver_cr_name("h100-train", v, UpgradeStrategy::Rolling),
                "pool-h100-train"
            );
        }
    }

    #[test]
    fn a_slug_keeps_ascii_letters_and_digits_lower_cased() {
        assert_eq!(slug("NVIDIA-H100-80GB-HBM3"), "nvidia-h100-80gb-hbm3");
        assert_eq!(slug("RTX PRO 6000 (Blackwell)"), "rtx-pro-6000--blackwell-");
        assert_eq!(slug("é.1"), "--1");
    }
}
