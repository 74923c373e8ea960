//! Each fleet rule with a failing and a passing fleet file, and `check` over the clusters'
//! effective blueprints (findings in the file that set the value, named by cluster).

use std::path::Path;

use super::*;

const BASE: &str = include_str!("../../../blueprints/mixed-lab-fixed.yaml");

const HEAD: &str = "apiVersion: gpuctl.dev/v1alpha1\nkind: Fleet\nmetadata: { name: f }\n";

/// The clusters a, b, c (labels region us/us/eu) on overlays of one base.
const CLUSTERS: &str = "spec:
  clusters:
    - { name: a, blueprint: clusters/a.yaml, context: ctx-a, labels: { region: us } }
    - { name: b, blueprint: clusters/b.yaml, context: ctx-b, labels: { region: us } }
    - { name: c, blueprint: clusters/c.yaml, context: ctx-c, labels: { region: eu } }
";

const WAVES: &str = "  waves:
    - { name: canary, clusters: [a], bake: 24h, gates: [converged, doctor] }
    - { name: us, selector: { matchLabels: { region: us } }, bake: 1h30m }
    - { name: rest, selector: {} }
";

fn overlay(name: &str) -> String {
    format!(
        "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: ../base/base.yaml\nmetadata: {{ name: {name} }}\n"
    )
}

fn fleet_dir(fleet: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let w = |p: &str, t: &str| {
        let path = d.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, t).unwrap();
    };
    w("base/base.yaml", BASE);
    for n in ["a", "b", "c"] {
        w(&format!("clusters/{n}.yaml"), &overlay(n));
    }
    w("fleet.yaml", fleet);
    d
}

fn opts() -> Options {
    Options {
        today: jiff::civil::date(2026, 12, 3),
    }
}

fn run(fleet: &str) -> (tempfile::TempDir, FleetReport) {
    let d = fleet_dir(fleet);
    let r = check_path(&d.path().join("fleet.yaml"), Catalog::embedded(), opts()).expect("reads");
    (d, r)
}

fn fleet_rules(r: &FleetReport) -> Vec<(&'static str, String)> {
    r.fleet
        .findings
        .iter()
        .map(|f| (f.rule, f.path.clone()))
        .collect()
}

#[test]
fn a_valid_fleet_has_no_findings_and_its_waves_hold_every_cluster_once() {
    let (d, r) = run(&format!("{HEAD}{CLUSTERS}{WAVES}"));
    assert!(r.fleet.findings.is_empty(), "{:#?}", r.fleet.findings);
    assert_eq!(r.clusters.len(), 3);
    for (name, reports) in &r.clusters {
        assert!(
            reports.iter().all(|r| r.findings.is_empty()),
            "{name}: {reports:#?}"
        );
    }
    let bytes = std::fs::read(d.path().join("fleet.yaml")).unwrap();
    let l = load(&d.path().join("fleet.yaml"), bytes, Catalog::embedded()).unwrap();
    assert_eq!(
        members(&l.fleet),
        vec![
            ("canary".to_string(), vec!["a".to_string()]),
            ("us".to_string(), vec!["b".to_string()]),
            ("rest".to_string(), vec!["c".to_string()]),
        ]
    );
    assert_eq!(duration_seconds("1h30m"), Some(5400));
    assert_eq!(duration_seconds("one day"), None);
}

/// (rule, fleet spec edit: from, to, path the finding is at); each passes without the edit.
#[test]
fn every_fleet_rule_fails_its_case_and_passes_the_valid_fleet() {
    let valid = format!("{HEAD}{CLUSTERS}{WAVES}");
    let cases: &[(&str, &str, &str, &str)] = &[
        ("GPU182", "name: b,", "name: a,", "spec.clusters[1].name"),
        ("GPU182", "name: b,", "name: B_2,", "spec.clusters[1].name"),
        (
            "GPU183",
            "context: ctx-b",
            "context: ctx-a",
            "spec.clusters[1].context",
        ),
        (
            "GPU184",
            "clusters: [a]",
            "clusters: [a, b] }\n    - { name: x, clusters: [b]",
            "spec.waves[1].clusters[0]",
        ),
        (
            "GPU184",
            "    - { name: rest, selector: {} }\n",
            "",
            "spec.clusters[2].name",
        ),
        (
            "GPU185",
            "clusters: [a]",
            "clusters: [z]",
            "spec.waves[0].clusters[0]",
        ),
        (
            "GPU186",
            "blueprint: clusters/c.yaml",
            "blueprint: ../outside.yaml",
            "spec.clusters[2].blueprint",
        ),
        (
            "GPU186",
            "blueprint: clusters/c.yaml",
            "blueprint: /etc/hostname",
            "spec.clusters[2].blueprint",
        ),
        (
            "GPU186",
            "blueprint: clusters/c.yaml",
            "blueprint: clusters/none.yaml",
            "spec.clusters[2].blueprint",
        ),
        ("GPU189", "name: rest,", "name: us,", "spec.waves[2].name"),
        (
            "GPU189",
            "{ name: rest, selector: {} }",
            "{ name: rest }\n    - { name: rest2, selector: {} }",
            "spec.waves[2]",
        ),
        ("GPU189", "bake: 24h", "bake: one day", "spec.waves[0].bake"),
    ];
    let (_d, r) = run(&valid);
    assert!(r.fleet.findings.is_empty(), "{:#?}", r.fleet.findings);
    for (rule, from, to, path) in cases {
        assert!(valid.contains(from), "{from}");
        let (_d, r) = run(&valid.replacen(from, to, 1));
        let got = fleet_rules(&r);
        assert!(
            got.contains(&(rule, path.to_string())),
            "{rule} at {path} for {to:?}: {got:?}"
        );
        for f in &r.fleet.findings {
            assert!(f.pos.is_some() && f.hint.is_some(), "{f:?}");
        }
    }
}

