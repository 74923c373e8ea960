//! CEL selectors of DRA device shapes (`spec.dra.shapes`): what gpuctl writes into a shape's
//! DeviceClass, from what NVIDIA's DRA driver publishes (profiles/dra.yaml `device_types`,
//! `device_classes`) and the GPU catalog. Render writes them; validation reports why a shape
//! cannot have them (GPU171). Each selector reads only an attribute or capacity the facts say the
//! device type publishes, so none can fail at scheduling time with `no such key`; one selector per
//! constraint (the API server ANDs them), so a claim that matches nothing shows which is unmet.

use gpuctl_model::blueprint::dra::DeviceShape;
use gpuctl_model::profiles::Catalog;

/// The DRA driver of `kind` devices (`gpu.nvidia.com`): the domain of their attributes and
/// capacities, from the driver's class for that device type (profiles/dra.yaml `device_classes`).
pub fn driver_of<'a>(catalog: &'a Catalog, kind: &str) -> Option<&'a str> {
    catalog
        .dra()
        .driver
        .device_classes
        .iter()
        .find(|c| c.device_type == kind)
        .map(|c| c.driver.as_str())
}

/// The device type a shape claims (`gpu` or `mig`, as the driver's `type` attribute says).
pub fn device_type(shape: &DeviceShape) -> &'static str {
    if shape.mig.is_some() { "mig" } else { "gpu" }
}

/// A CEL string literal (single-quoted, `\` and `'` escaped).
fn cel_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A version as the driver publishes it: semver 2.0 with three parts and no leading zeros
/// (`580.95.05` -> `580.95.5`, compute capability `9.0` -> `9.0.0`).
pub fn semver_of(text: &str) -> Result<String, String> {
    let parts: Vec<&str> = text.trim().split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(format!("`{text}` is not a version of one to three numbers"));
    }
    let mut out = Vec::with_capacity(3);
    for p in &parts {
        let n: u64 = p
            .parse()
            .map_err(|_| format!("`{text}` is not a version of one to three numbers"))?;
        out.push(n.to_string());
    }
    while out.len() < 3 {
        out.push("0".to_string());
    }
    Ok(out.join("."))
}

/// The CEL selectors of `shape`'s DeviceClass, base class selector first; or why it cannot have
/// them (a constraint the device type does not publish, an unknown model or profile, a value
/// that does not parse). Validation reports the same reasons as findings (GPU171).
pub fn selectors(shape: &DeviceShape, catalog: &Catalog) -> Result<Vec<String>, String> {
    let facts = &catalog.dra().driver;
    let kind = device_type(shape);
    let base = facts
        .device_classes
        .iter()
        .find(|c| c.device_type == kind)
        .ok_or_else(|| format!("the DRA facts have no class for `{kind}` devices"))?;
    let driver = base.driver.as_str();
    let attr = |name: &str| -> Result<String, String> {
        facts.attribute(kind, name).map(|_| ()).ok_or_else(|| {
            format!("`{kind}` devices of NVIDIA's DRA driver publish no attribute `{name}`")
        })?;
        Ok(format!("device.attributes['{driver}'].{name}"))
    };
    let mut out = vec![base.selector.clone()];
    let model = shape
        .gpu
        .as_ref()
        .and_then(|g| g.model.as_deref())
        .or(shape.mig.as_ref().and_then(|m| m.model.as_deref()));
    if let Some(model) = model {
        let gpu = catalog
            .gpu(model)
            .ok_or_else(|| format!("GPU model `{model}` is not in the catalog"))?;
        out.push(format!(
            "{} == {}",
            attr("productName")?,
            cel_string(&gpu.display_name)
        ));
    }
    if let Some(mig) = &shape.mig {
        out.push(format!(
            "{} == {}",
            attr("profile")?,
            cel_string(&mig.profile)
        ));
    }
    if let Some(mem) = &shape.min_memory {
        if !facts.has_capacity(kind, "memory") {
            return Err(format!(
                "`{kind}` devices of NVIDIA's DRA driver publish no capacity `memory`"
            ));
        }
        let q = gpuctl_model::quantity::parse(&mem.0)?;
        if q.nano < 0 {
            return Err(format!("`{}` is negative", mem.0));
        }
        out.push(format!(
            "device.capacity['{driver}'].memory.compareTo(quantity({})) >= 0",
            cel_string(&mem.0)
        ));
    }
    for (value, name) in [
        (&shape.min_compute_capability, "cudaComputeCapability"),
        (&shape.min_driver, "driverVersion"),
    ] {
        if let Some(v) = value {
            out.push(format!(
                "{}.compareTo(semver({})) >= 0",
                attr(name)?,
                cel_string(&semver_of(v)?)
            ));
        }
    }
    Ok(out)
}

