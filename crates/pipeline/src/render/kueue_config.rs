//! Kueue's own Configuration from `scheduling.kueue.config`: the chart's Configuration
//! (`profiles/queueing.yaml`, `kueue_configuration.chart_defaults`) with the blueprint's settings
//! put in, rendered as the Kueue chart's `managerConfig` values when gpuctl's blueprint says how
//! Kueue is installed (`install: helm` or `gitops`); and the settings a running Kueue's
//! Configuration contradicts (`install: none`, compared by a live plan).

use serde_json::{Map, Value, json};

use gpuctl_model::blueprint::{
    KueueConfig, MultiKueueDispatcher, QuotaCheckStrategy, TransformationStrategy,
};
use gpuctl_model::profiles::KueueConfiguration;

/// Kueue's `resources.deviceClassMappings`: per Kueue resource, the DeviceClasses charged to it.
pub type ClassMappings = [(String, Vec<String>)];

/// The device-class mappings Kueue needs for the blueprint's DRA shapes (`spec.dra.shapes`): each
/// shape's class charged to the resource the device plugin gives the same devices
/// ([`crate::cel::device_class_mappings`]), and, where tenants may create ComputeDomains, the
/// channel class of their workloads; none without either. Without them Kueue leaves every job
/// that uses such a claim template inadmissible ("is not mapped in DRA configuration").
pub fn dra_mappings(
    bp: &gpuctl_model::blueprint::Blueprint,
    catalog: &gpuctl_model::profiles::Catalog,
) -> Vec<(String, Vec<String>)> {
    let mut out = crate::extended::kueue_class_mappings(bp, catalog);
    if super::dra::any_compute_domains(bp) {
        let facts = catalog.dra();
        out.push((
            facts.kueue.resource_names.compute_domain_channel.clone(),
            vec![facts.driver.compute_domains.channel_class.clone()],
        ));
        out.sort();
    }
    out
}

fn mappings_value(mappings: &ClassMappings) -> Value {
    Value::Array(
        mappings
            .iter()
            .map(|(name, classes)| json!({ "name": name, "deviceClassNames": classes }))
            .collect(),
    )
}

/// Path of the Kueue chart values in [`crate::render::RenderedSet::documents`].
pub const KUEUE_VALUES: &str = "helm/kueue-values.yaml";

/// `fairSharing` as the blueprint declares it. Without named strategies it gets
/// `facts.fair_sharing_default_strategies`: Kueue's v1beta2 Configuration has no default for them
/// and Kueue refuses to start with an empty list.
fn declared_fair_sharing(config: &KueueConfig, facts: &KueueConfiguration) -> Option<Value> {
    let fs = config.fair_sharing.as_ref()?;
    let strategies = if fs.preemption_strategies.is_empty() {
        &facts.fair_sharing_default_strategies
    } else {
        &fs.preemption_strategies
    };
    Some(json!({ "preemptionStrategies": strategies }))
}

/// The other settings the blueprint declares, in Kueue's Configuration spelling. Settings left out
/// mean Kueue's defaults, and are written as such only where Kueue has an explicit spelling for
/// them.
fn declared(config: &KueueConfig, mappings: &ClassMappings) -> Map<String, Value> {
    let mut out = Map::new();
    let r = &config.resources;
    let mut res = Map::new();
    if !mappings.is_empty() {
        res.insert("deviceClassMappings".into(), mappings_value(mappings));
    }
    if let Some(s) = r.quota_check_strategy {
        res.insert("quotaCheckStrategy".into(), json!(strategy_name(s)));
    }
    if !r.exclude_resource_prefixes.is_empty() {
        res.insert(
            "excludeResourcePrefixes".into(),
            json!(r.exclude_resource_prefixes),
        );
    }
    if !r.transformations.is_empty() {
        let list: Vec<Value> = r
            .transformations
            .iter()
            .map(|t| {
                json!({
                    "input": t.input,
                    "strategy": transformation_name(t.strategy),
                    "outputs": t.outputs.iter().map(|(k, q)| (k.clone(), json!(q.0))).collect::<Map<_, _>>(),
                })
            })
            .collect();
        res.insert("transformations".into(), Value::Array(list));
    }
    if !res.is_empty() {
        out.insert("resources".into(), Value::Object(res));
    }
    if let Some(i) = &config.integrations {
        out.insert("integrations".into(), json!({ "frameworks": i.frameworks }));
    }
    if let Some(w) = &config.wait_for_pods_ready {
        let mut m = Map::new();
        m.insert("timeout".into(), json!(w.timeout));
        if let Some(b) = w.block_admission {
            m.insert("blockAdmission".into(), json!(b));
        }
        out.insert("waitForPodsReady".into(), Value::Object(m));
    }
    if let Some(d) = config.multi_kueue.as_ref().and_then(|m| m.dispatcher) {
        out.insert(
            "multiKueue".into(),
            json!({ "dispatcherName": dispatcher_name(d) }),
        );
    }
    out
}

