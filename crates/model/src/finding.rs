//! Findings: the one registry of every id gpuctl reports, and the one shape of a finding about the
//! cluster.
//!
//! Every finding, from any command, carries a stable id (`GPU050`, `GPU200`, `GPU251`, `GPU300`,
//! `GPU401`) whose [`Rule`] is registered here: its family, the most severe level it is reported at, what it
//! finds, why that matters, how to fix it and where its facts come from. `gpuctl explain ID` prints
//! an entry, `gpuctl explain --all` prints docs/rules.md, and the SARIF log's rule table comes from
//! the same records. The tables are data here, in the model crate, so that every crate can emit a
//! registered finding without importing the code of another family (issue 38: the tables used to
//! sit beside their emitters, which made this module import four features that import it back):
//!
//! | family | ids | table | emitted by |
//! |---|---|---|---|
//! | validation | GPU001–GPU199, GPU1000–GPU1999 | `finding/validation.rs` | `validate/rules/`, `blueprint/load.rs` |
//! | doctor | GPU200–GPU249, GPU2000–GPU2999 | `finding/doctor.rs` | `doctor/` (through `doctor::finding`) |
//! | metrics | GPU250–GPU299, GPU3000–GPU3999 | `finding/metrics.rs` | `metrics/analyze.rs` |
//! | import | GPU300–GPU349, GPU4000–GPU4999 | `finding/import.rs` | `import/` (through `Draft::warn`) |
//! | plan | GPU400–GPU499, GPU5000–GPU5999 | `finding/plan.rs` | `plan/` (through `PlanFinding::error`, `::warning`) |
//! | policy | GPU500–GPU549, GPU6000–GPU6999 | `finding/policy.rs` | gpuctl-policy's `finding.rs` (an organisation's Rego results) |
//!
//! An id is `GPU` and three digits, or four from 1000 on: each family owns its first, three-digit
//! range and then a four-digit one, so every family has room for new ids for years while the ids
//! already given keep their meaning (issue 38). A family's table lists its three-digit ids first.
//!
//! Where a finding points decides its shape: validation findings point into the blueprint file
//! ([`crate::located::Finding`]: path, line and column); doctor's and metrics' findings point at
//! objects of the cluster and are a [`Finding`] (merged into one doctor report; metrics first build
//! their structured `metrics::Finding` and convert it); import's warnings point at a path of the
//! blueprint it writes (`import::Note`); the plan's findings are about the live cluster as a plan
//! sees it (`plan::PlanFinding`: an id, a severity and a message). All carry a registered id and the one [`Severity`].
//! Tests check that every id any code or test names is registered, that every registered id is
//! emitted by its family's code, and that an emitted finding is never more severe than its
//! registration says (`finding/tests.rs`).

pub mod doctor;
pub mod import;
pub mod metrics;
pub mod plan;
pub mod policy;
#[cfg(test)]
mod tests;
pub mod validation;

use serde::{Deserialize, Serialize};

use crate::located::Severity;

/// Which part of gpuctl reports a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// `gpuctl validate` (and every command that loads a blueprint): the blueprint against the
    /// facts catalog.
    Validation,
    /// `gpuctl doctor`: the cluster's objects against the blueprint.
    Doctor,
    /// `gpuctl doctor --prometheus`: DCGM metrics through Prometheus.
    Metrics,
    /// `gpuctl import`: what the imported blueprint cannot express or does not round-trip.
    Import,
    /// `gpuctl plan` and `gpuctl apply` (which plans first): what a plan notices about the live
    /// cluster or a snapshot beside its actions.
    Plan,
    /// `--policy DIR` of `validate`, `plan` and `fleet plan`: the organisation's own Rego policies.
    Policy,
}

