//! Hand-computed figures on the accounting fixture: weights come in through the series (the
//! expressions weigh them), so these check the joins, the unknown rule, prices and the day split.

use std::collections::BTreeMap;

use super::*;
use crate::{Chunk, Series};
use gpuctl_model::profiles::Catalog;

const BP: &str = include_str!("../../../../tests/fixtures/accounting/blueprint.yaml");

fn table() -> AccountingTable {
    let loaded = gpuctl_model::blueprint::load_str("a.yaml", BP).unwrap();
    AccountingTable::new(&loaded.blueprint, Catalog::embedded()).expect("accounting set")
}

fn series(labels: &[(&str, &str)], points: &[(i64, f64)]) -> Series {
    Series {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        points: points.to_vec(),
    }
}

#[test]
fn used_idle_unknown_and_days() {
    let t = table();
    let w = Window::new(0, 2 * 86_400, 3600).unwrap();
    let mut acc = Accumulator::new(&t, w, By::Tenant);
    let pod = [("namespace", "team-a"), ("pod", "p"), ("pool", "h100")];
    // One GPU held for the whole window; activity 0.5 on day one, missing on day two.
    let alloc: Vec<(i64, f64)> = (0..48).map(|i| (i * 3600, 1.0)).collect();
    let act: Vec<(i64, f64)> = (0..24).map(|i| (i * 3600, 0.5)).collect();
    let answers = BTreeMap::from([
        (QueryKind::Allocated, vec![series(&pod, &alloc)]),
        (QueryKind::Active, vec![series(&pod, &act)]),
        (QueryKind::Coverage, vec![series(&[], &alloc)]),
    ]);
    acc.add_chunk(
        Chunk {
            start: 0,
            end: 47 * 3600,
        },
        &answers,
    );
    let r = acc.finish();
    assert_eq!(r.rows.len(), 2);
    let d1 = &r.rows[0].figures;
    assert_eq!(
        (d1.allocated, d1.used, d1.idle, d1.unknown),
        (24.0, 12.0, 12.0, 0.0)
    );
    let d2 = &r.rows[1].figures;
    assert_eq!(
        (d2.allocated, d2.used, d2.idle, d2.unknown),
        (24.0, 0.0, 0.0, 24.0)
    );
    assert_eq!(r.rows[0].day, "1970-01-01");
    assert_eq!(r.rows[0].cost_centre.as_deref(), Some("CC-4711"));
    assert_eq!(r.totals[0].figures.cost, 48.0 * 2.5);
    assert_eq!(r.blind.no_kube_state_metrics_hours, 0.0);
    // No exporter series for any pool in this chunk: 48 blind hours each.
    assert_eq!(r.blind.no_exporter_hours["a100"], 48.0);
    // Nor any node labels: every pool's allocation is blind for the whole window.
    assert_eq!(r.blind.no_node_labels_hours["h100"], 48.0);
    assert_eq!(day_string(20_427), "2025-12-05");
}

/// One day at hourly steps by tenant, with one Kueue queue series of `kind`: 4 GPUs for 12 hours.
fn one_queue_day(kind: QueryKind, labels: &[(&str, &str)]) -> crate::Report {
    let t = table();
    let w = Window::new(0, 86_400, 3600).unwrap();
    let mut acc = Accumulator::new(&t, w, By::Tenant);
    let pts: Vec<(i64, f64)> = (0..12).map(|i| (i * 3600, 4.0)).collect();
    acc.add_chunk(
        Chunk {
            start: 0,
            end: 23 * 3600,
        },
        &BTreeMap::from([(kind, vec![series(labels, &pts)])]),
    );
    acc.finish()
}

#[test]
fn borrowed_is_weighted_and_goes_to_the_queue_tenant() {
    let b = [
        ("cluster_queue", "cq-b"),
        ("flavor", "h100"),
        ("resource", "nvidia.com/gpu"),
    ];
    let r = one_queue_day(QueryKind::Borrowed, &b);
    assert_eq!(r.totals[0].key, "team-b");
    assert_eq!(r.totals[0].figures.borrowed, 48.0);
    assert_eq!(r.blind.no_kube_state_metrics_hours, 24.0);
}

#[test]
fn weights_follow_the_blueprint() {
    let t = table();
    let a100 = t.pool("a100").unwrap();
    assert_eq!(a100.request_weights["nvidia_com_mig_1g_10gb"], 1.0 / 7.0);
    assert_eq!(a100.activity_weights["1g.10gb"], 1.0 / 7.0);
    let l4 = t.pool("l4").unwrap();
    assert_eq!(l4.request_weights["nvidia_com_gpu"], 0.25);
    assert!(t.pool("h100-dra").unwrap().dra);
    assert_eq!(a100.price, Some(1.75));
}

#[test]
fn lent_goes_to_the_lending_queue_tenant() {
    let l = [
        ("cohort", "all"),
        ("cluster_queue", "cq-a"),
        ("flavor", "h100"),
        ("resource", "nvidia.com/gpu"),
    ];
    let r = one_queue_day(QueryKind::Lent, &l);
    assert_eq!(r.totals[0].key, "team-a");
    assert_eq!(r.totals[0].figures.lent, 48.0);
    assert_eq!(r.totals[0].figures.borrowed, 0.0);
}

#[test]
fn lending_is_attributed_within_a_cohort_only() {
    let t = table();
    let e = t.lent_expr().expect("a Kueue blueprint");
    // Queues in no cohort lend nothing; the cohort's borrowing is shared by unused quota.
    assert!(e.contains("cohort!=\"\""), "{e}");
    assert!(
        e.contains("group_left () clamp_max(sum by (cohort, flavor, resource)"),
        "{e}"
    );
}

#[test]
fn a_dra_pools_mig_devices_are_weighted_by_their_profile() {
    let t = table();
    let dra = t.pool("h100-dra").unwrap();
    // Whatever MIG device a claim gets on an H100: a 1g slice is 1/7, the whole-GPU profile 1.
    assert_eq!(dra.activity_weights["1g.10gb"], 1.0 / 7.0);
    assert_eq!(dra.activity_weights["7g.80gb"], 1.0);
    assert_eq!(dra.activity_weights[""], 1.0);
    // A device-plugin pool without MIG has only the whole GPU.
    assert_eq!(t.pool("h100").unwrap().activity_weights.len(), 1);
}