#[test]
fn multikueue_rules() {
    let base = format!("{HEAD}{CLUSTERS}{WAVES}");
    let mk = |m: &str| format!("{base}  multiKueue: {m}\n");
    let (_d, ok) = run(&mk(
        "{ manager: a, workers: [b, c], dispatcher: Incremental, clusterQueues: [cq] }",
    ));
    // The fleet file's own rules pass; the base uses no Kueue, which the rules over the
    // blueprints report (GPU193, mk_rules_tests.rs has their cases).
    assert_eq!(
        fleet_rules(&ok),
        [("GPU193", "spec.multiKueue.manager".to_string())]
    );
    for (rule, m, path) in [
        (
            "GPU187",
            "{ manager: a, workers: [a, b] }",
            "spec.multiKueue.workers[0]",
        ),
        (
            "GPU188",
            "{ manager: a, workers: [b, b] }",
            "spec.multiKueue.workers[1]",
        ),
        (
            "GPU188",
            "{ manager: a, workers: [] }",
            "spec.multiKueue.workers",
        ),
        (
            "GPU185",
            "{ manager: hub, workers: [b] }",
            "spec.multiKueue.manager",
        ),
        (
            "GPU185",
            "{ manager: a, workers: [z] }",
            "spec.multiKueue.workers[0]",
        ),
    ] {
        let (_d, r) = run(&mk(m));
        assert!(
            fleet_rules(&r).contains(&(rule, path.to_string())),
            "{rule} {m}: {:?}",
            fleet_rules(&r)
        );
    }
    // 21 workers.
    let mut clusters = String::from("spec:\n  clusters:\n");
    for i in 0..22 {
        clusters.push_str(&format!(
            "    - {{ name: w{i}, blueprint: clusters/a.yaml }}\n"
        ));
    }
    let workers: Vec<String> = (1..22).map(|i| format!("w{i}")).collect();
    let text = format!(
        "{HEAD}{clusters}  multiKueue: {{ manager: w0, workers: [{}] }}\n",
        workers.join(", ")
    );
    let (_d, r) = run(&text);
    assert!(
        fleet_rules(&r).contains(&("GPU188", "spec.multiKueue.workers".into())),
        "{:?}",
        fleet_rules(&r)
    );
}

#[test]
fn the_multikueue_manager_gets_the_fleets_dispatcher_and_no_other_cluster_does() {
    // The example fleet: `hub` dispatches to `eu-onprem` and `us-east`, `dispatcher: Incremental`.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../blueprints/fleet/fleet.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("dispatcher: Incremental"),
        "the example changed"
    );
    let dispatchers = |text: &str| {
        let loaded = load(&path, text.as_bytes().to_vec(), Catalog::embedded()).expect("loads");
        ["hub", "us-canary", "us-east", "eu-onprem"].map(|name| {
            let i = loaded.cluster_index(name).unwrap();
            let l = loaded
                .load_cluster(i)
                .unwrap()
                .unwrap_or_else(|_| panic!("{name}"));
            let kueue = l
                .blueprint
                .spec
                .scheduling
                .kueue
                .expect("the base has Kueue");
            kueue.config.multi_kueue.and_then(|m| m.dispatcher)
        })
    };
    assert_eq!(
        dispatchers(&text),
        [Some(model::Dispatcher::Incremental), None, None, None]
    );
    // No dispatcher in the fleet: the manager's Kueue keeps its own default.
    assert_eq!(
        dispatchers(&text.replace("    dispatcher: Incremental\n", "")),
        [None, None, None, None]
    );
}

#[test]
fn a_file_that_is_not_a_fleet_is_one_structural_finding() {
    for (text, rule) in [
        ("spec: [\n", "GPU001"),
        (
            "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\n",
            "GPU005",
        ),
        (
            &format!(
                "{HEAD}spec:\n  clusters:\n    - {{ name: a, blueprint: a.yaml, kubeconfig: /root/.kube/config }}\n"
            ) as &str,
            "GPU002",
        ),
        (
            &format!("{HEAD}spec:\n  clusters:\n    - {{ name: a }}\n") as &str,
            "GPU004",
        ),
        (&format!("{HEAD}spec:\n  clusters: 3\n") as &str, "GPU003"),
    ] {
        let (_d, r) = run(text);
        assert_eq!(r.fleet.findings.len(), 1, "{text}: {:#?}", r.fleet.findings);
        assert_eq!(r.fleet.findings[0].rule, rule, "{text}");
        assert!(r.fleet.findings[0].pos.is_some(), "{text}");
        assert!(r.clusters.is_empty());
    }
}

