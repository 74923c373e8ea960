//! Pre-flight from the catalog: the blueprint is validated twice, as written and with the pool's
//! driver set to the target, and every finding the target adds is a pre-flight check (driver vs the
//! pool's GPU architecture and MIG, kernel module type, tenants' CUDA versions, the operator
//! release's validated drivers, branch end of life). No version table is repeated here: the rules
//! and the catalog own them. Also renders the target blueprint, which gives the green NVIDIADriver
//! CR exactly as `gpuctl apply` will write it once the blueprint names the new driver.

use std::collections::BTreeSet;
use std::path::Path;

use jiff::civil::Date;
use serde::Serialize;
use serde_json::Value;

use gpuctl_model::applyset::PART_OF;
use gpuctl_model::blueprint::{self, Blueprint, Loaded, PoolDriver, UpgradeStrategy};
use gpuctl_model::located::{FileReport, Severity};
use gpuctl_model::profiles::Catalog;
use gpuctl_model::version::DriverVersion;
use gpuctl_pipeline::render::{
    self, DRIVER_LABEL, NodePatch, RenderedSet, Templates, pool_driver_cr_name,
};
use gpuctl_pipeline::validate::{self, ValidatedBlueprint};

/// One pre-flight result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Error, warning or info.
    pub level: Severity,
    /// `catalog`, `blueprint` or `cluster`: where the fact came from.
    pub source: &'static str,
    /// Validation rule id when the check is a rule's finding (`gpuctl explain GPU021`).
    pub rule: Option<String>,
    /// What was found.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Check {
    /// A check without a rule id.
    pub fn new(level: Severity, source: &'static str, message: impl Into<String>) -> Check {
        Check {
            level,
            source,
            rule: None,
            message: message.into(),
            hint: None,
        }
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Check {
        self.hint = Some(hint.into());
        self
    }
}

/// Facts about the target driver's branch, from the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BranchFacts {
    /// `R595`.
    pub branch: String,
    /// `production`, `long-term support`, ...
    pub kind: String,
    /// End of life as published (`2027-03`, `reached`, `unpublished`).
    pub end_of_life: String,
    /// CUDA version the branch ships natively.
    pub native_cuda: Option<String>,
}

/// Why an upgrade could not even be planned.
#[derive(Debug)]
pub enum PrepareError {
    /// The blueprint did not load or does not validate as written: fix it first.
    Blueprint(FileReport),
    /// The arguments or the blueprint refuse this upgrade; the message says why and what to do.
    Refused(String),
    /// The target blueprint could not be rendered.
    Render(render::RenderError),
}

impl std::fmt::Display for PrepareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrepareError::Blueprint(r) => write!(
                f,
                "{} has error findings; fix them first (`gpuctl validate {}`)",
                r.file,
                gpuctl_model::input::as_argument(&r.file)
            ),
            PrepareError::Refused(m) => f.write_str(m),
            PrepareError::Render(e) => write!(f, "{e}"),
        }
    }
}

/// Everything the catalog side of pre-flight knows, before the cluster is read.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The blueprint as written (validated).
    pub validated: ValidatedBlueprint,
    /// Its render (node patches give the pool's selector and declared labels).
    pub rendered: RenderedSet,
    /// Index of the pool in `spec.nodePools`.
    pub pool_index: usize,
    /// The target driver.
    pub target: DriverVersion,
    /// The driver the blueprint declares for the pool today.
    pub declared: DriverVersion,
    /// Checks from the catalog and the blueprint.
    pub checks: Vec<Check>,
    /// The green NVIDIADriver CR as render writes it for the target (`None` when the target has
    /// error findings, so there is nothing to create).
    pub green_manifest: Option<Value>,
    /// Facts about the target branch.
    pub branch: Option<BranchFacts>,
    /// The edit that makes the blueprint say what the cluster will run.
    pub blueprint_change: String,
}

impl Prepared {
    /// The blueprint.
    pub fn blueprint(&self) -> &Blueprint {
        self.validated.blueprint()
    }

    /// The pool's node patch (selector, labels gpuctl declares).
    pub fn node_patch(&self) -> &NodePatch {
        &self.rendered.node_patches[self.pool_index]
    }

    /// The CR render gives the pool today (`cluster-default`, or `pool-<pool>-<version>` for a pool
    /// with its own driver).
    pub fn declared_cr(&self) -> String {
        self.node_patch()
            .labels
            .get(DRIVER_LABEL)
            .cloned()
            .unwrap_or_default()
    }
}

