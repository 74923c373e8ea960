//! Runs an upgrade (and its rollback) against the cluster: a state machine per node, driven batch
//! by batch, with every transition written to the journal before the next one starts. Each step
//! is idempotent, so a run stopped anywhere (Ctrl-C, a crash, a dropped future) resumes by
//! repeating the step it was in. Every wait is bounded and named.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use gpuctl_model::names::VALIDATOR_DEPLOY_LABEL;
use gpuctl_pipeline::render::{DEVICE_PLUGIN_CONFIG_LABEL, DRIVER_LABEL, MIG_CONFIG_LABEL};
use gpuctl_plan::live::workloads::{LiveNode, LivePod, PodRole};
use gpuctl_plan::upgrade::journal::{Journal, JournalPhase, NodeState};
use gpuctl_plan::upgrade::schedule::UpgradePlan;
use gpuctl_plan::upgrade::verdict::{Expectation, Verdict, verdict};
use gpuctl_plan::upgrade::{MIG_CONFIG_STATE_LABEL, Timing, human_duration};

use super::UpgradeError;
use super::journal::{self, JournalStore, LeaseGuard};
use crate::client::{self, Kube};
use crate::nodeops::{self, Eviction};
use crate::read;
use crate::report::Reporter;
use crate::wait::{Look, TimedOut, Wait};

mod drift;

/// The GPU Operator's per-pool driver CR.
const DRIVER_API: &str = "nvidia.com/v1alpha1";
/// See [`DRIVER_API`].
const DRIVER_KIND: &str = "NVIDIADriver";

/// Stops a run cleanly (the Lease is released) when it turns `true`: Ctrl-C in the CLI.
#[derive(Clone)]
pub struct Cancel(Option<watch::Receiver<bool>>);

impl Cancel {
    /// Never cancels.
    pub fn never() -> Cancel {
        Cancel(None)
    }

    /// Cancels when `rx` turns `true`.
    pub fn on(rx: watch::Receiver<bool>) -> Cancel {
        Cancel(Some(rx))
    }

    async fn cancelled(&mut self) {
        match &mut self.0 {
            None => std::future::pending().await,
            Some(rx) => {
                let _ = rx.wait_for(|v| *v).await;
            }
        }
    }
}

/// Starts the upgrade `plan` describes (which must have passed pre-flight).
pub async fn start(
    k: &Kube,
    plan: &UpgradePlan,
    timing: &Timing,
    progress: &dyn Reporter,
    cancel: Cancel,
) -> Result<Journal, UpgradeError> {
    if plan.errors() > 0 {
        return Err(UpgradeError::Preflight(plan.errors()));
    }
    let ctx = Ctx::new(k, timing, progress, cancel);
    ctx.run(&plan.namespace, &plan.blueprint, &plan.pool, Direction::Forward, async |store, holder| {
        if let Some(old) = store.load().await?
            && !old.phase.is_final()
        {
            return Err(UpgradeError::Refused(format!(
                "an upgrade of pool `{}` to {} is {}; continue it with `gpuctl upgrade driver --resume --pool {0}` or undo it with `gpuctl upgrade rollback --pool {0}`",
                old.pool,
                old.to_version,
                old.phase.describe()
            )));
        }
        let j = Journal::from_plan(plan);
        let event = format!(
            "upgrade of pool {} from {} ({}) to {} ({}) started by {holder}",
            j.pool, j.from_version, j.blue_cr, j.to_version, j.green_cr
        );
        Ok((j, event))
    })
    .await
}

/// Continues the upgrade of `pool` (or the only unfinished one) from its journal.
pub async fn resume(
    k: &Kube,
    namespace: Option<&str>,
    pool: Option<&str>,
    timing: &Timing,
    progress: &dyn Reporter,
    cancel: Cancel,
) -> Result<Journal, UpgradeError> {
    let found = journal::find(k, namespace, pool).await?;
    match found.phase {
        JournalPhase::Completed => {
            return Err(UpgradeError::NoJournal(format!(
                "the upgrade of pool `{}` to {} is complete; nothing to resume",
                found.pool, found.to_version
            )));
        }
        JournalPhase::RolledBack => {
            return Err(UpgradeError::NoJournal(format!(
                "the upgrade of pool `{}` was rolled back; plan a new one",
                found.pool
            )));
        }
        JournalPhase::RollingBack => {
            return Err(UpgradeError::Refused(format!(
                "pool `{0}` is being rolled back; finish that with `gpuctl upgrade rollback --pool {0}`",
                found.pool
            )));
        }
        JournalPhase::Running | JournalPhase::Failed => {}
    }
    let pool = &found.pool;
    let ctx = Ctx::new(k, timing, progress, cancel);
    ctx.run(&found.namespace, &found.blueprint, pool, Direction::Forward, async |store, holder| {
        // Read again under the Lease: the journal may have moved while we waited for it.
        let mut j = load_under_lease(store, pool).await?;
        if j.phase != JournalPhase::Running && j.phase != JournalPhase::Failed {
            return Err(UpgradeError::Refused(format!(
                "the upgrade of pool `{pool}` is {} now; see `gpuctl upgrade status --pool {pool}`",
                j.phase.describe()
            )));
        }
        j.phase = JournalPhase::Running;
        Ok((j, format!("resumed by {holder}")))
    })
    .await
}