impl Family {
    /// Every family, in id order.
    pub const ALL: [Family; 6] = [
        Family::Validation,
        Family::Doctor,
        Family::Metrics,
        Family::Import,
        Family::Plan,
        Family::Policy,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Family::Validation => "validation",
            Family::Doctor => "doctor",
            Family::Metrics => "metrics",
            Family::Import => "import",
            Family::Plan => "plan",
            Family::Policy => "policy",
        }
    }

    /// The ids the family owns: `GPU` and a number in one of these ranges (inclusive), written
    /// with three digits below 1000 and four from 1000 on. The first range is the family's
    /// three-digit one; the second, four-digit one takes its new ids when the first is full.
    pub fn ids(self) -> [(u16, u16); 2] {
        match self {
            Family::Validation => [(1, 199), (1000, 1999)],
            Family::Doctor => [(200, 249), (2000, 2999)],
            Family::Metrics => [(250, 299), (3000, 3999)],
            Family::Import => [(300, 349), (4000, 4999)],
            Family::Plan => [(400, 499), (5000, 5999)],
            Family::Policy => [(500, 549), (6000, 6999)],
        }
    }

    /// The family's rules, ordered by id.
    pub fn rules(self) -> &'static [Rule] {
        match self {
            Family::Validation => validation::RULES,
            Family::Doctor => doctor::RULES,
            Family::Metrics => metrics::RULES,
            Family::Import => import::RULES,
            Family::Plan => plan::RULES,
            Family::Policy => policy::RULES,
        }
    }

    /// What the family's section of docs/rules.md says about it.
    fn intro(self) -> &'static str {
        match self {
            Family::Validation => {
                "Reported by `gpuctl validate` and every command that loads a blueprint, at a path, line and column of the file (`-o json`, `-o sarif`). The example is a blueprint fragment that triggers the rule, and the fixed form the same fragment corrected: a test merges each into `blueprints/fleet/base/training.yaml` (whose names they use: pools `h100-train` and `h100-infer`, tenants `team-a` and `team-infer`, ClusterQueues `cq-team-a` and `cq-infer`), or, for the fleet rules, into the example fleet `blueprints/fleet/fleet.yaml` or one of its clusters' blueprints, and checks that the example reports the rule and the fixed form does not (`tests/offline/registry_examples.rs`)."
            }
            Family::Doctor => {
                "Reported by `gpuctl doctor` from the cluster's objects (live or a `--diagnostics` snapshot), by runbook layer, naming the objects, the evidence, the cause and the next step (docs/doctor.md). The example is a finding's title as printed."
            }
            Family::Metrics => {
                "Reported by `gpuctl doctor --prometheus URL` from dcgm-exporter's metrics, in the same report as the doctor's findings (docs/doctor-metrics.md). The example is a finding's cause as printed."
            }
            Family::Import => {
                "Reported by `gpuctl import` on standard error (`warning[GPU300]: PATH: MESSAGE`) and as `import:` comments in the blueprint it writes (docs/import.md). The example is a warning as printed."
            }
            Family::Plan => {
                "Reported by `gpuctl plan` and `gpuctl apply` (which plans first) about the live cluster or a snapshot, under the plan's findings, each with its `id` in the plan document (`-o json`, `--out`); apply refuses a plan with an error finding (docs/plan-apply.md). The example is a finding as printed."
            }
            Family::Policy => {
                "Reported by `gpuctl validate`, `gpuctl plan` and `gpuctl fleet plan` with `--policy DIR`: the results of the organisation's own Rego policies, written with conftest's conventions and evaluated in-process (docs/policy.md). The message is the policy's, followed by the rule's query; the id says whether a `deny`/`violation` rule (an error, the run fails) or a `warn` rule (a warning) produced it. The example is a finding's message as printed."
            }
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The documentation of one finding id: what `gpuctl explain` prints.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Stable id, `GPU` + three digits, or four from 1000 on ([`Family::ids`]; users' CI
    /// configuration names it: never renumbered).
    pub id: &'static str,
    /// Short kebab-case name.
    pub name: &'static str,
    /// Who reports it.
    pub family: Family,
    /// Where within the family: the validation rule file (`structure`, `mig`), the doctor's runbook
    /// layer (`scheduling`), the import step.
    pub area: &'static str,
    /// The most severe level it is reported at (some doctor findings are warnings in milder cases).
    pub severity: Severity,
    /// What it checks or finds.
    pub title: &'static str,
    /// Why it matters.
    pub why: &'static str,
    /// How to fix a finding.
    pub fix: &'static str,
    /// Where the facts come from.
    pub source: &'static str,
    /// Validation: a blueprint fragment that triggers it; others: a finding as printed.
    pub example: &'static str,
    /// Validation: the example corrected so that the rule no longer fires (a test runs both,
    /// `tests/offline/registry_examples.rs`); others: empty.
    pub fixed: &'static str,
}

/// Every registered rule, by family (in [`Family::ALL`]'s order), then by id.
pub fn rules() -> impl Iterator<Item = &'static Rule> {
    Family::ALL.into_iter().flat_map(Family::rules)
}

