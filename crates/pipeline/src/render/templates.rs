//! The minijinja templates render uses: embedded from `templates/` at build time, each of which a
//! `--templates DIR` may replace with a file of the same relative path.
//!
//! Templates run with strict undefined (a misspelt variable is an error, never an empty string).
//! Templates named `*.yaml.j2` escape every `{{ value }}` as JSON, which is also valid YAML, so a
//! value can never break the document's structure whatever it contains.
//!
//! Overrides come from pull requests in CI, so they are bounded: each file by
//! [`gpuctl_model::input::TEMPLATE`], the directory by [`gpuctl_model::input::TEMPLATE_DIR_BYTES`], and every
//! render by [`TEMPLATE_FUEL`], so a template that loops forever fails instead of hanging the pipeline.

use std::path::{Path, PathBuf};

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Serde, Value};
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;

use super::RenderError;

/// Every template, by the path relative to `templates/`.
pub const EMBEDDED: &[(&str, &str)] = &[
    (
        "config/dcgm-metrics.csv.j2",
        include_str!("../../../../templates/config/dcgm-metrics.csv.j2"),
    ),
    (
        "config/device-plugin.yaml.j2",
        include_str!("../../../../templates/config/device-plugin.yaml.j2"),
    ),
    (
        "config/mig-parted.yaml.j2",
        include_str!("../../../../templates/config/mig-parted.yaml.j2"),
    ),
    (
        "helm/gpu-operator-values.yaml.j2",
        include_str!("../../../../templates/helm/gpu-operator-values.yaml.j2"),
    ),
    (
        "objects/configmap.yaml.j2",
        include_str!("../../../../templates/objects/configmap.yaml.j2"),
    ),
    (
        "objects/kueue-clusterqueue.yaml.j2",
        include_str!("../../../../templates/objects/kueue-clusterqueue.yaml.j2"),
    ),
    (
        "objects/kueue-cohort.yaml.j2",
        include_str!("../../../../templates/objects/kueue-cohort.yaml.j2"),
    ),
    (
        "objects/kueue-localqueue.yaml.j2",
        include_str!("../../../../templates/objects/kueue-localqueue.yaml.j2"),
    ),
    (
        "objects/kueue-resourceflavor.yaml.j2",
        include_str!("../../../../templates/objects/kueue-resourceflavor.yaml.j2"),
    ),
    (
        "objects/kueue-topology.yaml.j2",
        include_str!("../../../../templates/objects/kueue-topology.yaml.j2"),
    ),
    (
        "objects/kueue-workloadpriorityclass.yaml.j2",
        include_str!("../../../../templates/objects/kueue-workloadpriorityclass.yaml.j2"),
    ),
    (
        "config/kubelet-numa.yaml.j2",
        include_str!("../../../../templates/config/kubelet-numa.yaml.j2"),
    ),
    (
        "helm/network-operator-values.yaml.j2",
        include_str!("../../../../templates/helm/network-operator-values.yaml.j2"),
    ),
    (
        "objects/limitrange.yaml.j2",
        include_str!("../../../../templates/objects/limitrange.yaml.j2"),
    ),
    (
        "objects/nvidiadriver.yaml.j2",
        include_str!("../../../../templates/objects/nvidiadriver.yaml.j2"),
    ),
    (
        "objects/operator-namespace.yaml.j2",
        include_str!("../../../../templates/objects/operator-namespace.yaml.j2"),
    ),
    (
        "objects/priorityclass.yaml.j2",
        include_str!("../../../../templates/objects/priorityclass.yaml.j2"),
    ),
    (
        "objects/prometheusrule.yaml.j2",
        include_str!("../../../../templates/objects/prometheusrule.yaml.j2"),
    ),
    (
        "objects/resourcequota.yaml.j2",
        include_str!("../../../../templates/objects/resourcequota.yaml.j2"),
    ),
    (
        "objects/servicemonitor.yaml.j2",
        include_str!("../../../../templates/objects/servicemonitor.yaml.j2"),
    ),
    (
        "objects/tenant-namespace.yaml.j2",
        include_str!("../../../../templates/objects/tenant-namespace.yaml.j2"),
    ),
    (
        "objects/volcano-queue.yaml.j2",
        include_str!("../../../../templates/objects/volcano-queue.yaml.j2"),
    ),
    (
        "runbooks/troubleshooting.md.j2",
        include_str!("../../../../templates/runbooks/troubleshooting.md.j2"),
    ),
    (
        "runbooks/upgrade-driver.md.j2",
        include_str!("../../../../templates/runbooks/upgrade-driver.md.j2"),
    ),
];