/// Kueue's spelling of a dispatcher (v0.19.2 `configuration_types.go`,
/// `MultiKueueDispatcherModeAllAtOnce` / `MultiKueueDispatcherModeIncremental`); an API enum, like
/// [`strategy_name`], not a fact that changes by release.
fn dispatcher_name(d: MultiKueueDispatcher) -> &'static str {
    match d {
        MultiKueueDispatcher::AllAtOnce => "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
        MultiKueueDispatcher::Incremental => "kueue.x-k8s.io/multikueue-dispatcher-incremental",
    }
}

/// The dispatcher: compared only when the blueprint (or its fleet) names one; a running Kueue
/// without `multiKueue.dispatcherName` uses `AllAtOnce`.
fn dispatcher(config: &KueueConfig, live: &Value, out: &mut Vec<String>) {
    let Some(want) = config.multi_kueue.as_ref().and_then(|m| m.dispatcher) else {
        return;
    };
    let want = dispatcher_name(want);
    let have = live["multiKueue"]["dispatcherName"]
        .as_str()
        .unwrap_or_else(|| dispatcher_name(MultiKueueDispatcher::AllAtOnce));
    if want != have {
        out.push(format!(
            "MultiKueue dispatcher: the fleet says `{want}` (`multiKueue.dispatcher`), the running Kueue `{have}`"
        ));
    }
}

fn strategy_name(s: QuotaCheckStrategy) -> &'static str {
    match s {
        QuotaCheckStrategy::BlockUndeclared => "BlockUndeclared",
        QuotaCheckStrategy::IgnoreUndeclared => "IgnoreUndeclared",
    }
}

fn transformation_name(s: TransformationStrategy) -> &'static str {
    match s {
        TransformationStrategy::Retain => "Retain",
        TransformationStrategy::Replace => "Replace",
    }
}

/// The whole Configuration: the chart's, with each top-level setting the blueprint declares
/// replacing the chart's (`integrations` included: a declared framework list is the list), and the
/// DRA shapes' `mappings`.
pub fn configuration(
    config: &KueueConfig,
    mappings: &ClassMappings,
    facts: &KueueConfiguration,
) -> Value {
    let mut out = facts
        .chart_defaults
        .as_object()
        .cloned()
        .unwrap_or_default();
    if let Some(fs) = declared_fair_sharing(config, facts) {
        out.insert("fairSharing".into(), fs);
    }
    for (k, v) in declared(config, mappings) {
        out.insert(k, v);
    }
    Value::Object(out)
}

/// The Kueue chart's values as YAML text (see [`values`]).
pub fn chart_values(
    config: &KueueConfig,
    mappings: &ClassMappings,
    facts: &KueueConfiguration,
) -> String {
    super::text::yaml(&values(config, mappings, facts))
}

/// The Kueue chart's values: `managerConfig.controllerManagerConfigYaml` holds the Configuration
/// as YAML text, the form the chart expects.
pub fn values(config: &KueueConfig, mappings: &ClassMappings, facts: &KueueConfiguration) -> Value {
    let text = super::text::yaml(&configuration(config, mappings, facts));
    let mut values = Value::Object(Map::new());
    let mut cur = &mut values;
    let keys: Vec<&str> = facts.chart_values_key.split('.').collect();
    for (i, k) in keys.iter().enumerate() {
        let last = i + 1 == keys.len();
        cur = cur
            .as_object_mut()
            .expect("built as objects")
            .entry(k.to_string())
            .or_insert_with(|| {
                if last {
                    Value::String(text.clone())
                } else {
                    Value::Object(Map::new())
                }
            });
    }
    values
}

