//! Render: a validated blueprint becomes the ordered set of objects, values and documents it implies.
//!
//! Rust decides *what* exists (which objects, their names, the values derived from the blueprint and
//! the facts catalog); the templates in `templates/` decide how each one is written. Every object is
//! parsed back from its template's output, labelled as a member of the blueprint's ApplySet, and
//! sorted by (phase, kind, namespace, name), so the same blueprint always gives the same bytes.

pub mod accounting;
pub mod dra;
pub mod dra_chart;
mod driver;
mod helm;
pub mod kueue_config;
pub mod network;
mod nodes;
mod objects;
pub mod provisioning;
pub mod rendered;
mod runbook;
mod templates;
mod text;
pub mod volcano;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

pub use driver::{DriverCr, DriverManager, driver_crs, nvidia_driver_cr};
pub use gpuctl_model::names::{
    DEFAULT_DRIVER_CR, DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL, TENANT_LABEL,
    VOLCANO_QUEUE_ANNOTATION, pool_driver_cr_name,
};
pub use helm::{CHART, CHART_REPOSITORY, RELEASE_NAME};
pub use nodes::{DEVICE_PLUGIN_DEFAULT, MIG_DISABLED, Toleration};
pub use objects::{LOCAL_QUEUE, limit_range_name, quota_key, quota_name};
pub use rendered::*;
pub use templates::{TEMPLATE_FUEL, Templates};
pub use text::yaml;

use crate::validate::ValidatedBlueprint;
use gpuctl_model::applyset::{ApplySetParent, BLUEPRINT_LABEL, MANAGED_BY, PART_OF};
use gpuctl_model::profiles::Catalog;

/// The `app.kubernetes.io/managed-by` value on everything gpuctl renders.
pub const MANAGER: &str = "gpuctl";
/// Names of the ConfigMaps gpuctl renders into the operator's namespace.
pub const MIG_PARTED_CONFIGMAP: &str = "gpuctl-mig-parted-config";
/// See [`MIG_PARTED_CONFIGMAP`].
pub const DEVICE_PLUGIN_CONFIGMAP: &str = "gpuctl-device-plugin-config";
/// See [`MIG_PARTED_CONFIGMAP`].
pub const DCGM_METRICS_CONFIGMAP: &str = "gpuctl-dcgm-metrics";
/// Path of the troubleshooting runbook in [`RenderedSet::documents`].
pub const TROUBLESHOOTING_RUNBOOK: &str = "runbooks/troubleshooting.md";

