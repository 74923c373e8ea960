//! Issue 41: the accounting PrometheusRule `gpuctl render` writes for
//! `tests/fixtures/accounting/blueprint.yaml` is accepted by the real PrometheusRule CRD
//! (prometheus-operator's, installed by the harness from `../shared/upstream/prometheus-operator`)
//! in a server-side dry run with strict field validation; the same object with a rule whose `for`
//! is not a Prometheus duration, or with a field the CRD does not have, is refused, so the check
//! can fail. Prometheus's own checks of the rules (`promtool check rules`, `promtool test rules`)
//! are in `tests/external/accounting_rules.rs`.

use crate::support;

use gpuctl_test_skip::needs_test_cluster;
use kube::api::{Patch, PatchParams};
use serde_json::Value;
use support::cluster::TestCluster;

fn rendered_rule(namespace: &str) -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/accounting/blueprint.yaml"
    );
    let catalog = gpuctl_core::profiles::Catalog::embedded();
    let loaded = gpuctl_core::blueprint::load_file(std::path::Path::new(path)).expect("loads");
    let v = gpuctl_core::validate::validate(
        loaded,
        catalog,
        gpuctl_core::validate::Options {
            today: jiff::civil::date(2026, 12, 6),
        },
    )
    .unwrap_or_else(|r| panic!("validates: {:#?}", r.findings));
    let set = gpuctl_core::render::render(&v, catalog, &gpuctl_core::render::Templates::embedded())
        .expect("renders");
    let mut rule = set
        .objects
        .iter()
        .find(|o| {
            o.kind == "PrometheusRule"
                && o.manifest["metadata"]["name"]
                    == gpuctl_core::render::accounting::PROMETHEUS_RULE
        })
        .unwrap_or_else(|| {
            panic!(
                "no accounting PrometheusRule among {:?}",
                set.objects.iter().map(|o| &o.kind).collect::<Vec<_>>()
            )
        })
        .manifest
        .clone();
    // Into this test's namespace (the CRD is namespaced; the rendered one is the monitoring one).
    rule["metadata"]["namespace"] = Value::from(namespace);
    rule
}

async fn dry_run(tc: &TestCluster, rule: &Value) -> kube::Result<kube::api::DynamicObject> {
    let api = tc.dynamic(
        "monitoring.coreos.com",
        "v1",
        "PrometheusRule",
        "prometheusrules",
        true,
    );
    let name = rule["metadata"]["name"].as_str().unwrap().to_owned();
    let params = PatchParams {
        dry_run: true,
        ..support::cluster::apply_params()
    };
    api.patch(&name, &params, &Patch::Apply(rule)).await
}

#[needs_test_cluster]
#[tokio::test]
async fn the_accounting_prometheus_rule_is_accepted_by_its_crd() {
    let Some(tc) =
        TestCluster::connect("the_accounting_prometheus_rule_is_accepted_by_its_crd").await
    else {
        return;
    };
    let rule = rendered_rule(&tc.namespace);
    let stored = dry_run(&tc, &rule)
        .await
        .unwrap_or_else(|e| panic!("the CRD refuses the rendered rule: {e}"));
    // Nothing pruned: every group and rule arrives as rendered.
    assert_eq!(stored.data["spec"], rule["spec"]);

    let mut bad_for = rule.clone();
    let alerts = bad_for["spec"]["groups"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|g| g["name"] == "gpuctl-accounting-alerts")
        .expect("an alert group");
    alerts["rules"][0]["for"] = Value::from("half an hour");
    let e = dry_run(&tc, &bad_for).await.expect_err("a bad duration");
    assert!(e.to_string().contains("for"), "{e}");

    let mut unknown = rule.clone();
    unknown["spec"]["groups"][0]["rules"][0]["severity"] = Value::from("warning");
    let e = dry_run(&tc, &unknown).await.expect_err("an unknown field");
    assert!(
        e.to_string().contains("field not declared in schema"),
        "{e}"
    );
}