/// Looks an id up (case-insensitive).
pub fn rule(id: &str) -> Option<&'static Rule> {
    rules().find(|r| r.id.eq_ignore_ascii_case(id))
}

/// docs/rules.md, generated (`gpuctl explain --all`).
pub fn markdown() -> String {
    let mut out = String::from(
        "# Findings: every rule and finding id\n\n<!-- Generated from the rule tables named in \
         crates/model/src/finding.rs by `gpuctl explain --all`; a test fails when this file is stale. -->\n\n\
         Every finding gpuctl reports names one of these ids, and `gpuctl explain <ID>` prints its \
         entry. Ids are stable: CI configuration may name them.\n\n| family | ids | rules |\n|---|---|---|\n",
    );
    for family in Family::ALL {
        let ranges: Vec<String> = family
            .ids()
            .iter()
            .map(|(lo, hi)| format!("GPU{lo:03}–GPU{hi:03}"))
            .collect();
        out.push_str(&format!(
            "| [{family}](#{family}) | {} | {} |\n",
            ranges.join(", "),
            family.rules().len()
        ));
    }
    for family in Family::ALL {
        out.push_str(&format!(
            "\n## {family}\n\n{}\n\n| id | name | area | severity |\n|---|---|---|---|\n",
            family.intro()
        ));
        for r in family.rules() {
            out.push_str(&format!(
                "| [{id}](#{lower}) | {name} | {area} | {sev} |\n",
                id = r.id,
                lower = r.id.to_ascii_lowercase(),
                name = r.name,
                area = r.area,
                sev = r.severity
            ));
        }
        for r in family.rules() {
            out.push('\n');
            out.push_str(&entry(r, "###"));
        }
    }
    out
}

/// One rule as Markdown (`gpuctl explain ID`).
pub fn explain(r: &Rule) -> String {
    entry(r, "##")
}

fn entry(r: &Rule, heading: &str) -> String {
    let line_ended = |text: &str| {
        if text.ends_with('\n') {
            text.to_string()
        } else {
            format!("{text}\n")
        }
    };
    let example = line_ended(r.example);
    let (what, example_intro, lang) = match r.family {
        Family::Validation => ("Checks", "Example that triggers it", "yaml"),
        _ => ("Finds", "Example", "text"),
    };
    let fixed = if r.fixed.is_empty() {
        String::new()
    } else {
        format!("\nFixed:\n\n```{lang}\n{}```\n", line_ended(r.fixed))
    };
    format!(
        "{heading} {id}\n\n**{name}** ({family}, {area}, {severity})\n\n- **{what}:** {title}\n- **Why:** {why}\n- **Fix:** {fix}\n- **Facts:** {source}\n\n{example_intro}:\n\n```{lang}\n{example}```\n{fixed}",
        id = r.id,
        name = r.name,
        family = r.family,
        area = r.area,
        severity = r.severity,
        title = r.title,
        why = r.why,
        fix = r.fix,
        source = r.source,
    )
}