/// Why a validated blueprint could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A template failed to compile or render (syntax error, undefined variable under strict mode).
    #[error("template `{template}`: {source}")]
    Template {
        /// Template name, relative to `templates/`.
        template: String,
        /// minijinja's error, with line information.
        #[source]
        source: Box<minijinja::Error>,
    },
    /// A template rendered something that is not the object render expects.
    #[error("template `{template}` produced invalid output: {message}")]
    TemplateOutput {
        /// Template name.
        template: String,
        /// What is wrong (not YAML, no `kind`, ...).
        message: String,
    },
    /// A `--templates` directory or one of its files could not be read.
    #[error("cannot read templates from `{path}`: {source}")]
    TemplateDir {
        /// The directory or file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A `--templates` file that is not a regular file or is over [`gpuctl_model::input::TEMPLATE`].
    #[error("template override {0}")]
    TemplateFile(#[source] gpuctl_model::input::InputError),
    /// A `--templates` directory whose files together are over [`gpuctl_model::input::TEMPLATE_DIR_BYTES`].
    #[error(
        "the templates in `{path}` are over {limit} bytes together; keep only the templates you change there"
    )]
    TemplateDirTooLarge {
        /// The directory.
        path: String,
        /// The limit.
        limit: u64,
    },
    /// A template did more work than any render needs ([`TEMPLATE_FUEL`]): a loop that does
    /// not end, or one over far more items than a blueprint has.
    #[error(
        "template `{template}` ran out of fuel (more than {fuel} steps); the shipped templates need \
         a small fraction of that, so check the loops of this template (`--templates` overrides)"
    )]
    OutOfFuel {
        /// Template name.
        template: String,
        /// The fuel it had.
        fuel: u64,
    },
    /// A file in a `--templates` directory replaces no embedded template.
    #[error("`{path}` names no template; {hint}see `templates/` for the names")]
    UnknownTemplate {
        /// The file.
        path: String,
        /// "did you mean" hint, or empty.
        hint: String,
    },
    /// The blueprint names an operator release render has no chart key tree for.
    #[error(
        "no chart key tree for GPU Operator `{version}`: render knows {known}; add \
         `profiles/gpu-operator-values/{version}.yaml` (generated from the chart's values.yaml) \
         or choose a known release"
    )]
    NoChartKeyTree {
        /// The blueprint's `gpuOperator.version`.
        version: String,
        /// Releases that have one.
        known: String,
    },
    /// Key paths in `gpuOperator.values` the chart of that release does not have.
    #[error(
        "`gpuOperator.values` does not fit the GPU Operator {version} chart: {}",
        problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    UnknownChartKeys {
        /// Chart release.
        version: String,
        /// Each bad path (relative to `gpuOperator.values`) and what is wrong.
        problems: Vec<gpuctl_model::profiles::chart::KeyProblem>,
    },
    /// gpuctl itself would write a key the chart does not have: a bug in a template or key tree.
    #[error(
        "the rendered Helm values do not fit the GPU Operator {version} chart (check `templates/helm/`): {}",
        problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    RenderedChartKeys {
        /// Chart release.
        version: String,
        /// Each bad path and what is wrong.
        problems: Vec<gpuctl_model::profiles::chart::KeyProblem>,
    },
    /// Two rendered objects have the same identity.
    #[error("`{id}` is rendered twice ({first} and {second}); rename one of them")]
    DuplicateObject {
        /// `Kind/namespace/name`.
        id: String,
        /// What the first one came from.
        first: String,
        /// What the second one came from.
        second: String,
    },
    /// The blueprint uses a name gpuctl reserves for something it renders.
    #[error("{what} `{name}` is reserved by gpuctl ({why}); rename it")]
    ReservedName {
        /// What is named (`node pool`).
        what: &'static str,
        /// The name.
        name: String,
        /// What gpuctl uses it for.
        why: &'static str,
    },
    /// MIG pools ask for different device-plugin strategies, which one operator cannot serve.
    #[error(
        "MIG pools use different strategies ({detail}); the GPU Operator sets one `mig.strategy` for \
         the whole cluster (its MIG_STRATEGY environment overrides per-node device-plugin configs), so \
         give every MIG pool the same `partitioning.mig.strategy` (`mixed` serves any layout)"
    )]
    ConflictingMigStrategies {
        /// `pool: strategy` pairs.
        detail: String,
    },
    /// The declared Kueue or Volcano release does not serve the API version gpuctl writes, or is
    /// unknown (validation refuses this first, GPU076 / GPU084).
    #[error("{message}: {hint}")]
    QueueRelease {
        /// What is wrong.
        message: String,
        /// What to do.
        hint: String,
    },
    /// A DRA shape or claim gpuctl cannot render (validation refuses it first: GPU171, GPU173).
    #[error("`{path}`: {message}")]
    Dra {
        /// Blueprint field.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A pool names a GPU the catalog does not know (validation normally refuses this first).
    #[error("pool `{pool}`: GPU model `{model}` is not in the catalog")]
    UnknownGpu {
        /// Pool name.
        pool: String,
        /// Model key.
        model: String,
    },
}

impl RenderError {
    fn template(name: &str, e: minijinja::Error) -> RenderError {
        RenderError::Template {
            template: name.to_string(),
            source: Box::new(e),
        }
    }
}

