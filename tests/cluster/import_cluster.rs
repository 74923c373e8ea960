//! Brownfield round trip against real API servers: for every example blueprint, a cluster built by
//! hand (its rendered objects applied with `kubectl apply --server-side` under another field
//! manager, its nodes as GPU Feature Discovery labels them, the real GPU Operator chart installed
//! with the real helm and the rendered values), then `gpuctl import`, `gpuctl validate` of what it
//! wrote, `gpuctl apply` refusing without `--adopt`, `gpuctl apply --adopt`, and `gpuctl plan
//! --detailed-exitcode` exiting 0. No field value of any adopted object changes: each one's
//! content, minus `managedFields`, `resourceVersion` and the ApplySet label, is the same before
//! and after, and Helm keeps one revision.
//!
//! Import reads the whole cluster, so each example gets a kube-apiserver of its own (the harness in
//! a temporary directory): the shared test server holds other tests' nodes and objects, which
//! would be imported too. The stand-ins are the harness's: no controllers run (helm installs without
//! waiting; the chart's CRD upgrade Job is turned off, as in tests/cluster/cli_cluster.rs).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuctl_core::import::fixture;
use gpuctl_core::render::{RenderedSet, Templates};
use gpuctl_test_skip::needs_test_cluster;
use serde_json::{Value, json};
use support::gpuctl::{Gpuctl, TODAY};

const CHART: &str = "gpu-operator-v26.7.0.tgz";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A kube-apiserver + etcd of this test's own, stopped when dropped.
struct Harness {
    dir: PathBuf,
    env: Vec<(String, String)>,
}

impl Harness {
    fn up(dir: &Path) -> Harness {
        let o = Command::new(repo().join("tools/kube-harness/run"))
            .args(["up", "--dir"])
            .arg(dir)
            .output()
            .expect("the harness script runs");
        assert!(
            o.status.success(),
            "harness up failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let env = std::fs::read_to_string(dir.join("env"))
            .expect("the harness writes its env")
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Harness {
            dir: dir.to_path_buf(),
            env,
        }
    }

    fn var(&self, key: &str) -> String {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("the harness env has no {key}"))
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .current_dir(&self.dir)
            .env("KUBECONFIG", self.var("GPUCTL_TEST_KUBECONFIG"))
            .env("GPUCTL_TODAY", "2026-11-30")
            .output()
            .unwrap_or_else(|e| panic!("{program} runs: {e}"))
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.run(&self.var("GPUCTL_KUBECTL"), args)
    }

    fn gpuctl(&self, args: &[&str]) -> Output {
        Gpuctl::new(args)
            .current_dir(&self.dir)
            .env("KUBECONFIG", self.var("GPUCTL_TEST_KUBECONFIG"))
            .today(TODAY)
            .output()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("tools/kube-harness/run"))
            .args(["down", "--dir"])
            .arg(&self.dir)
            .output();
    }
}

fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn code(o: &Output, expected: i32, what: &str) {
    assert_eq!(
        o.status.code(),
        Some(expected),
        "{what}\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The example as a team would have it installed: from the real chart archive beside it, without
/// the chart's CRD upgrade Job (no controller runs Jobs here).
fn local_example(dir: &Path, file: &str, namespace: Option<&str>) -> String {
    let shared = std::env::var("GPUCTL_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join("../shared"));
    std::fs::copy(
        shared.join("upstream/gpu-operator/v26.7.0").join(CHART),
        dir.join(CHART),
    )
    .expect("the real chart archive is in ../shared/upstream");
    let text = std::fs::read_to_string(repo().join("blueprints").join(file)).unwrap();
    // Drop a chart source the example names (air-gapped) and any values; name the archive.
    let mut out = String::new();
    let mut skip_indent: Option<usize> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(i) = skip_indent {
            if line.trim().is_empty() || indent > i {
                continue;
            }
            skip_indent = None;
        }
        if indent == 4
            && (line.trim_start().starts_with("chart:") || line.trim_start().starts_with("values:"))
        {
            skip_indent = Some(indent);
            continue;
        }
        if namespace.is_some() && indent == 4 && line.trim_start().starts_with("namespace:") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if line == "  gpuOperator:" {
            out.push_str(&format!(
                "    chart: {{ path: {CHART} }}\n    values: {{ operator: {{ upgradeCRD: false }} }}\n"
            ));
            if let Some(ns) = namespace {
                out.push_str(&format!("    namespace: {ns}\n"));
            }
        }
    }
    out
}

fn render(text: &str) -> (gpuctl_core::blueprint::Blueprint, RenderedSet) {
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let loaded = gpuctl_core::blueprint::load_str("example.yaml", text).expect("loads");
    let v = gpuctl_core::validate::validate(
        loaded,
        catalog,
        gpuctl_core::validate::Options {
            today: jiff::civil::date(2026, 11, 30),
        },
    )
    .unwrap_or_else(|r| panic!("validates: {:#?}", r.findings));
    let bp = v.blueprint().clone();
    let set = gpuctl_core::render::render(&v, catalog, &Templates::embedded()).expect("renders");
    (bp, set)
}

fn write_list(path: &Path, items: Vec<Value>) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(path, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
}

/// Every rendered object as the server has it, minus what adoption may change.
fn contents(h: &Harness, set: &RenderedSet) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for o in &set.objects {
        let mut args = vec!["get", "-o", "json"];
        let resource = format!(
            "{}.{}",
            o.kind.to_lowercase(),
            o.api_version.rsplit_once('/').map_or("", |(g, _)| g)
        );
        let resource = resource.trim_end_matches('.').to_string();
        args.push(&resource);
        args.push(&o.name);
        if let Some(ns) = &o.namespace {
            args.push("-n");
            args.push(ns);
        }
        let text = ok(
            &h.kubectl(&args),
            &format!("kubectl get {resource} {}", o.name),
        );
        let mut v: Value = serde_json::from_str(&text).unwrap();
        let meta = v["metadata"].as_object_mut().unwrap();
        meta.remove("managedFields");
        meta.remove("resourceVersion");
        if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            labels.remove(gpuctl_core::applyset::PART_OF);
            // An object without labels before has only the membership label after.
            if labels.is_empty() {
                meta.remove("labels");
            }
        }
        out.push((o.display_id(), v));
    }
    out
}

/// How the hand-built cluster's operator release is installed: under gpuctl's release name in the
/// blueprint's namespace, or under another name in another namespace.
#[derive(Clone, Copy)]
struct Release {
    name: &'static str,
    namespace: Option<&'static str>,
}

const GPUCTLS_RELEASE: Release = Release {
    name: "gpu-operator",
    namespace: None,
};