/// Loads `path`, validates it as written and with pool `pool` on driver `to`, and renders the target.
pub fn prepare(
    path: &Path,
    pool: &str,
    to: &str,
    today: Date,
    templates: &Templates,
) -> Result<Prepared, PrepareError> {
    let loaded = blueprint::load_file(path).map_err(PrepareError::Blueprint)?;
    prepare_loaded(loaded, pool, to, today, templates)
}

/// [`prepare`] for an already loaded blueprint.
pub fn prepare_loaded(
    loaded: Loaded,
    pool: &str,
    to: &str,
    today: Date,
    templates: &Templates,
) -> Result<Prepared, PrepareError> {
    let catalog = Catalog::embedded();
    let opts = validate::Options { today };
    let before = validate::check(&loaded, catalog, opts);
    let validated =
        validate::validate(loaded.clone(), catalog, opts).map_err(PrepareError::Blueprint)?;
    let bp = validated.blueprint();
    let (pool_index, target, declared) = resolve(bp, pool, to)?;
    let rendered = render::render(&validated, catalog, templates).map_err(PrepareError::Render)?;

    let mut checks = blueprint_checks(bp, pool_index, &target, &declared);
    let target_loaded = with_target_driver(loaded, pool_index, &target);
    let (target_checks, target_errors) = target_findings(&before, &target_loaded, catalog, opts);
    checks.extend(target_checks);
    let branch = branch_facts(catalog, &target);
    if let Some(b) = &branch {
        checks.push(branch_check(b));
    }
    let green_manifest = if target_errors == 0 {
        green_cr(target_loaded, pool, &target, catalog, opts, templates)?
    } else {
        None
    };
    let blueprint_change = blueprint_change(&validated, pool_index, &target);
    Ok(Prepared {
        validated,
        rendered,
        pool_index,
        target,
        declared,
        checks,
        green_manifest,
        branch,
        blueprint_change,
    })
}

/// The pool's index, the target driver and the pool's declared driver; refuses an unknown pool, a
/// version that does not parse, and `strategy: rolling` (the operator upgrades in place then).
fn resolve(
    bp: &Blueprint,
    pool: &str,
    to: &str,
) -> Result<(usize, DriverVersion, DriverVersion), PrepareError> {
    let Some(pool_index) = bp.spec.node_pools.iter().position(|p| p.name == pool) else {
        let names = bp.spec.node_pools.iter().map(|p| p.name.as_str());
        return Err(PrepareError::Refused(format!(
            "the blueprint has no pool `{pool}`; {}pools: {}",
            gpuctl_model::suggest::did_you_mean(pool, names.clone()),
            names.collect::<Vec<_>>().join(", ")
        )));
    };
    let target: DriverVersion = to.parse().map_err(|e| {
        PrepareError::Refused(format!(
            "--to `{to}`: {e}; write a released driver version such as `595.91.07`"
        ))
    })?;
    let p = &bp.spec.node_pools[pool_index];
    let declared_text = p
        .driver
        .as_ref()
        .map_or(&bp.spec.gpu_operator.driver.version, |d| &d.version);
    let declared: DriverVersion = declared_text
        .parse()
        .map_err(|e| PrepareError::Refused(format!("the pool's driver `{declared_text}`: {e}")))?;
    if bp.spec.upgrades.strategy == UpgradeStrategy::Rolling {
        return Err(PrepareError::Refused(format!(
            "the blueprint says `upgrades.strategy: rolling`: set nodePools[{pool_index}].driver.version to \"{target}\" and run `gpuctl apply`; the operator rolls the pool in place under its upgradePolicy. `gpuctl upgrade driver` runs blue-green upgrades (`strategy: blue-green`)"
        )));
    }
    Ok((pool_index, target, declared))
}

/// What the blueprint itself says against the upgrade: a colour label it declares (apply would
/// reset it), a target it already names, a downgrade.
fn blueprint_checks(
    bp: &Blueprint,
    pool_index: usize,
    target: &DriverVersion,
    declared: &DriverVersion,
) -> Vec<Check> {
    let p = &bp.spec.node_pools[pool_index];
    let pool = &p.name;
    let mut checks = Vec::new();
    let color_label = bp.spec.upgrades.blue_green.as_ref().map_or_else(
        || gpuctl_model::names::DEFAULT_COLOR_LABEL.to_string(),
        |b| b.color_label.clone(),
    );
    if p.labels.contains_key(&color_label) {
        checks.push(
            Check::new(
                Severity::Error,
                "blueprint",
                format!(
                    "pool `{pool}` declares the colour label `{color_label}` in `labels`, so `gpuctl apply` would reset the colour the upgrade sets"
                ),
            )
            .hint(format!("remove `{color_label}` from nodePools[{pool_index}].labels; the upgrade owns it")),
        );
    }
    if target == declared {
        checks.push(Check::new(
            Severity::Error,
            "blueprint",
            format!("the blueprint already gives pool `{pool}` driver {declared}"),
        ).hint("nothing to upgrade; to move nodes that still run an older driver, `gpuctl apply` the blueprint (the operator upgrades them in place)"));
    } else if target < declared {
        checks.push(
            Check::new(
                Severity::Warning,
                "blueprint",
                format!("{target} is older than the pool's {declared}: this is a downgrade"),
            )
            .hint("fine for backing out of a bad driver; otherwise check the version"),
        );
    }
    checks
}

