//! DRA device shapes (`spec.dra.shapes`) and tenant claims (`spec.tenants[].claims`) as objects:
//! a DeviceClass per shape whose CEL selectors read what NVIDIA's DRA driver publishes, a
//! ResourceClaimTemplate per claimed shape in each tenant namespace, and a ResourceQuota per such
//! namespace that allows the claimed shapes' devices and no other GPU device class; where tenants
//! may create ComputeDomains, a ClusterRole that lets namespace editors do so and the count of them
//! in each such quota.
//! The selectors come from [`crate::cel`].

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Builder, Phase, RenderError};
use crate::cel::{device_type, driver_of, selectors};
use gpuctl_model::blueprint::dra::{
    DeviceMaintenance, DeviceShape, DeviceToleration, TolerationOperator,
};
use gpuctl_model::blueprint::{Blueprint, Tenant};
use gpuctl_model::names::{
    MAINTENANCE_TAINT_KEY, dra_maintenance_rule, dra_quota_name, dra_shape_class,
};
use gpuctl_model::profiles::Catalog;

/// Renders the shapes' DeviceClasses and, per tenant with claims, its templates and quota.
pub(crate) fn objects(
    bp: &Blueprint,
    catalog: &Catalog,
    out: &mut Builder<'_>,
) -> Result<(), RenderError> {
    let Some(dra) = &bp.spec.dra else {
        return Ok(());
    };
    let api = &catalog.dra().kubernetes.api_version;
    for (i, shape) in dra.shapes.iter().enumerate() {
        if shape.has_alternatives() {
            continue; // its template names its alternatives' classes
        }
        let selectors = selectors(shape, catalog).map_err(|message| RenderError::Dra {
            path: format!("spec.dra.shapes[{i}]"),
            message,
        })?;
        let selectors: Vec<Value> = selectors
            .into_iter()
            .map(|expression| json!({ "cel": { "expression": expression } }))
            .collect();
        out.push(
            Phase::Foundation,
            "dra/deviceclass",
            format!("spec.dra.shapes[{i}]"),
            json!({
                "apiVersion": api,
                "kind": "DeviceClass",
                "metadata": { "name": dra_shape_class(&shape.name) },
                "spec": { "selectors": selectors },
            }),
        )?;
    }
    for c in crate::extended::classes(bp, catalog)
        .into_iter()
        .filter(|c| c.by_gpuctl)
    {
        let selectors: Vec<Value> = crate::extended::selectors(&c, catalog)
            .map_err(|message| RenderError::Dra {
                path: "spec.dra.extendedResources".to_string(),
                message,
            })?
            .into_iter()
            .map(|expression| json!({ "cel": { "expression": expression } }))
            .collect();
        out.push(
            Phase::Foundation,
            "dra/deviceclass",
            "spec.dra.extendedResources".to_string(),
            json!({
                "apiVersion": api,
                "kind": "DeviceClass",
                "metadata": { "name": c.class },
                "spec": { "selectors": selectors, "extendedResourceName": c.resource },
            }),
        )?;
    }
    for (i, m) in dra.maintenance.iter().enumerate() {
        out.push(
            Phase::Foundation,
            "dra/devicetaintrule",
            format!("spec.dra.maintenance[{i}]"),
            taint_rule(bp, catalog, m).map_err(|message| RenderError::Dra {
                path: format!("spec.dra.maintenance[{i}]"),
                message,
            })?,
        )?;
    }
    if any_compute_domains(bp) {
        out.push(
            Phase::Foundation,
            "dra/clusterrole",
            "spec.tenants".to_string(),
            compute_domain_role(catalog),
        )?;
    }
    for (ti, t) in bp.spec.tenants.iter().enumerate() {
        if t.claims.is_empty() && t.compute_domains == 0 {
            continue;
        }
        let hard = quota(bp, catalog, t);
        for ns in &t.namespaces {
            for name in t.claims.keys() {
                let Some(shape) = dra.shape(name) else {
                    return Err(RenderError::Dra {
                        path: format!("spec.tenants[{ti}].claims.{name}"),
                        message: format!("no shape `{name}` in spec.dra.shapes"),
                    });
                };
                out.push(
                    Phase::Quotas,
                    "dra/resourceclaimtemplate",
                    format!("spec.tenants[{ti}].claims"),
                    template(api, ns, shape, &dra.shapes, &t.device_tolerations).map_err(
                        |message| RenderError::Dra {
                            path: format!("spec.tenants[{ti}].claims.{name}"),
                            message,
                        },
                    )?,
                )?;
            }
            out.push(
                Phase::Quotas,
                "dra/resourcequota",
                format!("spec.tenants[{ti}].claims"),
                json!({
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": { "name": dra_quota_name(&t.name), "namespace": ns },
                    "spec": { "hard": hard },
                }),
            )?;
        }
    }
    Ok(())
}

