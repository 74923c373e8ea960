//! SARIF 2.1.0, so GitHub code scanning annotates a pull request with the findings.

use serde_json::{Value, json};

use gpuctl_core::diag::{FileReport, Severity};
use gpuctl_core::validate::registry::RULES;

/// Renders reports as one SARIF 2.1.0 log.
pub fn sarif(reports: &[FileReport]) -> String {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.name,
                "shortDescription": { "text": r.checks },
                "fullDescription": { "text": r.why },
                "help": { "text": r.fix, "markdown": gpuctl_core::validate::registry::explain(r) },
                "defaultConfiguration": { "level": level(r.severity) },
                "properties": { "family": r.family },
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
                "ruleIndex": RULES.iter().position(|r| r.id == f.rule),
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
