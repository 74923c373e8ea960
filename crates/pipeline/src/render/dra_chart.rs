//! NVIDIA's DRA driver chart on the ClusterPolicy + standalone path
//! (`spec.dra.driver.deployment: standalone`): the chart release (its name and home per driver
//! release, profiles/dra.yaml `driver.releases`, `standalone`), its values (GPU resources on with
//! the chart's override, the kubelet plugin restricted to the pools declared `gpuPlugin: dra` by
//! the label gpuctl sets on their nodes, compute domains, feature gates), the node labels that move
//! a pool from the device plugin to DRA, and the migration runbook.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{ChartSource, HelmRelease, Stack};
use gpuctl_model::blueprint::dra::DraDriver;
use gpuctl_model::blueprint::{Blueprint, GpuPlugin, NodePool};
use gpuctl_model::object::set_path;
use gpuctl_model::profiles::Catalog;
use gpuctl_model::profiles::dra::StandaloneFacts;

/// Path of the DRA driver chart values in [`crate::render::RenderedSet::documents`].
pub const DRA_DRIVER_VALUES: &str = "helm/dra-driver-values.yaml";
/// Path of the device-plugin-to-DRA migration runbook in the documents.
pub const DRA_MIGRATION_RUNBOOK: &str = "runbooks/dra-migration.md";

/// The driver settings when the blueprint deploys the standalone chart.
pub fn standalone(bp: &Blueprint) -> Option<&DraDriver> {
    bp.spec.dra.as_ref()?.standalone()
}

/// The pools DRA serves (declared `gpuPlugin: dra`), on the standalone path only.
pub fn dra_pools(bp: &Blueprint) -> Vec<&NodePool> {
    if standalone(bp).is_none() {
        return vec![];
    }
    bp.spec
        .node_pools
        .iter()
        .filter(|p| p.gpu_plugin == GpuPlugin::Dra)
        .collect()
}

/// The labels gpuctl sets on pool `p`'s nodes for the standalone path: on a DRA pool the
/// operator's device-plugin switch off and the kubelet plugin's label on; on the others the
/// kubelet plugin's label off and the switch on (the operator's own default, unless the pool's
/// `operands.devicePlugin` says otherwise), so a pool moved back leaves DRA. Empty off the
/// standalone path.
pub fn pool_labels(
    bp: &Blueprint,
    facts: &StandaloneFacts,
    p: &NodePool,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if standalone(bp).is_none() {
        return out;
    }
    let dra = p.gpu_plugin == GpuPlugin::Dra;
    out.insert(facts.pool_label.clone(), dra.to_string());
    if dra {
        out.insert(facts.device_plugin_label.clone(), "false".to_string());
    } else if p.operands.device_plugin.is_none() {
        out.insert(facts.device_plugin_label.clone(), "true".to_string());
    }
    out
}

/// On the standalone path with DRA pools: the GPU Operator's driver manager gets the DRA pools'
/// label (`driver.manager.env`, NVIDIA's documented workaround), so a driver upgrade evicts the DRA
/// kubelet plugin from those nodes too. An entry the blueprint's own values set is kept.
pub fn driver_manager_env(bp: &Blueprint, facts: &StandaloneFacts, operator_values: &mut Value) {
    if dra_pools(bp).is_empty() {
        return;
    }
    let Some(driver) = operator_values
        .get_mut("driver")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let manager = driver.entry("manager").or_insert_with(|| json!({}));
    let Some(manager) = manager.as_object_mut() else {
        return;
    };
    let env = manager.entry("env").or_insert_with(|| json!([]));
    let Some(list) = env.as_array_mut() else {
        return;
    };
    if !list
        .iter()
        .any(|e| e["name"] == facts.driver_manager_eviction_env.as_str())
    {
        list.push(json!({ "name": facts.driver_manager_eviction_env, "value": facts.pool_label }));
    }
}