/// The blueprint with pool `pool_index` on driver `target` (keeping its kernel module type).
fn with_target_driver(mut loaded: Loaded, pool_index: usize, target: &DriverVersion) -> Loaded {
    let p = &mut loaded.blueprint.spec.node_pools[pool_index];
    let kmt = p.driver.as_ref().and_then(|d| d.kernel_module_type);
    p.driver = Some(PoolDriver {
        version: target.to_string(),
        kernel_module_type: kmt,
    });
    loaded
}

/// Every finding the target adds, by rule and message (paths differ: the target's pool gets its
/// own `driver`, so findings move from spec.gpuOperator.driver to spec.nodePools[i].driver), and
/// how many of them are errors.
fn target_findings(
    before: &FileReport,
    target_loaded: &Loaded,
    catalog: &Catalog,
    opts: validate::Options,
) -> (Vec<Check>, usize) {
    let after = validate::check(target_loaded, catalog, opts);
    let known: BTreeSet<(&str, &str)> = before
        .findings
        .iter()
        .map(|f| (f.rule, f.message.as_str()))
        .collect();
    let added: Vec<Check> = after
        .findings
        .iter()
        .filter(|f| !known.contains(&(f.rule, f.message.as_str())))
        .map(|f| Check {
            level: f.severity,
            source: "catalog",
            rule: Some(f.rule.to_string()),
            message: f.message.clone(),
            hint: f.hint.clone(),
        })
        .collect();
    let errors = added.iter().filter(|c| c.level == Severity::Error).count();
    (added, errors)
}

/// The catalog's facts about the target's branch.
fn branch_facts(catalog: &Catalog, target: &DriverVersion) -> Option<BranchFacts> {
    catalog.driver_branch(target).map(|b| BranchFacts {
        branch: format!("R{}", b.branch),
        kind: b.branch_type.to_string(),
        end_of_life: b.end_of_life.to_string(),
        native_cuda: b.native_cuda.as_ref().map(ToString::to_string),
    })
}

fn branch_check(b: &BranchFacts) -> Check {
    Check::new(
        Severity::Info,
        "catalog",
        format!(
            "target branch {} ({}), end of life {}{}",
            b.branch,
            b.kind,
            b.end_of_life,
            b.native_cuda
                .as_ref()
                .map(|c| format!(", native CUDA {c}"))
                .unwrap_or_default()
        ),
    )
}

/// The green CR: render's own output for the target blueprint, so apply later writes the same.
/// Not an ApplySet member until the blueprint names the driver: a prune by an apply of the old
/// blueprint must never delete the CR the nodes run on.
fn green_cr(
    target_loaded: Loaded,
    pool: &str,
    target: &DriverVersion,
    catalog: &Catalog,
    opts: validate::Options,
    templates: &Templates,
) -> Result<Option<Value>, PrepareError> {
    let Ok(tv) = validate::validate(target_loaded, catalog, opts) else {
        return Ok(None);
    };
    let set = render::render(&tv, catalog, templates).map_err(PrepareError::Render)?;
    // Render's name for the pool's CR on the target: the green CR's name.
    let strategy = tv.blueprint().spec.upgrades.strategy;
    let name = pool_driver_cr_name(pool, &target.to_string(), strategy);
    Ok(set
        .objects
        .into_iter()
        .find(|o| o.kind == "NVIDIADriver" && o.name == name)
        .map(|o| {
            let mut m = o.manifest;
            if let Some(labels) = m["metadata"]["labels"].as_object_mut() {
                labels.remove(PART_OF);
            }
            m
        }))
}