/// Whether some tenant may create ComputeDomains.
pub fn any_compute_domains(bp: &Blueprint) -> bool {
    bp.spec.tenants.iter().any(|t| t.compute_domains > 0)
}

/// The ClusterRole that lets namespace admins and editors manage ComputeDomains: aggregated into
/// the built-in `admin` and `edit` roles (NVIDIA's driver ships none, so tenants could not create
/// them); each tenant namespace's quota caps how many (0 where not granted).
fn compute_domain_role(catalog: &Catalog) -> Value {
    let cd = &catalog.dra().driver.compute_domains;
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": gpuctl_model::names::COMPUTE_DOMAIN_ROLE,
            "labels": {
                "rbac.authorization.k8s.io/aggregate-to-admin": "true",
                "rbac.authorization.k8s.io/aggregate-to-edit": "true",
            },
        },
        "rules": [{
            "apiGroups": [cd.group],
            "resources": [cd.resource],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
        }],
    })
}

/// The ResourceClaimTemplate of `shape` in `namespace`: one request of `count` devices of the
/// shape's class (with `capacity.requests` for a `memoryShare`), tolerating the tenant's
/// `deviceTolerations` (none by default: a tainted device is never allocated to it). A shape of
/// alternatives is one request whose `firstAvailable` subrequests are its alternatives in order,
/// each named after its shape and written as that shape's own request.
fn template(
    api: &str,
    namespace: &str,
    shape: &DeviceShape,
    shapes: &[DeviceShape],
    tolerations: &[DeviceToleration],
) -> Result<Value, String> {
    let request = if shape.has_alternatives() {
        let subrequests = shape
            .first_available
            .iter()
            .map(|alt| {
                let s = shapes
                    .iter()
                    .find(|s| &s.name == alt && !s.has_alternatives())
                    .ok_or_else(|| {
                        format!("alternative `{alt}` is not a shape of one kind of device")
                    })?;
                let mut sub = exact(s, tolerations);
                sub["name"] = json!(s.name);
                Ok(sub)
            })
            .collect::<Result<Vec<Value>, String>>()?;
        json!({ "name": "device", "firstAvailable": subrequests })
    } else {
        json!({ "name": device_type(shape), "exactly": exact(shape, tolerations) })
    };
    Ok(json!({
        "apiVersion": api,
        "kind": "ResourceClaimTemplate",
        "metadata": { "name": shape.name, "namespace": namespace },
        "spec": { "spec": { "devices": { "requests": [request] } } },
    }))
}

/// One kind of device as a request (`exactly`) or subrequest: the shape's class, `count` devices,
/// its share of each device's memory, the tenant's tolerations.
fn exact(shape: &DeviceShape, tolerations: &[DeviceToleration]) -> Value {
    let mut exactly = json!({
        "deviceClassName": dra_shape_class(&shape.name),
        "allocationMode": "ExactCount",
        "count": shape.count,
    });
    if let Some(share) = &shape.memory_share {
        exactly["capacity"] = json!({ "requests": { "memory": &share.0 } });
    }
    if !tolerations.is_empty() {
        exactly["tolerations"] = Value::Array(tolerations.iter().map(toleration).collect());
    }
    exactly
}

/// A device toleration as the API writes it.
fn toleration(t: &DeviceToleration) -> Value {
    let mut v = json!({
        "key": t.key,
        "operator": match t.operator {
            TolerationOperator::Equal => "Equal",
            TolerationOperator::Exists => "Exists",
        },
    });
    if let Some(value) = &t.value {
        v["value"] = json!(value);
    }
    if let Some(e) = t.effect {
        v["effect"] = json!(e.as_str());
    }
    v
}