fn round_trip(file: &str, release: Release) {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::up(&dir.path().join("harness"));
    let work = dir.path();
    let text = local_example(work, file, release.namespace);
    let (bp, set) = render(&text);

    // The hand-built cluster: namespaces, then everything else, then the nodes, then helm.
    let (namespaces, rest): (Vec<_>, Vec<_>) =
        set.objects.iter().partition(|o| o.kind == "Namespace");
    write_list(
        &work.join("namespaces.json"),
        namespaces
            .iter()
            .map(|o| fixture::unowned(&o.manifest))
            .collect(),
    );
    write_list(
        &work.join("objects.json"),
        rest.iter().map(|o| fixture::unowned(&o.manifest)).collect(),
    );
    write_list(&work.join("nodes.json"), fixture::nodes(&bp, &set));
    for f in ["namespaces.json", "objects.json", "nodes.json"] {
        let path = work.join(f);
        ok(
            &h.kubectl(&[
                "apply",
                "--server-side",
                "--field-manager=someone-else",
                "-f",
                path.to_str().unwrap(),
            ]),
            &format!("{file}: kubectl apply {f}"),
        );
    }
    if bp.spec.gpu_operator.install == gpuctl_core::blueprint::InstallMode::Helm {
        std::fs::write(
            work.join("values.json"),
            serde_json::to_vec(&set.helm.values).unwrap(),
        )
        .unwrap();
        ok(
            &h.run(
                &h.var("GPUCTL_HELM"),
                &[
                    "install",
                    release.name,
                    work.join(CHART).to_str().unwrap(),
                    "-n",
                    &set.helm.namespace,
                    "--values",
                    work.join("values.json").to_str().unwrap(),
                ],
            ),
            &format!("{file}: helm install"),
        );
    }
    let before = contents(&h, &set);

    // Import, validate, adopt.
    let imported = work.join("imported.yaml");
    let imported = imported.to_str().unwrap();
    let o = h.gpuctl(&["import", "--out", imported]);
    ok(&o, &format!("{file}: import"));
    let warnings = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        !warnings.contains("a plan of this blueprint would"),
        "{file}: import says its plan changes something:\n{warnings}"
    );
    let yaml = std::fs::read_to_string(imported).unwrap();
    let helm = bp.spec.gpu_operator.install == gpuctl_core::blueprint::InstallMode::Helm;
    if helm && release.name != "gpu-operator" {
        // Found by its chart; gpuctl's helm mode manages `gpu-operator`, so this one is left alone.
        assert!(
            warnings.contains(&format!(
                "installed by Helm as release `{}/{}`",
                set.helm.namespace, release.name
            )),
            "{file}: {warnings}"
        );
        assert!(yaml.contains("    install: none\n"), "{file}: {yaml}");
    }
    if bp.spec.network_operator.is_some() {
        assert!(yaml.contains("\n  networkOperator:\n"), "{file}: {yaml}");
    }
    assert!(
        !warnings.contains("neither changes nor prunes"),
        "{file}: an object was left unmapped:\n{warnings}"
    );
    ok(
        &h.gpuctl(&["validate", imported]),
        &format!("{file}: validate\n{yaml}"),
    );
    one_capture_serves_import_doctor_and_status(
        &h,
        work,
        file,
        imported,
        &yaml,
        fixture::nodes(&bp, &set).len(),
    );
    let o = h.gpuctl(&["plan", imported, "--detailed-exitcode"]);
    code(&o, 2, &format!("{file}: the first plan adopts"));
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(shown.contains(" adopt "), "{file}: {shown}");
    assert!(
        !shown.contains("~ update") && !shown.contains("! conflict") && !shown.contains("+ create"),
        "{file}: only adoptions expected:\n{shown}\n{yaml}"
    );
    let o = h.gpuctl(&["apply", imported, "--yes"]);
    code(&o, 1, &format!("{file}: apply without --adopt"));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("re-run with --adopt"),
        "{file}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    ok(
        &h.gpuctl(&["apply", imported, "--adopt", "--yes"]),
        &format!("{file}: apply --adopt"),
    );
    let o = h.gpuctl(&["plan", imported, "--detailed-exitcode"]);
    code(&o, 0, &format!("{file}: the plan after adoption is empty"));
    // Idempotent: adopting again changes nothing either.
    ok(
        &h.gpuctl(&["apply", imported, "--adopt", "--yes"]),
        &format!("{file}: second apply --adopt"),
    );

    let after = contents(&h, &set);
    for ((id, b), (_, a)) in before.iter().zip(&after) {
        assert_eq!(b, a, "{file}: adoption changed {id}");
    }
    // Adopted objects are members of the set now, with gpuctl a manager of their fields.
    let parent = gpuctl_core::plan::parent_of(&render(&yaml).1).id();
    let members = ok(
        &h.kubectl(&[
            "get",
            "priorityclasses,namespaces,resourcequotas,configmaps",
            "-A",
            "-l",
            &format!("{}={parent}", gpuctl_core::applyset::PART_OF),
            "-o",
            "name",
        ]),
        "members",
    );
    assert!(
        !members.trim().is_empty(),
        "{file}: no members after adoption"
    );
    if bp.spec.gpu_operator.install == gpuctl_core::blueprint::InstallMode::Helm {
        let revisions = ok(
            &h.kubectl(&[
                "get",
                "secrets",
                "-n",
                &set.helm.namespace,
                "-l",
                &format!("owner=helm,name={}", release.name),
                "-o",
                "name",
            ]),
            "helm revisions",
        );
        assert_eq!(
            revisions.lines().count(),
            1,
            "{file}: the release was upgraded during adoption"
        );
    }
}