/// The labels that make an object a member of a blueprint's ApplySet.
pub fn member_labels(blueprint: &str, operator_namespace: &str) -> BTreeMap<String, String> {
    let id = ApplySetParent::for_blueprint(blueprint, operator_namespace).id();
    BTreeMap::from([
        (PART_OF.to_string(), id),
        (MANAGED_BY.to_string(), MANAGER.to_string()),
        (BLUEPRINT_LABEL.to_string(), blueprint.to_string()),
    ])
}

/// Adds `labels` to `manifest.metadata.labels` (gpuctl's values win), keeping labels sorted.
pub fn add_labels(manifest: &mut Value, labels: &BTreeMap<String, String>) {
    let Some(obj) = manifest.as_object_mut() else {
        return;
    };
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let mut all: BTreeMap<String, Value> = meta
        .get("labels")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    for (k, v) in labels {
        all.insert(k.clone(), Value::String(v.clone()));
    }
    meta.insert(
        "labels".to_string(),
        Value::Object(all.into_iter().collect()),
    );
}

/// Renders everything `v` implies.
pub fn render(
    v: &ValidatedBlueprint,
    catalog: &Catalog,
    templates: &Templates,
) -> Result<RenderedSet, RenderError> {
    let bp = v.blueprint();
    let name = bp.metadata.name.clone();
    let op_ns = bp.spec.gpu_operator.namespace.clone();
    let release = catalog
        .chart_release(&bp.spec.gpu_operator.version)
        .ok_or_else(|| RenderError::NoChartKeyTree {
            version: bp.spec.gpu_operator.version.clone(),
            known: catalog.chart_versions().join(", "),
        })?;
    let mut out = Builder {
        templates,
        labels: member_labels(&name, &op_ns),
        objects: Vec::new(),
        pending: Vec::new(),
    };

    let plan = nodes::plan(bp, catalog, release)?;
    let mut helm = helm::release(bp, &plan, release, templates)?;
    dra_chart::driver_manager_env(bp, &catalog.dra().standalone, &mut helm.values);
    accounting::add_exporter_env(&mut helm.values, &accounting::exporter_env(bp, catalog));
    objects::foundation(bp, &mut out)?;
    driver::objects(bp, &plan, release, &helm.values, &mut out)?;
    nodes::config_maps(bp, &plan, &mut out)?;
    objects::tenants(bp, &mut out)?;
    objects::queues(bp, catalog, &mut out)?;
    objects::monitoring(bp, catalog, &mut out)?;
    let accounting = accounting::AccountingTable::new(bp, catalog);
    if let Some(t) = &accounting {
        out.push(
            Phase::Monitoring,
            "accounting/prometheusrule",
            "spec.accounting".to_string(),
            accounting::prometheus_rule(t, &op_ns),
        )?;
    }
    network::objects(bp, catalog, &mut out)?;
    dra::objects(bp, catalog, &mut out)?;
    provisioning::objects(bp, catalog, &plan, &mut out)?;

    let mut objects = out.finish()?;
    objects.sort_by(|a, b| a.0.sort_key().cmp(&b.0.sort_key()));
    let mut seen: BTreeMap<(String, String, String, String), String> = BTreeMap::new();
    for (o, origin) in &objects {
        let key = (
            o.group().to_string(),
            o.kind.clone(),
            o.namespace.clone().unwrap_or_default(),
            o.name.clone(),
        );
        if let Some(first) = seen.insert(key, origin.clone()) {
            return Err(RenderError::DuplicateObject {
                id: o.display_id(),
                first,
                second: origin.clone(),
            });
        }
    }
    let objects: Vec<RenderedObject> = objects.into_iter().map(|(o, _)| o).collect();

    let mut documents = BTreeMap::new();
    documents.insert(
        TROUBLESHOOTING_RUNBOOK.to_string(),
        runbook::troubleshooting(bp, catalog, &plan, templates)?,
    );
    if let Some(t) = &accounting {
        documents.insert(
            accounting::RULES_FILE.to_string(),
            accounting::rules_file(t),
        );
    }
    let network = network::release(bp, templates)?;
    network::documents(bp, network.as_ref(), &mut documents)?;
    network::kubelet_documents(bp, catalog, templates, &mut documents)?;
    provisioning::documents(bp, catalog, &plan, &mut documents);

    let (releases, undeclared) = other_releases(bp, catalog, &name, network, &mut documents);

    Ok(RenderedSet {
        blueprint: name,
        objects,
        node_patches: plan.node_patches,
        helm,
        releases,
        undeclared,
        documents,
    })
}

