//! Device taints during a driver upgrade (issue 39): on a DRA pool whose cluster serves
//! DeviceTaintRule, each node's GPUs are taken out of service with a DeviceTaintRule before the
//! node is cordoned and drained, and the rule is deleted once the node has validated on the new
//! driver. The rule is the one `spec.dra.maintenance[]` renders
//! ([`gpuctl_pipeline::render::dra::taint_rule`]), for an entry named `upgrade-<node>` covering all
//! of the node's GPUs with `NoSchedule`: key `gpuctl.dev/maintenance`, value `upgrade-<node>`,
//! rule `gpuctl-maintenance-upgrade-<node>`.
//!
//! A cordon already keeps the scheduler's ordinary pods off the node; the rule also keeps off the
//! pods a cordon does not (pods tolerating `node.kubernetes.io/unschedulable`, and claims of pods
//! that name the node), and it marks the devices themselves as out of service where DRA-aware
//! tools (and `gpuctl doctor`, GPU218) look. Where the rule is not available the plan says why and
//! the upgrade cordons only, as on device-plugin pools.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use gpuctl_model::blueprint::dra::{DeviceMaintenance, TaintEffect};
use gpuctl_model::blueprint::{Blueprint, GpuPlugin, NodePool};
use gpuctl_model::names::dra_maintenance_rule;
use gpuctl_model::profiles::Catalog;

/// Longest label value (the maintenance name is the taint's value).
const LABEL_VALUE_MAX: usize = 63;

/// Whether and how the upgrade takes nodes' GPUs out of service with DeviceTaintRules.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceTaints {
    /// The rule of each node, by node name (empty: not used).
    pub rules: BTreeMap<String, Value>,
    /// Why not, on a DRA pool where they are not used (`None` when used, or on a device-plugin
    /// pool, where device taints do not apply).
    pub fallback: Option<String>,
}

impl DeviceTaints {
    /// Rules are used.
    pub fn used(&self) -> bool {
        !self.rules.is_empty()
    }
}

/// The maintenance entry the upgrade uses for `node`.
pub fn maintenance_entry(node: &str) -> DeviceMaintenance {
    DeviceMaintenance {
        name: format!("upgrade-{node}"),
        node: node.to_string(),
        device: None,
        effect: TaintEffect::NoSchedule,
    }
}

/// The name of the DeviceTaintRule the upgrade uses for `node`.
pub fn rule_name(node: &str) -> String {
    dra_maintenance_rule(&maintenance_entry(node).name)
}

