//! A Karpenter pool's upgrade: the nodes are replaced, not relabelled. The run applies the green
//! CR, server-side applies the NodePool's template label `gpuctl.dev/driver` (the upgrade's field
//! manager, forced), and follows Karpenter's drift: each NodeClaim made from the old template is
//! `Drifted` (its `karpenter.sh/nodepool-hash` no longer matches), so Karpenter launches its
//! replacement from the new template, waits for it to initialise, taints the old node
//! `karpenter.sh/disrupted` and drains it with evictions, under the NodePool's budgets for
//! `Drifted`. The run records each node that leaves (`replaced`) and each that arrives, and
//! validates every arrival on the target driver exactly as a relabelled node is validated. A
//! rollback moves the template back and follows the same drift the other way.
//!
//! Waits are bounded by progress, not by a total: the run stops, naming what holds each node, when
//! no node left or validated for the drain timeout plus the validation timeout.

use std::collections::BTreeMap;
use std::time::Instant;

use gpuctl_model::names::MIG_CAPABLE_LABEL;
use gpuctl_pipeline::render::DRIVER_LABEL;
use gpuctl_plan::live::workloads::LiveNode;
use gpuctl_plan::upgrade::human_duration;
use gpuctl_plan::upgrade::journal::{JournalPhase, NodeRecord, NodeState};
use gpuctl_plan::upgrade::verdict::Verdict;

use super::{DRIVER_API, DRIVER_KIND, Direction, Run, UpgradeError};
use crate::read;

/// What one look at the pool found.
#[derive(Default)]
struct Look {
    /// Nodes still on the CR the template left.
    leaving: Vec<String>,
    /// Arrived nodes not validated yet, with what is missing.
    pending: BTreeMap<String, Vec<String>>,
    /// Something moved (a node left or validated) since the last look.
    moved: bool,
}

