//! GPU193–GPU196, each with a failing and a passing fleet (a manager `hub` and workers `w1`, `w2`
//! on one Kueue base, an edit to one file per case), and the structural MultiKueue rules gpuctl
//! guarantees by construction, shown over the rendered output of every cluster.

use std::path::Path;

use crate::{check_path, load};
use gpuctl_model::profiles::Catalog;
use gpuctl_pipeline::validate::Options;

const BASE: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: ClusterBlueprint
metadata:
  name: base
spec:
  kubernetes:
    version: \"1.35.1\"
  gpuOperator:
    version: v26.7.0
    namespace: gpu-operator
    install: none
    driver:
      version: \"580.173.02\"
      kernelModuleType: open
  nodePools:
    - name: train
      role: training
      selector: { gpuctl.dev/pool: train }
      nodes: 1
      gpu: { model: H100-SXM5-80GB, count: 8 }
  scheduling:
    queueing: kueue
    kueue:
      version: v0.19.2
      install: none
      clusterQueues:
        - name: cq-team-a
          resources:
            - { pool: train, quota: { nvidia.com/gpu: 8, cpu: \"16\", memory: 64Gi } }
        - name: cq-local
          resources:
            - { pool: train, quota: { nvidia.com/gpu: 0, cpu: \"4\", memory: 16Gi } }
  tenants:
    - name: team-a
      namespaces: [team-a, team-a-dev]
      queue: cq-team-a
    - name: ops
      namespaces: [ops]
      queue: cq-local
";

const FLEET: &str = "apiVersion: gpuctl.dev/v1alpha1
kind: Fleet
metadata: { name: mk }
spec:
  clusters:
    - { name: hub, blueprint: clusters/hub.yaml, context: ctx-hub }
    - { name: w1, blueprint: clusters/w1.yaml, context: ctx-w1 }
    - { name: w2, blueprint: clusters/w2.yaml, context: ctx-w2 }
  multiKueue:
    manager: hub
    workers: [w1, w2]
    clusterQueues: [cq-team-a]
";

fn overlay(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: ../base.yaml\nmetadata: {{ name: {name} }}\n{spec}"
    )
}

fn opts() -> Options {
    Options {
        today: jiff::civil::date(2026, 11, 30),
    }
}

/// The fleet with `edits` (file, spec of its overlay; `fleet.yaml` replaces the fleet file).
fn fleet_dir(edits: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    let w = |p: &str, t: &str| {
        let path = d.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, t).unwrap();
    };
    w("base.yaml", BASE);
    w("fleet.yaml", FLEET);
    for n in ["hub", "w1", "w2"] {
        w(&format!("clusters/{n}.yaml"), &overlay(n, ""));
    }
    for (file, text) in edits {
        if *file == "fleet.yaml" {
            w(file, text);
        } else {
            w(&format!("clusters/{file}.yaml"), &overlay(file, text));
        }
    }
    d
}

/// The fleet file's findings: (rule, path, message); with `valid`, the clusters' own blueprints
/// have no error (a failing case may break a cluster's own rules too, e.g. a tenant without a
/// queue under Kueue is GPU074 there).
fn checked(edits: &[(&str, &str)], valid: bool) -> Vec<(&'static str, String, String)> {
    let d = fleet_dir(edits);
    let r = check_path(&d.path().join("fleet.yaml"), Catalog::embedded(), opts()).expect("reads");
    for (name, reports) in r.clusters.iter().filter(|_| valid) {
        let errors: Vec<_> = reports
            .iter()
            .flat_map(|r| &r.findings)
            .filter(|f| f.severity == gpuctl_model::located::Severity::Error)
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
    for f in &r.fleet.findings {
        assert!(f.pos.is_some() && f.hint.is_some(), "{f:?}");
    }
    r.fleet
        .findings
        .iter()
        .map(|f| (f.rule, f.path.clone(), f.message.clone()))
        .collect()
}

fn findings(edits: &[(&str, &str)]) -> Vec<(&'static str, String, String)> {
    checked(edits, true)
}

const FRAMEWORKS: &str = "spec:\n  scheduling:\n    kueue:\n      config:\n        integrations:\n          frameworks: ";

#[test]
fn multikueue_blueprint_rules_pass_the_mirrored_fleet() {
    assert_eq!(findings(&[]), vec![]);
    // The manager's frameworks: kinds of Kubernetes itself need nothing on a worker; a framework
    // of the chart's default list is on a worker that declares none.
    let hub =
        format!("{FRAMEWORKS}[batch/job, pod, deployment, statefulset, jobset.x-k8s.io/jobset]\n");
    let w1 = format!("{FRAMEWORKS}[batch/job, jobset.x-k8s.io/jobset]\n");
    assert_eq!(findings(&[("hub", &hub), ("w1", &w1)]), vec![]);
    // A worker's LocalQueue may point to a ClusterQueue of another name; a quota equal to the
    // workers' sum is no warning.
    let w2 = "spec:\n  tenants:\n    - { name: team-a, queue: cq-local }\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-local\n          resources:\n            - { pool: train, quota: { nvidia.com/gpu: 8, cpu: \"16\", memory: 64Gi } }\n";
    let hub = "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources:\n            - { pool: train, quota: { nvidia.com/gpu: 16 } }\n";
    assert_eq!(findings(&[("w2", w2), ("hub", hub)]), vec![]);
}

/// (rule, edits, path of the finding, words of its message).
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str, &'a [&'a str]);

#[test]
fn every_multikueue_blueprint_rule_fails_its_case() {
    let dup = FLEET.replace("[cq-team-a]", "[cq-team-a, cq-team-a]");
    let unknown = FLEET.replace("[cq-team-a]", "[cq-team-b]");
    let no_kueue = "spec:\n  scheduling:\n    queueing: none\n    kueue: null\n  tenants:\n    - { name: team-a, queue: null }\n    - { name: ops, queue: null }\n";
    let pytorch = format!("{FRAMEWORKS}[batch/job, kubeflow.org/pytorchjob]\n");
    let only_job = format!("{FRAMEWORKS}[batch/job]\n");
    let big = "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources:\n            - { pool: train, quota: { nvidia.com/gpu: 24 } }\n";
    let cases: &[Case] = &[
        (
            "GPU193",
            vec![("fleet.yaml", &dup)],
            "spec.multiKueue.clusterQueues[1]",
            &["`cq-team-a` is listed twice"],
        ),
        (
            "GPU193",
            vec![("fleet.yaml", &unknown)],
            "spec.multiKueue.clusterQueues[0]",
            &[
                "declares no ClusterQueue `cq-team-b`",
                "cq-local, cq-team-a",
            ],
        ),
        (
            "GPU193",
            vec![("hub", no_kueue)],
            "spec.multiKueue.manager",
            &["manager `hub` does not use Kueue"],
        ),
        (
            "GPU193",
            vec![("w2", no_kueue)],
            "spec.multiKueue.workers[1]",
            &["worker `w2` does not use Kueue"],
        ),
        (
            "GPU194",
            vec![(
                "w2",
                "spec:\n  tenants:\n    - { name: team-a, $patch: delete }\n",
            )],
            "spec.multiKueue.workers[1]",
            &["worker `w2` has no namespace `team-a`", "`team-a/default`"],
        ),
        (
            "GPU194",
            vec![(
                "w1",
                "spec:\n  tenants:\n    - { name: team-a, queue: null }\n",
            )],
            "spec.multiKueue.workers[0]",
            &["has namespace `team-a` (tenant `team-a`) without a queue"],
        ),
        (
            "GPU195",
            vec![("hub", &pytorch)],
            "spec.multiKueue.workers[1]",
            &[
                "enables `kubeflow.org/pytorchjob`",
                "which worker `w2` does not (Kueue's chart default list",
            ],
        ),
        (
            "GPU195",
            vec![("w1", &only_job)],
            "spec.multiKueue.workers[0]",
            &[
                "`jobset.x-k8s.io/jobset`",
                "chart default list",
                "`w1`'s MultiKueueCluster stays inactive",
            ],
        ),
        (
            "GPU196",
            vec![("hub", big)],
            "spec.multiKueue.clusterQueues[0]",
            &[
                "up to 24 of `nvidia.com/gpu`",
                "hold 16 in all",
                "`w1`: cq-team-a; `w2`: cq-team-a",
            ],
        ),
    ];
    for (rule, edits, path, words) in cases {
        let got = checked(edits, *rule != "GPU194");
        assert!(
            got.iter()
                .any(|(r, p, m)| r == rule && p == path && words.iter().all(|w| m.contains(w))),
            "{rule} at {path} saying {words:?} for {edits:?}: {got:#?}"
        );
    }
    // The warning is a warning; the errors stop `fleet plan` and `fleet apply`.
    let w = gpuctl_pipeline::validate::registry::rule("GPU196").unwrap();
    assert_eq!(w.severity, gpuctl_model::located::Severity::Warning);
}

/// What the blueprint cannot say, gpuctl guarantees: over every cluster's rendered output (the
/// example fleet and this one), no worker ClusterQueue carries an admission check, each
/// dispatching ClusterQueue of the manager carries exactly one, the MultiKueue check, at
/// ClusterQueue level (no `onFlavors`), and the manager has no other AdmissionCheck (so none
/// beside a ProvisioningRequest check).
#[test]
fn rendered_fleets_carry_one_multikueue_check_per_dispatching_cluster_queue_and_none_on_workers() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../blueprints/fleet/fleet.yaml");
    let d = fleet_dir(&[]);
    let catalog = Catalog::embedded();
    let controller = &catalog.queueing().multikueue.controller_name;
    for path in [example, d.path().join("fleet.yaml")] {
        let l = load(&path, std::fs::read(&path).unwrap(), catalog).expect("a fleet");
        let mk = l.fleet.spec.multi_kueue.clone().expect("MultiKueue");
        let mut dispatching_seen = 0;
        for (i, c) in l.fleet.spec.clusters.iter().enumerate() {
            let loaded = l.load_cluster(i).unwrap().map_err(|b| b.report).unwrap();
            let valid = gpuctl_pipeline::validate::validate(loaded, catalog, opts())
                .unwrap_or_else(|r| panic!("{}: {:?}", c.name, r.findings));
            let mut set = gpuctl_pipeline::render::render(
                &valid,
                catalog,
                &gpuctl_pipeline::render::Templates::embedded(),
            )
            .unwrap();
            crate::multikueue::add(&l.fleet, &c.name, l.manager_frameworks(), &mut set.objects);
            let checks: Vec<_> = set
                .objects
                .iter()
                .filter(|o| o.kind == "AdmissionCheck")
                .collect();
            for o in set.objects.iter().filter(|o| o.kind == "ClusterQueue") {
                let spec = &o.manifest["spec"];
                assert!(spec.get("admissionChecks").is_none(), "{}: {o:?}", c.name);
                let strategy = spec.get("admissionChecksStrategy");
                if c.name == mk.manager && mk.cluster_queues.contains(&o.name) {
                    dispatching_seen += 1;
                    let list = strategy
                        .and_then(|s| s["admissionChecks"].as_array())
                        .unwrap();
                    assert_eq!(list.len(), 1, "{}: {o:?}", c.name);
                    assert!(list[0].get("onFlavors").is_none(), "{o:?}");
                    let name = list[0]["name"].as_str().unwrap();
                    let ac = checks
                        .iter()
                        .find(|a| a.name == name)
                        .expect("its AdmissionCheck");
                    assert_eq!(&ac.manifest["spec"]["controllerName"], controller.as_str());
                } else {
                    assert!(strategy.is_none(), "{}: {o:?}", c.name);
                }
            }
            let expected = usize::from(c.name == mk.manager);
            assert_eq!(checks.len(), expected, "{}: {checks:?}", c.name);
        }
        assert_eq!(
            dispatching_seen,
            mk.cluster_queues.len(),
            "{}",
            path.display()
        );
    }
}