/// Fuel of one template render (minijinja charges about one per instruction and one per 64 bytes
/// of data made). Measured, the heaviest single render of the shipped templates takes 1,072 fuel
/// for the example blueprints (987 for the largest, `blueprints/dgx-h100-training.yaml`) and
/// 51,289 for the 5,000-object benchmark blueprint (`testgen::large_blueprint`, 64 pools), which
/// grows with the number of pools. 2,000,000 is 39 times the benchmark (room for ~2,500 pools)
/// and still bounds what a runaway `--templates` override can do: about a second of work and
/// 128 MB of data (64 bytes per fuel) before it fails.
pub const TEMPLATE_FUEL: u64 = 2_000_000;

/// The compiled template set render uses.
#[derive(Debug)]
pub struct Templates {
    env: Environment<'static>,
    overridden: Vec<String>,
}

impl Templates {
    /// The templates compiled into the binary.
    pub fn embedded() -> Templates {
        Templates::build(Vec::new(), &[]).expect("embedded templates compile (render tests)")
    }

    /// The templates of `--templates DIR` when given, else the embedded ones.
    pub fn load(dir: Option<&Path>) -> Result<Templates, RenderError> {
        dir.map_or_else(|| Ok(Templates::embedded()), Templates::from_dir)
    }

    /// The embedded templates, with every file found under `dir` (same relative path, e.g.
    /// `objects/resourcequota.yaml.j2`) replacing its embedded namesake. A file there that names
    /// no template is an error, so a misspelt override is never silently ignored.
    pub fn from_dir(dir: &Path) -> Result<Templates, RenderError> {
        let mut files = Vec::new();
        collect_files(dir, dir, &mut files).map_err(|source| RenderError::TemplateDir {
            path: dir.display().to_string(),
            source,
        })?;
        files.sort();
        let mut overrides = Vec::new();
        let mut total = 0u64;
        for rel in files {
            let name = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            if !EMBEDDED.iter().any(|(n, _)| *n == name) {
                let known = EMBEDDED.iter().map(|(n, _)| *n);
                return Err(RenderError::UnknownTemplate {
                    path: dir.join(&rel).display().to_string(),
                    hint: gpuctl_model::suggest::did_you_mean(&name, known),
                });
            }
            let path = dir.join(&rel);
            let bytes = gpuctl_model::input::read(&path, &gpuctl_model::input::TEMPLATE)
                .map_err(RenderError::TemplateFile)?;
            total += bytes.len() as u64;
            if total > gpuctl_model::input::TEMPLATE_DIR_BYTES {
                return Err(RenderError::TemplateDirTooLarge {
                    path: dir.display().to_string(),
                    limit: gpuctl_model::input::TEMPLATE_DIR_BYTES,
                });
            }
            let text = String::from_utf8(bytes).map_err(|_| RenderError::TemplateDir {
                path: path.display().to_string(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
            })?;
            overrides.push((name, text));
        }
        let names: Vec<String> = overrides.iter().map(|(n, _)| n.clone()).collect();
        Templates::build(overrides, &names)
    }

    fn build(overrides: Vec<(String, String)>, names: &[String]) -> Result<Templates, RenderError> {
        Templates::build_with_fuel(overrides, names, TEMPLATE_FUEL)
    }

    fn build_with_fuel(
        overrides: Vec<(String, String)>,
        names: &[String],
        fuel: u64,
    ) -> Result<Templates, RenderError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // minijinja's recursion limit (500 levels of nesting, includes and macros) stays as it
        // is: it bounds the stack, fuel bounds the work.
        env.set_fuel(Some(fuel));
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .map_err(|e| RenderError::template("(syntax)", e))?;
        env.set_syntax(syntax);
        for (name, text) in EMBEDDED {
            if names.iter().any(|n| n == name) {
                continue;
            }
            env.add_template(name, text)
                .map_err(|e| RenderError::template(name, e))?;
        }
        for (name, text) in overrides {
            env.add_template_owned(name.clone(), text)
                .map_err(|e| RenderError::template(&name, e))?;
        }
        Ok(Templates {
            env,
            overridden: names.to_vec(),
        })
    }

