//! What the plan/apply and upgrade tests share beyond the cluster connection: quiet progress, a
//! live plan of a rendered set, the same plan against a snapshot (what CI plans against), and a
//! plan's error findings.
#![allow(dead_code)]

use gpuctl::output::progress::{Progress, ProgressMode};
use gpuctl_cluster::{Kube, read};
use gpuctl_core::located::Severity;
use gpuctl_core::plan::{self, Plan, PlanOptions};
use gpuctl_core::render::RenderedSet;
use gpuctl_core::snapshot::Snapshot;

/// Progress lines on stderr with `GPUCTL_TEST_PROGRESS=1` (for debugging), else nothing.
pub fn quiet() -> Progress {
    if std::env::var_os("GPUCTL_TEST_PROGRESS").is_some() {
        Progress::new(ProgressMode::Lines)
    } else {
        Progress::new(ProgressMode::Quiet)
    }
}

/// A live `gpuctl plan` of `set` (default options, 32 reads at a time).
pub async fn live_plan(k: &Kube, set: &RenderedSet) -> Plan {
    read::plan(k, set, PlanOptions::default(), 32)
        .await
        .unwrap_or_else(|e| panic!("plan: {e}"))
}

/// A snapshot of what `set` touches, taken now, and the plan of `set` against it.
pub async fn snapshot_plan(k: &Kube, set: &RenderedSet) -> (Snapshot, Plan) {
    let snap = read::snapshot(k, set)
        .await
        .unwrap_or_else(|e| panic!("snapshot: {e}"));
    let view = snap.live_view(&plan::parent_of(set).id());
    let planned = plan::plan(set, &view, PlanOptions::default())
        .unwrap_or_else(|e| panic!("plan from snapshot: {e}"));
    (snap, planned)
}

/// The messages of `plan`'s error findings.
pub fn errors(plan: &Plan) -> Vec<String> {
    plan.findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.message.clone())
        .collect()
}