/// The other stacks' releases gpuctl installs (`helm`) or hands to GitOps, in [`Stack`] order,
/// with their values documents, and the stacks the blueprint does not declare at all.
fn other_releases(
    bp: &gpuctl_model::blueprint::Blueprint,
    catalog: &Catalog,
    name: &str,
    network: Option<HelmRelease>,
    documents: &mut BTreeMap<String, String>,
) -> (Vec<HelmRelease>, Vec<Stack>) {
    let kueue = bp
        .spec
        .scheduling
        .kueue
        .as_ref()
        .filter(|_| bp.spec.scheduling.queueing == gpuctl_model::blueprint::Queueing::Kueue)
        .filter(|k| k.install != gpuctl_model::blueprint::InstallMode::None)
        .map(|k| {
            kueue_config::release(
                k,
                &kueue_config::dra_mappings(bp, catalog),
                &accounting::kueue_configuration(bp, catalog),
            )
        });
    // Kueue's chart values, when the blueprint says how Kueue is installed.
    if let Some(k) = &kueue {
        documents.insert(
            kueue_config::KUEUE_VALUES.to_string(),
            format!(
                "# Kueue {} chart values rendered by gpuctl from blueprint `{}` (install: {}).\n# helm upgrade --install {} {} --version {} --namespace {} --create-namespace -f kueue-values.yaml\n{}",
                k.version,
                name,
                k.install,
                k.release,
                k.chart_reference(),
                k.version,
                k.namespace,
                yaml(&k.values)
            ),
        );
    }
    let volcano = bp
        .spec
        .scheduling
        .volcano
        .as_ref()
        .filter(|_| bp.spec.scheduling.queueing == gpuctl_model::blueprint::Queueing::Volcano)
        .filter(|v| v.install != gpuctl_model::blueprint::InstallMode::None)
        .map(|v| volcano::release(v, &catalog.queueing().volcano_release));
    if let Some(r) = &volcano {
        documents.insert(
            volcano::VOLCANO_VALUES.to_string(),
            volcano::values_document(r, name),
        );
    }
    let dra = dra_chart::release(bp, catalog);
    if let Some(r) = &dra {
        documents.insert(
            dra_chart::DRA_DRIVER_VALUES.to_string(),
            dra_chart::values_document(r, name),
        );
    }
    if let Some(runbook) = dra_chart::migration_runbook(bp, &catalog.dra().standalone) {
        documents.insert(dra_chart::DRA_MIGRATION_RUNBOOK.to_string(), runbook);
    }
    let releases: Vec<HelmRelease> = network
        .into_iter()
        .chain(dra)
        .filter(|r| r.install != gpuctl_model::blueprint::InstallMode::None)
        .chain(kueue)
        .chain(volcano)
        .collect();
    // What the blueprint does not use at all (the GPU Operator it always declares).
    let undeclared = [
        (Stack::NetworkOperator, bp.spec.network_operator.is_none()),
        (
            Stack::Kueue,
            bp.spec.scheduling.queueing != gpuctl_model::blueprint::Queueing::Kueue,
        ),
        (
            Stack::Volcano,
            bp.spec.scheduling.queueing != gpuctl_model::blueprint::Queueing::Volcano,
        ),
        (Stack::DraDriver, dra_chart::standalone(bp).is_none()),
    ]
    .into_iter()
    .filter_map(|(stack, absent)| absent.then_some(stack))
    .collect();
    (releases, undeclared)
}