/// Decides for `pool` of `bp` over `nodes`, with `served` the API version the cluster serves
/// DeviceTaintRule in (`None`: not served).
pub fn decide(
    bp: &Blueprint,
    catalog: &Catalog,
    pool: &NodePool,
    nodes: &[String],
    served: Option<&str>,
) -> DeviceTaints {
    if pool.gpu_plugin != GpuPlugin::Dra {
        return DeviceTaints::default();
    }
    let fallback = |why: String| DeviceTaints {
        rules: BTreeMap::new(),
        fallback: Some(format!(
            "{why}; the upgrade cordons the nodes only, so pods tolerating the cordon can still be given their GPUs while the driver is swapped"
        )),
    };
    let version = &bp.spec.kubernetes.version;
    let facts = &catalog.dra().kubernetes;
    let taints = &facts.device_taints;
    let gate_on = facts
        .gate(&taints.gate, version)
        .is_some_and(|s| s.on_by_default());
    let Some(api) = taints.rule_api_version(version).filter(|_| gate_on) else {
        return fallback(format!(
            "Kubernetes {version} (declared) has no DeviceTaintRule API with {} on (profiles/dra.yaml kubernetes.device_taints)",
            taints.gate
        ));
    };
    match served {
        Some(s) if s == api => {}
        Some(s) => {
            return fallback(format!(
                "the cluster serves DeviceTaintRule as {s}, not {api} as Kubernetes {version} does: is the declared version right?"
            ));
        }
        None => {
            return fallback(format!(
                "the cluster serves no DeviceTaintRule ({api}): turn on the {} gate on the API server, scheduler and controller manager, and `--runtime-config={}`",
                taints.rule_gate,
                taints
                    .rule_runtime_config
                    .iter()
                    .find(|(m, _)| version.starts_with(m.as_str()))
                    .map_or(api, |(_, v)| v.as_str())
            ));
        }
    }
    let mut rules = BTreeMap::new();
    for n in nodes {
        let m = maintenance_entry(n);
        if m.name.len() > LABEL_VALUE_MAX {
            return fallback(format!(
                "node name `{n}` is too long for a taint value `{}` ({} > {LABEL_VALUE_MAX} characters)",
                m.name,
                m.name.len()
            ));
        }
        match gpuctl_pipeline::render::dra::taint_rule(bp, catalog, &m) {
            Ok(rule) => {
                rules.insert(n.clone(), rule);
            }
            Err(e) => return fallback(e),
        }
    }
    DeviceTaints {
        rules,
        fallback: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The DRA shapes fixture on Kubernetes `kube`, its pools on DRA when `dra`.
    fn blueprint(kube: &str, dra: bool) -> Blueprint {
        let mut text = include_str!("../../../../tests/fixtures/dra/shapes.yaml")
            .replace("version: \"1.35.1\"", &format!("version: \"{kube}\""))
            .replace(
                "  dra:\n    shapes:\n",
                "  dra:\n    driver: { deployment: standalone, version: v25.12.0 }\n    shapes:\n",
            );
        if dra {
            text = text.replace("count: 8 }\n", "count: 8 }\n      gpuPlugin: dra\n");
        }
        gpuctl_model::blueprint::load_str("t.yaml", &text)
            .expect("loads")
            .blueprint
    }

    fn decide_for(kube: &str, dra: bool, served: Option<&str>, nodes: &[&str]) -> DeviceTaints {
        let bp = blueprint(kube, dra);
        let pool = bp
            .spec
            .node_pools
            .iter()
            .find(|p| p.gpu.count == 8)
            .expect("an 8-GPU pool")
            .clone();
        let nodes: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        decide(&bp, Catalog::embedded(), &pool, &nodes, served)
    }

    /// On 1.36 with the rule served, each node gets the rule `spec.dra.maintenance` would render
    /// for an entry `upgrade-<node>` over all of its GPUs, NoSchedule.
    #[test]
    fn a_dra_pool_on_1_36_gets_one_maintenance_rule_per_node() {
        let d = decide_for(
            "1.36.3",
            true,
            Some("resource.k8s.io/v1beta2"),
            &["n1", "n2"],
        );
        assert_eq!(d.fallback, None);
        assert_eq!(d.rules.len(), 2);
        assert_eq!(
            d.rules["n1"],
            json!({
                "apiVersion": "resource.k8s.io/v1beta2",
                "kind": "DeviceTaintRule",
                "metadata": {"name": "gpuctl-maintenance-upgrade-n1"},
                "spec": {
                    "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1"},
                    "taint": {"key": "gpuctl.dev/maintenance", "value": "upgrade-n1", "effect": "NoSchedule"},
                },
            })
        );
        assert_eq!(rule_name("n2"), "gpuctl-maintenance-upgrade-n2");
    }

    /// Where the rule cannot be used the plan falls back to cordoning and says why; device-plugin
    /// pools are not concerned at all.
    #[test]
    fn without_the_rule_the_plan_says_why_and_cordons_only() {
        let cases: &[(&str, bool, Option<&str>, &str, &str)] = &[
            (
                "1.35.1",
                true,
                Some("resource.k8s.io/v1alpha3"),
                "n1",
                "Kubernetes 1.35.1 (declared) has no DeviceTaintRule API with DRADeviceTaints on",
            ),
            (
                "1.36.3",
                true,
                None,
                "n1",
                "the cluster serves no DeviceTaintRule (resource.k8s.io/v1beta2): turn on the DRADeviceTaintRules gate",
            ),
            (
                "1.36.3",
                true,
                Some("resource.k8s.io/v1alpha3"),
                "n1",
                "serves DeviceTaintRule as resource.k8s.io/v1alpha3, not resource.k8s.io/v1beta2",
            ),
            (
                "1.36.3",
                true,
                Some("resource.k8s.io/v1beta2"),
                "a-node-name-that-is-far-too-long-to-be-the-value-of-a-taint-x",
                "too long for a taint value",
            ),
        ];
        for (kube, dra, served, node, why) in cases {
            let d = decide_for(kube, *dra, *served, &[node]);
            assert!(d.rules.is_empty(), "{kube} {served:?}");
            let f = d.fallback.unwrap_or_default();
            assert!(
                f.contains(why) && f.contains("cordons the nodes only"),
                "{f}"
            );
        }
        let d = decide_for("1.36.3", false, Some("resource.k8s.io/v1beta2"), &["n1"]);
        assert_eq!(
            d,
            DeviceTaints::default(),
            "device-plugin pools: nothing to say"
        );
    }
}