/// Kueue's Helm release (`install: helm` or `gitops`): release and chart named after the chart
/// Kueue publishes (`kueue`), in the namespace its manager reads its ConfigMap from, the chart
/// version of the release (`profiles/queueing.yaml` `kueue_configuration.charts`, `0.19.2`; a
/// release gpuctl has no chart for, which validation refuses, falls back to the tag without its
/// `v`), the values of [`values`].
pub fn release(
    kueue: &gpuctl_model::blueprint::Kueue,
    mappings: &ClassMappings,
    facts: &KueueConfiguration,
) -> super::HelmRelease {
    let reference = facts.chart_reference.as_str();
    let chart = reference
        .rsplit('/')
        .next()
        .unwrap_or(reference)
        .to_string();
    super::HelmRelease {
        stack: super::Stack::Kueue,
        release: chart.clone(),
        chart,
        version: facts.chart(&kueue.version).map_or_else(
            || kueue.version.trim().trim_start_matches('v').to_string(),
            |c| c.version.clone(),
        ),
        namespace: facts.config_map.namespace.clone(),
        install: kueue.install,
        values: values(&kueue.config, mappings, facts),
        source: super::ChartSource::from_spec(
            &kueue.chart,
            super::ChartSource::Oci {
                reference: reference.to_string(),
            },
        ),
    }
}

/// A transformation compared: input, strategy, sorted outputs.
type Transformation = (String, String, Vec<(String, String)>);

