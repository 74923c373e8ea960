//! Render output against the real upstream definitions in `../shared/upstream` (or `$GPUCTL_SHARED`):
//! chart key trees and values, CRD schemas, and the k8s-openapi types of core objects.

use crate::render_common;

use render_common::{root, shared};
use serde_json::{Map, Value};

const CHART_RELEASES: [&str; 2] = ["v25.10.1", "v26.7.0"];

fn upstream_values(version: &str) -> (String, Map<String, Value>) {
    let path = shared().join(format!("upstream/gpu-operator/{version}/values.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let values: Value = serde_saphyr::from_str(&text).expect("values.yaml parses");
    (
        text,
        values
            .as_object()
            .cloned()
            .expect("values.yaml is a mapping"),
    )
}

/// The committed key trees are exactly what the generator derives from the real values.yaml.
/// `GPUCTL_UPDATE_KEYTREES=1` rewrites them instead (this test is the generator).
#[test]
fn key_trees_match_upstream_values() {
    let update = std::env::var_os("GPUCTL_UPDATE_KEYTREES").is_some();
    for version in CHART_RELEASES {
        let (_, values) = upstream_values(version);
        let source =
            format!("NVIDIA/gpu-operator deployments/gpu-operator/values.yaml at tag {version}");
        let want = gpuctl_core::profiles::chart::key_tree_file(version, &source, &values);
        let path = root().join(format!("profiles/gpu-operator-values/{version}.yaml"));
        if update {
            std::fs::write(&path, &want).expect("writable profiles/");
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is stale: run GPUCTL_UPDATE_KEYTREES=1 cargo test --test offline render_schemas::key_trees_match_upstream_values",
            path.display()
        );
    }
    for version in NETWORK_RELEASES {
        let values = network_values(version);
        let source = format!(
            "Mellanox/network-operator deployment/network-operator/values.yaml at tag {version}"
        );
        let want = gpuctl_core::profiles::chart::network_key_tree_file(version, &source, &values);
        let path = root().join(format!("profiles/network-operator-values/{version}.yaml"));
        if update {
            std::fs::write(&path, &want).expect("writable profiles/");
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is stale: run GPUCTL_UPDATE_KEYTREES=1 cargo test --test offline render_schemas::key_trees_match_upstream_values",
            path.display()
        );
    }
}

/// Network Operator chart releases gpuctl renders for (their values.yaml and CRDs are in
/// `upstream/network-operator/<version>/`).
const NETWORK_RELEASES: [&str; 1] = ["v26.4.1"];

fn network_values(version: &str) -> Map<String, Value> {
    let path = shared().join(format!("upstream/network-operator/{version}/values.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let values: Value = serde_saphyr::from_str(&text).expect("values.yaml parses");
    values.as_object().cloned().expect("a mapping")
}

/// One file of a chart archive, as text (`tar -xzOf`).
fn archive_file(archive: &std::path::Path, member: &str) -> String {
    let out = std::process::Command::new("tar")
        .arg("-xzOf")
        .arg(archive)
        .arg(member)
        .output()
        .expect("tar runs");
    assert!(
        out.status.success(),
        "{} {member}: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `profiles/network.yaml`'s chart facts against the real archive: the chart's version and
/// appVersion, every dependency (name, version, condition) and the vendored subchart's own
/// Chart.yaml, every default gpuctl relies on in the archive's values.yaml, and each hook Job in
/// the templates (with its events and the value that guards it).
#[test]
fn network_operator_chart_facts_match_the_archive() {
    let facts = &gpuctl_core::profiles::Catalog::embedded()
        .network()
        .network_operator;
    let mut checked = 0;
    for release in &facts.releases {
        let Some(chart) = &release.chart else {
            continue;
        };
        let version = &release.version;
        let archive = shared().join(format!(
            "upstream/network-operator/{version}/network-operator-{version}.tgz"
        ));
        let meta: Value =
            serde_saphyr::from_str(&archive_file(&archive, "network-operator/Chart.yaml")).unwrap();
        assert_eq!(meta["version"], Value::String(chart.version.clone()));
        assert_eq!(meta["appVersion"], Value::String(chart.app_version.clone()));
        let deps: Vec<(String, String, String)> = meta["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let s = |k: &str| d[k].as_str().unwrap().to_string();
                (s("name"), s("version"), s("condition"))
            })
            .collect();
        let want: Vec<(String, String, String)> = chart
            .subcharts
            .iter()
            .map(|s| (s.name.clone(), s.version.clone(), s.condition.clone()))
            .collect();
        assert_eq!(deps, want, "{version}: dependencies");
        for s in &chart.subcharts {
            let sub: Value = serde_saphyr::from_str(&archive_file(
                &archive,
                &format!("network-operator/charts/{}/Chart.yaml", s.name),
            ))
            .unwrap();
            assert_eq!(
                sub["version"],
                Value::String(s.version.clone()),
                "{}",
                s.name
            );
        }
        let values: Value =
            serde_saphyr::from_str(&archive_file(&archive, "network-operator/values.yaml"))
                .unwrap();
        for (path, want) in &chart.defaults {
            let pointer = format!("/{}", path.replace('.', "/"));
            assert_eq!(
                values.pointer(&pointer),
                Some(want),
                "{version}: default of {path}"
            );
        }
        for hook in &chart.hooks {
            let file = match hook.job.as_str() {
                "network-operator-keep-ncp" => "keep-ncp-hook.yaml",
                "network-operator-upgrade-crd" => "upgrade-crd-hook.yaml",
                other => panic!("no template known for hook {other}"),
            };
            let text = archive_file(&archive, &format!("network-operator/templates/{file}"));
            let job = text
                .split("\n---")
                .find(|doc| doc.contains("kind: Job"))
                .unwrap_or_else(|| panic!("{file} has no Job"));
            assert!(job.contains(&format!("name: {}", hook.job)), "{file}");
            assert!(
                job.contains(&format!("\"helm.sh/hook\": {}", hook.events.join(","))),
                "{file}: hook events {:?}",
                hook.events
            );
            match &hook.condition {
                Some(c) => assert!(
                    text.starts_with(&format!("{{{{- if .Values.{c} }}}}")),
                    "{file}: guarded by {c}"
                ),
                None => assert!(
                    !text.trim_start().starts_with("{{- if"),
                    "{file}: unguarded"
                ),
            }
        }
        checked += 1;
    }
    assert_eq!(
        checked,
        NETWORK_RELEASES.len(),
        "every archive in ../shared was read"
    );
}

/// `profiles/queueing.yaml`'s Kueue chart facts against the chart's Chart.yaml: in ../shared, and
/// in Kueue's Go module when the harness has downloaded it.
#[test]
fn kueue_chart_facts_match_the_chart() {
    let facts = &gpuctl_core::profiles::Catalog::embedded()
        .queueing()
        .kueue_configuration;
    assert!(!facts.charts.is_empty());
    for c in &facts.charts {
        let mut files = vec![shared().join(format!("upstream/kueue/{}/Chart.yaml", c.release))];
        // The harness's copy of the chart from Kueue's Go module (`GPUCTL_KUEUE_CHART`), when it
        // is the chart of this release.
        if let Some(cache) = std::env::var_os("GPUCTL_KUEUE_CHART") {
            let f = std::path::PathBuf::from(cache).join("Chart.yaml");
            if std::fs::read_to_string(&f)
                .is_ok_and(|t| t.contains(&format!("appVersion: \"{}\"", c.release)))
            {
                files.push(f);
            }
        }
        for f in files {
            let meta: Value =
                serde_saphyr::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            assert_eq!(meta["name"], "kueue", "{}", f.display());
            assert_eq!(
                meta["version"],
                Value::String(c.version.clone()),
                "{}",
                f.display()
            );
            assert_eq!(
                meta["appVersion"],
                Value::String(c.app_version.clone()),
                "{}",
                f.display()
            );
            assert!(meta.get("dependencies").is_none(), "{}", f.display());
        }
    }
    let reference = &facts.chart_reference;
    assert!(reference.ends_with("/kueue"), "{reference}");
}

/// Every key the Network Operator values document holds exists in that chart's real values.yaml,
/// and every network document parses; the blueprints that declare the operator are among those
/// rendered.
#[test]
fn network_operator_values_exist_in_the_real_chart() {
    let mut checked = 0;
    for (source, set) in renders() {
        let Some(text) = set
            .documents
            .get(gpuctl_core::render::network::NETWORK_OPERATOR_VALUES)
        else {
            continue;
        };
        let rel: Value = serde_saphyr::from_str(
            &set.documents[gpuctl_core::render::network::NETWORK_OPERATOR_RELEASE],
        )
        .unwrap();
        // The chart version (`26.4.1`); the upstream folder is named after the tag (`v26.4.1`).
        let version = format!(
            "v{}",
            rel["version"].as_str().unwrap().trim_start_matches('v')
        );
        let values = network_values(&version);
        let rendered: Value = serde_saphyr::from_str(text).unwrap();
        let mut paths = Vec::new();
        leaf_paths(&rendered, "", &mut paths);
        assert!(!paths.is_empty(), "{source}: empty network operator values");
        for p in paths {
            assert!(
                path_in_values(&values, &p),
                "{source}: `{p}` is not a key of the Network Operator {version} chart values"
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 2,
        "the network examples were rendered ({checked})"
    );
}

/// Every render the conformance tests check: the valid examples, the v25.10.1 blueprint, and a
/// small generated one (driver overrides, MIG, time-slicing, many tenants).
fn renders() -> Vec<(String, gpuctl_core::render::RenderedSet)> {
    let mut out: Vec<(String, gpuctl_core::render::RenderedSet)> =
        render_common::valid_blueprints()
            .iter()
            .map(|p| (p.display().to_string(), render_common::render_file(p)))
            .collect();
    out.push((
        "V25_BLUEPRINT".into(),
        render_common::render_text("v25.yaml", render_common::V25_BLUEPRINT),
    ));
    // The gb200 example with a CIDRPool the secondary network uses and an IPv6 IPPool besides its
    // own IPPool, so every nv-ipam kind and field gpuctl renders is checked.
    let gb200 = std::fs::read_to_string(render_common::root().join("blueprints/gb200-nvl72-training.yaml"))
        .unwrap()
        .replace("ipPool: ib-storage }", "ipPool: rail-1 }")
        .replace(
            "        nodePools: [gb200]\n",
            "        nodePools: [gb200]\n      - { name: rail-1, kind: cidrpool, range: 10.220.0.0/16, perNodeNetworkPrefix: 24, gatewayIndex: 1, defaultGateway: true, exclusions: [{ startIP: 10.220.0.1, endIP: 10.220.0.3 }] }\n      - { name: rail-v6, range: \"fd00:10:220::/48\", gateway: \"fd00:10:220::1\", perNodeBlockSize: 1024 }\n",
        );
    out.push((
        "gb200 with nv-ipam pools".into(),
        render_common::render_text("pools.yaml", &gb200),
    ));
    // GPU-hours accounting: its PrometheusRule and the GPU Operator values with the exporter env.
    out.push((
        "accounting fixture".into(),
        render_common::render_file(
            &render_common::root().join("tests/fixtures/accounting/blueprint.yaml"),
        ),
    ));
    out.push((
        "testgen".into(),
        render_common::render_text("gen.yaml", &gpuctl_core::testgen::blueprint(8, 12, 2)),
    ));
    out
}

// ---------------------------------------------------------------------------------------------
// CRD schemas

/// A CRD's structural schema as a JSON Schema that treats unknown fields as errors.
///
/// Conversions, and why:
/// - `x-kubernetes-int-or-string: true` becomes `anyOf: [integer, string]` (the CRDs usually say
///   so already; the keyword itself means nothing to JSON Schema);
/// - `nullable: true` also admits `null` (OpenAPI 3.0 spelling; JSON Schema has no such keyword);
/// - an object that declares `properties` and neither `additionalProperties` nor
///   `x-kubernetes-preserve-unknown-fields` gets `additionalProperties: false`: the API server
///   prunes unknown fields of structural schemas, and strict field validation rejects them, so an
///   unknown field is a field gpuctl would lose;
/// - `x-kubernetes-preserve-unknown-fields: true` keeps the object open, as the API server does;
/// - the top-level `metadata` (just `type: object` in CRDs) is replaced by the ObjectMeta fields
///   render writes (name, namespace, labels, annotations), closed as well;
/// - `x-kubernetes-validations` (CEL) cannot be expressed in JSON Schema: the rules that apply to
///   what render writes are checked by hand in [`cel_rules_hold`].
fn structural_to_json_schema(node: &Value) -> Value {
    match node {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                match k.as_str() {
                    "properties" => {
                        let props: Map<String, Value> = v
                            .as_object()
                            .unwrap()
                            .iter()
                            .map(|(k, v)| (k.clone(), structural_to_json_schema(v)))
                            .collect();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    "items" | "additionalProperties" if v.is_object() => {
                        out.insert(k.clone(), structural_to_json_schema(v));
                    }
                    "anyOf" | "allOf" | "oneOf" => {
                        let list = v.as_array().unwrap().iter().map(structural_to_json_schema);
                        out.insert(k.clone(), Value::Array(list.collect()));
                    }
                    k if k.starts_with("x-kubernetes-") || k == "nullable" => {}
                    _ => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            if m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
                && !out.contains_key("anyOf")
            {
                out.remove("type");
                out.insert(
                    "anyOf".into(),
                    serde_json::json!([{"type": "integer"}, {"type": "string"}]),
                );
            }
            let preserve =
                m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            if m.contains_key("properties") && !m.contains_key("additionalProperties") && !preserve
            {
                out.insert("additionalProperties".into(), Value::Bool(false));
            }
            if m.get("nullable") == Some(&Value::Bool(true)) {
                return serde_json::json!({ "anyOf": [Value::Object(out), {"type": "null"}] });
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn metadata_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "required": ["name"],
        "additionalProperties": false,
        "properties": {
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        }
    })
}

/// (group, kind, version) -> JSON Schema, from every CRD file under `dir`.
fn crd_schemas(dir: &std::path::Path) -> Vec<((String, String, String), Value, Value)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let group = crd["spec"]["group"].as_str().unwrap().to_string();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
        for v in crd["spec"]["versions"].as_array().unwrap() {
            let raw = v["schema"]["openAPIV3Schema"].clone();
            let mut schema = structural_to_json_schema(&raw);
            schema["properties"]["metadata"] = metadata_schema();
            let version = v["name"].as_str().unwrap().to_string();
            out.push(((group.clone(), kind.clone(), version), schema, raw));
        }
    }
    out
}

fn all_schemas() -> Vec<((String, String, String), Value, Value)> {
    let up = shared().join("upstream");
    let mut all = crd_schemas(&up.join("kueue/v0.19.2/crds"));
    all.extend(crd_schemas(&up.join("volcano/v1.15.1/crds")));
    all.extend(crd_schemas(&up.join("prometheus-operator/v0.93.0/crds")));
    // Karpenter's NodePool and NodeOverlay (issue 40), kept apart from upstream/ (the harness does not
    // install them in every run).
    all.extend(crd_schemas(
        &shared().join("upstream-provisioning/karpenter/v1.15.0/crds"),
    ));
    for version in NETWORK_RELEASES {
        all.extend(crd_schemas(
            &up.join(format!("network-operator/{version}/crds")),
        ));
        // nv-ipam's IPPool and CIDRPool, as the Network Operator release applies them.
        all.extend(crd_schemas(
            &up.join(format!("nvidia-k8s-ipam/network-operator-{version}/crds")),
        ));
    }
    all
}

fn nvidia_driver_schema(version: &str) -> Value {
    let dir = shared().join(format!("upstream/gpu-operator/{version}/crds"));
    crd_schemas(&dir)
        .into_iter()
        .find(|((_, k, _), _, _)| k == "NVIDIADriver")
        .map(|(_, s, _)| s)
        .expect("NVIDIADriver CRD")
}

fn errors(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).expect("schema compiles");
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn every_custom_resource_validates_against_its_upstream_crd() {
    let schemas = all_schemas();
    let mut checked = std::collections::BTreeSet::new();
    for (source, set) in renders() {
        for o in &set.objects {
            // Built-in kinds have no CRD: the cluster tests apply them to the real API server.
            if o.group().is_empty()
                || [
                    "scheduling.k8s.io",
                    "rbac.authorization.k8s.io",
                    "resource.k8s.io",
                    // The Node Readiness Controller's CRD is not among the stored upstream files
                    // (docs/node-pools.md); its rule is built from NRC v0.5.0's API types.
                    "readiness.node.x-k8s.io",
                ]
                .contains(&o.group())
            {
                continue;
            }
            let schema = if o.kind == "NVIDIADriver" {
                nvidia_driver_schema(&set.helm.version)
            } else {
                schemas
                    .iter()
                    .find(|((g, k, v), _, _)| g == o.group() && *k == o.kind && v == o.version())
                    .map(|(_, s, _)| s.clone())
                    .unwrap_or_else(|| panic!("{source}: no upstream CRD for {}", o.display_id()))
            };
            let errs = errors(&schema, &o.manifest);
            assert!(
                errs.is_empty(),
                "{source}: {} does not fit its CRD:\n{}\n{}",
                o.display_id(),
                errs.join("\n"),
                serde_json::to_string_pretty(&o.manifest).unwrap()
            );
            checked.insert(o.kind.clone());
        }
    }
    for kind in [
        "NVIDIADriver",
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
        "Queue",
        "ServiceMonitor",
        "PrometheusRule",
        "Topology",
        "NicClusterPolicy",
        "IPoIBNetwork",
        "IPPool",
        "CIDRPool",
    ] {
        assert!(checked.contains(kind), "no rendered {kind} was checked");
    }
}

#[test]
fn schema_conversion_rejects_unknown_fields() {
    let cq = all_schemas()
        .into_iter()
        .find(|((_, k, v), _, _)| k == "ClusterQueue" && v == "v1beta2")
        .unwrap()
        .1;
    let mut obj = serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": {"cohortName": "c", "resourceGroups": []}
    });
    assert!(errors(&cq, &obj).is_empty());
    obj["spec"]["cohort"] = Value::String("c".into());
    assert!(
        !errors(&cq, &obj).is_empty(),
        "v1beta1's `cohort` must be refused"
    );
    let nvd = nvidia_driver_schema("v25.10.1");
    let cr = serde_json::json!({
        "apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": "d"},
        "spec": {"driverType": "gpu", "image": "driver", "default": true}
    });
    assert!(
        !errors(&nvd, &cr).is_empty(),
        "v25.10.1 has no spec.default"
    );
}

/// The CEL rules of the upstream CRDs that apply to what render writes, checked by hand.
#[test]
fn cel_rules_hold() {
    for (source, set) in renders() {
        for o in &set.objects {
            let spec = &o.manifest["spec"];
            match o.kind.as_str() {
                // nvidiadrivers: "default NVIDIADriver must not use nodeSelector"
                "NVIDIADriver" if spec["default"] == Value::Bool(true) => {
                    assert!(
                        spec.get("nodeSelector").is_none(),
                        "{source}: {}",
                        o.display_id()
                    );
                }
                // resourceflavors: "at least one nodeLabel is required when topology is set"
                "ResourceFlavor" if spec.get("topologyName").is_some() => {
                    assert!(
                        spec["nodeLabels"]
                            .as_object()
                            .is_some_and(|m| !m.is_empty()),
                        "{source}: {}",
                        o.display_id()
                    );
                }
                // topologies: "must be unique"; "the kubernetes.io/hostname label can only be used
                // at the lowest level of topology"
                "Topology" => {
                    let levels: Vec<&str> = spec["levels"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|l| l["nodeLabel"].as_str().unwrap())
                        .collect();
                    let unique: std::collections::BTreeSet<&&str> = levels.iter().collect();
                    assert_eq!(unique.len(), levels.len(), "{source}: {}", o.display_id());
                    if levels.contains(&"kubernetes.io/hostname") {
                        assert_eq!(
                            levels.last(),
                            Some(&"kubernetes.io/hostname"),
                            "{source}: {}",
                            o.display_id()
                        );
                    }
                }
                "ClusterQueue" => {
                    // "flavors must have the same number of resources as the coveredResources"
                    // (and, per the webhook, in the same order)
                    for rg in spec["resourceGroups"].as_array().unwrap() {
                        let covered: Vec<&Value> =
                            rg["coveredResources"].as_array().unwrap().iter().collect();
                        for f in rg["flavors"].as_array().unwrap() {
                            let names: Vec<&Value> = f["resources"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|r| &r["name"])
                                .collect();
                            assert_eq!(names, covered, "{source}: {}", o.display_id());
                        }
                    }
                    // "borrowingLimit must be nil when cohort is empty"
                    if spec.get("cohortName").is_none() {
                        assert!(
                            !o.manifest.to_string().contains("borrowingLimit"),
                            "{source}: {}",
                            o.display_id()
                        );
                    }
                    // "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
                    let p = &spec["preemption"];
                    let reclaim_never = p.get("reclaimWithinCohort").is_none_or(|r| r == "Never");
                    let borrow = p["borrowWithinCohort"]["policy"]
                        .as_str()
                        .unwrap_or("Never");
                    assert!(
                        !(reclaim_never && borrow != "Never"),
                        "{source}: {}",
                        o.display_id()
                    );
                }
                _ => {}
            }
        }
    }
}

/// Every CEL rule (`x-kubernetes-validations`) of the v1beta2 Kueue CRDs of the kinds gpuctl
/// renders, by its message: the validation rule that refuses a blueprint which would break it, or
/// why it cannot apply to what gpuctl renders. A CRD that gains a rule fails this test until the
/// rule is placed here (issue 14).
#[test]
fn every_kueue_cel_rule_on_rendered_kinds_has_a_validation_rule() {
    const PLACED: &[(&str, &str, &str)] = &[
        (
            "ClusterQueue",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            "GPU111",
        ),
        (
            "ClusterQueue",
            "flavors must have the same number of resources as the coveredResources",
            "GPU070",
        ),
        (
            "ClusterQueue",
            "borrowingLimit must be nil when cohort is empty",
            "GPU071",
        ),
        (
            "ClusterQueue",
            "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
            "not rendered: gpuctl writes no flavorFungibility",
        ),
        (
            "Cohort",
            "flavors must have the same number of resources as the coveredResources",
            "not rendered: gpuctl writes no Cohort resourceGroups",
        ),
        (
            "LocalQueue",
            "field is immutable",
            "not a value rule: spec.clusterQueue may not change; a tenant moved to another queue is a new LocalQueue only if renamed",
        ),
        (
            "Topology",
            "field is immutable",
            "not a value rule: a Topology's levels may not change; plan shows the change, apply's server-side dry-run refuses it",
        ),
        ("Topology", "must be unique", "GPU140"),
        (
            "Topology",
            "the kubernetes.io/hostname label can only be used at the lowest level of topology",
            "GPU140",
        ),
        (
            "ResourceFlavor",
            "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
            "schema: TaintEffect has only these values (GPU003)",
        ),
        (
            "ResourceFlavor",
            "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
            "render: tolerations always carry the taint's key",
        ),
        (
            "ResourceFlavor",
            "effect must be 'NoExecute' when 'tolerationSeconds' is set",
            "not rendered: gpuctl writes no tolerationSeconds",
        ),
        (
            "ResourceFlavor",
            "supported toleration values: 'Equal'(default), 'Exists'",
            "render: tolerations use Equal or Exists",
        ),
        (
            "ResourceFlavor",
            "a value must be empty when 'operator' is 'Exists'",
            "render: an Exists toleration carries no value",
        ),
        (
            "ResourceFlavor",
            "at least one nodeLabel is required when topology is set",
            "not rendered: gpuctl writes no topologyName",
        ),
        (
            "ResourceFlavor",
            "nodeLabels are immutable when topologyName is set",
            "not rendered: gpuctl writes no topologyName",
        ),
        (
            "ResourceFlavor",
            "tolerations are immutable when topologyName is set",
            "not rendered: gpuctl writes no topologyName",
        ),
        (
            "ResourceFlavor",
            "topologyName is immutable when topologyName is set",
            "not rendered: gpuctl writes no topologyName",
        ),
    ];
    fn collect(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::Array(rules)) = m.get("x-kubernetes-validations") {
                    for r in rules {
                        let msg = r["message"].as_str().unwrap_or_default();
                        out.push(msg.split_whitespace().collect::<Vec<_>>().join(" "));
                    }
                }
                for x in m.values() {
                    collect(x, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
            _ => {}
        }
    }
    let rendered: std::collections::BTreeSet<String> = renders()
        .iter()
        .flat_map(|(_, set)| set.objects.iter())
        .filter(|o| o.group() == "kueue.x-k8s.io")
        .map(|o| o.kind.clone())
        .collect();
    let mut found = Vec::new();
    for ((group, kind, version), _, raw) in all_schemas() {
        if group != "kueue.x-k8s.io" || version != "v1beta2" || !rendered.contains(&kind) {
            continue;
        }
        let mut msgs = Vec::new();
        collect(&raw, &mut msgs);
        for m in msgs {
            found.push((kind.clone(), m));
        }
    }
    assert!(
        !found.is_empty(),
        "no CEL rules found: wrong CRD directory?"
    );
    for (kind, msg) in &found {
        let placed = PLACED
            .iter()
            .find(|(k, m, _)| k == kind && m == msg)
            .unwrap_or_else(|| {
                panic!(
                    "{kind}: CEL rule `{msg}` has no gpuctl rule: add one (GPU111) and list it here"
                )
            });
        if placed.2.starts_with("GPU") {
            assert!(
                gpuctl_core::validate::registry::rule(placed.2).is_some(),
                "{}",
                placed.2
            );
        }
    }
    // Nothing listed that the CRDs no longer have (for kinds render writes).
    for (k, m, _) in PLACED.iter().filter(|(k, _, _)| rendered.contains(*k)) {
        assert!(
            found.iter().any(|(fk, fm)| fk == k && fm == m),
            "{k}: `{m}` is not a CEL rule of the v0.19.2 CRD any more"
        );
    }
}

/// The Kueue chart's own Configuration that gpuctl's rendered `managerConfig` starts from
/// (`profiles/queueing.yaml`, `kueue_configuration.chart_defaults`) is the chart's, and every
/// setting gpuctl writes is a field of the Configuration type.
#[test]
fn kueue_chart_defaults_match_the_chart() {
    let dir = shared().join("upstream/kueue/v0.19.2");
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("values.yaml")).unwrap()).unwrap();
    let text = values["managerConfig"]["controllerManagerConfigYaml"]
        .as_str()
        .expect("the chart keeps the Configuration as text");
    let chart: Value = serde_saphyr::from_str(text).unwrap();
    let facts = &gpuctl_core::profiles::Catalog::embedded()
        .queueing()
        .kueue_configuration;
    assert_eq!(facts.chart_defaults, chart);
    assert_eq!(
        facts.chart_values_key,
        "managerConfig.controllerManagerConfigYaml"
    );
    let types = std::fs::read_to_string(dir.join("configuration_types.go")).unwrap();
    for field in [
        "json:\"fairSharing,omitempty\"",
        "json:\"preemptionStrategies\"",
        "json:\"resources,omitempty\"",
        "json:\"quotaCheckStrategy,omitempty\"",
        "json:\"excludeResourcePrefixes,omitempty\"",
        "json:\"transformations,omitempty\"",
        "json:\"input\"",
        "json:\"strategy,omitempty\"",
        "json:\"outputs,omitempty\"",
        "json:\"integrations,omitempty\"",
        "json:\"frameworks,omitempty\"",
        "json:\"waitForPodsReady,omitempty\"",
        "json:\"timeout\"",
        "json:\"blockAdmission,omitempty\"",
    ] {
        assert!(
            types.contains(field),
            "configuration_types.go has no {field}"
        );
    }
    // Every framework gpuctl accepts is one the type's documentation lists.
    for f in &facts.frameworks {
        assert!(types.contains(&format!("//  - \"{f}\"")), "{f}");
    }
    for s in facts.fair_sharing_strategy_sets.iter().flatten() {
        assert!(
            types.contains(&format!("PreemptionStrategy = \"{s}\"")),
            "{s}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Core objects

fn round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(
    o: &gpuctl_core::render::RenderedObject,
) {
    let typed: T = serde_json::from_value(o.manifest.clone())
        .unwrap_or_else(|e| panic!("{} does not deserialise: {e}", o.display_id()));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        back,
        o.manifest,
        "{} loses fields in k8s-openapi",
        o.display_id()
    );
}

#[test]
fn every_core_object_round_trips_through_k8s_openapi() {
    use k8s_openapi::api::core::v1::{ConfigMap, LimitRange, Namespace, ResourceQuota};
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    let mut seen = std::collections::BTreeSet::new();
    for (_, set) in renders() {
        for o in &set.objects {
            match (o.api_version.as_str(), o.kind.as_str()) {
                ("v1", "Namespace") => round_trips::<Namespace>(o),
                ("v1", "ResourceQuota") => round_trips::<ResourceQuota>(o),
                ("v1", "LimitRange") => round_trips::<LimitRange>(o),
                ("v1", "ConfigMap") => round_trips::<ConfigMap>(o),
                ("scheduling.k8s.io/v1", "PriorityClass") => round_trips::<PriorityClass>(o),
                ("v1", kind) | ("scheduling.k8s.io/v1", kind) => {
                    panic!("core kind {kind} has no round-trip check")
                }
                _ => continue,
            }
            seen.insert(o.kind.clone());
        }
    }
    assert_eq!(seen.len(), 5, "{seen:?}");
}

// ---------------------------------------------------------------------------------------------
// Helm values

/// Commented keys (`# name:` lines) inside the top-level section of `path`'s first segment, in
/// order: the chart documents some keys only this way.
fn commented_key_exists(text: &str, path: &str) -> bool {
    let mut parts = path.split('.');
    let top = parts.next().unwrap();
    let rest: Vec<&str> = parts.collect();
    let Some(start) = text.find(&format!("\n{top}:")) else {
        return false;
    };
    let section: Vec<&str> = text[start + 1..]
        .lines()
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with(' ') || l.starts_with('#'))
        .collect();
    let keys: Vec<&str> = section
        .iter()
        .filter_map(|l| l.trim_start().strip_prefix('#'))
        .filter_map(|l| l.trim_start().split_once(':').map(|(k, _)| k.trim()))
        .collect();
    let mut want = rest.iter();
    let mut next = want.next();
    for k in keys {
        if Some(&k) == next {
            next = want.next();
        }
    }
    next.is_none()
}

fn leaf_paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_paths(v, &p, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// Whether `path` exists in the parsed values.yaml: every segment down to a leaf (or an empty map,
/// whose keys are the user's) is a key there.
fn path_in_values(values: &Map<String, Value>, path: &str) -> bool {
    let mut node = values;
    for part in path.split('.') {
        match node.get(part) {
            Some(Value::Object(m)) if !m.is_empty() => node = m,
            Some(_) => return true,
            None => return false,
        }
    }
    true
}

/// The node-feature-discovery dependency's values.yaml as vendored in the release's chart archive.
fn nfd_values(version: &str) -> Map<String, Value> {
    let archive = shared().join(format!(
        "upstream/gpu-operator/{version}/gpu-operator-{version}.tgz"
    ));
    let out = std::process::Command::new("tar")
        .arg("-xzOf")
        .arg(&archive)
        .arg("gpu-operator/charts/node-feature-discovery/values.yaml")
        .output()
        .expect("tar runs");
    assert!(
        out.status.success(),
        "{}: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Its long comment blocks overflow the YAML reader's look-ahead; comments carry no values.
    let text: String = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let v: Value = serde_saphyr::from_str(&text).unwrap();
    v.as_object().cloned().unwrap()
}

const NFD: &str = "node-feature-discovery.";

#[test]
fn every_rendered_helm_value_exists_in_the_real_chart() {
    let mut releases = std::collections::BTreeSet::new();
    for (source, set) in renders() {
        let version = set.helm.version.clone();
        let (text, values) = upstream_values(&version);
        let mut paths = Vec::new();
        leaf_paths(&set.helm.values, "", &mut paths);
        for p in paths {
            // A dependency's keys are in the dependency's own values.yaml.
            let known = path_in_values(&values, &p)
                || commented_key_exists(&text, &p)
                || p.strip_prefix(NFD)
                    .is_some_and(|sub| path_in_values(&nfd_values(&version), sub));
            assert!(
                known,
                "{source}: `{p}` is not a key of the GPU Operator {version} chart values"
            );
        }
        releases.insert(version);
    }
    assert_eq!(
        releases.into_iter().collect::<Vec<_>>(),
        CHART_RELEASES.to_vec(),
        "both supported releases are rendered"
    );
}

/// releases.yaml's hand-written facts against the real files: commented keys are documented in
/// values.yaml, and the NVIDIADriver CRD has `spec.default` / `spec.upgradePolicy` exactly when the
/// facts say so.
#[test]
fn release_facts_match_upstream_files() {
    for version in CHART_RELEASES {
        let r = gpuctl_core::profiles::chart::chart_release(version).unwrap();
        let (text, values) = upstream_values(version);
        for path in r.facts.commented_keys.keys() {
            assert!(
                !path_in_values(&values, path) && commented_key_exists(&text, path),
                "{version}: `{path}` should be a commented-out key of values.yaml"
            );
        }
        let dir = shared().join(format!("upstream/gpu-operator/{version}/crds"));
        let raw = crd_schemas(&dir)
            .into_iter()
            .find(|((_, k, _), _, _)| k == "NVIDIADriver")
            .unwrap()
            .2;
        let spec = &raw["properties"]["spec"]["properties"];
        assert_eq!(
            spec.get("default").is_some(),
            r.facts.nvidia_driver_default_field,
            "{version}"
        );
        assert_eq!(
            spec.get("upgradePolicy").is_some(),
            r.facts.nvidia_driver_upgrade_policy,
            "{version}"
        );
    }
}

/// The dependency image facts in releases.yaml are the vendored dependency's own defaults.
#[test]
fn subchart_image_facts_match_the_chart_archive() {
    let r = gpuctl_core::profiles::chart::chart_release("v26.7.0").unwrap();
    let nfd = nfd_values("v26.7.0");
    let mut checked = 0;
    for (path, default) in r.image_repositories() {
        if let Some(sub) = path.strip_prefix(NFD) {
            let pointer = format!("/{}", sub.replace('.', "/"));
            assert_eq!(
                Value::Object(nfd.clone())
                    .pointer(&pointer)
                    .and_then(Value::as_str),
                Some(default),
                "{path}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 1);
    assert!(nfd.get("imagePullSecrets").is_some_and(Value::is_array));
}

/// Every field the upstream CRDs keep immutable on the kinds gpuctl renders (a CEL rule
/// `self == oldSelf` on the field, in the API version render writes; or a rule on the object that
/// compares with `oldSelf`) is in `profiles/limits.yaml` `immutable_fields`, which plans read to
/// replace such an object instead of planning an update the server refuses; and every CRD path
/// listed there exists in the CRD. A CRD that gains such a rule fails this test.
#[test]
fn immutable_fields_follow_the_upstream_crd_rules() {
    fn walk(node: &Value, path: &str, exact: &mut Vec<String>, other: &mut Vec<String>) {
        for rule in node["x-kubernetes-validations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let r = rule["rule"].as_str().unwrap_or_default();
            if r.trim() == "self == oldSelf" {
                exact.push(path.to_string());
            } else if r.contains("oldSelf") {
                other.push(path.to_string());
            }
        }
        for (k, v) in node["properties"].as_object().into_iter().flatten() {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            walk(v, &p, exact, other);
        }
        walk_items(node, path, exact, other);
    }
    fn walk_items(node: &Value, path: &str, exact: &mut Vec<String>, other: &mut Vec<String>) {
        if node["items"].is_object() {
            walk(&node["items"], &format!("{path}[]"), exact, other);
        }
    }
    let facts = &gpuctl_core::profiles::Catalog::embedded()
        .limits()
        .immutable_fields;
    let rendered: std::collections::BTreeSet<(String, String, String)> = renders()
        .iter()
        .flat_map(|(_, set)| {
            set.objects
                .iter()
                .map(|o| {
                    (
                        o.group().to_string(),
                        o.kind.clone(),
                        o.version().to_string(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let up = shared().join("upstream");
    let mut schemas = all_schemas();
    schemas.extend(crd_schemas(&up.join("gpu-operator/v26.7.0/crds")));
    let mut missing = Vec::new();
    let mut checked = 0;
    for ((group, kind, version), _, raw) in &schemas {
        if !rendered.contains(&(group.clone(), kind.clone(), version.clone())) {
            continue;
        }
        checked += 1;
        let (mut exact, mut other) = (Vec::new(), Vec::new());
        walk(raw, "", &mut exact, &mut other);
        let entry: Vec<&gpuctl_core::profiles::ImmutableKind> = facts
            .kinds
            .iter()
            .filter(|k| k.group == *group && k.kind == *kind)
            .collect();
        for p in &exact {
            if !entry.iter().any(|k| k.paths.contains(p)) {
                missing.push(format!("{kind}.{group} {version}: `{p}` (self == oldSelf)"));
            }
        }
        if !other.is_empty() && entry.iter().all(|k| k.when_live_has.is_none()) {
            missing.push(format!(
                "{kind}.{group} {version}: rules comparing with oldSelf at {other:?} have no conditional entry"
            ));
        }
        for k in &entry {
            for p in &k.paths {
                let mut node = raw;
                for part in p.split('.') {
                    node = &node["properties"][part];
                }
                assert!(
                    node.is_object(),
                    "profiles/limits.yaml immutable_fields: {kind} has no field `{p}` in its CRD"
                );
            }
        }
    }
    assert!(
        checked >= 8,
        "only {checked} rendered CRD kinds were checked"
    );
    assert!(
        missing.is_empty(),
        "add these to profiles/limits.yaml immutable_fields:\n{}",
        missing.join("\n")
    );
}

/// profiles/dra.yaml's DeviceClasses are the DRA driver chart's own: every class name and CEL
/// selector appears verbatim in the chart's templates (v25.12.0 in ../shared/upstream).
#[test]
fn dra_device_classes_are_the_driver_charts() {
    let dir = shared().join("upstream/dra-driver-nvidia-gpu/v25.12.0/templates");
    let text: String = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .collect();
    let classes = &gpuctl_core::profiles::Catalog::embedded()
        .dra()
        .driver
        .device_classes;
    assert_eq!(classes.len(), text.matches("kind: DeviceClass").count());
    for c in classes {
        assert!(
            text.contains(&format!("name: {}\n", c.name)),
            "{} is not a class of the chart",
            c.name
        );
        assert!(
            text.contains(&format!("expression: \"{}\"", c.selector)),
            "{}: the selector differs from the chart's",
            c.name
        );
    }
}

/// `profiles/queueing.yaml`'s Volcano chart facts: every CRD they list is of an API group whose
/// objects block the release's uninstall; and, when the harness has the chart from Volcano's Go
/// module (`GPUCTL_VOLCANO_CHART`, its env file), the facts are the chart's: name, version,
/// appVersion, its jobflow dependency, every CRD it ships (its own and jobflow's `crd/bases`), and
/// the top-level sections of its values.yaml.
#[test]
fn volcano_chart_facts_match_the_chart() {
    let facts = &gpuctl_core::profiles::Catalog::embedded()
        .queueing()
        .volcano_release;
    let groups = gpuctl_core::plan::uninstall::api_groups(gpuctl_core::render::Stack::Volcano);
    for c in &facts.charts {
        for crd in &c.crds {
            let group = crd.split_once('.').map(|(_, g)| g).unwrap_or_default();
            assert!(groups.contains(&group), "{crd}: {group} not in {groups:?}");
        }
    }
    let Some(dir) = std::env::var_os("GPUCTL_VOLCANO_CHART").map(std::path::PathBuf::from) else {
        eprintln!("GPUCTL_VOLCANO_CHART is not set (no harness env): Chart.yaml not compared");
        return;
    };
    let meta: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("Chart.yaml")).unwrap()).unwrap();
    let c = facts
        .charts
        .iter()
        .find(|c| meta["appVersion"] == Value::String(c.app_version.clone()))
        .unwrap_or_else(|| panic!("no facts for the chart in {}", dir.display()));
    assert_eq!(meta["name"], Value::String(facts.chart.clone()));
    assert_eq!(meta["version"], Value::String(c.version.clone()));
    assert_eq!(meta["dependencies"][0]["name"], "jobflow");
    let mut crds = Vec::new();
    for sub in ["crd/bases", "charts/jobflow/crd/bases"] {
        for f in std::fs::read_dir(dir.join(sub)).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            let crd: Value = serde_saphyr::from_str(&text).unwrap();
            assert_eq!(crd["kind"], "CustomResourceDefinition");
            crds.push(crd["metadata"]["name"].as_str().unwrap().to_string());
        }
    }
    crds.sort();
    assert_eq!(crds, c.crds);
    let values: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("values.yaml")).unwrap()).unwrap();
    let sections: Vec<&String> = values.as_object().unwrap().keys().collect();
    let mut want: Vec<&String> = c.values_sections.iter().collect();
    want.sort();
    let mut sections = sections;
    sections.sort();
    assert_eq!(sections, want);
}

/// The standalone DRA driver chart's values (`helm/dra-driver-values.yaml`): every key gpuctl
/// renders exists in the chart's values.yaml of each release whose values tree is stored in
/// ../shared (profiles/dra.yaml `standalone.values_tree_in_shared`: v25.12.0; the v0.4.0+ trees
/// are not there, and neither is the chart itself, so no `helm template` of it runs anywhere in
/// the tests), and the GPU Operator values of the same render (the driver manager's eviction
/// label) exist in the operator's chart.
#[test]
fn every_rendered_dra_driver_value_exists_in_the_real_chart() {
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let facts = &catalog.dra().standalone;
    assert!(!facts.values_tree_in_shared.is_empty());
    let base = std::fs::read_to_string(root().join("tests/fixtures/dra/shapes.yaml")).unwrap();
    for version in &facts.values_tree_in_shared {
        let text = base
            .replace(
                "  dra:\n    shapes:\n",
                &format!("  dra:\n    driver: {{ deployment: standalone, version: {version}, install: helm, featureGates: {{ MPSSupport: true }} }}\n    shapes:\n"),
            )
            .replace(
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n",
                "      gpu: { model: H100-SXM5-80GB, count: 8 }\n      gpuPlugin: dra\n",
            )
            // the MIG shape's pool too: a shape only device-plugin pools hold is an error (GPU169)
            .replace(
                "      gpu: { model: A100-SXM4-80GB, count: 4 }\n",
                "      gpu: { model: A100-SXM4-80GB, count: 4 }\n      gpuPlugin: dra\n",
            );
        let set = render_common::render_text("standalone.yaml", &text);
        let dra = set
            .releases
            .iter()
            .find(|r| r.stack == gpuctl_core::render::Stack::DraDriver)
            .expect("the DRA driver release is rendered");
        let path = shared().join(format!(
            "upstream/dra-driver-nvidia-gpu/{version}/values.yaml"
        ));
        let upstream: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let upstream = upstream.as_object().unwrap();
        let mut paths = Vec::new();
        leaf_paths(&dra.values, "", &mut paths);
        for rendered in facts.rendered_paths() {
            assert!(
                path_in_values(upstream, rendered),
                "profiles/dra.yaml standalone.values `{rendered}` is not a key of {}",
                path.display()
            );
        }
        assert!(paths.len() >= 5, "{paths:?}");
        for p in paths {
            assert!(
                path_in_values(upstream, &p),
                "`{p}` is not a key of the DRA driver chart {version} values ({})",
                path.display()
            );
        }
        // The chart's own name in that release is the one the facts give it.
        let chart = std::fs::read_to_string(path.with_file_name("Chart.yaml")).unwrap();
        let release = catalog.dra().driver.release(version).unwrap();
        assert!(
            chart.contains(&format!("\nname: {}\n", release.chart)),
            "{version}: chart name {}",
            release.chart
        );
        assert_eq!(dra.chart_name(), release.chart);
        let (text, op) = upstream_values(&set.helm.version);
        let mut paths = Vec::new();
        leaf_paths(&set.helm.values, "", &mut paths);
        assert!(paths.iter().any(|p| p.starts_with("driver.manager.env")));
        for p in paths {
            assert!(
                path_in_values(&op, &p) || commented_key_exists(&text, &p),
                "`{p}` is not a key of the GPU Operator chart"
            );
        }
    }
}