/// The chart's values: GPU resources on with the override the chart demands (gpuctl keeps the
/// device plugin off the kubelet plugin's nodes), the kubelet plugin on the DRA pools' label only,
/// compute domains, feature gates; then the blueprint's `values` deep-merged.
pub fn values(d: &DraDriver, facts: &StandaloneFacts) -> Value {
    let v = &facts.values;
    let mut m = Map::new();
    set_path(&mut m, &v.gpu_resources_override, json!(true));
    set_path(&mut m, &v.gpus_enabled, json!(true));
    set_path(&mut m, &v.compute_domains_enabled, json!(d.compute_domains));
    if !d.feature_gates.is_empty() {
        set_path(&mut m, &v.feature_gates, json!(d.feature_gates));
    }
    set_path(
        &mut m,
        &v.kubelet_plugin_node_selector,
        json!({ facts.pool_label.as_str(): "true" }),
    );
    gpuctl_model::profiles::chart::deep_merge(&mut m, &d.values);
    Value::Object(m)
}

/// The chart release (`None` off the standalone path). Its chart name and home follow the
/// declared release: `nvidia/nvidia-dra-driver-gpu` from NVIDIA's Helm repository before v0.4.0,
/// `dra-driver-nvidia-gpu` from its OCI registry after (a release gpuctl does not know, which
/// validation refuses, keeps the newer name).
pub fn release(bp: &Blueprint, catalog: &Catalog) -> Option<HelmRelease> {
    let d = standalone(bp)?;
    let facts = &catalog.dra().standalone;
    let version = d.version.clone().unwrap_or_default();
    let known = catalog.dra().driver.release(&version);
    let (chart, default) = match known.and_then(|r| r.chart_repository.as_ref().map(|u| (r, u))) {
        Some((r, repo)) => (
            r.chart.clone(),
            ChartSource::Oci {
                reference: format!("{}/{}", repo.trim_end_matches('/'), r.chart),
            },
        ),
        None => (
            format!(
                "nvidia/{}",
                known.map_or(facts.release.as_str(), |r| r.chart.as_str())
            ),
            ChartSource::Repository {
                url: facts.calver_chart_repository.clone(),
            },
        ),
    };
    Some(HelmRelease {
        stack: Stack::DraDriver,
        release: facts.release.clone(),
        chart,
        version: version.trim().trim_start_matches('v').to_string(),
        namespace: facts.namespace.clone(),
        install: d.install,
        values: {
            let mut v = values(d, facts);
            // The driver root follows who installs the driver on the provisioned DRA pools;
            // the blueprint's own `values` still win.
            if let (Some(root), Some(m)) = (
                catalog.provisioning().dra_driver_root(bp),
                v.as_object_mut(),
            ) {
                let key = &catalog.provisioning().driver_ownership.dra_root_value;
                if !d.values.contains_key(key) {
                    m.insert(key.clone(), Value::String(root));
                }
            }
            v
        },
        source: ChartSource::from_spec(&d.chart, default),
    })
}

/// The values document: a header with the `helm upgrade --install` command, then the values.
pub fn values_document(r: &HelmRelease, blueprint: &str) -> String {
    format!(
        "# NVIDIA DRA driver chart {} values rendered by gpuctl from blueprint `{blueprint}` (install: {}).\n# helm upgrade --install {} {} --version {} --namespace {} --create-namespace -f dra-driver-values.yaml\n{}",
        r.version,
        r.install,
        r.release,
        r.chart_reference(),
        r.version,
        r.namespace,
        super::text::yaml(&r.values)
    )
}

