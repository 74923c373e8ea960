//! DRA serving the extended resources pods already ask for (KEP-5004, `spec.dra.extendedResources`):
//! which DeviceClass serves each name (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`) through its
//! `spec.extendedResourceName`, and who owns that class: NVIDIA's driver chart (its `gpu.nvidia.com`
//! sets `nvidia.com/gpu` from v25.12.0, profiles/dra.yaml `device_classes`) or gpuctl. A name is
//! served by one class only: gpuctl never renders a class for a name the chart's class serves.
//! Render writes gpuctl's classes and lets each tenant's DRA quota charge the serving classes like
//! the name; validation (GPU158) refuses what cannot work.

use gpuctl_model::blueprint::dra::DraDeployment;
use gpuctl_model::blueprint::{Blueprint, GpuPlugin};
use gpuctl_model::profiles::Catalog;

/// Suffix of the DeviceClasses gpuctl renders to serve an extended resource.
pub const EXTENDED_CLASS_SUFFIX: &str = ".extended.gpuctl.dev";

/// One DeviceClass that serves an extended resource from DRA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedClass {
    /// The DeviceClass.
    pub class: String,
    /// The extended resource it serves (`nvidia.com/gpu`).
    pub resource: String,
    /// `gpu` or `mig`.
    pub device_type: String,
    /// The MIG profile (mig only).
    pub profile: Option<String>,
    /// Rendered by gpuctl (else NVIDIA's chart owns it and gpuctl renders nothing for the name).
    pub by_gpuctl: bool,
}

/// Whether the declared Kubernetes keeps `extendedResourceName` (its gate on by default).
pub fn gate_on(bp: &Blueprint, catalog: &Catalog) -> bool {
    let k = &catalog.dra().kubernetes;
    k.gate(&k.extended_resource_gate, &bp.spec.kubernetes.version)
        .is_some_and(|s| s.on_by_default())
}

/// Whether pool `i` is served by DRA (its devices are in ResourceSlices, its device plugin off).
pub fn dra_pool(bp: &Blueprint, i: usize) -> bool {
    let Some(driver) = bp.spec.dra.as_ref().and_then(|d| d.driver.as_ref()) else {
        return false;
    };
    match driver.deployment {
        DraDeployment::GpuCluster => true,
        DraDeployment::Standalone => bp.spec.node_pools[i].gpu_plugin == GpuPlugin::Dra,
    }
}

/// The chart-owned class serving `resource` for the declared driver, if its chart sets one.
fn chart_class(bp: &Blueprint, catalog: &Catalog, device_type: &str) -> Option<(String, String)> {
    let driver = bp.spec.dra.as_ref()?.standalone()?;
    let facts = &catalog.dra().driver;
    let class = facts
        .device_classes
        .iter()
        .find(|c| c.device_type == device_type)?;
    let name = class.extended_resource_name.clone()?;
    let since = class.extended_resource_since.as_deref()?;
    let version = driver.version.as_deref()?;
    let pos = |v: &str| facts.releases.iter().position(|r| r.version == v);
    match (pos(version), pos(since)) {
        (Some(have), Some(from)) if have >= from => Some((class.name.clone(), name)),
        _ => None,
    }
}

/// Kueue's `deviceClassMappings` for the blueprint's DRA classes of GPUs and MIG devices: each
/// shape's class charged to the resource the device plugin gives the same devices
/// ([`crate::cel::device_class_mappings`]) and, with `spec.dra.extendedResources`, each class that
/// serves a name pods ask for mapped to that name: Kueue (KueueDRAIntegrationExtendedResource)
/// charges a pod's plain request served by DRA to its class's mapping, and a claim of the class
/// to the same one. Sorted; what render writes (with the ComputeDomain channel beside it) and what
/// GPU173 counts.
pub fn kueue_class_mappings(bp: &Blueprint, catalog: &Catalog) -> Vec<(String, Vec<String>)> {
    let mut out = bp
        .spec
        .dra
        .as_ref()
        .map(|d| crate::cel::device_class_mappings(&d.shapes, catalog))
        .unwrap_or_default();
    if bp.spec.dra.as_ref().is_some_and(|d| d.extended_resources) {
        for c in classes(bp, catalog) {
            match out.iter_mut().find(|(name, _)| *name == c.resource) {
                Some((_, classes)) => {
                    classes.push(c.class);
                    classes.sort();
                    classes.dedup();
                }
                None => out.push((c.resource, vec![c.class])),
            }
        }
        out.sort();
    }
    out
}

