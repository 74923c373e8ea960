//! Issue 10 item 3: credentials never appear in any printed plan (human, Markdown, JSON), neither
//! the blueprint's new values nor the live release's old ones, while the saved plan keeps what
//! apply needs. In-process, against a snapshot: no cluster.

use gpuctl::output::plan::{human, markdown};
use gpuctl::settings::Style;
use gpuctl_core::blueprint::InstallMode;
use gpuctl_core::live::release::LiveRelease;
use gpuctl_core::plan::{self, ActionKind, HelmAction, Plan, PlanOptions};
use gpuctl_core::render::{HelmRelease, Phase, RenderedObject, RenderedSet};
use gpuctl_core::snapshot::{self, SNAPSHOT_FORMAT_VERSION, Snapshot};
use serde_json::{Value, json};

/// Substrings of every credential below, old and new.
const CREDENTIALS: &[&str] = &["nvapi-abc", "hunter2", "abc123", "user:pass", "plainpw"];

/// Operator values carrying credentials every way the issue lists; `tag` makes old and new differ.
fn values(tag: &str) -> Value {
    json!({
        "driver": {
            "version": "580.95.05",
            "env": [
                {"name": "NGC_API_KEY", "value": format!("nvapi-abc{tag}")},
                {"name": "HTTPS_PROXY", "value": format!("http://user:pass@proxy{tag}:3128")},
                {"name": "DB_PASSWORD", "value": format!("plainpw{tag}")}
            ],
            "licensingConfig": {"secretName": "licence"}
        },
        "subchart": {"auth": {"password": format!("hunter2{tag}")}},
        "validator": {"args": [format!("--token=abc123{tag}"), "--v=2"]}
    })
}

fn driver_cr(tag: &str) -> Value {
    json!({
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": "cluster-default", "resourceVersion": "5"},
        "spec": {
            "env": values(tag)["driver"]["env"].clone(),
            "args": [format!("--token=abc123{tag}")]
        }
    })
}

fn object(manifest: Value) -> RenderedObject {
    RenderedObject {
        phase: Phase::Operator,
        api_version: manifest["apiVersion"].as_str().unwrap().into(),
        kind: manifest["kind"].as_str().unwrap().into(),
        namespace: manifest["metadata"]["namespace"]
            .as_str()
            .map(str::to_string),
        name: manifest["metadata"]["name"].as_str().unwrap().into(),
        manifest,
    }
}

fn set() -> RenderedSet {
    let mut cr = driver_cr("");
    cr["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    RenderedSet {
        releases: vec![],
        undeclared: vec![],
        blueprint: "secrets".into(),
        objects: vec![
            object(cr),
            object(json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "proxy", "namespace": "gpu-operator"},
                "data": {
                    "HTTPS_PROXY": "http://user:pass@proxy:3128",
                    "config.yaml": "registry:\n  password: hunter2\n"
                }
            })),
        ],
        node_patches: vec![],
        helm: HelmRelease {
            stack: Default::default(),
            release: "gpu-operator".into(),
            chart: "nvidia/gpu-operator".into(),
            version: "v26.7.0".into(),
            namespace: "gpu-operator".into(),
            install: InstallMode::Helm,
            values: values(""),
            source: Default::default(),
        },
        documents: Default::default(),
    }
}

fn live_release(values: Value) -> LiveRelease {
    LiveRelease {
        revision: 3,
        status: "deployed".into(),
        chart: "gpu-operator".into(),
        chart_version: "v26.7.0".into(),
        values,
    }
}

fn snapshot_plan() -> Plan {
    let mut snap = Snapshot {
        format_version: SNAPSHOT_FORMAT_VERSION,
        fingerprint: Some("abc".into()),
        helm_release: Some(live_release(values("-old"))),
        ..Snapshot::default()
    };
    snap.objects.insert(
        snapshot::key(
            "nvidia.com/v1alpha1",
            "NVIDIADriver",
            None,
            "cluster-default",
        ),
        driver_cr("-old"),
    );
    let set = set();
    let view = snap.live_view(&plan::parent_of(&set).id());
    plan::plan(&set, &view, PlanOptions::default()).expect("plan")
}

fn assert_masked(what: &str, text: &str) {
    for c in CREDENTIALS {
        assert!(!text.contains(c), "{what} shows `{c}`:\n{text}");
    }
}

#[test]
fn issue_10_printed_plans_never_show_credentials() {
    let p = snapshot_plan();
    // The credentials changed, so the plan must still say so: diffed raw, masked after.
    let release = p.helm_release.as_ref().expect("release planned");
    assert_eq!(release.action, HelmAction::Upgrade);
    let paths: Vec<&str> = release.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "driver.env[0].value",
            "driver.env[1].value",
            "driver.env[2].value",
            "subchart.auth.password",
            "validator.args[0]",
        ]
    );
    assert_eq!(p.actions[0].action, ActionKind::Update, "{:?}", p.actions);

    for verbose in [false, true] {
        let text = human(&p, Style::Plain, verbose);
        assert_masked("human", &text);
        assert!(
            text.contains("~ driver.env[2].value: \"(sensitive)\" -> \"(sensitive)\""),
            "{text}"
        );
        assert!(
            text.contains("\"http://user:(sensitive)@proxy-old:3128\" -> \"http://user:(sensitive)@proxy:3128\""),
            "a proxy URL stays readable: {text}"
        );
    }
    assert_masked("markdown", &markdown(&p));
    let json = p.to_json();
    assert_masked("json", &json);
    assert!(
        json.contains("\"secretName\": \"licence\""),
        "references stay: {json}"
    );
}

#[test]
fn issue_10_the_printed_json_plan_cannot_be_applied_the_saved_one_round_trips() {
    let p = snapshot_plan();
    let refused = Plan::from_json(&p.to_json()).unwrap_err().to_string();
    assert!(refused.contains("--out"), "{refused}");
    let saved = p.to_saved_json();
    assert!(
        saved.contains("hunter2"),
        "apply sends the values as rendered"
    );
    assert_eq!(Plan::from_json(&saved).expect("round trip"), p);
    // Only what apply sends is in the clear; the changes a reviewer reads are masked.
    let v: Value = serde_json::from_str(&saved).unwrap();
    let changes: Vec<&Value> = v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["changes"])
        .chain([&v["helm_release"]["changes"]])
        .collect();
    assert_masked(
        "changes in the saved plan",
        &serde_json::to_string(&changes).unwrap(),
    );
}

#[test]
fn issue_10_installing_shows_no_credentials_either() {
    let (release, _) = plan::helm_plan(&set().helm, None);
    let release = release.unwrap();
    assert_eq!(release.action, HelmAction::Install);
    let shown = serde_json::to_string(&release.changes).unwrap();
    assert_masked("install changes", &shown);
    // Only a password changed: still an upgrade, though both sides print the same.
    let mut new = values("");
    new["subchart"]["auth"]["password"] = json!("hunter3");
    let mut helm = set().helm;
    helm.values = new;
    let (release, _) = plan::helm_plan(&helm, Some(&live_release(values(""))));
    let release = release.unwrap();
    assert_eq!(release.action, HelmAction::Upgrade);
    assert_eq!(
        serde_json::to_value(&release.changes).unwrap(),
        json!([{"path": "subchart.auth.password", "before": "(sensitive)", "after": "(sensitive)"}])
    );
}
