//! SARIF 2.1.0, so GitHub code scanning annotates a pull request with the findings.

use serde_json::{Value, json};

use gpuctl_model::finding::{self, Family};
use gpuctl_model::located::{FileReport, Severity};

/// Renders reports as one SARIF 2.1.0 log. Its rule table is the validation family of the one
/// registry (the rules a blueprint file can break) and the policy family (`--policy DIR`: the
/// organisation's Rego results), each with its `gpuctl explain` text.
pub fn sarif(reports: &[FileReport]) -> String {
    let registered: Vec<&finding::Rule> = Family::Validation
        .rules()
        .iter()
        .chain(Family::Policy.rules())
        .collect();
    let rules: Vec<Value> = registered
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "shortDescription": { "text": r.title },
                "fullDescription": { "text": r.why },
                "help": { "text": r.fix, "markdown": finding::explain(r) },
                "defaultConfiguration": { "level": level(r.severity) },
                "properties": { "family": r.area },
            })
        })
        .collect();
    let mut results = Vec::new();
    for report in reports {
        for f in &report.findings {
            let mut location = json!({
                "physicalLocation": { "artifactLocation": { "uri": report.file } },
                "logicalLocations": [ { "fullyQualifiedName": f.path } ],
            });
            if let Some(p) = f.pos {
                location["physicalLocation"]["region"] =
                    json!({ "startLine": p.line, "startColumn": p.column });
            }
            let text = match &f.hint {
                Some(h) => format!("{} ({h})", f.message),
                None => f.message.clone(),
            };
            results.push(json!({
                "ruleId": f.rule,
                "ruleIndex": registered.iter().position(|r| r.id == f.rule),
                "level": level(f.severity),
                "message": { "text": text },
                "locations": [location],
            }));
        }
    }
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "gpuctl",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    });
    let mut s = serde_json::to_string_pretty(&log).unwrap_or_default();
    s.push('\n');
    s
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}