/// Where a running Kueue's Configuration (`live`, the YAML text of its manager ConfigMap)
/// contradicts the blueprint's declared settings, one sentence each. Settings the blueprint does
/// not declare are compared with Kueue's defaults (fair sharing and waiting for pods ready off,
/// `BlockUndeclared`, nothing excluded or transformed), except the framework list, which the
/// blueprint need not state.
pub fn contradictions(
    config: &KueueConfig,
    mappings: &ClassMappings,
    live: &str,
) -> Result<Vec<String>, String> {
    let live: Value = serde_saphyr::from_str(live)
        .map_err(|e| format!("its configuration is not YAML gpuctl can read: {e}"))?;
    if !live.is_object() {
        return Err("its configuration is not a YAML mapping".into());
    }
    let mut out = Vec::new();
    fair_sharing(config, &live, &mut out);
    resources(config, &live, &mut out);
    device_classes(mappings, &live, &mut out);
    if let Some(i) = &config.integrations {
        let mut want: Vec<&str> = i.frameworks.iter().map(String::as_str).collect();
        let mut have: Vec<&str> = live["integrations"]["frameworks"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        want.sort_unstable();
        have.sort_unstable();
        if want != have {
            out.push(format!(
                "integrated frameworks: the blueprint says [{}], the running Kueue [{}]",
                want.join(", "),
                have.join(", ")
            ));
        }
    }
    wait_for_pods_ready(config, &live, &mut out);
    dispatcher(config, &live, &mut out);
    Ok(out)
}

/// Fair sharing: on in both or neither, with the same preemption strategies.
fn fair_sharing(config: &KueueConfig, live: &Value, out: &mut Vec<String>) {
    let live_fs = live.get("fairSharing").filter(|v| !v.is_null());
    match (&config.fair_sharing, live_fs) {
        (Some(_), None) => out.push(
            "the blueprint turns fair sharing on (`config.fairSharing`), the running Kueue has no `fairSharing`: it ignores every fairSharingWeight".into(),
        ),
        (None, Some(_)) => out.push(
            "the running Kueue has fair sharing on (`fairSharing`), the blueprint does not say so (`config.fairSharing`)".into(),
        ),
        (Some(fs), Some(l)) if !fs.preemption_strategies.is_empty() => {
            let live_s: Vec<String> = l["preemptionStrategies"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            if live_s != fs.preemption_strategies {
                out.push(format!(
                    "fair-sharing preemption strategies: the blueprint says [{}], the running Kueue [{}]",
                    fs.preemption_strategies.join(", "),
                    live_s.join(", ")
                ));
            }
        }
        _ => {}
    }
}

/// The quota check strategy, excluded resource prefixes and resource transformations.
fn resources(config: &KueueConfig, live: &Value, out: &mut Vec<String>) {
    let res = &live["resources"];
    let live_strategy = res["quotaCheckStrategy"]
        .as_str()
        .unwrap_or("BlockUndeclared");
    let want = strategy_name(config.quota_check());
    if live_strategy != want {
        out.push(format!(
            "quota check strategy: the blueprint says `{want}`, the running Kueue `{live_strategy}`"
        ));
    }
    let mut live_prefixes: Vec<String> = res["excludeResourcePrefixes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut want_prefixes = config.resources.exclude_resource_prefixes.clone();
    live_prefixes.sort();
    want_prefixes.sort();
    if live_prefixes != want_prefixes {
        out.push(format!(
            "excluded resource prefixes: the blueprint says [{}], the running Kueue [{}]",
            want_prefixes.join(", "),
            live_prefixes.join(", ")
        ));
    }
    let declared_res = declared(config, &[]);
    let want_t = transformations(
        &declared_res
            .get("resources")
            .map(|r| r["transformations"].clone())
            .unwrap_or(Value::Null),
    );
    let live_t = transformations(&res["transformations"]);
    if want_t != live_t {
        let show = |l: &[Transformation]| {
            l.iter()
                .map(|(i, s, _)| format!("{i} ({s})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!(
            "resource transformations: the blueprint says [{}], the running Kueue [{}]",
            show(&want_t),
            show(&live_t)
        ));
    }
}

/// The DRA device-class mappings: the shapes' classes, each charged to the same resource. Extra
/// mappings of the running Kueue (classes gpuctl does not own) are left alone.
fn device_classes(mappings: &ClassMappings, live: &Value, out: &mut Vec<String>) {
    let live_map: Vec<(String, Vec<String>)> = live["resources"]["deviceClassMappings"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| {
                    let classes = m["deviceClassNames"]
                        .as_array()
                        .map(|c| {
                            c.iter()
                                .filter_map(|x| x.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default();
                    (m["name"].as_str().unwrap_or_default().to_string(), classes)
                })
                .collect()
        })
        .unwrap_or_default();
    for (name, classes) in mappings {
        for class in classes {
            let charged = live_map
                .iter()
                .find(|(_, cs)| cs.contains(class))
                .map(|(n, _)| n.as_str());
            match charged {
                Some(n) if n == name => {}
                Some(n) => out.push(format!(
                    "DRA device class `{class}`: the blueprint charges it to `{name}`, the running Kueue to `{n}`"
                )),
                None => out.push(format!(
                    "DRA device class `{class}` is not in the running Kueue's `resources.deviceClassMappings`: jobs claiming it are never admitted (the blueprint charges it to `{name}`)"
                )),
            }
        }
    }
}

/// Resource transformations compared by value: input, strategy and sorted canonical outputs.
fn transformations(v: &Value) -> Vec<Transformation> {
    let mut list: Vec<_> = v
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    let mut outs: Vec<(String, String)> = t["outputs"]
                        .as_object()
                        .map(|o| {
                            o.iter()
                                .map(|(k, q)| {
                                    let q = match q {
                                        Value::String(s) => s.clone(),
                                        other => other.to_string(),
                                    };
                                    // By value: `1Gi` in the running Kueue's file is the
                                    // blueprint's `1024Mi`.
                                    (k.clone(), gpuctl_model::quantity::canonical(&q))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    outs.sort();
                    (
                        t["input"].as_str().unwrap_or_default().to_string(),
                        t["strategy"].as_str().unwrap_or("Retain").to_string(),
                        outs,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    list.sort();
    list
}

/// Waiting for pods ready: on in both or neither, with the same timeout and blocking.
fn wait_for_pods_ready(config: &KueueConfig, live: &Value, out: &mut Vec<String>) {
    let live_w = live.get("waitForPodsReady").filter(|v| !v.is_null());
    match (&config.wait_for_pods_ready, live_w) {
        (Some(_), None) => out.push(
            "the blueprint waits for pods ready (`config.waitForPodsReady`), the running Kueue does not".into(),
        ),
        (None, Some(_)) => out.push(
            "the running Kueue waits for pods ready (`waitForPodsReady`), the blueprint does not say so".into(),
        ),
        (Some(w), Some(l)) => {
            let want_ms = gpuctl_model::quantity::parse_duration_ms(&w.timeout).ok();
            let have_ms = l["timeout"]
                .as_str()
                .and_then(|t| gpuctl_model::quantity::parse_duration_ms(t).ok());
            if want_ms != have_ms {
                out.push(format!(
                    "waitForPodsReady timeout: the blueprint says {}, the running Kueue {}",
                    w.timeout,
                    l["timeout"].as_str().unwrap_or("none")
                ));
            }
            let have_block = l["blockAdmission"].as_bool().unwrap_or(false);
            if w.block_admission.unwrap_or(false) != have_block {
                out.push(format!(
                    "waitForPodsReady blockAdmission: the blueprint says {}, the running Kueue {have_block}",
                    w.block_admission.unwrap_or(false)
                ));
            }
        }
        (None, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuctl_model::blueprint::{KueueFairSharing, KueueResources, KueueWaitForPodsReady};
    use gpuctl_model::profiles::Catalog;

    fn facts() -> &'static KueueConfiguration {
        &Catalog::embedded().queueing().kueue_configuration
    }

    #[test]
    fn the_rendered_configuration_is_the_charts_with_the_blueprints_settings() {
        let config = KueueConfig {
            fair_sharing: Some(KueueFairSharing::default()),
            resources: KueueResources {
                quota_check_strategy: Some(QuotaCheckStrategy::IgnoreUndeclared),
                ..KueueResources::default()
            },
            ..KueueConfig::default()
        };
        let c = configuration(&config, &[], facts());
        // Fair sharing on without strategies: the list Kueue's v1beta1 API defaulted to, as
        // Kueue v0.19 refuses `fairSharing: {}` (preemptionStrategies is required).
        assert_eq!(
            c["fairSharing"],
            json!({"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]})
        );
        let named = KueueConfig {
            fair_sharing: Some(KueueFairSharing {
                preemption_strategies: vec!["LessThanInitialShare".into()],
            }),
            ..config.clone()
        };
        assert_eq!(
            configuration(&named, &[], facts())["fairSharing"],
            json!({"preemptionStrategies": ["LessThanInitialShare"]})
        );
        assert_eq!(c["resources"]["quotaCheckStrategy"], "IgnoreUndeclared");
        // The chart's own settings stay.
        assert_eq!(c["webhook"]["port"], 9443);
        assert_eq!(c["apiVersion"], "config.kueue.x-k8s.io/v1beta2");
        let values = chart_values(&config, &[], facts());
        let parsed: Value = serde_saphyr::from_str(&values).unwrap();
        let inner: Value = serde_saphyr::from_str(
            parsed["managerConfig"]["controllerManagerConfigYaml"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(inner, c);
        // Same input, same bytes.
        assert_eq!(values, chart_values(&config, &[], facts()));
    }

    #[test]
    fn a_live_configuration_is_compared_setting_by_setting() {
        let config = KueueConfig {
            fair_sharing: Some(KueueFairSharing::default()),
            wait_for_pods_ready: Some(KueueWaitForPodsReady {
                timeout: "5m".into(),
                block_admission: Some(true),
            }),
            ..KueueConfig::default()
        };
        // The running Kueue is the one gpuctl renders: nothing to say.
        let same = super::super::text::yaml(&configuration(&config, &[], facts()));
        assert_eq!(
            contradictions(&config, &[], &same).unwrap(),
            Vec::<String>::new()
        );
        // The chart's defaults: fair sharing and waiting for pods ready are off.
        let chart = super::super::text::yaml(&facts().chart_defaults);
        let found = contradictions(&config, &[], &chart).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("fair sharing on"), "{found:?}");
        assert!(found[1].contains("waits for pods ready"), "{found:?}");
        // A live Kueue that ignores undeclared resources, against a blueprint that says nothing.
        let live = "resources:\n  quotaCheckStrategy: IgnoreUndeclared\n  excludeResourcePrefixes: [example.com/]\n";
        let found = contradictions(&KueueConfig::default(), &[], live).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("`BlockUndeclared`, the running Kueue `IgnoreUndeclared`"));
        assert!(found[1].contains("[example.com/]"));
        // Transformation outputs compare by value: the running Kueue's `0.5` is the blueprint's
        // `500m`; another amount is a contradiction.
        let mut outputs = std::collections::BTreeMap::new();
        outputs.insert(
            "example.com/gpu-equivalent".to_string(),
            gpuctl_model::blueprint::Quantity("500m".into()),
        );
        let transforming = KueueConfig {
            resources: KueueResources {
                transformations: vec![gpuctl_model::blueprint::ResourceTransformation {
                    input: "nvidia.com/mig-1g.10gb".into(),
                    strategy: Default::default(),
                    outputs,
                }],
                ..KueueResources::default()
            },
            ..KueueConfig::default()
        };
        let live = "resources:\n  transformations:\n  - input: nvidia.com/mig-1g.10gb\n    outputs: {example.com/gpu-equivalent: \"0.5\"}\n";
        assert_eq!(
            contradictions(&transforming, &[], live).unwrap(),
            Vec::<String>::new()
        );
        let other = live.replace("0.5", "0.25");
        assert_eq!(contradictions(&transforming, &[], &other).unwrap().len(), 1);
        assert!(contradictions(&config, &[], "[not, a, mapping]").is_err());
        assert!(contradictions(&config, &[], "a: [").is_err());
    }

    #[test]
    fn a_fleets_dispatcher_is_rendered_and_compared_with_the_running_kueue() {
        use gpuctl_model::blueprint::{KueueMultiKueue, MultiKueueDispatcher};
        let incremental = KueueConfig {
            multi_kueue: Some(KueueMultiKueue {
                dispatcher: Some(MultiKueueDispatcher::Incremental),
            }),
            ..KueueConfig::default()
        };
        let c = configuration(&incremental, &[], facts());
        assert_eq!(
            c["multiKueue"],
            json!({"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental"})
        );
        // Not named: nothing written, nothing compared.
        assert!(configuration(&KueueConfig::default(), &[], facts())["multiKueue"].is_null());
        let chart = super::super::text::yaml(&facts().chart_defaults);
        assert!(
            contradictions(&KueueConfig::default(), &[], &chart)
                .unwrap()
                .is_empty()
        );
        // The chart's Kueue dispatches all at once.
        let found = contradictions(&incremental, &[], &chart).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("multikueue-dispatcher-incremental` (`multiKueue.dispatcher`), the running Kueue `kueue.x-k8s.io/multikueue-dispatcher-all-at-once`"),
            "{found:?}"
        );
        let same = super::super::text::yaml(&c);
        assert!(contradictions(&incremental, &[], &same).unwrap().is_empty());
        // Naming Kueue's default matches a Kueue that names none.
        let all = KueueConfig {
            multi_kueue: Some(KueueMultiKueue {
                dispatcher: Some(MultiKueueDispatcher::AllAtOnce),
            }),
            ..KueueConfig::default()
        };
        assert!(contradictions(&all, &[], &chart).unwrap().is_empty());
    }

    #[test]
    fn dra_shapes_are_mapped_and_a_running_kueue_without_them_contradicts() {
        let mappings = vec![
            (
                "nvidia.com/gpu".to_string(),
                vec!["h100.shapes.gpuctl.dev".to_string()],
            ),
            (
                "nvidia.com/mig-1g.10gb".to_string(),
                vec!["small.shapes.gpuctl.dev".to_string()],
            ),
        ];
        let config = KueueConfig::default();
        let c = configuration(&config, &mappings, facts());
        assert_eq!(
            c["resources"]["deviceClassMappings"],
            json!([
                {"name": "nvidia.com/gpu", "deviceClassNames": ["h100.shapes.gpuctl.dev"]},
                {"name": "nvidia.com/mig-1g.10gb", "deviceClassNames": ["small.shapes.gpuctl.dev"]},
            ])
        );
        assert!(
            configuration(&config, &[], facts())["resources"]
                .get("deviceClassMappings")
                .is_none()
        );
        // The same configuration contradicts nothing; without the mappings, each class is named.
        let same = super::super::text::yaml(&c);
        assert_eq!(
            contradictions(&config, &mappings, &same).unwrap(),
            Vec::<String>::new()
        );
        let without = super::super::text::yaml(&configuration(&config, &[], facts()));
        let found = contradictions(&config, &mappings, &without).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("`h100.shapes.gpuctl.dev` is not in the running Kueue"));
        // Charged elsewhere: named with both resources; extra live mappings are left alone.
        let moved = "resources:\n  deviceClassMappings:\n  - {name: example.com/gpu, deviceClassNames: [h100.shapes.gpuctl.dev]}\n  - {name: nvidia.com/mig-1g.10gb, deviceClassNames: [small.shapes.gpuctl.dev, other.example.com]}\n";
        let found = contradictions(&config, &mappings, moved).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .contains("charges it to `nvidia.com/gpu`, the running Kueue to `example.com/gpu`")
        );
    }

    /// The DRA rules' base (tests/fixtures/dra/shapes.yaml) on Kubernetes 1.36.3 with the
    /// standalone DRA chart `driver`, both pools moved to DRA, and `extra` in `spec.dra`.
    fn extended_blueprint(
        kube: &str,
        driver: &str,
        extra: &str,
    ) -> gpuctl_model::blueprint::Blueprint {
        let text = include_str!("../../../../tests/fixtures/dra/shapes.yaml")
            .replace("version: \"1.35.1\"", &format!("version: \"{kube}\""))
            .replace(
                "  dra:\n    shapes:\n",
                &format!("  dra:\n    driver: {driver}\n{extra}    shapes:\n"),
            )
            .replace("count: 8 }\n", "count: 8 }\n      gpuPlugin: dra\n")
            .replace("count: 4 }\n", "count: 4 }\n      gpuPlugin: dra\n");
        gpuctl_model::blueprint::load_str("ext.yaml", &text)
            .expect("loads")
            .blueprint
    }

    /// Kueue v0.19.2 charges a pod's `nvidia.com/gpu` served by DRA to the `deviceClassMappings`
    /// name of the class whose `extendedResourceName` it is (`pkg/dra/extended_resources.go`,
    /// `resolveQuotaKey`), and a device-plugin pod's request to `nvidia.com/gpu` itself: with
    /// `spec.dra.extendedResources` each serving class is mapped to the name it serves, beside
    /// the shapes' classes of the same kind, so both stacks and the templates charge one
    /// ClusterQueue resource. No feature gate is written: `KueueDRAIntegration` and
    /// `KueueDRAIntegrationExtendedResource` are on by default from v0.19 (GPU158 refuses older),
    /// and Kueue refuses gates set both in its Configuration and on its command line.
    #[test]
    fn extended_resources_map_their_serving_classes_to_the_names_pods_ask_for() {
        let c = Catalog::embedded();
        let sa = "{ deployment: standalone, version: v25.12.0 }";
        let on = "    extendedResources: true\n";
        let m = dra_mappings(&extended_blueprint("1.36.3", sa, on), c);
        let owned = |v: &[(&str, &[&str])]| -> Vec<(String, Vec<String>)> {
            v.iter()
                .map(|(n, cs)| (n.to_string(), cs.iter().map(|c| c.to_string()).collect()))
                .collect()
        };
        assert_eq!(
            m,
            owned(&[
                (
                    "nvidia.com/gpu",
                    &[
                        "gpu.nvidia.com",
                        "h100.shapes.gpuctl.dev",
                        "h100x8.shapes.gpuctl.dev"
                    ]
                ),
                (
                    "nvidia.com/mig-1g.10gb",
                    &[
                        "mig-1g.10gb.extended.gpuctl.dev",
                        "mig-1g.shapes.gpuctl.dev"
                    ]
                ),
            ])
        );
        // The Configuration carries them and no featureGates.
        let config = configuration(&KueueConfig::default(), &m, facts());
        assert_eq!(
            config["resources"]["deviceClassMappings"][0],
            json!({"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com", "h100.shapes.gpuctl.dev", "h100x8.shapes.gpuctl.dev"]})
        );
        assert!(config.get("featureGates").is_none(), "{config:#}");
        // No class is mapped twice (Kueue refuses that; its name check runs in
        // tests/cluster/dra_kueue_extended.rs, where the real Kueue starts with this mapping).
        let mut seen = std::collections::BTreeSet::new();
        for (_, classes) in &m {
            for class in classes {
                assert!(seen.insert(class.clone()), "{class} mapped twice");
            }
        }
        // A chart before v25.12.0 sets no extendedResourceName: gpuctl's class serves the name.
        let old = "{ deployment: standalone, version: v25.8.0 }";
        let m = dra_mappings(&extended_blueprint("1.36.3", old, on), c);
        assert_eq!(
            m[0].1,
            vec![
                "gpu.extended.gpuctl.dev".to_string(),
                "h100.shapes.gpuctl.dev".into(),
                "h100x8.shapes.gpuctl.dev".into()
            ]
        );
        // Without extendedResources, or on 1.35 (the field is dropped), only the shapes' classes.
        let shapes_only = owned(&[
            (
                "nvidia.com/gpu",
                &["h100.shapes.gpuctl.dev", "h100x8.shapes.gpuctl.dev"],
            ),
            ("nvidia.com/mig-1g.10gb", &["mig-1g.shapes.gpuctl.dev"]),
        ]);
        assert_eq!(
            dra_mappings(&extended_blueprint("1.36.3", sa, ""), c),
            shapes_only
        );
        assert_eq!(
            dra_mappings(&extended_blueprint("1.35.4", sa, on), c),
            shapes_only
        );
    }
}