/// The DeviceTaintRule of a `spec.dra.maintenance` entry: the node's pool of NVIDIA's GPU driver
/// (one pool per node, named after it), one device of it or all, tainted with gpuctl's
/// maintenance key and the entry's name as value. Its API version is the one the declared
/// Kubernetes serves it as (profiles/dra.yaml `device_taints.rule_api_versions`).
pub fn taint_rule(
    bp: &Blueprint,
    catalog: &Catalog,
    m: &DeviceMaintenance,
) -> Result<Value, String> {
    let taints = &catalog.dra().kubernetes.device_taints;
    let api = taints
        .rule_api_version(&bp.spec.kubernetes.version)
        .ok_or_else(|| {
            format!(
                "Kubernetes {} serves no DeviceTaintRule API",
                bp.spec.kubernetes.version
            )
        })?;
    let driver = driver_of(catalog, "gpu").ok_or("the DRA facts have no GPU driver")?;
    let mut selector = json!({ "driver": driver, "pool": m.node });
    if let Some(d) = &m.device {
        selector["device"] = json!(d);
    }
    Ok(json!({
        "apiVersion": api,
        "kind": "DeviceTaintRule",
        "metadata": { "name": dra_maintenance_rule(&m.name) },
        "spec": {
            "deviceSelector": selector,
            "taint": {
                "key": MAINTENANCE_TAINT_KEY,
                "value": m.name,
                "effect": m.effect.as_str(),
            },
        },
    }))
}

/// The quota of a tenant's namespaces: its claimed shapes at their amounts, every other shape and
/// every GPU class of the driver (`gpu.nvidia.com`, `mig.nvidia.com`, ...) at 0. DeviceClasses are
/// cluster-wide and any namespace may name any of them, so what is not granted is closed. Where
/// some tenant may create ComputeDomains (and so every editor may, [`compute_domain_role`]), the
/// object count of them at `compute_domains`.
/// Where a class serves an extended resource (KEP-5004 on 1.36, [`crate::extended::classes`]) its
/// key is not closed: the scheduler's claim for a pod's plain `nvidia.com/gpu` request is charged
/// to that class's key too, so a 0 would refuse every such pod on a DRA pool. It gets the tenant's
/// own quota of the name (`requests.nvidia.com/gpu`, which on 1.36 counts device-plugin GPUs and
/// those claims alike), or no key where the tenant's quota has no such name.
pub fn quota(bp: &Blueprint, catalog: &Catalog, t: &Tenant) -> Value {
    let claims: &BTreeMap<String, u32> = &t.claims;
    let compute_domains = t.compute_domains;
    let facts = catalog.dra();
    let key = |class: &str| facts.kubernetes.quota.key_for_class(class);
    let mut hard: BTreeMap<String, String> = BTreeMap::new();
    let gpu_driver = driver_of(catalog, "gpu");
    for c in facts
        .driver
        .device_classes
        .iter()
        .filter(|c| Some(c.driver.as_str()) == gpu_driver)
    {
        hard.insert(key(&c.name), "0".to_string());
    }
    let shapes: &[DeviceShape] = bp
        .spec
        .dra
        .as_ref()
        .map_or(&[][..], |d| d.shapes.as_slice());
    let mut devices: BTreeMap<String, u64> = BTreeMap::new();
    for shape in shapes.iter().filter(|s| !s.has_alternatives()) {
        let n = claims.get(&shape.name).copied().unwrap_or(0);
        devices.insert(dra_shape_class(&shape.name), u64::from(n));
    }
    // A claim of alternatives is charged every alternative's count on that alternative's class
    // (the API server's worst case per class), whichever is allocated: room for `n` claims.
    for shape in shapes.iter().filter(|s| s.has_alternatives()) {
        let n = u64::from(claims.get(&shape.name).copied().unwrap_or(0));
        let mut worst: BTreeMap<String, u64> = BTreeMap::new();
        for alt in shape
            .first_available
            .iter()
            .filter_map(|a| shapes.iter().find(|s| &s.name == a))
        {
            let w = worst.entry(dra_shape_class(&alt.name)).or_default();
            *w = (*w).max(u64::from(alt.count));
        }
        for (class, per_claim) in worst {
            *devices.entry(class).or_default() += n.saturating_mul(per_claim);
        }
    }
    for (class, n) in devices {
        hard.insert(key(&class), n.to_string());
    }
    for c in crate::extended::classes(bp, catalog) {
        let requests = super::objects::quota_key(&c.resource);
        match t
            .quota
            .iter()
            .find(|(k, _)| super::objects::quota_key(k) == requests)
        {
            Some((_, q)) => hard.insert(key(&c.class), q.0.clone()),
            None => hard.remove(&key(&c.class)),
        };
    }
    if any_compute_domains(bp) {
        let prefix = &catalog.limits().resource_quota.object_count_prefix;
        hard.insert(
            facts.driver.compute_domains.quota_key(prefix),
            compute_domains.to_string(),
        );
    }
    json!(hard)
}
