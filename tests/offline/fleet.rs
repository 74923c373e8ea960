//! Issue 31: `gpuctl fleet validate | render` through the real binary on the example fleet
//! (`blueprints/fleet/`), and each cluster's effective render golden-tested in `golden/fleet/`.

use std::process::Output;

use crate::render_common::{opts, root};
use std::path::Path;

use gpuctl_core::blueprint::load_file_in;
use gpuctl_core::profiles::Catalog;
use gpuctl_core::validate::{Options, check_split};

use crate::support::fleet::{FleetRepo, copy_dir, example_dir};
use crate::support::gpuctl::gpuctl;

const FLEET: &str = "blueprints/fleet/fleet.yaml";

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_example_fleet_validates_clean() {
    let o = gpuctl(&["fleet", "validate", FLEET]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("0 errors, 0 warnings"), "{}", text(&o));
    let o = gpuctl(&["fleet", "validate", "--strict", "-o", "json", FLEET]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = gpuctl(&["fleet", "validate", "blueprints/fleet/none.yaml"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "an unreadable fleet is an input error: {}",
        text(&o)
    );
}

#[test]
fn fleet_validate_fails_on_a_fleet_rule_and_on_a_cluster_finding_in_its_base() {
    let d = FleetRepo::new().example("").build();
    let fleet = d.path().join("fleet.yaml");
    let text0 = std::fs::read_to_string(&fleet).unwrap();
    std::fs::write(
        &fleet,
        text0.replace("workers: [eu-onprem, us-east]", "workers: [hub, us-east]"),
    )
    .unwrap();
    let o = gpuctl(&["fleet", "validate", fleet.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("GPU187"), "{}", text(&o));
    std::fs::write(&fleet, &text0).unwrap();
    let base = d.path().join("base/training.yaml");
    let b = std::fs::read_to_string(&base).unwrap();
    std::fs::write(&base, b.replacen("H100-SXM5-80GB", "H100-SXM9", 1)).unwrap();
    let o = gpuctl(&["fleet", "validate", "-o", "json", fleet.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Every cluster inherits the base's pool: one finding per cluster, each in the base file.
    let mut got = Vec::new();
    for f in v["files"].as_array().unwrap() {
        for finding in f["findings"].as_array().unwrap() {
            let file = f["file"].as_str().unwrap();
            let line = finding["pos"]["line"].as_u64();
            let message = finding["message"].as_str().unwrap();
            got.push((
                file.ends_with("base/training.yaml"),
                line,
                message.split(':').next().unwrap().to_string(),
            ));
        }
    }
    for cluster in ["hub", "us-canary", "us-east", "eu-onprem"] {
        assert!(
            got.contains(&(true, Some(24), format!("cluster `{cluster}`"))),
            "{cluster}: {got:?}"
        );
    }
    // And render refuses before writing anything.
    let out = d.path().join("rendered");
    let o = gpuctl(&[
        "fleet",
        "render",
        fleet.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!out.exists(), "nothing written");
}

/// `fleet render -o DIR` writes `DIR/<cluster>/`, byte for byte what `gpuctl render
/// --output-dir` writes for that cluster's blueprint (given the fleet's directory as root), the
/// same bytes on every run.
#[test]
fn fleet_render_writes_one_tree_per_cluster_as_render_does() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a");
    let b = d.path().join("b");
    for dir in [&a, &b] {
        let o = gpuctl(&["fleet", "render", FLEET, "-o", dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let mut names: Vec<String> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["eu-onprem", "hub", "us-canary", "us-east"]);
    assert_eq!(files(&a), files(&b), "deterministic");
    // The tree of a cluster no longer in the fleet is named, and left with its files; a directory
    // of the user's without a render manifest is not named.
    copy_dir(&a.join("us-east"), &{
        std::fs::create_dir_all(a.join("gone")).unwrap();
        a.join("gone")
    });
    std::fs::create_dir_all(a.join("notes")).unwrap();
    let o = gpuctl(&["fleet", "render", FLEET, "-o", a.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("gone is a gpuctl tree of no cluster of this fleet"),
        "{out}"
    );
    assert_eq!(out.matches("warning:").count(), 1, "{out}");
    assert_eq!(files(&a.join("gone")), files(&a.join("us-east")));
    std::fs::remove_dir_all(a.join("gone")).unwrap();
    std::fs::remove_dir_all(a.join("notes")).unwrap();
    assert_eq!(files(&a), files(&b));
    // us-canary.yaml (no MultiKueue role) extends ../regions/us.yaml: alone, its directory is the root, so the tree is
    // compared with a render of a copy of the fleet with the cluster file at the top.
    let flat = d.path().join("flat");
    copy_dir(&example_dir(), &{
        std::fs::create_dir_all(&flat).unwrap();
        flat.clone()
    });
    let canary = std::fs::read_to_string(flat.join("clusters/us-canary.yaml"))
        .unwrap()
        .replace("../regions/us.yaml", "regions/us.yaml");
    std::fs::write(flat.join("us-canary.yaml"), canary).unwrap();
    let single = d.path().join("single");
    let o = gpuctl(&[
        "render",
        flat.join("us-canary.yaml").to_str().unwrap(),
        "--output-dir",
        single.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(files(&single), files(&a.join("us-canary")));
    assert!(a.join("us-east/kustomization.yaml").is_file());
    // A MultiKueue worker's tree adds what the manager uses on it; the manager's, the wiring.
    let east = std::fs::read_to_string(a.join("us-east/.gpuctl-render-manifest")).unwrap();
    assert!(
        east.contains("serviceaccount_kueue-system_gpuctl-multikueue"),
        "{east}"
    );
    let hub = std::fs::read_to_string(a.join("hub/.gpuctl-render-manifest")).unwrap();
    assert!(
        hub.contains("multikueuecluster_us-east") && hub.contains("admissioncheck_multikueue"),
        "{hub}"
    );
}

/// Every file under `dir`, relative path and bytes, sorted.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Golden: each cluster's effective objects, Helm values and node patches, so a change to the
/// base shows in every cluster's snapshot in review.
#[test]
fn every_example_cluster_matches_its_golden_render() {
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let path = root().join(FLEET);
    let bytes = std::fs::read(&path).unwrap();
    let fleet = gpuctl_core::fleet::load(&path, bytes, catalog).expect("fleet loads");
    assert!(
        fleet.report.findings.is_empty(),
        "{:#?}",
        fleet.report.findings
    );
    for (i, c) in fleet.fleet.spec.clusters.iter().enumerate() {
        let loaded = fleet
            .load_cluster(i)
            .expect("readable")
            .unwrap_or_else(|b| panic!("{}: {:#?}", c.name, b.report.findings));
        let v = gpuctl_core::validate::validate(loaded, catalog, opts())
            .unwrap_or_else(|r| panic!("{}: {:#?}", c.name, r.findings));
        let set =
            gpuctl_core::render::render(&v, catalog, &gpuctl_core::render::Templates::embedded())
                .unwrap();
        insta::with_settings!({
            snapshot_path => root().join("golden/fleet"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(format!("{}.yaml", c.name), set.to_yaml());
            insta::assert_snapshot!(format!("{}.values", c.name), set.helm_values_yaml());
            insta::assert_snapshot!(format!("{}.nodes", c.name), set.node_patches_yaml());
        });
    }
}

/// One cluster of a fleet validates and renders on its own (`gpuctl validate clusters/x.yaml`,
/// whose parents are above its directory) inside a repository, whose root bounds its `extends`
/// chain, and renders exactly what `fleet render` writes for it; outside a repository its own
/// directory is the root, and the same chain is refused (GPU180).
#[test]
fn one_cluster_of_a_fleet_plans_on_its_own_inside_its_repository() {
    let repo = FleetRepo::new().example("fleet").git().build();
    let cluster = repo.path().join("fleet/clusters/us-canary.yaml");
    let cluster = cluster.to_str().unwrap();
    let o = gpuctl(&["validate", cluster]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let one = repo.path().join("one");
    let o = gpuctl(&["render", cluster, "--output-dir", one.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let all = repo.path().join("all");
    let fleet = repo.path().join("fleet/fleet.yaml");
    let o = gpuctl(&[
        "fleet",
        "render",
        fleet.to_str().unwrap(),
        "-o",
        all.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(files(&one), files(&all.join("us-canary")));

    let bare = FleetRepo::new().example("fleet").build();
    let cluster = bare.path().join("fleet/clusters/us-east.yaml");
    let o = gpuctl(&["validate", cluster.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("GPU180") && text(&o).contains("outside the root"),
        "{}",
        text(&o)
    );
}

/// `fleet explain` on the example fleet: an overridden field (us-east's region sets its pool's
/// nodes over the base's), an inherited one (the base's GPU count), and the usage errors.
#[test]
fn fleet_explain_prints_the_chain_of_one_field() {
    let o = gpuctl(&[
        "fleet",
        "explain",
        FLEET,
        "us-east",
        "spec.nodePools[0].nodes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "cluster: us-east
field: spec.nodePools[0].nodes (spec.nodePools[name=h100-train].nodes)
value: 16
chain, nearest first:
  blueprints/fleet/clusters/us-east.yaml  -   not set
  blueprints/fleet/regions/us.yaml:10     16  set here, wins
  blueprints/fleet/base/training.yaml:23  8   overridden by blueprints/fleet/regions/us.yaml:10
"
    );
    let o = gpuctl(&[
        "fleet",
        "explain",
        FLEET,
        "us-east",
        "spec.nodePools[h100-train].gpu.count",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "cluster: us-east
field: spec.nodePools[0].gpu.count (spec.nodePools[name=h100-train].gpu.count)
value: 8
chain, nearest first:
  blueprints/fleet/clusters/us-east.yaml  -  not set
  blueprints/fleet/regions/us.yaml        -  not set
  blueprints/fleet/base/training.yaml:24  8  set here, wins
"
    );
    // The canary deletes the inference pool the base declares.
    let o = gpuctl(&[
        "fleet",
        "explain",
        FLEET,
        "us-canary",
        "spec.nodePools[name=h100-infer].nodes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("value: none (removed from the effective blueprint)"),
        "{out}"
    );
    assert!(
        out.contains(
            "blueprints/fleet/clusters/us-canary.yaml:14  -  deleted here ($patch: delete)"
        ),
        "{out}"
    );
    assert!(out.contains("blueprints/fleet/base/training.yaml:30       2  deleted by blueprints/fleet/clusters/us-canary.yaml:14"), "{out}");

    let o = gpuctl(&["fleet", "explain", FLEET, "us-west", "spec"]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(
        text(&o).contains("has no cluster `us-west`; did you mean `us-east`? its clusters: hub, us-canary, us-east, eu-onprem"),
        "{}",
        text(&o)
    );
    let o = gpuctl(&[
        "fleet",
        "explain",
        FLEET,
        "us-east",
        "spec.nodePools[0].gpu.cont",
    ]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(
        text(&o).contains("did you mean `spec.nodePools[0].gpu.count`?"),
        "{}",
        text(&o)
    );
    assert!(o.stdout.is_empty());
}

/// Validation of a blueprint built from overlays names the file (and line) that set the value at
/// fault (`validate::check_split`); the overlay merge itself is tested in the model crate
/// (`blueprint/overlay/tests.rs`), from the same base file.
const OVERLAY_BASE: &str = include_str!("../fixtures/overlay/base.yaml");

/// An overlay of `base.yaml` named `us` with `spec` after its metadata.
fn overlay(spec: &str) -> String {
    format!(
        "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: base.yaml\nmetadata: {{ name: us }}\n{spec}"
    )
}

#[test]
fn overlay_findings_point_at_the_file_that_set_the_value() {
    let opts = Options {
        today: jiff::civil::date(2026, 12, 3),
    };
    // The base's namespace is shared by two tenants only once the overlay adds the second one:
    // the duplicate is the overlay's; an unknown GPU model in the base is the base's.
    let base = OVERLAY_BASE.replace("model: A100-SXM4-80GB", "model: A100-SXM9");
    let d = FleetRepo::new()
        .file("base.yaml", &base)
        .file(
            "us.yaml",
            &overlay("spec:\n  tenants:\n    - { name: team-c, namespaces: [team-b] }\n"),
        )
        .build();
    let loaded = load_file_in(&d.path().join("us.yaml"), None).expect("loads");
    assert_eq!(loaded.layers.len(), 1);
    let reports = check_split(&loaded, Catalog::embedded(), opts);
    let by_rule = |rule: &str| {
        reports
            .iter()
            .find(|r| r.findings.iter().any(|f| f.rule == rule))
            .map(|r| {
                let f = r.findings.iter().find(|f| f.rule == rule).unwrap();
                (
                    Path::new(&r.file)
                        .file_name()
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .to_string(),
                    f.pos.map(|p| p.line),
                    f.hint.clone().unwrap_or_default(),
                )
            })
    };
    let (file, line, _) = by_rule("GPU011").expect("duplicate namespace");
    assert_eq!((file.as_str(), line), ("us.yaml", Some(7)));
    let unknown_gpu = reports
        .iter()
        .flat_map(|r| r.findings.iter().map(move |f| (r, f)))
        .find(|(_, f)| f.path.contains("gpu.model"))
        .expect("unknown model");
    assert!(
        unknown_gpu.0.file.ends_with("base.yaml"),
        "{}",
        unknown_gpu.0.file
    );
    assert_eq!(unknown_gpu.1.pos.map(|p| p.line), Some(27));
    assert!(unknown_gpu.1.hint.as_deref().unwrap().contains("us.yaml"));
    // `check` (one report) names the base's file and line in the message instead.
    let one = gpuctl_core::validate::check(&loaded, Catalog::embedded(), opts);
    let f = one
        .findings
        .iter()
        .find(|f| f.path.contains("gpu.model"))
        .unwrap();
    assert!(
        f.pos.is_none() && f.message.contains("base.yaml:27:"),
        "{f:?}"
    );
}