/// The classes that serve extended resources on the declared cluster, sorted by class name:
/// the chart's (whenever the declared Kubernetes keeps the field, whether or not the blueprint
/// asks: the chart sets it anyway) and, with `spec.dra.extendedResources`, gpuctl's for the names
/// no chart class serves: `nvidia.com/gpu` and each MIG profile pre-created on a DRA pool.
pub fn classes(bp: &Blueprint, catalog: &Catalog) -> Vec<ExtendedClass> {
    let mut out = Vec::new();
    let Some(dra) = &bp.spec.dra else {
        return out;
    };
    if !gate_on(bp, catalog) {
        return out;
    }
    let names = &catalog.dra().kueue.resource_names;
    let chart_gpu = chart_class(bp, catalog, "gpu");
    if let Some((class, resource)) = &chart_gpu {
        out.push(ExtendedClass {
            class: class.clone(),
            resource: resource.clone(),
            device_type: "gpu".into(),
            profile: None,
            by_gpuctl: false,
        });
    }
    if dra.extended_resources && dra.driver.is_some() {
        if chart_gpu.as_ref().map(|(_, r)| r) != Some(&names.gpu) {
            out.push(ExtendedClass {
                class: format!("gpu{EXTENDED_CLASS_SUFFIX}"),
                resource: names.gpu.clone(),
                device_type: "gpu".into(),
                profile: None,
                by_gpuctl: true,
            });
        }
        let mut profiles = std::collections::BTreeSet::new();
        for (i, pool) in bp.spec.node_pools.iter().enumerate() {
            if !dra_pool(bp, i) {
                continue;
            }
            for layout in gpuctl_model::blueprint::resources::mig_layout_per_gpu(pool)
                .into_iter()
                .flatten()
            {
                profiles.extend(layout.into_iter().filter(|(_, n)| *n > 0).map(|(p, _)| p));
            }
        }
        for p in profiles {
            let resource = names.mig(&p);
            let suffix = resource.trim_start_matches(names.mig_prefix.as_str());
            out.push(ExtendedClass {
                class: format!("mig-{suffix}{EXTENDED_CLASS_SUFFIX}"),
                resource,
                device_type: "mig".into(),
                profile: Some(p),
                by_gpuctl: true,
            });
        }
    }
    out.sort_by(|a, b| a.class.cmp(&b.class));
    out
}