/// Moves every node of `pool`'s upgrade back to where it was, batch by batch in reverse order.
pub async fn rollback(
    k: &Kube,
    namespace: Option<&str>,
    pool: Option<&str>,
    timing: &Timing,
    progress: &dyn Reporter,
    cancel: Cancel,
) -> Result<Journal, UpgradeError> {
    let found = journal::find(k, namespace, pool).await?;
    if found.phase == JournalPhase::RolledBack {
        return Err(UpgradeError::NoJournal(format!(
            "the upgrade of pool `{}` is rolled back already",
            found.pool
        )));
    }
    let pool = &found.pool;
    let ctx = Ctx::new(k, timing, progress, cancel);
    ctx.run(
        &found.namespace,
        &found.blueprint,
        pool,
        Direction::Back,
        async |store, holder| {
            let mut j = load_under_lease(store, pool).await?;
            j.phase = JournalPhase::RollingBack;
            Ok((j, format!("rollback started by {holder}")))
        },
    )
    .await
}

/// The time a journal event is recorded at: the cluster crate reads the clock, the core's journal
/// is given it.
fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

/// What every run works with: the cluster, the timing, where progress goes and what stops it.
struct Ctx<'a> {
    k: &'a Kube,
    timing: &'a Timing,
    progress: &'a dyn Reporter,
    cancel: Cancel,
}

impl<'a> Ctx<'a> {
    /// Bundles a run's context.
    fn new(k: &'a Kube, timing: &'a Timing, progress: &'a dyn Reporter, cancel: Cancel) -> Ctx<'a> {
        Ctx {
            k,
            timing,
            progress,
            cancel,
        }
    }

    /// Under `pool`'s Lease, `open` reads or makes the journal to run (given the store and the
    /// Lease holder) and says what to record; the journal is saved with that event and run
    /// `dir`: forward to green or back to blue.
    async fn run(
        &self,
        namespace: &str,
        blueprint: &str,
        pool: &str,
        dir: Direction,
        open: impl AsyncFnOnce(&mut JournalStore, &str) -> Result<(Journal, String), UpgradeError>,
    ) -> Result<Journal, UpgradeError> {
        self.with_lease(namespace, blueprint, pool, async |mut store, lease| {
            let (mut j, event) = open(&mut store, &lease.holder).await?;
            j.event(now(), event);
            store.save(&mut j).await?;
            let mut run = Run::new(self, j, store, lease);
            match dir {
                Direction::Forward => run.forward().await?,
                Direction::Back => run.backward().await?,
            }
            Ok(run.j)
        })
        .await
    }

    /// Runs `f` holding `pool`'s Lease, with a journal store that checks it still holds it; Ctrl-C
    /// stops `f`, and the Lease is released however `f` ends. An apply of `blueprint` that is
    /// running (its lock is live) is not raced: the run stops before `f`. Apply checks the upgrade
    /// Leases after taking its lock, and this checks the apply lock after taking the Lease, so of
    /// two that start together at least one sees the other.
    async fn with_lease(
        &self,
        namespace: &str,
        blueprint: &str,
        pool: &str,
        f: impl AsyncFnOnce(JournalStore, &LeaseGuard) -> Result<Journal, UpgradeError>,
    ) -> Result<Journal, UpgradeError> {
        let lease = self.acquire(namespace, pool).await?;
        let apply_lock = gpuctl_model::names::apply_lock_name(blueprint);
        match crate::lock::info(self.k, namespace, &apply_lock).await {
            Ok(Some(info)) if info.live() => {
                lease.release().await;
                return Err(UpgradeError::Refused(format!(
                    "an apply of blueprint `{blueprint}` is running (Lease/{namespace}/{apply_lock} is held by {}); nothing was changed. Start the upgrade again once it finishes",
                    info.describe()
                )));
            }
            Ok(_) => {}
            Err(e) => {
                lease.release().await;
                return Err(UpgradeError::cluster(pool, e));
            }
        }
        let mut store = JournalStore::new(self.k, namespace, pool);
        store.guard(&lease);
        let result = guarded(pool, self.cancel.clone(), f(store, &lease)).await;
        lease.release().await;
        result
    }

    /// Takes the pool's Lease; Ctrl-C while waiting for a previous run's lease to expire stops too.
    async fn acquire(&self, namespace: &str, pool: &str) -> Result<LeaseGuard, UpgradeError> {
        let mut cancel = self.cancel.clone();
        tokio::select! {
            l = journal::acquire(self.k, namespace, pool, self.timing.lease_duration, self.timing.poll, self.progress) => l,
            () = cancel.cancelled() => Err(UpgradeError::Interrupted(pool.to_string())),
        }
    }
}

/// The journal, read again once the Lease is held.
async fn load_under_lease(store: &mut JournalStore, pool: &str) -> Result<Journal, UpgradeError> {
    store
        .load()
        .await?
        .ok_or_else(|| UpgradeError::NoJournal(format!("the journal of pool `{pool}` disappeared")))
}

/// Runs `f` until it ends or Ctrl-C stops it.
async fn guarded<F>(pool: &str, mut cancel: Cancel, f: F) -> Result<Journal, UpgradeError>
where
    F: std::future::Future<Output = Result<Journal, UpgradeError>>,
{
    tokio::select! {
        r = f => r,
        () = cancel.cancelled() => Err(UpgradeError::Interrupted(pool.to_string())),
    }
}

/// One run over a journal.
struct Run<'a> {
    k: &'a Kube,
    j: Journal,
    store: JournalStore,
    timing: &'a Timing,
    progress: &'a dyn Reporter,
    lease: &'a LeaseGuard,
}

/// Where a node (or a whole run) is going: forward to green, or back to blue.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Back,
}

