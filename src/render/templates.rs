//! The minijinja templates render uses: embedded from `templates/` at build time, each of which a
//! `--templates DIR` may replace with a file of the same relative path.
//!
//! Templates run with strict undefined (a misspelt variable is an error, never an empty string).
//! Templates named `*.yaml.j2` escape every `{{ value }}` as JSON, which is also valid YAML, so a
//! value can never break the document's structure whatever it contains.

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
        include_str!("../../templates/config/dcgm-metrics.csv.j2"),
    ),
    (
        "config/device-plugin.yaml.j2",
        include_str!("../../templates/config/device-plugin.yaml.j2"),
    ),
    (
        "config/mig-parted.yaml.j2",
        include_str!("../../templates/config/mig-parted.yaml.j2"),
    ),
    (
        "helm/gpu-operator-values.yaml.j2",
        include_str!("../../templates/helm/gpu-operator-values.yaml.j2"),
    ),
    (
        "objects/configmap.yaml.j2",
        include_str!("../../templates/objects/configmap.yaml.j2"),
    ),
    (
        "objects/kueue-clusterqueue.yaml.j2",
        include_str!("../../templates/objects/kueue-clusterqueue.yaml.j2"),
    ),
    (
        "objects/kueue-cohort.yaml.j2",
        include_str!("../../templates/objects/kueue-cohort.yaml.j2"),
    ),
    (
        "objects/kueue-localqueue.yaml.j2",
        include_str!("../../templates/objects/kueue-localqueue.yaml.j2"),
    ),
    (
        "objects/kueue-resourceflavor.yaml.j2",
        include_str!("../../templates/objects/kueue-resourceflavor.yaml.j2"),
    ),
    (
        "objects/kueue-workloadpriorityclass.yaml.j2",
        include_str!("../../templates/objects/kueue-workloadpriorityclass.yaml.j2"),
    ),
    (
        "objects/limitrange.yaml.j2",
        include_str!("../../templates/objects/limitrange.yaml.j2"),
    ),
    (
        "objects/nvidiadriver.yaml.j2",
        include_str!("../../templates/objects/nvidiadriver.yaml.j2"),
    ),
    (
        "objects/operator-namespace.yaml.j2",
        include_str!("../../templates/objects/operator-namespace.yaml.j2"),
    ),
    (
        "objects/priorityclass.yaml.j2",
        include_str!("../../templates/objects/priorityclass.yaml.j2"),
    ),
    (
        "objects/prometheusrule.yaml.j2",
        include_str!("../../templates/objects/prometheusrule.yaml.j2"),
    ),
    (
        "objects/resourcequota.yaml.j2",
        include_str!("../../templates/objects/resourcequota.yaml.j2"),
    ),
    (
        "objects/servicemonitor.yaml.j2",
        include_str!("../../templates/objects/servicemonitor.yaml.j2"),
    ),
    (
        "objects/tenant-namespace.yaml.j2",
        include_str!("../../templates/objects/tenant-namespace.yaml.j2"),
    ),
    (
        "objects/volcano-queue.yaml.j2",
        include_str!("../../templates/objects/volcano-queue.yaml.j2"),
    ),
    (
        "runbooks/troubleshooting.md.j2",
        include_str!("../../templates/runbooks/troubleshooting.md.j2"),
    ),
    (
        "runbooks/upgrade-driver.md.j2",
        include_str!("../../templates/runbooks/upgrade-driver.md.j2"),
    ),
];

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
                    hint: crate::suggest::did_you_mean(&name, known),
                });
            }
            let text = std::fs::read_to_string(dir.join(&rel)).map_err(|source| {
                RenderError::TemplateDir {
                    path: dir.join(&rel).display().to_string(),
                    source,
                }
            })?;
            overrides.push((name, text));
        }
        let names: Vec<String> = overrides.iter().map(|(n, _)| n.clone()).collect();
        Templates::build(overrides, &names)
    }

    fn build(overrides: Vec<(String, String)>, names: &[String]) -> Result<Templates, RenderError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
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
        tpl.render(Value::from(Serde(ctx)))
            .map_err(|e| RenderError::template(name, e))
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
