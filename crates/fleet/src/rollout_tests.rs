//! `fleet apply`'s gate logic as a pure function: per-cluster observed state in, the next wave
//! and what holds it back out.

use super::*;
use crate::model::Fleet;

/// a (wave canary, bake 10m), b and c (wave rest; rest's gates as given).
fn fleet(rest_gates: &str) -> Fleet {
    let text = format!(
        "apiVersion: gpuctl.dev/v1alpha1
kind: Fleet
metadata: {{ name: f }}
spec:
  clusters:
    - {{ name: a, blueprint: a.yaml, context: ctx-a }}
    - {{ name: b, blueprint: b.yaml, context: ctx-b }}
    - {{ name: c, blueprint: c.yaml, context: ctx-c }}
  waves:
    - {{ name: canary, clusters: [a], bake: 10m }}
    - {{ name: rest, selector: {{}}{rest_gates} }}
"
    );
    serde_saphyr::from_str(&text).expect("fleet parses")
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const NOW: &str = "2026-12-04T06:00:00Z";

/// A cluster at its revision, applied an hour before [`NOW`], converged, doctor clean.
fn good(name: &str) -> Observed {
    Observed {
        name: name.into(),
        context: Some(format!("ctx-{name}")),
        blueprint: format!("{name}.yaml"),
        want: "sha256:1111111111111111".into(),
        stamp: Ok(Some(Stamp {
            revision: "sha256:1111111111111111".into(),
            applied_at: Some(at("2026-12-04T05:00:00Z")),
        })),
        converged: Check::Passed,
        doctor: Check::Passed,
    }
}

fn gates(blocks: &[Block]) -> Vec<(&str, &str)> {
    blocks
        .iter()
        .map(|b| (b.cluster.as_str(), b.gate))
        .collect()
}

#[test]
fn the_first_wave_not_at_its_revision_is_next() {
    let f = fleet("");
    let w = Waves::of(&f);
    let mut obs = vec![good("a"), good("b"), good("c")];
    assert_eq!(w.next(&obs), None, "every cluster at its revision");
    obs[2].stamp = Ok(None);
    assert_eq!(w.next(&obs), Some(1));
    obs[0].want = "sha256:2222".into();
    assert_eq!(w.next(&obs), Some(0), "the canary first");
    // A cluster never read counts as not at its revision.
    assert_eq!(w.next(&obs[1..]), Some(0));
    // An unreadable stamp too.
    let mut obs = vec![good("a"), good("b"), good("c")];
    obs[1].stamp = Err("connection refused".into());
    assert_eq!(w.next(&obs), Some(1));
}

#[test]
fn the_first_wave_is_never_held_back() {
    let f = fleet("");
    let w = Waves::of(&f);
    let mut a = good("a");
    a.stamp = Ok(None);
    a.doctor = Check::Failed("x".into());
    assert!(blocks(&w, 0, &[a], at(NOW), "fleet.yaml").is_empty());
}

#[test]
fn a_healthy_baked_canary_lets_the_next_wave_start() {
    let f = fleet("");
    let w = Waves::of(&f);
    let obs = [good("a"), good("b")];
    assert_eq!(blocks(&w, 1, &obs, at(NOW), "fleet.yaml"), vec![]);
    // Clusters of the wave itself and later are not gated.
    let mut later = good("b");
    later.stamp = Ok(None);
    assert!(blocks(&w, 1, &[good("a"), later], at(NOW), "fleet.yaml").is_empty());
}

#[test]
fn a_canary_without_the_revision_holds_the_next_wave_and_says_what_to_run() {
    let f = fleet("");
    let w = Waves::of(&f);
    let mut a = good("a");
    a.stamp = Ok(None);
    let b = blocks(&w, 1, &[a.clone()], at(NOW), "fleet.yaml");
    assert_eq!(gates(&b), vec![("a", "revision")]);
    assert_eq!(b[0].wave, "canary");
    assert!(
        b[0].why.contains("carries no fleet revision"),
        "{}",
        b[0].why
    );
    assert_eq!(b[0].next, "`gpuctl fleet apply fleet.yaml --wave canary`");

    a.stamp = Ok(Some(Stamp {
        revision: "sha256:0000000000000000000".into(),
        applied_at: Some(at("2026-12-04T05:00:00Z")),
    }));
    let b = blocks(&w, 1, &[a.clone()], at(NOW), "fleet.yaml");
    assert_eq!(gates(&b), vec![("a", "revision")]);
    assert_eq!(
        b[0].why,
        "carries revision sha256:000000000000, the fleet renders sha256:111111111111"
    );

    a.stamp = Err("context ctx-a: connection refused".into());
    let b = blocks(&w, 1, &[a], at(NOW), "fleet.yaml");
    assert_eq!(gates(&b), vec![("a", "revision")]);
    assert!(b[0].next.contains("ctx-a"));

    // Not read at all.
    let b = blocks(&w, 1, &[], at(NOW), "fleet.yaml");
    assert_eq!(gates(&b), vec![("a", "revision")]);
}

#[test]
fn bake_time_counts_from_the_applied_at_stamp() {
    let f = fleet("");
    let w = Waves::of(&f);
    let mut a = good("a");
    a.stamp = Ok(Some(Stamp {
        revision: a.want.clone(),
        applied_at: Some(at("2026-12-04T05:51:00Z")),
    }));
    let b = blocks(&w, 1, &[a.clone()], at(NOW), "fleet.yaml");
    assert_eq!(gates(&b), vec![("a", "bake")]);
    assert_eq!(
        b[0].next, "wait 1m for bake (until 2026-12-04T06:01:00Z)",
        "9 of 10 minutes passed"
    );
    assert!(b[0].why.contains("bakes 10m: 1m left"), "{}", b[0].why);
    // 9m 30s left rounds up to 10m, never down to a wait too short.
    let b = blocks(
        &w,
        1,
        &[a.clone()],
        at("2026-12-04T05:51:30Z"),
        "fleet.yaml",
    );
    assert!(b[0].next.starts_with("wait 10m for bake"), "{}", b[0].next);
    // Exactly the bake time: done.
    assert!(
        blocks(
            &w,
            1,
            &[a.clone()],
            at("2026-12-04T06:01:00Z"),
            "fleet.yaml"
        )
        .is_empty()
    );
    // A stamp a second ahead of this clock waits the bake time, never more.
    let b = blocks(
        &w,
        1,
        &[a.clone()],
        at("2026-12-04T05:50:59Z"),
        "fleet.yaml",
    );
    assert_eq!(
        b[0].next, "wait 10m for bake (until 2026-12-04T06:01:00Z)",
        "clock behind the stamp"
    );
    assert!(b[0].why.contains("bakes 10m: 10m left"), "{}", b[0].why);
    // No applied-at time: the bake cannot be measured, so it holds.
    a.stamp = Ok(Some(Stamp {
        revision: a.want.clone(),
        applied_at: None,
    }));
    let b = blocks(&w, 1, &[a], at(NOW), "fleet.yaml");
    assert_eq!(gates(&b), vec![("a", "bake")]);
}

#[test]
fn a_plan_with_changes_or_a_doctor_error_holds_the_next_wave() {
    let f = fleet("");
    let w = Waves::of(&f);
    let mut a = good("a");
    a.converged = Check::Failed("its plan has 2 changes".into());
    a.doctor = Check::Failed("doctor reports 1 error: GPU231 ClusterPolicy p is notReady".into());
    let b = blocks(&w, 1, &[a], at(NOW), "fleet.yaml");
    assert_eq!(gates(&b), vec![("a", "converged"), ("a", "doctor")]);
    assert_eq!(
        b[0].next,
        "`gpuctl fleet plan fleet.yaml` shows it; `gpuctl fleet apply fleet.yaml --wave canary` applies it"
    );
    assert_eq!(
        b[1].next,
        "`gpuctl doctor a.yaml --context ctx-a` says what is wrong; fix it, then run this again"
    );
    assert!(b[1].why.contains("GPU231"));
}

#[test]
fn a_wave_checks_only_the_gates_it_lists_and_both_when_it_lists_none() {
    let doctor_only = fleet(", gates: [doctor]");
    let w = Waves::of(&doctor_only);
    assert_eq!(w.gates(1), vec![Gate::Doctor]);
    let mut a = good("a");
    a.converged = Check::Failed("its plan has 2 changes".into());
    assert!(blocks(&w, 1, &[a.clone()], at(NOW), "f.yaml").is_empty());
    a.doctor = Check::NotRun;
    // A gate that was asked for and not run holds the wave (never passes silently).
    assert_eq!(
        gates(&blocks(&w, 1, &[a], at(NOW), "f.yaml")),
        vec![("a", "doctor")]
    );
    let both = fleet("");
    assert_eq!(
        Waves::of(&both).gates(1),
        vec![Gate::Converged, Gate::Doctor]
    );
    // maxParallel: 1 without it, at least 1, as given otherwise.
    assert_eq!(Waves::of(&both).max_parallel(1), 1);
    assert_eq!(Waves::of(&fleet(", maxParallel: 0")).max_parallel(1), 1);
    assert_eq!(Waves::of(&fleet(", maxParallel: 3")).max_parallel(1), 3);
    assert_eq!(Waves::of(&both).max_parallel(7), 1);
}

#[test]
fn every_block_of_every_earlier_cluster_is_reported_in_wave_order() {
    let text = "apiVersion: gpuctl.dev/v1alpha1
kind: Fleet
metadata: { name: f }
spec:
  clusters:
    - { name: a, blueprint: a.yaml }
    - { name: b, blueprint: b.yaml }
    - { name: c, blueprint: c.yaml }
  waves:
    - { name: one, clusters: [a] }
    - { name: two, clusters: [b] }
    - { name: three, clusters: [c] }
";
    let f: Fleet = serde_saphyr::from_str(text).unwrap();
    let w = Waves::of(&f);
    assert_eq!(w.index("three"), Some(2));
    assert_eq!(w.index("four"), None);
    let mut a = good("a");
    a.doctor = Check::Failed("x".into());
    let mut b = good("b");
    b.stamp = Ok(None);
    let blocks = blocks(&w, 2, &[b, a], at(NOW), "f.yaml");
    assert_eq!(gates(&blocks), vec![("a", "doctor"), ("b", "revision")]);
    assert_eq!(blocks[1].wave, "two");
    assert_eq!(
        blocks[0].next,
        "`gpuctl doctor a.yaml --context ctx-a` says what is wrong; fix it, then run this again"
    );
}

#[test]
fn the_revision_is_a_stable_hash_of_what_is_applied() {
    let bp = gpuctl_model::blueprint::load_bytes(
        "bp.yaml",
        include_bytes!("../../../blueprints/mixed-lab-fixed.yaml").to_vec(),
    )
    .expect("loads");
    let opts = gpuctl_pipeline::validate::Options {
        today: jiff::civil::date(2026, 12, 3),
    };
    let render = |l: gpuctl_model::blueprint::Loaded| {
        let v = gpuctl_pipeline::validate::validate(
            l,
            gpuctl_model::profiles::Catalog::embedded(),
            opts,
        )
        .expect("valid");
        let templates = gpuctl_pipeline::render::Templates::embedded();
        gpuctl_pipeline::render::render(&v, gpuctl_model::profiles::Catalog::embedded(), &templates)
            .expect("renders")
    };
    let set = render(bp.clone());
    let r = revision(&set);
    assert!(r.starts_with("sha256:") && r.len() == 7 + 64, "{r}");
    assert_eq!(revision(&render(bp)), r, "deterministic");
    let mut runbooks = set.clone();
    runbooks
        .documents
        .insert("runbooks/x.md".into(), "changed".into());
    assert_eq!(revision(&runbooks), r, "runbooks are not applied");
    let mut changed = set.clone();
    changed.objects.pop();
    assert_ne!(revision(&changed), r);
    assert_eq!(short(&r).len(), 7 + 12);
    assert_eq!(human(0), "0s");
    assert_eq!(human(59), "59s");
    assert_eq!(human(61), "2m");
    assert_eq!(human(5400), "1h30m");
    assert_eq!(human(7200), "2h");
}

#[test]
fn the_converged_gate_passes_an_empty_plan_without_error_findings_only() {
    use gpuctl_plan::plan::{PlanFinding, Summary};
    let warning = PlanFinding::warning("GPU400", "2 of 3 nodes carry the label".into());
    let error = PlanFinding::error("GPU401", "the API server refused the dry run".into());
    let changes = Summary {
        create: 2,
        adopt: 1,
        update: 3,
        delete: 1,
        uninstall: 1,
        nodes: 4,
        helm: 1,
        conflict: 5,
        unchanged: 9,
    };
    let unchanged = Summary {
        unchanged: 9,
        ..Summary::default()
    };
    for (case, findings, summary, want) in [
        ("empty plan", vec![], unchanged, Check::Passed),
        (
            "a warning does not hold",
            vec![warning.clone()],
            unchanged,
            Check::Passed,
        ),
        (
            "an error finding holds",
            vec![warning, error.clone(), error.clone()],
            unchanged,
            Check::Failed("its plan has 2 error finding(s)".into()),
        ),
        (
            "errors are said before changes",
            vec![error],
            changes,
            Check::Failed("its plan has 1 error finding(s)".into()),
        ),
        (
            "changes hold, adoptions count as creates and uninstalls as deletes",
            vec![],
            changes,
            Check::Failed("its plan is not empty: 3 to create, 3 to update, 2 to delete, 4 node(s), 1 release(s), 5 conflict(s)".into()),
        ),
        (
            "one Helm release to upgrade is a change",
            vec![],
            Summary {
                helm: 1,
                ..Summary::default()
            },
            Check::Failed("its plan is not empty: 0 to create, 0 to update, 0 to delete, 0 node(s), 1 release(s), 0 conflict(s)".into()),
        ),
    ] {
        assert_eq!(converged_check(&findings, &summary), want, "{case}");
    }
}

#[test]
fn the_doctor_gate_passes_without_an_error_and_names_the_first_three() {
    use gpuctl_model::located::Severity::{Error, Info, Warning};
    let errors = [
        (Error, "GPU231", "ClusterPolicy p is notReady"),
        (Warning, "GPU240", "a pool wastes GPUs"),
        (Error, "GPU200", "pod a/b is Pending"),
        (Error, "GPU201", "pod a/c is Pending"),
        (Error, "GPU202", "node n is NotReady"),
        (Error, "GPU203", "node m is NotReady"),
    ];
    for (case, findings, want) in [
        ("no finding", &[][..], Check::Passed),
        (
            "warnings and infos do not hold",
            &[(Warning, "GPU240", "w"), (Info, "GPU241", "i")][..],
            Check::Passed,
        ),
        (
            "one error",
            &errors[..2],
            Check::Failed("doctor reports 1 error(s): GPU231 ClusterPolicy p is notReady".into()),
        ),
        (
            "three errors, in the report's order",
            &errors[..4],
            Check::Failed("doctor reports 3 error(s): GPU231 ClusterPolicy p is notReady; GPU200 pod a/b is Pending; GPU201 pod a/c is Pending".into()),
        ),
        (
            "more than three: the first three, then a count",
            &errors[..],
            Check::Failed("doctor reports 5 error(s): GPU231 ClusterPolicy p is notReady; GPU200 pod a/b is Pending; GPU201 pod a/c is Pending; 2 more".into()),
        ),
    ] {
        assert_eq!(doctor_check(findings.iter().copied()), want, "{case}");
    }
}