impl<'a> Run<'a> {
    /// A run over `j` in `ctx`, saving to `store` while `lease` is held.
    fn new(ctx: &Ctx<'a>, j: Journal, store: JournalStore, lease: &'a LeaseGuard) -> Run<'a> {
        Run {
            k: ctx.k,
            j,
            store,
            timing: ctx.timing,
            progress: ctx.progress,
            lease,
        }
    }

    fn cluster(&self, e: client::ClusterError) -> UpgradeError {
        UpgradeError::cluster(&self.j.pool, e)
    }

    async fn save(&mut self, event: String) -> Result<(), UpgradeError> {
        if self.lease.is_lost() {
            return Err(UpgradeError::LeaseLost(self.j.pool.clone()));
        }
        self.j.event(now(), event);
        self.store.save(&mut self.j).await
    }

    async fn set_state(
        &mut self,
        node: &str,
        state: NodeState,
        message: Option<String>,
    ) -> Result<(), UpgradeError> {
        if let Some(r) = self.j.nodes.get_mut(node) {
            r.state = state;
            r.message.clone_from(&message);
        }
        self.progress.step(&format!("Node/{node}"), state.name());
        let event = match message {
            Some(m) => format!("{node}: {} ({m})", state.name()),
            None => format!("{node}: {}", state.name()),
        };
        self.save(event).await
    }

    /// Nodes of the pool now (a node Karpenter replaced is not one).
    fn node_count(&self) -> usize {
        self.j
            .nodes
            .values()
            .filter(|r| r.state != NodeState::Replaced)
            .count()
    }

    fn state(&self, node: &str) -> NodeState {
        self.j.nodes.get(node).map_or(NodeState::Blue, |r| r.state)
    }

    fn stopped(&self, what: String, next: String) -> UpgradeError {
        UpgradeError::Stopped {
            what,
            state: self.j.where_it_is(),
            next,
        }
    }

    // ---- forward ------------------------------------------------------------------------------

    /// The nodes of batch `b` not in state `done` yet.
    fn not_yet(&self, b: usize, done: NodeState) -> Vec<String> {
        self.j
            .batch(b)
            .iter()
            .filter(|n| self.state(n) != done)
            .cloned()
            .collect()
    }

    async fn forward(&mut self) -> Result<(), UpgradeError> {
        if self.j.karpenter.is_some() {
            return self.forward_drift().await;
        }
        if !self.j.prepared {
            self.prepare().await?;
        }
        let total = self.j.batches.len();
        for b in 1..=total {
            let todo = self.not_yet(b, NodeState::Done);
            if todo.is_empty() {
                continue;
            }
            self.progress
                .phase(&format!("batch {b}/{total}"), todo.len());
            self.forward_batch(b, &todo).await?;
        }
        self.finish().await
    }

    async fn prepare(&mut self) -> Result<(), UpgradeError> {
        self.progress.phase("prepare", self.j.nodes.len() + 1);
        self.apply_green_cr().await?;
        let names: Vec<String> = self.j.in_state(NodeState::Blue);
        for n in &names {
            let labels = self.owned_labels(n, Direction::Back, false);
            nodeops::apply_owned_labels(self.k, n, &labels)
                .await
                .map_err(|e| self.cluster(e))?;
            nodeops::set_pending_taint(self.k, n, true)
                .await
                .map_err(|e| self.cluster(e))?;
            self.progress.step(&format!("Node/{n}"), "marked");
        }
        self.j.prepared = true;
        let event = format!(
            "prepared: NVIDIADriver {} ({}) applied; {} node(s) labelled {}={} and tainted",
            self.j.green_cr,
            self.j.to_version,
            names.len(),
            self.j.color_label,
            self.j.blue_color
        );
        self.save(event).await
    }

    /// The resource of `kind` (`None`: the cluster does not serve it).
    async fn resource(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<client::Resolved>, UpgradeError> {
        self.k
            .resolve(api_version, kind)
            .await
            .map_err(|e| self.cluster(e))
    }

    /// [`Run::resource`], an error naming the kind when the cluster does not serve it.
    async fn served(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<client::Resolved, UpgradeError> {
        self.resource(api_version, kind).await?.ok_or_else(|| {
            self.cluster(client::ClusterError::KindNotServed {
                api_version: api_version.into(),
                kind: kind.into(),
            })
        })
    }

    /// Applies the green NVIDIADriver CR (forced: an earlier attempt's is taken over).
    async fn apply_green_cr(&mut self) -> Result<(), UpgradeError> {
        let r = self.served(DRIVER_API, DRIVER_KIND).await?;
        let manifest = self.j.green_manifest.clone();
        apply_as_upgrade(self.k, &r, &manifest)
            .await
            .map_err(|e| self.cluster(e))?;
        self.progress
            .step(&format!("NVIDIADriver/{}", self.j.green_cr), "applied");
        Ok(())
    }

    /// The labels the upgrade declares on a node: the green CR and colour once moved; before that
    /// (and after a rollback) the blue colour, or nothing when the node had no colour.
    fn owned_labels(&self, node: &str, dir: Direction, restore: bool) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        match dir {
            Direction::Forward => {
                m.insert(DRIVER_LABEL.to_string(), self.j.green_cr.clone());
                m.insert(self.j.color_label.clone(), self.j.green_color.clone());
            }
            Direction::Back => {
                let rec = self.j.nodes.get(node).map(|r| &r.recorded);
                if restore {
                    if let Some(Some(cr)) = rec.and_then(|r| r.get(DRIVER_LABEL)) {
                        m.insert(DRIVER_LABEL.to_string(), cr.clone());
                    }
                    if let Some(Some(c)) = rec.and_then(|r| r.get(&self.j.color_label)) {
                        m.insert(self.j.color_label.clone(), c.clone());
                    }
                } else {
                    m.insert(self.j.color_label.clone(), self.j.blue_color.clone());
                }
            }
        }
        m
    }

    async fn forward_batch(&mut self, b: usize, todo: &[String]) -> Result<(), UpgradeError> {
        // A deleted Node cannot be upgraded: it fails, which stops the rollout here.
        for n in self.gone(todo).await? {
            if self.state(&n) != NodeState::Failed {
                self.set_state(
                    &n,
                    NodeState::Failed,
                    Some("the Node object is gone".into()),
                )
                .await?;
            }
        }
        if todo.iter().any(|n| self.state(n) == NodeState::Blue) {
            self.gate(b, self.j.batch(b).to_vec()).await?;
        }
        for n in todo {
            if self.state(n) == NodeState::Blue {
                self.taint_devices(n).await?;
                self.cordon(n).await?;
                self.set_state(n, NodeState::Cordoned, None).await?;
            }
        }
        let cordoned = self.with_state(todo, &[NodeState::Cordoned]);
        if !cordoned.is_empty() {
            self.drain(b, &cordoned, Direction::Forward).await?;
            for n in &cordoned {
                self.set_state(n, NodeState::Drained, None).await?;
            }
        }
        for n in self.with_state(todo, &[NodeState::Drained]) {
            let labels = self.owned_labels(&n, Direction::Forward, false);
            nodeops::apply_owned_labels(self.k, &n, &labels)
                .await
                .map_err(|e| self.cluster(e))?;
            self.set_state(&n, NodeState::Moved, None).await?;
        }
        let moved = self.with_state(todo, &[NodeState::Moved, NodeState::Failed]);
        if !moved.is_empty() {
            let results = self.validate(&moved, Direction::Forward).await?;
            for (n, r) in results {
                match r {
                    Ok(()) => self.set_state(&n, NodeState::Validated, None).await?,
                    Err(m) => self.set_state(&n, NodeState::Failed, Some(m)).await?,
                }
            }
        }
        for n in self.with_state(todo, &[NodeState::Validated]) {
            self.settle(&n).await?;
            self.set_state(&n, NodeState::Done, None).await?;
        }
        let failed = self.with_state(todo, &[NodeState::Failed]);
        if !failed.is_empty() {
            self.j.phase = JournalPhase::Failed;
            let what = failed
                .iter()
                .map(|n| {
                    format!(
                        "node {n} did not validate on {}: {}",
                        self.j.to_version,
                        self.j
                            .nodes
                            .get(n)
                            .and_then(|r| r.message.clone())
                            .unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            self.save(format!("batch {b} stopped: {}", failed.join(", ")))
                .await?;
            let pool = self.j.pool.clone();
            return Err(self.stopped(
                format!("batch {b} stopped; the rollout is halted and later batches stay on the old driver.\n{what}"),
                format!(
                    "the failed node(s) stay cordoned on NVIDIADriver {}. Fix them (driver pod logs, `kubectl describe node`), then `gpuctl upgrade driver --resume --pool {pool}` re-checks them and continues; or `gpuctl upgrade rollback --pool {pool}` moves every node back to {}",
                    self.j.green_cr, self.j.blue_cr
                ),
            ));
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<(), UpgradeError> {
        self.untaint_all().await?;
        if self.j.remove_blue_cr {
            let blue = self.j.blue_cr.clone();
            if self.unused(&blue).await? {
                self.delete_cr(&blue).await?;
                self.progress
                    .step(&format!("NVIDIADriver/{blue}"), "deleted");
            }
        }
        self.j.phase = JournalPhase::Completed;
        let count = self.node_count();
        let done = format!(
            "completed: {count} node(s) on {} ({})",
            self.j.to_version, self.j.green_cr
        );
        self.save(done.clone()).await?;
        self.progress.done(
            serde_json::json!({"pool": self.j.pool, "driver": self.j.to_version, "nodes": count}),
            format!(
                "Upgrade complete: {count} node(s) of pool {} run {} on NVIDIADriver {}.\nNow {}, so `gpuctl plan` shows no node changes.",
                self.j.pool,
                self.j.to_version,
                self.j.green_cr,
                self.j.blueprint_change
            ),
        );
        Ok(())
    }

    // ---- back ---------------------------------------------------------------------------------

    async fn backward(&mut self) -> Result<(), UpgradeError> {
        if self.j.karpenter.is_some() {
            return self.backward_drift().await;
        }
        let total = self.j.batches.len();
        for b in (1..=total).rev() {
            let todo = self.not_yet(b, NodeState::RolledBack);
            if todo.is_empty() {
                continue;
            }
            self.progress
                .phase(&format!("rollback batch {b}/{total}"), todo.len());
            self.backward_batch(b, &todo).await?;
        }
        self.finish_rollback().await
    }

    /// Rolls back the nodes `todo` of batch `b`: releases those that never moved, and moves the
    /// others back to the blue CR, validates and settles them.
    async fn backward_batch(&mut self, b: usize, todo: &[String]) -> Result<(), UpgradeError> {
        // A deleted Node has nothing left to restore.
        for n in self.gone(todo).await? {
            self.set_state(
                &n,
                NodeState::RolledBack,
                Some("the Node object is gone".into()),
            )
            .await?;
        }
        // Nodes that never left blue only lose the colour, the steering taint and the cordon
        // the upgrade put on them.
        for n in self.with_state(
            todo,
            &[NodeState::Blue, NodeState::Cordoned, NodeState::Drained],
        ) {
            let cordoned = self.state(&n) != NodeState::Blue;
            self.release_node(&n, cordoned).await?;
            self.set_state(&n, NodeState::RolledBack, None).await?;
        }
        let back = self.with_state(
            todo,
            &[
                NodeState::Moved,
                NodeState::Validated,
                NodeState::Done,
                NodeState::Failed,
            ],
        );
        if back.is_empty() {
            return Ok(());
        }
        self.gate(b, back.clone()).await?;
        for n in &back {
            self.cordon(n).await?;
        }
        self.drain(b, &back, Direction::Back).await?;
        for n in &back {
            let labels = self.owned_labels(n, Direction::Back, true);
            nodeops::apply_owned_labels(self.k, n, &labels)
                .await
                .map_err(|e| self.cluster(e))?;
            self.progress.step(&format!("Node/{n}"), "moved back");
        }
        let results = self.validate(&back, Direction::Back).await?;
        let mut failed = Vec::new();
        for (n, r) in results {
            match r {
                Ok(()) => {
                    self.settle(&n).await?;
                    self.set_state(&n, NodeState::RolledBack, None).await?;
                }
                Err(m) => {
                    if let Some(rec) = self.j.nodes.get_mut(&n) {
                        rec.message = Some(m.clone());
                    }
                    failed.push(format!(
                        "node {n} did not validate on {}: {m}",
                        self.j.from_version
                    ));
                }
            }
        }
        if !failed.is_empty() {
            self.save(format!("rollback of batch {b} stopped")).await?;
            let pool = self.j.pool.clone();
            return Err(self.stopped(
                format!("rollback of batch {b} stopped:\n{}", failed.join("\n")),
                format!("fix the node(s) and run `gpuctl upgrade rollback --pool {pool}` again; it continues from here"),
            ));
        }
        Ok(())
    }

    /// Deletes the green CR when this upgrade created it and no node uses it, and records the
    /// rollback as complete.
    async fn finish_rollback(&mut self) -> Result<(), UpgradeError> {
        self.untaint_all().await?;
        let green = self.j.green_cr.clone();
        if !self.j.green_cr_existed && self.unused(&green).await? {
            self.delete_cr(&green).await?;
            self.progress
                .step(&format!("NVIDIADriver/{green}"), "deleted");
        }
        self.j.phase = JournalPhase::RolledBack;
        let count = self.node_count();
        self.save(format!(
            "rolled back: {count} node(s) on {} ({})",
            self.j.from_version, self.j.blue_cr
        ))
        .await?;
        self.progress.done(
            serde_json::json!({"pool": self.j.pool, "driver": self.j.from_version, "nodes": count}),
            format!(
                "Rollback complete: {count} node(s) of pool {} are back on NVIDIADriver {} ({}) with their recorded labels.",
                self.j.pool,
                self.j.blue_cr,
                self.j.from_version
            ),
        );
        Ok(())
    }

    /// Undoes what the upgrade did to a node that never moved: colour, steering taint and, when
    /// the upgrade cordoned it, the cordon.
    async fn release_node(&mut self, n: &str, uncordon: bool) -> Result<(), UpgradeError> {
        self.untaint_devices(n).await?;
        let labels = self.owned_labels(n, Direction::Back, true);
        nodeops::apply_owned_labels(self.k, n, &labels)
            .await
            .map_err(|e| self.cluster(e))?;
        nodeops::set_pending_taint(self.k, n, false)
            .await
            .map_err(|e| self.cluster(e))?;
        if uncordon && !self.initially_unschedulable(n) {
            nodeops::set_unschedulable(self.k, n, false)
                .await
                .map_err(|e| self.cluster(e))?;
        }
        Ok(())
    }

    // ---- shared steps -------------------------------------------------------------------------

    /// Nodes of `nodes` whose Node object no longer exists (and that are not marked yet).
    async fn gone(&self, nodes: &[String]) -> Result<Vec<String>, UpgradeError> {
        let mut out = Vec::new();
        for n in nodes {
            if read::read_node(self.k, n)
                .await
                .map_err(|e| self.cluster(e))?
                .is_none()
            {
                out.push(n.clone());
            }
        }
        Ok(out)
    }

    fn with_state(&self, nodes: &[String], states: &[NodeState]) -> Vec<String> {
        nodes
            .iter()
            .filter(|n| states.contains(&self.state(n)))
            .cloned()
            .collect()
    }

    fn initially_unschedulable(&self, n: &str) -> bool {
        self.j
            .nodes
            .get(n)
            .is_some_and(|r| r.initially_unschedulable)
    }

    async fn cordon(&mut self, n: &str) -> Result<(), UpgradeError> {
        nodeops::set_unschedulable(self.k, n, true)
            .await
            .map_err(|e| self.cluster(e))
    }

    /// Refuses to take `batch` out when that would leave more pool nodes unavailable than allowed.
    async fn gate(&mut self, b: usize, batch: Vec<String>) -> Result<(), UpgradeError> {
        let nodes = read::read_nodes(self.k, &self.j.selector)
            .await
            .map_err(|e| self.cluster(e))?;
        let others: Vec<&LiveNode> = nodes
            .iter()
            .filter(|n| !n.available() && !batch.contains(&n.name))
            .collect();
        if others.len() + batch.len() > self.j.max_unavailable {
            let names: Vec<&str> = others.iter().map(|n| n.name.as_str()).collect();
            let pool = self.j.pool.clone();
            return Err(self.stopped(
                format!(
                    "batch {b} was not started: {} other node(s) of the pool are unavailable ({}), and {} more would exceed the {} allowed",
                    others.len(),
                    names.join(", "),
                    batch.len(),
                    self.j.max_unavailable
                ),
                format!("bring those nodes back (uncordon or repair them), then `gpuctl upgrade driver --resume --pool {pool}`"),
            ));
        }
        Ok(())
    }

    /// Evicts (or, with `waitForJobs`, waits for) the GPU pods on `nodes` until none is left,
    /// within the drain timeout. The Eviction API refuses what a PodDisruptionBudget forbids; the
    /// drain retries those until the budget allows it or the time is up.
    async fn drain(
        &mut self,
        b: usize,
        nodes: &[String],
        dir: Direction,
    ) -> Result<(), UpgradeError> {
        let bound = Duration::from_secs(self.j.drain_timeout_s);
        let progress = self.progress;
        let drained = Wait::new(bound, self.timing.poll)
            .until(
                &mut (&mut *self, nodes),
                |(run, nodes), _| {
                    Box::pin(async move {
                        let mut waiting: BTreeMap<String, String> = BTreeMap::new();
                        for n in nodes.iter() {
                            run.drain_node(n, &mut waiting).await?;
                        }
                        Ok(if waiting.is_empty() {
                            Look::Done(())
                        } else {
                            Look::Pending(waiting)
                        })
                    })
                },
                |waiting, elapsed| {
                    let first = waiting
                        .iter()
                        .next()
                        .map(|(p, w)| format!("{p} ({w})"))
                        .unwrap_or_default();
                    progress.waiting(
                        &format!(
                            "batch {b} to drain: {} GPU pod(s) left, e.g. {first}",
                            waiting.len()
                        ),
                        elapsed.as_secs(),
                        bound.as_secs(),
                    );
                },
            )
            .await?;
        let Err(TimedOut(waiting)) = drained else {
            return Ok(());
        };
        for n in nodes {
            if let Some(r) = self.j.nodes.get_mut(n) {
                r.message = Some("drain timed out".into());
            }
        }
        if dir == Direction::Forward {
            self.j.phase = JournalPhase::Failed;
        }
        self.save(format!("drain of batch {b} timed out")).await?;
        let pool = self.j.pool.clone();
        let cmd = if dir == Direction::Forward {
            format!(
                "`gpuctl upgrade driver --resume --pool {pool}` drains again (after the jobs end or the budget allows), or `gpuctl upgrade rollback --pool {pool}` uncordons and restores"
            )
        } else {
            format!("`gpuctl upgrade rollback --pool {pool}` drains again")
        };
        Err(self.stopped(
            format!(
                "drain of batch {b} timed out after {} (drainTimeout); still there:\n{}",
                human_duration(bound),
                waiting
                    .iter()
                    .map(|(p, why)| format!("  - {p} {why}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            format!("the batch stays cordoned and on its driver. {cmd}"),
        ))
    }

    /// One pass over the GPU pods on `n`: evicts those it may, and notes each pod still there in
    /// `waiting`, with why.
    async fn drain_node(
        &mut self,
        n: &str,
        waiting: &mut BTreeMap<String, String>,
    ) -> Result<(), UpgradeError> {
        let pods = read::pods_on(self.k, n)
            .await
            .map_err(|e| self.cluster(e))?;
        for p in pods
            .iter()
            .filter(|p| p.uses_gpus() && !p.finished())
            .filter(|p| matches!(p.role, PodRole::Job | PodRole::Service))
        {
            let id = p.id();
            if p.terminating {
                waiting.insert(id, format!("on {n}, terminating"));
            } else if p.role == PodRole::Job && self.j.wait_for_jobs {
                waiting.insert(
                    id,
                    format!("on {n}, a running job (waitForJobs: not evicted)"),
                );
            } else {
                match nodeops::evict(self.k, &p.namespace, &p.name)
                    .await
                    .map_err(|e| self.cluster(e))?
                {
                    Eviction::Accepted => {
                        self.progress.step(&format!("Pod/{id}"), "evicted");
                        self.j.event(now(), format!("evicted {id} from {n}"));
                        waiting.insert(id, format!("on {n}, terminating"));
                    }
                    Eviction::Gone => {}
                    Eviction::Blocked(why) => {
                        let budgets = self.budgets_of(p).await?;
                        waiting.insert(id, format!("on {n}, eviction refused: {why}{budgets}"));
                    }
                }
            }
        }
        Ok(())
    }

    /// The PodDisruptionBudgets covering `p` and what each allows now, as text to append to a
    /// refused eviction.
    async fn budgets_of(&self, p: &LivePod) -> Result<String, UpgradeError> {
        let pdbs = read::read_pdbs(self.k, std::slice::from_ref(p))
            .await
            .map_err(|e| self.cluster(e))?;
        Ok(pdbs
            .iter()
            .map(|d| {
                format!(
                    "; PodDisruptionBudget {} ({}) allows {} disruption(s) now",
                    d.id(),
                    d.rule,
                    d.disruptions_allowed
                )
            })
            .collect::<String>())
    }

    /// Waits until each node passes the checks of `dir`'s driver, fails, or the time is up.
    async fn validate(
        &mut self,
        nodes: &[String],
        dir: Direction,
    ) -> Result<BTreeMap<String, Result<(), String>>, UpgradeError> {
        let bound = self.timing.validate_timeout;
        let (driver, owner) = match dir {
            Direction::Forward => (self.expected_driver(), self.j.green_cr.clone()),
            Direction::Back => (self.j.from_version.clone(), self.j.blue_cr.clone()),
        };
        let mut out: BTreeMap<String, Result<(), String>> = BTreeMap::new();
        let mut pending: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let (progress, driver, owner) = (self.progress, &driver, &owner);
        let validated = Wait::new(bound, self.timing.poll)
            .until(
                &mut (&*self, nodes, &mut out, &mut pending),
                |(run, nodes, out, pending), _| {
                    Box::pin(async move {
                        let open: Vec<&String> =
                            nodes.iter().filter(|n| !out.contains_key(*n)).collect();
                        for n in open {
                            let Some(v) = run.verdict_on(n, driver, owner).await? else {
                                out.insert(n.clone(), Err("the node is gone".into()));
                                continue;
                            };
                            match v {
                                Verdict::Pass => {
                                    out.insert(n.clone(), Ok(()));
                                    pending.remove(n);
                                }
                                Verdict::Failed(why) => {
                                    run.progress.failed(&format!("Node/{n}"), &why);
                                    out.insert(n.clone(), Err(why));
                                    pending.remove(n);
                                }
                                Verdict::Pending(missing) => {
                                    pending.insert(n.clone(), missing);
                                }
                            }
                        }
                        if out.len() == nodes.len() {
                            return Ok(Look::Done(()));
                        }
                        Ok(Look::Pending(
                            pending
                                .iter()
                                .map(|(n, m)| format!("{n}: {}", m.join(", ")))
                                .collect::<Vec<_>>()
                                .join("; "),
                        ))
                    })
                },
                |what, elapsed| {
                    progress.waiting(
                        &format!("driver {driver} to validate on {what}"),
                        elapsed.as_secs(),
                        bound.as_secs(),
                    );
                },
            )
            .await?;
        if validated.is_err() {
            for (n, missing) in std::mem::take(&mut pending) {
                out.insert(
                    n,
                    Err(format!(
                        "not validated within {}: waiting for {}",
                        human_duration(bound),
                        missing.join(", ")
                    )),
                );
            }
            for n in nodes {
                out.entry(n.clone())
                    .or_insert_with(|| Err("not validated".into()));
            }
        }
        Ok(out)
    }

    /// Node `n` checked once against `driver` on CR `owner` (`None`: the node is gone).
    async fn verdict_on(
        &self,
        n: &str,
        driver: &str,
        owner: &str,
    ) -> Result<Option<Verdict>, UpgradeError> {
        let Some(node) = read::read_node(self.k, n)
            .await
            .map_err(|e| self.cluster(e))?
        else {
            return Ok(None);
        };
        let want_validator = node.label(VALIDATOR_DEPLOY_LABEL) != Some("false");
        let validators = if want_validator {
            nodeops::validator_pods(self.k, n)
                .await
                .map_err(|e| self.cluster(e))?
        } else {
            Vec::new()
        };
        let mig = self.j.nodes.get(n).is_some_and(|r| r.mig_capable);
        let want = Expectation {
            driver,
            owner_cr: owner,
            mig,
            validator: want_validator,
        };
        Ok(Some(verdict(&node, &validators, &want)))
    }

    /// The driver GFD must report: the full version, or the branch with precompiled drivers.
    fn expected_driver(&self) -> String {
        let written = self.j.green_manifest["spec"]["version"]
            .as_str()
            .unwrap_or(&self.j.to_version);
        if self.j.green_manifest["spec"]["usePrecompiled"].as_bool() == Some(true) {
            written.to_string()
        } else {
            self.j.to_version.clone()
        }
    }

    /// After validation: restores recorded MIG and device-plugin config labels that changed (and
    /// waits for MIG Manager when the MIG config was restored), removes the steering taint and
    /// uncordons, unless the node was cordoned before the upgrade.
    async fn settle(&mut self, n: &str) -> Result<(), UpgradeError> {
        self.untaint_devices(n).await?;
        let node = read::read_node(self.k, n)
            .await
            .map_err(|e| self.cluster(e))?;
        let recorded = self
            .j
            .nodes
            .get(n)
            .map(|r| r.recorded.clone())
            .unwrap_or_default();
        let mut fix = BTreeMap::new();
        if let Some(node) = &node {
            for key in [MIG_CONFIG_LABEL, DEVICE_PLUGIN_CONFIG_LABEL] {
                let want = recorded.get(key).cloned().flatten();
                if node.label(key).map(str::to_string) != want {
                    fix.insert(key.to_string(), want);
                }
            }
        }
        if !fix.is_empty() {
            nodeops::restore_labels(self.k, n, &fix)
                .await
                .map_err(|e| self.cluster(e))?;
            self.progress.step(&format!("Node/{n}"), "labels restored");
            self.j.event(
                now(),
                format!(
                    "{n}: restored {}",
                    fix.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("(removed)")))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            if fix.contains_key(MIG_CONFIG_LABEL) {
                self.wait_mig(n).await?;
            }
        }
        nodeops::set_pending_taint(self.k, n, false)
            .await
            .map_err(|e| self.cluster(e))?;
        if !self.initially_unschedulable(n) {
            nodeops::set_unschedulable(self.k, n, false)
                .await
                .map_err(|e| self.cluster(e))?;
        }
        Ok(())
    }

    async fn wait_mig(&mut self, n: &str) -> Result<(), UpgradeError> {
        let bound = self.timing.validate_timeout;
        let progress = self.progress;
        let applied = Wait::new(bound, self.timing.poll)
            .until(
                &mut &*self,
                |run, _| {
                    Box::pin(async move {
                        let state = read::read_node(run.k, n)
                            .await
                            .map_err(|e| run.cluster(e))?
                            .and_then(|node| node.label(MIG_CONFIG_STATE_LABEL).map(str::to_string));
                        match state.as_deref() {
                            Some("success") => Ok(Look::Done(())),
                            Some("failed") => {
                                let pool = run.j.pool.clone();
                                Err(run.stopped(
                                    format!("MIG Manager failed to apply the restored MIG config on {n} ({MIG_CONFIG_STATE_LABEL}=failed)"),
                                    format!("see the nvidia-mig-manager pod's logs on {n}; then `gpuctl upgrade driver --resume --pool {pool}`"),
                                ))
                            }
                            _ => Ok(Look::Pending(())),
                        }
                    })
                },
                |(), elapsed| {
                    progress.waiting(
                        &format!("{MIG_CONFIG_STATE_LABEL}=success on {n}"),
                        elapsed.as_secs(),
                        bound.as_secs(),
                    );
                },
            )
            .await?;
        applied.map_err(|TimedOut(())| {
            let pool = self.j.pool.clone();
            self.stopped(
                format!(
                    "timed out after {} waiting for {MIG_CONFIG_STATE_LABEL}=success on {n}",
                    human_duration(bound)
                ),
                format!(
                    "check MIG Manager on {n}; then `gpuctl upgrade driver --resume --pool {pool}`"
                ),
            )
        })
    }

    /// The served DeviceTaintRule resource, when the journal has rules to write.
    async fn rule_resource(&self) -> Result<Option<client::Resolved>, UpgradeError> {
        if self.j.device_taint_rules.is_empty() {
            return Ok(None);
        }
        self.k
            .resolve_group_kind("resource.k8s.io", "DeviceTaintRule")
            .await
            .map_err(|e| self.cluster(e))
    }

    /// Takes node `n`'s GPUs out of service with its DeviceTaintRule (DRA pools whose cluster
    /// serves the rule; nothing otherwise). Server-side apply: a resumed run applies it again
    /// unchanged.
    async fn taint_devices(&mut self, n: &str) -> Result<(), UpgradeError> {
        let Some(rule) = self.j.device_taint_rules.get(n).cloned() else {
            return Ok(());
        };
        let Some(r) = self.rule_resource().await? else {
            let pool = self.j.pool.clone();
            return Err(self.stopped(
                format!("the cluster no longer serves DeviceTaintRule; {n}'s GPUs cannot be taken out of service as planned"),
                format!("turn DRADeviceTaintRules back on and `gpuctl upgrade driver --resume --pool {pool}`, or `gpuctl upgrade rollback --pool {pool}`"),
            ));
        };
        apply_as_upgrade(self.k, &r, &rule)
            .await
            .map_err(|e| self.cluster(e))?;
        let name = rule["metadata"]["name"].as_str().unwrap_or_default();
        self.progress
            .step(&format!("DeviceTaintRule/{name}"), "applied");
        self.save(format!(
            "{n}: GPUs out of service: DeviceTaintRule {name} ({}={}:{}) applied",
            rule["spec"]["taint"]["key"].as_str().unwrap_or_default(),
            rule["spec"]["taint"]["value"].as_str().unwrap_or_default(),
            rule["spec"]["taint"]["effect"].as_str().unwrap_or_default(),
        ))
        .await
    }

    /// Deletes node `n`'s DeviceTaintRule (absent already: nothing to do).
    async fn untaint_devices(&mut self, n: &str) -> Result<(), UpgradeError> {
        let Some(name) = self
            .j
            .device_taint_rules
            .get(n)
            .and_then(|r| r["metadata"]["name"].as_str().map(str::to_string))
        else {
            return Ok(());
        };
        let Some(r) = self.rule_resource().await? else {
            return Ok(());
        };
        let existed = self
            .k
            .get(&r, None, &name)
            .await
            .map_err(|e| self.cluster(e))?
            .is_some();
        if !existed {
            return Ok(());
        }
        self.k
            .delete(&r, None, &name, None)
            .await
            .map_err(|e| self.cluster(e))?;
        self.progress
            .step(&format!("DeviceTaintRule/{name}"), "deleted");
        self.save(format!(
            "{n}: GPUs back in service: DeviceTaintRule {name} deleted"
        ))
        .await
    }

    /// Deletes every DeviceTaintRule of the journal that is still there.
    async fn untaint_all(&mut self) -> Result<(), UpgradeError> {
        let nodes: Vec<String> = self.j.device_taint_rules.keys().cloned().collect();
        for n in nodes {
            self.untaint_devices(&n).await?;
        }
        Ok(())
    }

    /// No node in the cluster carries `gpuctl.dev/driver=<cr>`.
    async fn unused(&self, cr: &str) -> Result<bool, UpgradeError> {
        let sel = BTreeMap::from([(DRIVER_LABEL.to_string(), cr.to_string())]);
        let nodes = read::read_nodes(self.k, &sel)
            .await
            .map_err(|e| self.cluster(e))?;
        Ok(nodes.is_empty())
    }

    async fn delete_cr(&self, name: &str) -> Result<(), UpgradeError> {
        let Some(r) = self.resource(DRIVER_API, DRIVER_KIND).await? else {
            return Ok(());
        };
        self.k
            .delete(&r, None, name, None)
            .await
            .map_err(|e| self.cluster(e))
    }
}

/// Server-side applies a manifest with the upgrade's field manager (forced: an earlier attempt's
/// CR is taken over).
async fn apply_as_upgrade(
    k: &Kube,
    r: &client::Resolved,
    manifest: &Value,
) -> Result<(), client::ClusterError> {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    let api: Api<DynamicObject> = Api::all_with(k.client(), &r.resource);
    let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
    let params = PatchParams {
        field_manager: Some(gpuctl_plan::upgrade::FIELD_MANAGER.to_string()),
        force: true,
        ..PatchParams::default()
    };
    let patch = Patch::Apply(manifest);
    client::retry(|| api.patch(name, &params, &patch))
        .await
        .map(|_| ())
        .map_err(|e| client::classify(&format!("{}/{name}", r.resource.kind), e))
}