    /// The embedded templates with `fuel` per render instead of [`TEMPLATE_FUEL`].
    #[cfg(test)]
    pub(crate) fn embedded_with_fuel(fuel: u64) -> Templates {
        Templates::build_with_fuel(Vec::new(), &[], fuel).expect("embedded templates compile")
    }

    /// Template names replaced from a `--templates` directory.
    pub fn overridden(&self) -> &[String] {
        &self.overridden
    }

    /// Renders template `name` with `ctx`.
    pub fn render<S: Serialize>(&self, name: &str, ctx: S) -> Result<String, RenderError> {
        let tpl = self
            .env
            .get_template(name)
            .map_err(|e| RenderError::template(name, e))?;
        tpl.render(Value::from(Serde(ctx))).map_err(|e| {
            if e.kind() == minijinja::ErrorKind::OutOfFuel {
                RenderError::OutOfFuel {
                    template: name.to_string(),
                    fuel: self.env.fuel().unwrap_or_default(),
                }
            } else {
                RenderError::template(name, e)
            }
        })
    }
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            collect_files(root, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(root) {
            out.push(rel.to_path_buf());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_with(text: &str, templates: &Templates) -> Result<(), RenderError> {
        let catalog = gpuctl_model::profiles::Catalog::embedded();
        let loaded = gpuctl_model::blueprint::load_str("bp.yaml", text).expect("loads");
        let opts = crate::validate::Options {
            today: jiff::civil::date(2026, 11, 30),
        };
        let v = crate::validate::validate(loaded, catalog, opts).expect("valid");
        crate::render::render(&v, catalog, templates).map(|_| ())
    }

    fn example(name: &str) -> String {
        let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("blueprints")
            .join(name);
        std::fs::read_to_string(p).expect("example")
    }

    // Guards the headroom of TEMPLATE_FUEL: templates that grew heavier fail here, long before a
    // real cluster's render runs out.
    #[test]
    fn the_benchmark_blueprint_renders_with_a_tenth_of_the_fuel() {
        let tenth = Templates::embedded_with_fuel(TEMPLATE_FUEL / 10);
        render_with(&gpuctl_model::testgen::large_blueprint(), &tenth).expect("renders");
        let little = Templates::embedded_with_fuel(1_000);
        let e = render_with(&example("inference-mig.yaml"), &little).unwrap_err();
        assert!(matches!(e, RenderError::OutOfFuel { .. }), "{e}");
    }

    // Issue 10 item 5: a nested loop in an override never ended.
    #[test]
    fn an_override_that_loops_for_ever_runs_out_of_fuel_naming_the_template() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("objects")).unwrap();
        std::fs::write(
            dir.path().join("objects/operator-namespace.yaml.j2"),
            "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}",
        )
        .unwrap();
        let templates = Templates::from_dir(dir.path()).expect("compiles");
        let e = render_with(&example("dgx-h100-training.yaml"), &templates)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("template `objects/operator-namespace.yaml.j2` ran out of fuel (more than 2000000 steps)"),
            "{e}"
        );
    }

    #[test]
    fn override_files_are_bounded_one_by_one_and_together() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("objects")).unwrap();
        let big = dir.path().join("objects/configmap.yaml.j2");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(gpuctl_model::input::TEMPLATE.bytes + 1).unwrap();
        let e = Templates::from_dir(dir.path()).unwrap_err().to_string();
        assert!(e.starts_with("template override `"), "{e}");
        assert!(
            e.contains("a template over 1048576 bytes is refused"),
            "{e}"
        );
        // Nine files of 1 MiB each (sparse: no disk is used) are over the 8 MiB of a directory.
        std::fs::remove_file(&big).unwrap();
        for (name, _) in EMBEDDED
            .iter()
            .filter(|(n, _)| n.starts_with("objects/"))
            .take(9)
        {
            let f = std::fs::File::create(dir.path().join(name)).unwrap();
            f.set_len(gpuctl_model::input::TEMPLATE.bytes).unwrap();
        }
        let e = Templates::from_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("are over 8388608 bytes together"), "{e}");
    }
}