/// The CEL selectors of a class gpuctl renders: the driver's base class selector, and the profile
/// for a MIG class (read only where the facts say `mig` devices publish it).
pub fn selectors(c: &ExtendedClass, catalog: &Catalog) -> Result<Vec<String>, String> {
    let facts = &catalog.dra().driver;
    let base = facts
        .device_classes
        .iter()
        .find(|d| d.device_type == c.device_type)
        .ok_or_else(|| {
            format!(
                "the DRA facts have no class for `{}` devices",
                c.device_type
            )
        })?;
    let mut out = vec![base.selector.clone()];
    if let Some(p) = &c.profile {
        facts
            .attribute(&c.device_type, "profile")
            .ok_or_else(|| format!("`{}` devices publish no `profile`", c.device_type))?;
        out.push(format!(
            "device.attributes['{}'].profile == '{}'",
            base.driver,
            p.replace('\\', "\\\\").replace('\'', "\\'")
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuctl_model::blueprint::dra::DeviceMaintenance;
    use serde_json::json;

    /// The DRA rules' base (tests/fixtures/dra/shapes.yaml) on Kubernetes `kube`, with `driver`
    /// and `extra` spliced into `spec.dra`, both pools moved to DRA, and the tenant's quota `quota`.
    fn blueprint(kube: &str, driver: &str, extra: &str, quota: &str) -> Blueprint {
        let text = include_str!("../../../tests/fixtures/dra/shapes.yaml")
            .replace("version: \"1.35.1\"", &format!("version: \"{kube}\""))
            .replace(
                "  dra:\n    shapes:\n",
                &format!("  dra:\n    driver: {driver}\n{extra}    shapes:\n"),
            )
            .replace("count: 8 }\n", "count: 8 }\n      gpuPlugin: dra\n")
            .replace("count: 4 }\n", "count: 4 }\n      gpuPlugin: dra\n")
            .replace("quota: { pods: 50 }", quota);
        gpuctl_model::blueprint::load_str("ext.yaml", &text)
            .expect("loads")
            .blueprint
    }

    const SA: &str = "{ deployment: standalone, version: v25.12.0 }";

    fn names(v: &[ExtendedClass]) -> Vec<(&str, &str, bool)> {
        v.iter()
            .map(|c| (c.class.as_str(), c.resource.as_str(), c.by_gpuctl))
            .collect()
    }

    /// On 1.36 the chart's gpu.nvidia.com (v25.12.0+) serves nvidia.com/gpu and gpuctl adds a class
    /// per pre-created MIG profile of a DRA pool; under GPUCluster (whose class has no
    /// extendedResourceName) or with a chart before v25.12.0 gpuctl serves nvidia.com/gpu itself;
    /// on 1.35 (gate off) nothing serves any name, whatever the blueprint says.
    #[test]
    fn one_class_per_name_and_the_chart_s_first() {
        let c = Catalog::embedded();
        let on = "    extendedResources: true\n";
        let bp = blueprint("1.36.3", SA, on, "quota: { pods: 50 }");
        assert_eq!(
            names(&classes(&bp, c)),
            vec![
                ("gpu.nvidia.com", "nvidia.com/gpu", false),
                (
                    "mig-1g.10gb.extended.gpuctl.dev",
                    "nvidia.com/mig-1g.10gb",
                    true
                ),
            ]
        );
        let bp = blueprint(
            "1.36.3",
            "{ deployment: standalone, version: v25.8.0 }",
            on,
            "quota: { pods: 50 }",
        );
        assert_eq!(
            names(&classes(&bp, c))[0],
            ("gpu.extended.gpuctl.dev", "nvidia.com/gpu", true)
        );
        let bp = blueprint(
            "1.36.3",
            "{ deployment: gpuCluster }",
            on,
            "quota: { pods: 50 }",
        );
        assert_eq!(
            names(&classes(&bp, c))[0],
            ("gpu.extended.gpuctl.dev", "nvidia.com/gpu", true)
        );
        // Without the flag only the chart's class (it sets the field anyway).
        let bp = blueprint("1.36.3", SA, "", "quota: { pods: 50 }");
        assert_eq!(
            names(&classes(&bp, c)),
            vec![("gpu.nvidia.com", "nvidia.com/gpu", false)]
        );
        let bp = blueprint("1.35.1", SA, on, "quota: { pods: 50 }");
        assert!(classes(&bp, c).is_empty());
    }

    /// What render writes: gpuctl's MIG class with its extendedResourceName and selectors; in the
    /// tenant's DRA quota the serving classes get the tenant's quota of the name (not 0, which
    /// would refuse the scheduler's claims), and no key where the tenant has no such quota.
    #[test]
    fn classes_and_quota_as_rendered() {
        let c = Catalog::embedded();
        let bp = blueprint(
            "1.36.3",
            SA,
            "    extendedResources: true\n",
            "quota: { pods: 50, nvidia.com/gpu: 16 }",
        );
        let mig = classes(&bp, c).into_iter().find(|x| x.by_gpuctl).unwrap();
        assert_eq!(
            selectors(&mig, c).unwrap(),
            vec![
                "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'".to_string(),
                "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'".to_string(),
            ]
        );
        let t = &bp.spec.tenants[0];
        let hard = crate::render::dra::quota(&bp, c, t);
        assert_eq!(
            hard["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"],
            json!("16")
        );
        assert_eq!(
            hard["mig.nvidia.com.deviceclass.resource.k8s.io/devices"],
            json!("0"),
            "a class that serves no name stays closed"
        );
        assert!(
            hard.get("mig-1g.10gb.extended.gpuctl.dev.deviceclass.resource.k8s.io/devices")
                .is_none(),
            "no quota of nvidia.com/mig-1g.10gb: no key"
        );
        // On 1.35 nothing serves a name: NVIDIA's classes are closed as before.
        let bp = blueprint("1.35.1", SA, "", "quota: { pods: 50, nvidia.com/gpu: 16 }");
        let hard = crate::render::dra::quota(&bp, c, &bp.spec.tenants[0]);
        assert_eq!(
            hard["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"],
            json!("0")
        );
    }

    /// A maintenance entry becomes a DeviceTaintRule of the API the declared minor serves, on the
    /// node's pool of NVIDIA's GPU driver, one device or all.
    #[test]
    fn maintenance_is_a_device_taint_rule() {
        let c = Catalog::embedded();
        let bp = blueprint("1.36.3", SA, "", "quota: { pods: 50 }");
        let m: DeviceMaintenance =
            serde_json::from_value(json!({"name": "rma", "node": "n7", "device": "gpu-3"}))
                .unwrap();
        let rule = crate::render::dra::taint_rule(&bp, c, &m).unwrap();
        assert_eq!(
            rule,
            json!({
                "apiVersion": "resource.k8s.io/v1beta2",
                "kind": "DeviceTaintRule",
                "metadata": {"name": "gpuctl-maintenance-rma"},
                "spec": {
                    "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n7", "device": "gpu-3"},
                    "taint": {"key": "gpuctl.dev/maintenance", "value": "rma", "effect": "NoSchedule"},
                },
            })
        );
        let bp = blueprint("1.34.2", SA, "", "quota: { pods: 50 }");
        assert!(crate::render::dra::taint_rule(&bp, c, &m).is_err());
    }
}