impl Run<'_> {
    /// Forward: green CR, template, drift, finish.
    pub(super) async fn forward_drift(&mut self) -> Result<(), UpgradeError> {
        if !self.j.prepared {
            self.progress.phase("prepare", 1);
            self.apply_green_cr().await?;
            self.j.prepared = true;
            let event = format!(
                "prepared: NVIDIADriver {} ({}) applied",
                self.j.green_cr, self.j.to_version
            );
            self.save(event).await?;
        }
        let green = self.j.green_cr.clone();
        self.move_template(&green).await?;
        self.follow_drift(Direction::Forward).await?;
        self.finish().await
    }

    /// Back: template to the blue CR (which must still exist), drift, finish.
    pub(super) async fn backward_drift(&mut self) -> Result<(), UpgradeError> {
        let blue = self.j.blue_cr.clone();
        if !self.cr_exists(&blue).await? {
            let pool = self.j.pool.clone();
            return Err(self.stopped(
                format!(
                    "NVIDIADriver {blue} is gone (deleted when the upgrade completed): nodes Karpenter launched from a template naming it would get no driver"
                ),
                format!(
                    "to go back to {}, plan an upgrade to it: `gpuctl upgrade driver --pool {pool} --to {}`",
                    self.j.from_version, self.j.from_version
                ),
            ));
        }
        self.move_template(&blue).await?;
        self.follow_drift(Direction::Back).await?;
        self.finish_rollback().await
    }

    /// Server-side applies the NodePool's template label `gpuctl.dev/driver=<cr>` (once: the
    /// journal records the CR the template names).
    async fn move_template(&mut self, cr: &str) -> Result<(), UpgradeError> {
        let Some(rec) = self.j.karpenter.clone() else {
            return Ok(());
        };
        if rec.template_cr == cr {
            return Ok(());
        }
        let api = &gpuctl_model::profiles::Catalog::embedded()
            .provisioning()
            .karpenter
            .nodepool_api;
        let r = self.served(api, "NodePool").await?;
        // The template's labels are one atomic map in Karpenter's CRD
        // (`x-kubernetes-map-type: atomic`): an apply of the driver label alone would replace
        // every other label of the pool's nodes. So the whole map as it is, with that key changed.
        let live = self
            .k
            .get(&r, None, &rec.node_pool)
            .await
            .map_err(|e| self.cluster(e))?
            .ok_or_else(|| {
                self.stopped(
                    format!("NodePool {} is gone", rec.node_pool),
                    "apply the blueprint (it renders the NodePool), then `gpuctl upgrade driver --resume`".into(),
                )
            })?;
        let mut labels = live["spec"]["template"]["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        labels.insert(DRIVER_LABEL.to_string(), cr.into());
        let patch = serde_json::json!({
            "apiVersion": api,
            "kind": "NodePool",
            "metadata": {"name": rec.node_pool},
            "spec": {"template": {"metadata": {"labels": labels}}},
        });
        super::apply_as_upgrade(self.k, &r, &patch)
            .await
            .map_err(|e| self.cluster(e))?;
        self.progress
            .step(&format!("NodePool/{}", rec.node_pool), "template moved");
        if let Some(k) = self.j.karpenter.as_mut() {
            k.template_cr = cr.to_string();
        }
        self.save(format!(
            "NodePool {}: template label {DRIVER_LABEL}={cr}; Karpenter replaces the nodes made from the old template (drift)",
            rec.node_pool
        ))
        .await
    }

    /// Follows the drift of `dir` until no pool node is on the CR the template left and every
    /// node on the other has validated; stops when nothing moves for the drain plus validation
    /// timeouts.
    async fn follow_drift(&mut self, dir: Direction) -> Result<(), UpgradeError> {
        let bound =
            std::time::Duration::from_secs(self.j.drain_timeout_s) + self.timing.validate_timeout;
        let mut since = Instant::now();
        self.progress.phase("drift", self.j.nodes.len());
        loop {
            let look = self.look(dir).await?;
            if look.leaving.is_empty() && look.pending.is_empty() {
                return Ok(());
            }
            if look.moved {
                since = Instant::now();
            }
            let elapsed = since.elapsed();
            if elapsed > bound {
                return Err(self.stalled(dir, &look, bound).await);
            }
            self.progress.waiting(
                &format!(
                    "Karpenter to replace {} node(s) and {} to validate",
                    look.leaving.len(),
                    look.pending.len()
                ),
                elapsed.as_secs(),
                bound.as_secs(),
            );
            tokio::time::sleep(self.timing.poll).await;
        }
    }

    /// One look at the pool: records nodes that left and nodes that arrived, validates arrivals.
    async fn look(&mut self, dir: Direction) -> Result<Look, UpgradeError> {
        let (from_cr, to_cr) = self.crs(dir);
        let (driver, done) = match dir {
            Direction::Forward => (self.expected_driver(), NodeState::Done),
            Direction::Back => (self.j.from_version.clone(), NodeState::RolledBack),
        };
        let live = read::read_nodes(self.k, &self.j.selector)
            .await
            .map_err(|e| self.cluster(e))?;
        let mut look = Look::default();
        // Nodes the journal knows that are gone: Karpenter replaced (or removed) them.
        let gone: Vec<String> = self
            .j
            .nodes
            .iter()
            .filter(|(n, r)| {
                !matches!(r.state, NodeState::Replaced) && !live.iter().any(|l| &l.name == *n)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            look.moved = true;
            self.set_state(&n, NodeState::Replaced, Some("the Node is gone".into()))
                .await?;
        }
        for node in &live {
            let on = node.label(DRIVER_LABEL);
            if on == Some(from_cr.as_str()) {
                let state = match dir {
                    Direction::Forward => NodeState::Blue,
                    Direction::Back => NodeState::Moved,
                };
                self.record_arrival(node, state).await?;
                look.leaving.push(node.name.clone());
            } else if on == Some(to_cr.as_str()) {
                self.record_arrival(node, NodeState::Moved).await?;
                if self.state(&node.name) == done {
                    continue;
                }
                match self.verdict_on(&node.name, &driver, &to_cr).await? {
                    None => {}
                    Some(Verdict::Pass) => {
                        look.moved = true;
                        self.set_state(&node.name, done, None).await?;
                    }
                    Some(Verdict::Failed(why)) => {
                        self.progress.failed(&format!("Node/{}", node.name), &why);
                        self.set_state(&node.name, NodeState::Failed, Some(why.clone()))
                            .await?;
                        return Err(self.arrival_failed(dir, &node.name, &why).await);
                    }
                    Some(Verdict::Pending(missing)) => {
                        look.pending.insert(node.name.clone(), missing);
                    }
                }
            }
        }
        // A NodeClaim Karpenter launched whose Node has not registered yet: its node will arrive
        // (and must validate) before the pool is settled.
        for claim in self.launching(&live).await? {
            look.pending.insert(
                claim,
                vec!["its Node to register (NodeClaim launched)".into()],
            );
        }
        Ok(look)
    }

    /// NodeClaims of the pool's NodePool whose Node is not among `live` (launching, or registered
    /// without the pool's labels yet), as `NodeClaim/<name>`.
    async fn launching(&self, live: &[LiveNode]) -> Result<Vec<String>, UpgradeError> {
        use kube::api::{Api, DynamicObject, ListParams};
        let Some(rec) = &self.j.karpenter else {
            return Ok(Vec::new());
        };
        let facts = &gpuctl_model::profiles::Catalog::embedded()
            .provisioning()
            .karpenter;
        let Some(r) = self.resource(&facts.nodepool_api, "NodeClaim").await? else {
            return Ok(Vec::new());
        };
        let api: Api<DynamicObject> = Api::all_with(self.k.client(), &r.resource);
        let lp =
            ListParams::default().labels(&format!("{}={}", facts.nodepool_label, rec.node_pool));
        let claims = crate::client::retry(|| api.list(&lp))
            .await
            .map_err(|e| self.cluster(crate::client::classify("list NodeClaims", e)))?;
        Ok(claims
            .items
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter(|c| {
                let node = c.data["status"]["nodeName"].as_str();
                node.is_none_or(|n| !live.iter().any(|l| l.name == n))
            })
            .filter_map(|c| c.metadata.name.as_ref().map(|n| format!("NodeClaim/{n}")))
            .collect())
    }

    /// `(from, to)`: the CR the template left and the one it names.
    fn crs(&self, dir: Direction) -> (String, String) {
        match dir {
            Direction::Forward => (self.j.blue_cr.clone(), self.j.green_cr.clone()),
            Direction::Back => (self.j.green_cr.clone(), self.j.blue_cr.clone()),
        }
    }

    /// Puts a node the journal does not know yet in it (`state`: where it starts).
    async fn record_arrival(
        &mut self,
        node: &LiveNode,
        state: NodeState,
    ) -> Result<(), UpgradeError> {
        if self.j.nodes.contains_key(&node.name) {
            return Ok(());
        }
        self.j.nodes.insert(
            node.name.clone(),
            NodeRecord {
                batch: 0,
                state,
                initially_unschedulable: node.unschedulable,
                recorded: BTreeMap::new(),
                mig_capable: node.label(MIG_CAPABLE_LABEL) == Some("true"),
                driver_before: None,
                message: None,
            },
        );
        let on = node.label(DRIVER_LABEL).unwrap_or_default().to_string();
        self.save(format!(
            "{}: launched by Karpenter on {DRIVER_LABEL}={on}",
            node.name
        ))
        .await
    }

    /// The run stops: an arrived node failed on the new driver.
    async fn arrival_failed(&mut self, dir: Direction, n: &str, why: &str) -> UpgradeError {
        let pool = self.j.pool.clone();
        let (_, to_cr) = self.crs(dir);
        if dir == Direction::Forward {
            self.j.phase = JournalPhase::Failed;
        }
        let _ = self.save(format!("{n} failed on {to_cr}: {why}")).await;
        self.stopped(
            format!("node {n}, launched by Karpenter on NVIDIADriver {to_cr}, failed: {why}"),
            format!(
                "Karpenter keeps replacing drifted nodes under the NodePool's budget; stop it by fixing the driver (its pod logs on {n}) and `gpuctl upgrade driver --resume --pool {pool}`, or move the template back with `gpuctl upgrade rollback --pool {pool}`"
            ),
        )
    }

    /// The run stops: nothing moved for `bound`. Names what holds each node that has not left.
    async fn stalled(
        &mut self,
        dir: Direction,
        look: &Look,
        bound: std::time::Duration,
    ) -> UpgradeError {
        let facts = &gpuctl_model::profiles::Catalog::embedded()
            .provisioning()
            .karpenter;
        let mut what = Vec::new();
        for n in &look.leaving {
            let held: Vec<String> = match read::pods_on(self.k, n).await {
                Ok(pods) => pods
                    .iter()
                    .filter(|p| p.do_not_disrupt && !p.terminating)
                    .map(|p| p.id())
                    .collect(),
                Err(_) => Vec::new(),
            };
            let draining = read::read_node(self.k, n)
                .await
                .ok()
                .flatten()
                .is_some_and(|node| {
                    node.taints
                        .iter()
                        .any(|t| t.starts_with(&facts.disrupted_taint))
                });
            what.push(if !held.is_empty() {
                format!(
                    "node {n} is not replaced: {} carry `{}: \"true\"`",
                    held.join(", "),
                    facts.do_not_disrupt
                )
            } else if draining {
                format!("node {n} is being drained by Karpenter (`{}`)", facts.disrupted_taint)
            } else {
                format!(
                    "node {n} is not replaced yet: check its NodeClaim's `{}` condition and the NodePool's budgets for `{}`",
                    facts.drifted_reason, facts.drifted_reason
                )
            });
        }
        for (n, missing) in &look.pending {
            if n.starts_with("NodeClaim/") {
                what.push(format!("{n} has no registered Node of the pool yet"));
            } else {
                what.push(format!(
                    "node {n} has not validated: waiting for {}",
                    missing.join(", ")
                ));
            }
        }
        if dir == Direction::Forward {
            self.j.phase = JournalPhase::Failed;
        }
        let _ = self
            .save(format!("drift stalled for {}", human_duration(bound)))
            .await;
        let pool = self.j.pool.clone();
        self.stopped(
            format!(
                "nothing moved for {} (drain timeout plus validation timeout):\n{}",
                human_duration(bound),
                what.join("\n")
            ),
            format!(
                "once the cause is gone, `gpuctl upgrade driver --resume --pool {pool}` follows the drift again (`gpuctl upgrade rollback --pool {pool}` moves the template back); `kubectl get nodeclaims -l {}={}` shows Karpenter's side",
                facts.nodepool_label,
                self.j.karpenter.as_ref().map_or(pool.as_str(), |k| k.node_pool.as_str())
            ),
        )
    }

    /// The NVIDIADriver CR `name` exists.
    async fn cr_exists(&self, name: &str) -> Result<bool, UpgradeError> {
        let Some(r) = self.resource(DRIVER_API, DRIVER_KIND).await? else {
            return Ok(false);
        };
        self.k
            .get(&r, None, name)
            .await
            .map(|o| o.is_some())
            .map_err(|e| self.cluster(e))
    }
}