#[test]
fn cluster_findings_name_the_cluster_and_the_file_that_set_the_value() {
    let d = fleet_dir(&format!("{HEAD}{CLUSTERS}{WAVES}"));
    // The base's bad model reaches every cluster; b's own bad quota only b.
    let base = BASE.replace("A100-PCIE-40GB", "A100-PCIE-41GB");
    std::fs::write(d.path().join("base/base.yaml"), base).unwrap();
    std::fs::write(
        d.path().join("clusters/b.yaml"),
        format!(
            "{}spec:\n  nodePools:\n    - {{ name: v100, nodes: -1 }}\n",
            overlay("b")
        ),
    )
    .unwrap();
    let r = check_path(&d.path().join("fleet.yaml"), Catalog::embedded(), opts()).unwrap();
    for (name, reports) in &r.clusters {
        let base_report = reports
            .iter()
            .find(|r| r.file.ends_with("base/base.yaml"))
            .unwrap_or_else(|| panic!("{name}: {reports:#?}"));
        let f = &base_report.findings[0];
        assert!(
            f.message.starts_with(&format!("cluster `{name}`: ")),
            "{f:?}"
        );
        assert_eq!(f.rule, "GPU015");
        let own = reports
            .iter()
            .find(|r| r.file.ends_with(&format!("clusters/{name}.yaml")));
        assert_eq!(own.is_some(), name == "b", "{name}: {reports:#?}");
    }
    let all = r.reports();
    assert_eq!(
        all.iter().map(|r| r.count(Severity::Error)).sum::<usize>(),
        4
    );
}

#[test]
fn an_unreadable_fleet_file_is_an_input_error() {
    let d = tempfile::tempdir().unwrap();
    assert!(check_path(&d.path().join("none.yaml"), Catalog::embedded(), opts()).is_err());
    assert!(check_path(d.path(), Catalog::embedded(), opts()).is_err());
    let _ = Path::new(".");
}

/// 1,000 clusters on one base: bounded time (each cluster is loaded, checked and dropped).
#[test]
fn a_thousand_clusters_validate_without_error() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("base")).unwrap();
    std::fs::create_dir_all(d.path().join("clusters")).unwrap();
    std::fs::write(d.path().join("base/base.yaml"), BASE).unwrap();
    let mut fleet = format!("{HEAD}spec:\n  clusters:\n");
    for i in 0..1000 {
        std::fs::write(
            d.path().join(format!("clusters/c{i}.yaml")),
            overlay(&format!("c{i}")),
        )
        .unwrap();
        fleet.push_str(&format!(
            "    - {{ name: c{i}, blueprint: clusters/c{i}.yaml, context: ctx-{i}, labels: {{ n: \"{}\" }} }}\n",
            i % 10
        ));
    }
    fleet.push_str(
        "  waves:\n    - { name: canary, clusters: [c0] }\n    - { name: rest, selector: {} }\n",
    );
    std::fs::write(d.path().join("fleet.yaml"), fleet).unwrap();
    let start = std::time::Instant::now();
    let r = check_path(&d.path().join("fleet.yaml"), Catalog::embedded(), opts()).unwrap();
    let took = start.elapsed();
    assert!(r.fleet.findings.is_empty(), "{:#?}", r.fleet.findings);
    assert_eq!(r.clusters.len(), 1000);
    assert!(
        r.clusters
            .iter()
            .all(|(_, rs)| rs.iter().all(|r| r.findings.is_empty()))
    );
    eprintln!("1,000 clusters validated in {took:?}");
}

#[test]
fn a_cluster_is_found_by_name_and_an_unknown_one_names_the_known_ones() {
    let d = fleet_dir(&format!("{HEAD}{CLUSTERS}"));
    let path = d.path().join("fleet.yaml");
    let l = load(&path, std::fs::read(&path).unwrap(), Catalog::embedded()).unwrap();
    assert_eq!(l.cluster_index("b"), Ok(1));
    let e = l.cluster_index("zz").unwrap_err();
    assert_eq!(e, "fleet `f` has no cluster `zz`; its clusters: a, b, c");
    // The explained cluster's chain: the overlay, then the base it extends.
    let Some(Ok(loaded)) = l.load_cluster(2) else {
        panic!("cluster c loads")
    };
    let x = gpuctl_model::blueprint::origin::explain(&loaded, "metadata.name").expect("explains");
    assert_eq!(x.value, Some(serde_json::json!("c")));
    assert_eq!(x.files.len(), 2);
    assert!(x.files[1].file.ends_with("base/base.yaml"), "{x:?}");
    assert_eq!(
        x.files[0].verdict,
        gpuctl_model::blueprint::origin::Verdict::Wins
    );
}
