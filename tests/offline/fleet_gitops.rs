//! Issue 31: `gpuctl fleet render` with a `gitops` section, through the real binary on the example
//! fleet delivered by Argo CD (`blueprints/fleet/fleet-argocd.yaml`) and by Flux
//! (`fleet-flux.yaml`): the cluster trees are those of the fleet without it, the ApplicationSet
//! and Kustomizations are golden-tested in `golden/fleet/` and written the same on every run.

use std::path::Path;

use crate::render_common::root;
use crate::support::fleet::FleetRepo;
use crate::support::gpuctl::gpuctl;

fn render(fleet: &str, dir: &Path) {
    let o = gpuctl(&["fleet", "render", fleet, "-o", dir.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every file under `dir` (relative path, text), sorted.
fn files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => root().join("golden/fleet"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name.to_string(), text);
    });
}

#[test]
fn gitops_output_of_the_example_fleet_matches_its_golden_and_keeps_the_cluster_trees() {
    let d = tempfile::tempdir().unwrap();
    let plain = d.path().join("plain");
    render("blueprints/fleet/fleet.yaml", &plain);
    let plain_files = files(&plain);
    for (fleet, engine) in [("fleet-argocd.yaml", "argocd"), ("fleet-flux.yaml", "flux")] {
        let a = d.path().join(format!("{engine}-a"));
        let b = d.path().join(format!("{engine}-b"));
        render(&format!("blueprints/fleet/{fleet}"), &a);
        render(&format!("blueprints/fleet/{fleet}"), &b);
        let (ours, trees): (Vec<_>, Vec<_>) = files(&a)
            .into_iter()
            .partition(|(p, _)| p.starts_with(&format!("{engine}/")));
        // Nothing render emits holds `${`, so Flux's trees are unchanged too.
        assert_eq!(trees, plain_files, "{engine}: the cluster trees");
        assert_eq!(files(&a), files(&b), "{engine}: deterministic");
        assert!(!ours.is_empty());
        let text: String = ours.iter().map(|(p, t)| format!("--- {p}\n{t}")).collect();
        assert!(
            !text.contains("postBuild") && !text.contains("automated:"),
            "{text}"
        );
        snapshot(&format!("gitops-{engine}.yaml"), &text);
    }
}

/// A re-render removes the file of a cluster that left the fleet and keeps the user's own files;
/// a link where the engine's directory goes is refused.
#[test]
fn a_rerender_removes_only_its_own_stale_files_and_never_writes_through_a_link() {
    let d = FleetRepo::new().example("fleet").build();
    let src = d.path().join("fleet");
    let fleet = src.join("fleet-flux.yaml");
    let out = d.path().join("out");
    render(fleet.to_str().unwrap(), &out);
    std::fs::write(out.join("flux/notes.yaml"), "mine\n").unwrap();
    let text = std::fs::read_to_string(&fleet).unwrap();
    let fewer = text
        .lines()
        .filter(|l| !l.contains("name: eu-onprem"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("workers: [eu-onprem, us-east]", "workers: [us-east]");
    std::fs::write(&fleet, fewer + "\n").unwrap();
    render(fleet.to_str().unwrap(), &out);
    let mut names: Vec<String> = std::fs::read_dir(out.join("flux"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["hub.yaml", "notes.yaml", "us-canary.yaml", "us-east.yaml"]
    );
    let out2 = d.path().join("out2");
    render("blueprints/fleet/fleet.yaml", &out2);
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out2.join("flux")).unwrap();
    let o = gpuctl(&[
        "fleet",
        "render",
        "blueprints/fleet/fleet-flux.yaml",
        "-o",
        out2.to_str().unwrap(),
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

/// Switching engines (or dropping `gitops`) leaves the other engine's files, and says so.
#[test]
fn a_render_names_the_files_of_an_engine_the_fleet_no_longer_uses() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    render("blueprints/fleet/fleet-argocd.yaml", &out);
    let stderr = |fleet: &str| {
        let o = gpuctl(&["fleet", "render", fleet, "-o", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = stderr("blueprints/fleet/fleet-argocd.yaml");
    assert!(!e.contains("warning:"), "{e}");
    let e = stderr("blueprints/fleet/fleet-flux.yaml");
    assert!(
        e.contains("argocd holds gpuctl's argocd files of an earlier render"),
        "{e}"
    );
    assert!(!e.contains("flux holds"), "{e}");
    let e = stderr("blueprints/fleet/fleet.yaml");
    assert!(
        e.contains("argocd holds") && e.contains("flux holds"),
        "{e}"
    );
    assert!(out.join("argocd").read_dir().unwrap().count() > 0, "kept");
}