/// A template's output waiting to be parsed.
struct Pending {
    phase: Phase,
    template: String,
    origin: String,
    text: String,
}

/// Below this many objects, parsing on one thread is faster than starting more.
const PARALLEL_PARSE_MIN: usize = 256;

/// Collects objects while rendering. Templates render in order on one thread; their YAML output,
/// which dominates render time, is parsed on every core at the end (order does not matter: objects
/// are sorted afterwards).
pub(crate) struct Builder<'a> {
    templates: &'a Templates,
    labels: BTreeMap<String, String>,
    /// Each object with a note of what it was rendered from (for duplicate errors).
    objects: Vec<(RenderedObject, String)>,
    pending: Vec<Pending>,
}

impl Builder<'_> {
    /// Renders `template` with `ctx` into one object of `phase`.
    pub(crate) fn object<S: Serialize>(
        &mut self,
        phase: Phase,
        template: &str,
        origin: String,
        ctx: S,
    ) -> Result<(), RenderError> {
        let text = self.templates.render(template, ctx)?;
        self.pending.push(Pending {
            phase,
            template: template.to_string(),
            origin,
            text,
        });
        Ok(())
    }

    /// Adds an already built manifest.
    pub(crate) fn push(
        &mut self,
        phase: Phase,
        template: &str,
        origin: String,
        manifest: Value,
    ) -> Result<(), RenderError> {
        let o = owned_object(&self.labels, phase, template, manifest)?;
        self.objects.push((o, origin));
        Ok(())
    }

    pub(crate) fn templates(&self) -> &Templates {
        self.templates
    }

    /// Parses what is pending and returns every object.
    fn finish(self) -> Result<Vec<(RenderedObject, String)>, RenderError> {
        let Builder {
            labels,
            mut objects,
            pending,
            ..
        } = self;
        let parse = |chunk: &[Pending]| -> Result<Vec<(RenderedObject, String)>, RenderError> {
            chunk
                .iter()
                .map(|p| {
                    let manifest = parse_manifest(&p.template, &p.text)?;
                    let o = owned_object(&labels, p.phase, &p.template, manifest)?;
                    Ok((o, p.origin.clone()))
                })
                .collect()
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        if threads < 2 || pending.len() < PARALLEL_PARSE_MIN {
            objects.extend(parse(&pending)?);
            return Ok(objects);
        }
        let size = pending.len().div_ceil(threads);
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = pending
                .chunks(size)
                .map(|chunk| scope.spawn(|| parse(chunk)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("parsing does not panic"))
                .collect()
        });
        for r in results {
            objects.extend(r?);
        }
        Ok(objects)
    }
}