/// The migration runbook: per DRA pool, the steps that move its nodes from the device plugin to
/// the DRA kubelet plugin without a pod losing its GPU.
pub fn migration_runbook(bp: &Blueprint, facts: &StandaloneFacts) -> Option<String> {
    let pools = dra_pools(bp);
    if pools.is_empty() {
        return None;
    }
    let mut out = format!(
        "# Moving pools from the device plugin to DRA (blueprint `{}`)\n\n\
         gpuctl moves a pool by two node labels: `{}=false` (the GPU Operator removes the device plugin from the node) and `{}=true` (NVIDIA's DRA kubelet plugin, chart release `{}` in `{}`, runs only there). `gpuctl plan` refuses the move while pods on the pool's nodes hold device-plugin GPUs (`nvidia.com/gpu`, `nvidia.com/mig-*`), naming them; `--force-migration` overrides that (the pods keep running on GPUs the scheduler no longer accounts for). Do it node by node, or a batch at a time:\n",
        bp.metadata.name,
        facts.device_plugin_label,
        facts.pool_label,
        facts.release,
        facts.namespace,
    );
    for p in pools {
        let sel = p
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        out.push_str(&format!(
            "\n## Pool `{name}` ({nodes} node(s), `{sel}`)\n\n\
             1. **Cordon** the nodes: `kubectl cordon -l {sel}`.\n\
             2. **Drain the GPU pods**: `gpuctl plan BLUEPRINT` names every pod on the nodes that requests `nvidia.com/gpu` or `nvidia.com/mig-*`; end them through their controllers (scale down, let jobs finish) or empty each node with `kubectl drain NODE --ignore-daemonsets --delete-emptydir-data`. Go on once the plan names none.\n\
             3. **Relabel**: `gpuctl apply BLUEPRINT` (sets `{dp}=false` and `{pl}=true` on the pool's nodes; `kubectl label nodes -l {sel} {dp}=false {pl}=true --overwrite` by hand).\n\
             4. **Wait for the DRA kubelet plugin's ResourceSlices** on each node: `kubectl get resourceslices --field-selector spec.nodeName=NODE` lists a slice of driver `gpu.nvidia.com` with the node's GPUs (and `kubectl -n {ns} get pods -o wide` shows the kubelet plugin Running there); the node's `nvidia.com/gpu` allocatable drops to 0 once the device plugin is gone.\n\
             5. **Uncordon**: `kubectl uncordon -l {sel}`.\n\
             6. **Verify**: a test pod with a claim of one of the blueprint's shapes is allocated on the pool (`kubectl get resourceclaims -A`), `gpuctl plan` is empty, and `gpuctl doctor` reports no finding for the pool.\n\n\
             Back to the device plugin: the same steps with `gpuPlugin: devicePlugin` (gpuctl sets `{dp}=true` and `{pl}=false`), after the pods holding claims on the pool are gone (`kubectl get resourceclaims -A -o wide`: plan does not check claims).\n",
            name = p.name,
            nodes = p.nodes,
            dp = facts.device_plugin_label,
            pl = facts.pool_label,
            ns = facts.namespace,
        ));
    }
    out.push_str(&format!(
        "\n## Upgrading the DRA driver\n\nUpgrades go forward only (the kubelet plugin's checkpoint cannot be read by an older release): gpuctl refuses a downgrade of the installed release. The first upgrade from a release before {renamed} to {renamed} or later changes the chart (`nvidia-dra-driver-gpu` to `dra-driver-nvidia-gpu`, OCI registry): apply the new release's CRDs by hand first, and set `spec.dra.driver.values.nameOverride: {name}` so the objects keep their names; gpuctl refuses the upgrade without it.\n",
        renamed = facts.renamed_in,
        name = facts.name_override,
    ));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::ChartSource;

    /// The DRA rules' base (tests/fixtures/dra/shapes.yaml) on the standalone path, with the
    /// H100 pool moved to DRA and `driver` spliced in.
    fn blueprint(driver: &str) -> Blueprint {
        let text = include_str!("../../../../tests/fixtures/dra/shapes.yaml")
            .replace(
                "  dra:\n    shapes:\n",
                &format!("  dra:\n    driver: {driver}\n    shapes:\n"),
            )
            .replace(
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      gpuPlugin: dra\n",
            );
        gpuctl_model::blueprint::load_str("sa.yaml", &text)
            .expect("loads")
            .blueprint
    }

    /// Chart name, home and version follow the driver release: NVIDIA's Helm repository and the
    /// old name before v0.4.0, the OCI registry and the new name from it; a chart source the
    /// blueprint names wins.
    #[test]
    fn the_chart_follows_the_release() {
        let c = Catalog::embedded();
        for (driver, chart, reference, version) in [
            (
                "{ deployment: standalone, version: v25.12.0, install: helm }",
                "nvidia/nvidia-dra-driver-gpu",
                "nvidia/nvidia-dra-driver-gpu",
                "25.12.0",
            ),
            (
                "{ deployment: standalone, version: v0.4.1, install: helm }",
                "dra-driver-nvidia-gpu",
                "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
                "0.4.1",
            ),
            (
                "{ deployment: standalone, version: v0.5.0, chart: { oci: \"oci://mirror.example/charts/dra-driver-nvidia-gpu\" } }",
                "dra-driver-nvidia-gpu",
                "oci://mirror.example/charts/dra-driver-nvidia-gpu",
                "0.5.0",
            ),
        ] {
            let r = release(&blueprint(driver), c).expect("standalone");
            assert_eq!(r.stack, Stack::DraDriver);
            assert_eq!(
                (r.release.as_str(), r.namespace.as_str()),
                ("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu")
            );
            assert_eq!(r.chart, chart, "{driver}");
            assert_eq!(r.chart_reference(), reference, "{driver}");
            assert_eq!(r.version, version, "{driver}");
        }
        let r = release(
            &blueprint("{ deployment: standalone, version: v25.8.0 }"),
            c,
        )
        .unwrap();
        assert_eq!(
            r.source,
            ChartSource::Repository {
                url: "https://helm.ngc.nvidia.com/nvidia".into()
            }
        );
        assert_eq!(r.install, gpuctl_model::blueprint::InstallMode::None);
        assert!(release(&blueprint("{ deployment: gpuCluster }"), c).is_none());
    }

    /// The values: GPU resources on with the chart's override, the kubelet plugin on the DRA
    /// pools' label, compute domains and gates as declared, the blueprint's values merged last.
    #[test]
    fn values_restrict_the_kubelet_plugin_to_the_dra_pools() {
        let c = Catalog::embedded();
        let bp = blueprint(
            "{ deployment: standalone, version: v25.12.0, computeDomains: false, featureGates: { MPSSupport: true }, values: { nameOverride: x, resources: { gpus: { enabled: false } } } }",
        );
        let r = release(&bp, c).unwrap();
        assert_eq!(
            r.values,
            json!({
                "gpuResourcesEnabledOverride": true,
                "resources": {"gpus": {"enabled": false}, "computeDomains": {"enabled": false}},
                "featureGates": {"MPSSupport": true},
                "kubeletPlugin": {"nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"}},
                "nameOverride": "x",
            })
        );
        let doc = values_document(&r, "sa");
        assert!(doc.contains("# helm upgrade --install nvidia-dra-driver-gpu nvidia/nvidia-dra-driver-gpu --version 25.12.0 --namespace nvidia-dra-driver-gpu --create-namespace -f dra-driver-values.yaml\n"), "{doc}");
    }

    /// Per pool: the DRA pool gets the device plugin off and the kubelet plugin's label on, the
    /// other pool the reverse; nothing off the standalone path. The operator's driver manager
    /// learns the label.
    #[test]
    fn node_labels_and_the_driver_manager() {
        let facts = &Catalog::embedded().dra().standalone;
        let bp = blueprint("{ deployment: standalone, version: v25.12.0 }");
        let labels = |i: usize| pool_labels(&bp, facts, &bp.spec.node_pools[i]);
        assert_eq!(
            labels(0),
            BTreeMap::from([
                (
                    "nvidia.com/dra-kubelet-plugin".to_string(),
                    "true".to_string()
                ),
                (
                    "nvidia.com/gpu.deploy.device-plugin".to_string(),
                    "false".to_string()
                ),
            ])
        );
        assert_eq!(
            labels(1),
            BTreeMap::from([
                (
                    "nvidia.com/dra-kubelet-plugin".to_string(),
                    "false".to_string()
                ),
                (
                    "nvidia.com/gpu.deploy.device-plugin".to_string(),
                    "true".to_string()
                ),
            ])
        );
        let gc = blueprint("{ deployment: gpuCluster }");
        assert!(pool_labels(&gc, facts, &gc.spec.node_pools[0]).is_empty());
        let mut values = json!({"driver": {"manager": {"env": [{"name": "KEEP", "value": "1"}]}}});
        driver_manager_env(&bp, facts, &mut values);
        driver_manager_env(&bp, facts, &mut values);
        assert_eq!(
            values["driver"]["manager"]["env"],
            json!([{"name": "KEEP", "value": "1"}, {"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": "nvidia.com/dra-kubelet-plugin"}])
        );
        let runbook = migration_runbook(&bp, facts).unwrap();
        for step in [
            "Cordon",
            "Drain the GPU pods",
            "Relabel",
            "ResourceSlices",
            "Uncordon",
            "Verify",
        ] {
            assert!(runbook.contains(step), "{step}: {runbook}");
        }
        assert!(migration_runbook(&gc, facts).is_none());
    }
}