/// Issue 41: `gpuctl snapshot --all` holds the diagnostics too, so the one capture of a cluster CI
/// cannot reach serves `import --snapshot` (the same blueprint as the live import), `status
/// --snapshot` (every node of the cluster in its pools) and `doctor --snapshot`.
fn one_capture_serves_import_doctor_and_status(
    h: &Harness,
    work: &Path,
    file: &str,
    imported: &str,
    live_yaml: &str,
    nodes: usize,
) {
    let all = work.join("all.json");
    let all = all.to_str().unwrap();
    let o = h.gpuctl(&["snapshot", "--all", "--out", all]);
    ok(&o, &format!("{file}: snapshot --all"));
    let from_snapshot = work.join("imported-from-snapshot.yaml");
    ok(
        &h.gpuctl(&[
            "import",
            "--snapshot",
            all,
            "--out",
            from_snapshot.to_str().unwrap(),
        ]),
        &format!("{file}: import --snapshot"),
    );
    // The same blueprint; only the first comment line says where it came from.
    let body = |text: &str| text.split_once('\n').map(|(_, rest)| rest.to_owned());
    let snapshot_yaml = std::fs::read_to_string(&from_snapshot).unwrap();
    assert!(
        snapshot_yaml.starts_with("# Imported by `gpuctl import` from a snapshot captured at "),
        "{file}: {snapshot_yaml}"
    );
    assert_eq!(
        body(&snapshot_yaml),
        body(live_yaml),
        "{file}: the --all snapshot imports as the live cluster does"
    );
    let status = ok(
        &h.gpuctl(&["status", imported, "--snapshot", all, "-o", "json"]),
        &format!("{file}: status --snapshot of a --all snapshot"),
    );
    let v: Value = serde_json::from_str(&status).unwrap();
    let pools = v["pools"].as_array().expect("status JSON has pools");
    let shown: usize = pools
        .iter()
        .map(|p| p["nodes"]["total"].as_u64().unwrap_or(0) as usize)
        .sum();
    assert_eq!(
        shown, nodes,
        "{file}: status --snapshot shows every node\n{status}"
    );
    let o = h.gpuctl(&["doctor", imported, "--snapshot", all, "-o", "json"]);
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{file}: doctor --snapshot of a --all snapshot: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_str(&report).expect("doctor prints its JSON report");
    assert!(v.get("findings").is_some(), "{file}: {report}");
}

/// The same switch as every cluster test: without a configured server, say so (or fail in CI).
fn no_test_cluster() -> bool {
    if std::env::var_os(support::cluster::KUBECONFIG_ENV).is_some() {
        return false;
    }
    assert!(
        !support::cluster::cluster_required(),
        "{} is not set, but CI/GPUCTL_REQUIRE_CLUSTER says cluster tests must run",
        support::cluster::KUBECONFIG_ENV
    );
    eprintln!("skipped: no test cluster");
    true
}

/// One test per example (each on a harness of its own), so the test runner spreads them over its
/// threads: as one loop they were the longest cluster test by far (issue 27).
macro_rules! round_trip_tests {
    ($($name:ident => $file:literal),* $(,)?) => {
        $(
            #[needs_test_cluster]
            #[test]
            fn $name() {
                if no_test_cluster() {
                    return;
                }
                round_trip($file, GPUCTLS_RELEASE);
            }
        )*
    };
}

round_trip_tests! {
    dgx_h100_training_round_trips_through_import_and_adoption => "dgx-h100-training.yaml",
    gb200_nvl72_training_round_trips_through_import_and_adoption => "gb200-nvl72-training.yaml",
    inference_mig_round_trips_through_import_and_adoption => "inference-mig.yaml",
    mixed_lab_fixed_round_trips_through_import_and_adoption => "mixed-lab-fixed.yaml",
    air_gapped_round_trips_through_import_and_adoption => "air-gapped.yaml",
}

/// The operator installed by the real helm as release `nvidia-gpu` in namespace `platform-gpu`:
/// import finds it by its chart, reads its values and namespace, and leaves the release alone
/// (`install: none`): adoption takes over the objects and never touches the release.
#[needs_test_cluster]
#[test]
fn a_release_under_another_name_and_namespace_is_found_by_its_chart() {
    if std::env::var_os(support::cluster::KUBECONFIG_ENV).is_none() {
        assert!(
            !support::cluster::cluster_required(),
            "{} is not set, but CI/GPUCTL_REQUIRE_CLUSTER says cluster tests must run",
            support::cluster::KUBECONFIG_ENV
        );
        eprintln!("skipped: no test cluster");
        return;
    }
    round_trip(
        "mixed-lab-fixed.yaml",
        Release {
            name: "nvidia-gpu",
            namespace: Some("platform-gpu"),
        },
    );
}