/// The blueprint edit that makes the upgrade permanent.
fn blueprint_change(v: &ValidatedBlueprint, pool_index: usize, target: &DriverVersion) -> String {
    let p = &v.blueprint().spec.node_pools[pool_index];
    let pool = &p.name;
    match &p.driver {
        Some(_) => format!(
            "in {}, set `spec.nodePools[{pool_index}].driver.version` (pool `{pool}`) to \"{target}\"",
            v.file()
        ),
        None => format!(
            "in {}, give pool `{pool}` (spec.nodePools[{pool_index}]) its own driver: `driver: {{ version: \"{target}\" }}`",
            v.file()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Loaded {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("blueprints/dgx-h100-training.yaml");
        blueprint::load_file(&path).expect("example loads")
    }

    fn today() -> Date {
        jiff::civil::date(2026, 11, 30)
    }

    #[test]
    fn a_supported_target_has_no_errors_and_renders_the_green_cr() {
        let p = prepare_loaded(
            example(),
            "h100-train",
            "595.91.07",
            today(),
            &Templates::embedded(),
        )
        .expect("prepares");
        assert!(
            !p.checks.iter().any(|c| c.level == Severity::Error),
            "{:#?}",
            p.checks
        );
        assert_eq!(p.declared_cr(), "cluster-default");
        let m = p.green_manifest.expect("green CR rendered");
        assert_eq!(m["metadata"]["name"], "pool-h100-train-595-91-07");
        assert_eq!(m["spec"]["version"], "595.91.07");
        assert_eq!(
            m["spec"]["nodeSelector"][DRIVER_LABEL], "pool-h100-train-595-91-07",
            "selector disjoint from the default CR"
        );
        assert!(m["metadata"]["labels"].get(PART_OF).is_none());
    }

    #[test]
    fn catalog_findings_of_the_target_are_errors_of_the_upgrade() {
        // R590 is past its end of life and the operator release never validated it: both
        // findings show up, with the rules' severities (warnings), and nothing from the blueprint
        // as it is.
        let p = prepare_loaded(
            example(),
            "h100-train",
            "590.48.01",
            today(),
            &Templates::embedded(),
        )
        .expect("prepares");
        let rules: Vec<&str> = p.checks.iter().filter_map(|c| c.rule.as_deref()).collect();
        assert!(rules.contains(&"GPU026"), "{rules:?}");
        assert!(rules.contains(&"GPU028"), "{rules:?}");
        assert!(p.checks.iter().all(|c| c.level != Severity::Error));
        // An old driver breaks the tenants' CUDA 12.8.
        let p = prepare_loaded(
            example(),
            "h100-train",
            "550.54.15",
            today(),
            &Templates::embedded(),
        )
        .expect("prepares");
        assert!(
            p.checks
                .iter()
                .any(|c| c.rule.as_deref() == Some("GPU021") && c.level == Severity::Error),
            "{:#?}",
            p.checks
        );
        assert!(
            p.green_manifest.is_none(),
            "nothing to create for a refused target"
        );
    }

    #[test]
    fn a_green_cr_name_longer_than_a_label_value_is_an_error_of_the_upgrade() {
        // A 49-character pool on the default CR is fine as written; on its own CR for the target,
        // `pool-<pool>-595-91-07` would be 64 characters, too long for `gpuctl.dev/driver`.
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("blueprints/dgx-h100-training.yaml");
        let long = format!("h100-train{}", "-x".repeat(19) + "y");
        assert_eq!(long.len(), 49);
        let text = std::fs::read_to_string(path)
            .unwrap()
            .replace("h100-train\n", &format!("{long}\n"));
        let loaded = blueprint::load_str("long.yaml", &text).expect("loads");
        let p = prepare_loaded(loaded, &long, "595.91.07", today(), &Templates::embedded())
            .expect("prepares");
        let c = p
            .checks
            .iter()
            .find(|c| c.rule.as_deref() == Some("GPU017"))
            .unwrap_or_else(|| panic!("{:#?}", p.checks));
        assert_eq!(c.level, Severity::Error);
        assert!(
            c.message.contains("-595-91-07` (64 characters)"),
            "{}",
            c.message
        );
        assert!(
            p.green_manifest.is_none(),
            "no green CR under an invalid name"
        );
    }

    #[test]
    fn unknown_pools_and_bad_versions_are_refused_with_what_to_do() {
        let e = prepare_loaded(
            example(),
            "h100-trian",
            "595.91.07",
            today(),
            &Templates::embedded(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("did you mean `h100-train`"), "{e}");
        let e = prepare_loaded(
            example(),
            "h100-train",
            "latest",
            today(),
            &Templates::embedded(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("--to `latest`"), "{e}");
    }
}