/// The Kueue resource a shape's DeviceClass is charged to (`resources.deviceClassMappings[].name`):
/// the name the device plugin gives the same devices (profiles/dra.yaml `kueue.resource_names`),
/// `nvidia.com/gpu` for whole GPUs and `nvidia.com/mig-<profile>` for MIG devices, so a
/// ClusterQueue's quota covers a pool whichever plugin serves it.
pub fn kueue_resource(shape: &DeviceShape, catalog: &Catalog) -> String {
    let names = &catalog.dra().kueue.resource_names;
    match &shape.mig {
        Some(m) => names.mig(&m.profile),
        None => names.gpu.clone(),
    }
}

/// Kueue's `resources.deviceClassMappings` for `shapes`: one entry per Kueue resource, naming the
/// shapes' classes charged to it, both sorted (same shapes, same bytes). A shape of alternatives
/// (`firstAvailable`) has no class of its own: its alternatives are shapes mapped on their own.
pub fn device_class_mappings(
    shapes: &[DeviceShape],
    catalog: &Catalog,
) -> Vec<(String, Vec<String>)> {
    let mut by_name: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for s in shapes.iter().filter(|s| !s.has_alternatives()) {
        by_name
            .entry(kueue_resource(s, catalog))
            .or_default()
            .push(gpuctl_model::names::dra_shape_class(&s.name));
    }
    by_name
        .into_iter()
        .map(|(name, mut classes)| {
            classes.sort();
            classes.dedup();
            (name, classes)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuctl_model::blueprint::Quantity;
    use gpuctl_model::blueprint::dra::{GpuShape, MigShape};

    fn shape(gpu: Option<GpuShape>, mig: Option<MigShape>) -> DeviceShape {
        DeviceShape {
            name: "s".to_string(),
            gpu,
            mig,
            min_memory: None,
            min_compute_capability: None,
            min_driver: None,
            count: 1,
            first_available: Vec::new(),
            memory_share: None,
        }
    }

    fn any_gpu() -> Option<GpuShape> {
        Some(GpuShape { model: None })
    }

    #[test]
    fn shapes_map_to_the_names_the_device_plugin_gives_the_same_devices() {
        let c = Catalog::embedded();
        let named = |name: &str, mut s: DeviceShape| {
            s.name = name.to_string();
            s
        };
        let mig = |p: &str| {
            Some(MigShape {
                profile: p.to_string(),
                model: None,
            })
        };
        let shapes = [
            named("h100", shape(any_gpu(), None)),
            named("small", shape(None, mig("1g.10gb"))),
            named("any", shape(any_gpu(), None)),
            named("small-b", shape(None, mig("1g.10gb"))),
            named("big", shape(None, mig("3g.40gb"))),
        ];
        assert_eq!(
            device_class_mappings(&shapes, c),
            [
                (
                    "nvidia.com/gpu".to_string(),
                    vec![
                        "any.shapes.gpuctl.dev".to_string(),
                        "h100.shapes.gpuctl.dev".to_string()
                    ]
                ),
                (
                    "nvidia.com/mig-1g.10gb".to_string(),
                    vec![
                        "small-b.shapes.gpuctl.dev".to_string(),
                        "small.shapes.gpuctl.dev".to_string()
                    ]
                ),
                (
                    "nvidia.com/mig-3g.40gb".to_string(),
                    vec!["big.shapes.gpuctl.dev".to_string()]
                ),
            ]
        );
        assert!(device_class_mappings(&[], c).is_empty());
    }

    /// A media-extension MIG profile (`+me`) maps to the device plugin's name for it (`.me`):
    /// `+` is not valid in a resource name, and Kueue refuses a `deviceClassMappings` name that is
    /// not one. (Issue 39, Deliver 6.)
    #[test]
    fn media_extension_profiles_map_to_valid_resource_names() {
        let c = Catalog::embedded();
        for (profile, resource) in [
            ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),
            ("1g.12gb+me.all", "nvidia.com/mig-1g.12gb.me.all"),
            ("3g.40gb", "nvidia.com/mig-3g.40gb"),
        ] {
            let s = shape(
                None,
                Some(MigShape {
                    profile: profile.to_string(),
                    model: None,
                }),
            );
            let name = kueue_resource(&s, c);
            assert_eq!(name, resource, "{profile}");
            assert!(!name.contains('+'), "{name}");
            // The same name the device plugin gives the devices under the mixed strategy.
            assert_eq!(
                name,
                gpuctl_model::blueprint::resources::mig_resource(profile)
            );
        }
    }

    #[test]
    fn versions_are_written_as_the_driver_publishes_them() {
        assert_eq!(semver_of("580.95.05").unwrap(), "580.95.5");
        assert_eq!(semver_of("9.0").unwrap(), "9.0.0");
        assert_eq!(semver_of("12").unwrap(), "12.0.0");
        assert_eq!(semver_of(" 10.0 ").unwrap(), "10.0.0");
        for bad in ["", "9.0.0.1", "9.x", "-1.0", "v9.0", "9..0"] {
            assert!(semver_of(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_constraint_is_one_selector_on_a_published_attribute() {
        let c = Catalog::embedded();
        assert_eq!(
            selectors(&shape(any_gpu(), None), c).unwrap(),
            [c.dra()
                .driver
                .class("gpu.nvidia.com")
                .unwrap()
                .selector
                .clone()]
        );
        let mut s = shape(
            Some(GpuShape {
                model: Some("H100-SXM5-80GB".into()),
            }),
            None,
        );
        s.min_memory = Some(Quantity("40Gi".into()));
        s.min_compute_capability = Some("9.0".into());
        s.min_driver = Some("580.95.05".into());
        let sel = selectors(&s, c).unwrap();
        assert_eq!(
            sel[1..],
            [
                "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
                "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
                "device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0",
                "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.95.5')) >= 0",
            ]
        );
        let mig = shape(
            None,
            Some(MigShape {
                profile: "1g.10gb".into(),
                model: Some("A100-SXM4-80GB".into()),
            }),
        );
        let sel = selectors(&mig, c).unwrap();
        assert!(sel[0].contains("type == 'mig'"), "{sel:?}");
        assert_eq!(
            sel[2],
            "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
        );
    }

    #[test]
    fn what_cannot_be_selected_is_refused_with_the_reason() {
        let c = Catalog::embedded();
        let unknown = shape(
            Some(GpuShape {
                model: Some("H100-SXM9".into()),
            }),
            None,
        );
        assert!(
            selectors(&unknown, c)
                .unwrap_err()
                .contains("not in the catalog")
        );
        let mut bad_memory = shape(any_gpu(), None);
        bad_memory.min_memory = Some(Quantity("lots".into()));
        assert!(selectors(&bad_memory, c).is_err());
        let mut negative = shape(any_gpu(), None);
        negative.min_memory = Some(Quantity("-1Gi".into()));
        assert!(selectors(&negative, c).unwrap_err().contains("negative"));
    }

    #[test]
    fn cel_strings_cannot_be_broken_out_of() {
        assert_eq!(cel_string("a'b\\c"), r"'a\'b\\c'");
    }
}