/// A parsed manifest as an owned object: identity read from it, ApplySet labels added.
fn owned_object(
    labels: &BTreeMap<String, String>,
    phase: Phase,
    template: &str,
    mut manifest: Value,
) -> Result<RenderedObject, RenderError> {
    let bad = |message: &str| RenderError::TemplateOutput {
        template: template.to_string(),
        message: message.to_string(),
    };
    let field = |m: &Value, ptr: &str| m.pointer(ptr).and_then(Value::as_str).map(str::to_string);
    let api_version = field(&manifest, "/apiVersion").ok_or_else(|| bad("no `apiVersion`"))?;
    let kind = field(&manifest, "/kind").ok_or_else(|| bad("no `kind`"))?;
    let name = field(&manifest, "/metadata/name").ok_or_else(|| bad("no `metadata.name`"))?;
    let namespace = field(&manifest, "/metadata/namespace");
    // Names reach the API server and, through `render -o`, file names: a template override can
    // write any name, so check them as the API server would (validate checks the blueprint's).
    let limits = &gpuctl_model::profiles::Catalog::embedded()
        .limits()
        .kubernetes_names;
    let name_ok = if kind == "Namespace" {
        crate::validate::is_dns_label(&name, limits.dns1123_label_max_length)
    } else {
        crate::validate::is_dns_subdomain(&name, limits)
    };
    if !name_ok {
        return Err(bad(&format!(
            "`metadata.name` `{}` of a {kind} is not a valid Kubernetes name; make the template write lower-case letters, digits, `-` and `.` only",
            gpuctl_model::blueprint::yaml::shorten(&name)
        )));
    }
    if let Some(ns) = &namespace
        && !crate::validate::is_dns_label(ns, limits.dns1123_label_max_length)
    {
        return Err(bad(&format!(
            "`metadata.namespace` `{}` is not a DNS-1123 label; make the template write lower-case letters, digits and `-` only",
            gpuctl_model::blueprint::yaml::shorten(ns)
        )));
    }
    add_labels(&mut manifest, labels);
    Ok(RenderedObject {
        phase,
        api_version,
        kind,
        namespace,
        name,
        manifest,
    })
}

/// Parses one template's YAML output into a JSON value.
pub(crate) fn parse_manifest(template: &str, text: &str) -> Result<Value, RenderError> {
    let value: Value = serde_saphyr::from_str(text).map_err(|e| RenderError::TemplateOutput {
        template: template.to_string(),
        message: format!("not YAML: {e}"),
    })?;
    if !value.is_object() {
        return Err(RenderError::TemplateOutput {
            template: template.to_string(),
            message: "not a YAML mapping".to_string(),
        });
    }
    Ok(value)
}

/// Resource names the pools advertise, for documents and checks.
pub(crate) fn pool_resources(bp: &gpuctl_model::blueprint::Blueprint) -> BTreeSet<String> {
    bp.spec
        .node_pools
        .iter()
        .flat_map(|p| gpuctl_model::blueprint::resources::per_node(p).into_keys())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blueprint(version: &str) -> gpuctl_model::blueprint::Blueprint {
        let text = include_str!("../../../../blueprints/dgx-h100-training.yaml")
            .replace("version: v0.19.2", &format!("version: {version}"));
        gpuctl_model::blueprint::load_str("dgx.yaml", &text)
            .expect("loads")
            .blueprint
    }

    fn queues(version: &str) -> Result<Vec<String>, RenderError> {
        let templates = Templates::embedded();
        let mut out = Builder {
            templates: &templates,
            labels: BTreeMap::new(),
            objects: Vec::new(),
            pending: Vec::new(),
        };
        objects::queues(&blueprint(version), Catalog::embedded(), &mut out)?;
        Ok(out
            .finish()?
            .into_iter()
            .map(|(o, _)| format!("{} {}", o.api_version, o.kind))
            .collect())
    }

    /// Kueue objects carry the API version the declared release serves; a release that does not
    /// serve what gpuctl writes is refused, never rendered in an API it would reject.
    #[test]
    fn kueue_objects_use_the_api_version_of_the_declared_release() {
        for version in ["v0.19.2", "v0.15.0"] {
            let objects = queues(version).unwrap();
            assert!(
                objects
                    .iter()
                    .any(|o| o == "kueue.x-k8s.io/v1beta2 ClusterQueue")
            );
            assert!(
                objects
                    .iter()
                    .all(|o| o.starts_with("kueue.x-k8s.io/v1beta2 ")),
                "{objects:?}"
            );
        }
        for version in ["v0.13.0", "v0.14.6", "banana", "v0.19.9"] {
            let err = queues(version).unwrap_err().to_string();
            assert!(err.contains("Kueue"), "{version}: {err}");
        }
        let err = queues("v0.14.6").unwrap_err().to_string();
        assert!(err.contains("v0.15.0 or later"), "{err}");
    }
}