/// The four layers of the troubleshooting runbook (`templates/runbooks/troubleshooting.md.j2`),
/// in the order an on-call engineer walks them: every cluster finding is in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// Pods and workloads that do not get a node: scheduler, quotas, queues, fragmentation.
    Scheduling,
    /// Pods that got a node but whose containers do not start: the GPU stack (driver, toolkit,
    /// device plugin, MIG manager), driver and CUDA versions.
    ContainerStart,
    /// Running workloads: GPU errors, idle allocated GPUs (metrics).
    Runtime,
    /// Nodes and GPUs: readiness, advertised resources, hardware faults (metrics).
    NodeHardware,
}

impl Layer {
    /// Title as the runbook's section names it.
    pub fn title(self) -> &'static str {
        match self {
            Layer::Scheduling => "Scheduling",
            Layer::ContainerStart => "Container start",
            Layer::Runtime => "Runtime",
            Layer::NodeHardware => "Nodes and hardware",
        }
    }

    /// Every layer, in order.
    pub const ALL: [Layer; 4] = [
        Layer::Scheduling,
        Layer::ContainerStart,
        Layer::Runtime,
        Layer::NodeHardware,
    ];
}

/// One piece of evidence: what was seen, where, and when.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Evidence {
    /// Where it was seen: `event FailedScheduling on pod/team-a/train-0 (x12)`, `condition
    /// PodScheduled on pod/...`, `label nvidia.com/cuda.driver-version.full on node/gpu-a-3`,
    /// `metric DCGM_FI_DEV_XID_ERRORS{gpu="3"}`.
    pub source: String,
    /// What it says (event message, condition message, label or metric value).
    pub text: String,
    /// When (RFC 3339), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// One finding about the cluster (`gpuctl doctor`, with or without metrics).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable id, registered ([`rule`]): GPU200–GPU249 from the cluster's objects, GPU250–GPU299
    /// from metrics.
    pub id: String,
    /// Runbook layer.
    pub layer: Layer,
    /// `error` (work is stuck or failing), `warning` (will bite, or wastes GPUs), `info`.
    pub severity: Severity,
    /// One line: what is wrong, e.g. `pod team-a/train-0 is Pending: no node advertises
    /// nvidia.com/mig-2g.20gb`.
    pub title: String,
    /// The objects it concerns, `kind/namespace/name` or `kind/name` in lower case
    /// (`pod/team-a/train-0`, `node/gpu-a-3`, `pool/h100-train`, `clusterqueue/cq-team-a`).
    pub subjects: Vec<String>,
    /// What shows it, newest first, at most the doctor's `MAX_EVIDENCE`.
    pub evidence: Vec<Evidence>,
    /// The cause, in one sentence.
    pub cause: String,
    /// The next step, as a concrete command (or the blueprint change and `gpuctl apply`).
    pub fix: String,
}

/// Checks, in debug builds (every test), that `id` is registered to `family` and that `severity`
/// is not more severe than its registration: the point every emitter's findings pass through, so
/// any id a test observes can be explained.
pub fn debug_check(family: Family, id: &str, severity: Severity) {
    if cfg!(debug_assertions) {
        let r = rule(id).unwrap_or_else(|| panic!("{id} is not registered (crate::finding)"));
        assert_eq!(r.family, family, "{id} is registered to another family");
        assert!(
            severity >= r.severity,
            "{id} is reported as {severity}, but registered as at most {}",
            r.severity
        );
    }
}

/// [`debug_check`] for a finding about the cluster, which also checks that its runbook layer is
/// the one (or one of those) its registration's `area` names.
pub fn debug_check_cluster(family: Family, id: &str, severity: Severity, layer: Layer) {
    debug_check(family, id, severity);
    if cfg!(debug_assertions) {
        let area = rule(id).map_or("", |r| r.area);
        let name = serde_json::to_value(layer)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        assert!(
            area.split(" or ").any(|a| a == name),
            "{id} is reported in layer {name}, but registered in `{area}`"
        );
    }
}
