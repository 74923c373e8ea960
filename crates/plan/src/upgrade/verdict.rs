//! Whether a node finished its driver swap: the checks a node must pass on its new driver, as
//! the operator, GPU Feature Discovery, MIG Manager and the validator report them in labels and
//! pod states. Pure: the cluster crate reads the node and its validator pods.

use serde::Serialize;

use super::{
    DRIVER_OWNER_LABEL, DRIVER_VERSION_LABEL, MIG_CONFIG_STATE_LABEL, UPGRADE_DONE, UPGRADE_FAILED,
    UPGRADE_STATE_LABEL,
};
use crate::live::workloads::{LiveNode, LivePod};

/// Where a node stands against the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "detail", rename_all = "kebab-case")]
pub enum Verdict {
    /// Every check passed.
    Pass,
    /// Not there yet: what is still missing.
    Pending(Vec<String>),
    /// Failed for good (until someone fixes the node): why.
    Failed(String),
}

/// What a node must show on the new driver.
#[derive(Debug, Clone)]
pub struct Expectation<'a> {
    /// Target driver (full version; with precompiled drivers the branch is enough).
    pub driver: &'a str,
    /// The CR that must own the node (checked when the operator sets its owner label).
    pub owner_cr: &'a str,
    /// MIG-capable: `nvidia.com/mig.config.state` must be `success`.
    pub mig: bool,
    /// The operator's validator must be Ready on the node.
    pub validator: bool,
}

/// Checks a node (and the validator pods on it) against `want`: the operator's upgrade state is
/// `upgrade-done`, GFD reports the target driver, MIG Manager reports success, the validator is
/// Ready, the node is Ready. `upgrade-failed` and a failed MIG reconfiguration fail at once.
pub fn verdict(node: &LiveNode, validators: &[LivePod], want: &Expectation<'_>) -> Verdict {
    let mut missing = Vec::new();
    let label = |k: &str| node.label(k).unwrap_or("");
    match label(UPGRADE_STATE_LABEL) {
        UPGRADE_DONE => {}
        UPGRADE_FAILED => {
            return Verdict::Failed(format!(
                "the operator reports {UPGRADE_STATE_LABEL}={UPGRADE_FAILED} (see the nvidia-driver pod's logs on {})",
                node.name
            ));
        }
        s => missing.push(format!(
            "{UPGRADE_STATE_LABEL}={UPGRADE_DONE} (is `{}`)",
            if s.is_empty() { "unset" } else { s }
        )),
    }
    if let Some(owner) = node.label(DRIVER_OWNER_LABEL)
        && owner != want.owner_cr
    {
        missing.push(format!(
            "{DRIVER_OWNER_LABEL}={} (is `{owner}`)",
            want.owner_cr
        ));
    }
    let have = label(DRIVER_VERSION_LABEL);
    let driver_ok = have == want.driver
        || (!want.driver.contains('.') && have.split('.').next() == Some(want.driver));
    if !driver_ok {
        missing.push(format!(
            "{DRIVER_VERSION_LABEL}={} (is `{}`)",
            want.driver,
            if have.is_empty() { "unset" } else { have }
        ));
    }
    if want.mig {
        match label(MIG_CONFIG_STATE_LABEL) {
            "success" => {}
            "failed" => {
                return Verdict::Failed(format!(
                    "MIG Manager reports {MIG_CONFIG_STATE_LABEL}=failed (see the nvidia-mig-manager pod's logs on {})",
                    node.name
                ));
            }
            s => missing.push(format!(
                "{MIG_CONFIG_STATE_LABEL}=success (is `{}`)",
                if s.is_empty() { "unset" } else { s }
            )),
        }
    }
    if want.validator {
        let live: Vec<&LivePod> = validators.iter().filter(|p| !p.terminating).collect();
        if live.is_empty() {
            missing.push("an nvidia-operator-validator pod on the node".into());
        } else if !live.iter().all(|p| p.ready) {
            missing.push("the nvidia-operator-validator pod Ready".into());
        }
    }
    if !node.ready {
        missing.push("node Ready".into());
    }
    if missing.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Pending(missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::workloads::PodRole;
    use std::collections::BTreeMap;

    fn node(labels: &[(&str, &str)]) -> LiveNode {
        LiveNode {
            name: "n1".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            unschedulable: true,
            ready: true,
            taints: vec![],
            gpus: BTreeMap::new(),
        }
    }

    fn validator(ready: bool) -> LivePod {
        LivePod {
            namespace: "gpu-operator".into(),
            name: "nvidia-operator-validator-x".into(),
            uid: "u".into(),
            node: "n1".into(),
            phase: "Running".into(),
            terminating: false,
            ready,
            gpus: BTreeMap::new(),
            claims: 0,
            owner: Some("DaemonSet/nvidia-operator-validator".into()),
            role: PodRole::DaemonSet,
            labels: BTreeMap::new(),
            grace_seconds: 30,
            do_not_disrupt: false,
        }
    }

    const WANT: Expectation<'static> = Expectation {
        driver: "595.91.07",
        owner_cr: "pool-a",
        mig: true,
        validator: true,
    };

    #[test]
    fn a_node_passes_only_when_every_signal_agrees() {
        let done = node(&[
            (UPGRADE_STATE_LABEL, UPGRADE_DONE),
            (DRIVER_OWNER_LABEL, "pool-a"),
            (DRIVER_VERSION_LABEL, "595.91.07"),
            (MIG_CONFIG_STATE_LABEL, "success"),
        ]);
        assert_eq!(verdict(&done, &[validator(true)], &WANT), Verdict::Pass);
        match verdict(&done, &[validator(false)], &WANT) {
            Verdict::Pending(m) => assert!(m[0].contains("Ready"), "{m:?}"),
            v => panic!("{v:?}"),
        }
        let old = node(&[
            (UPGRADE_STATE_LABEL, UPGRADE_DONE),
            (DRIVER_VERSION_LABEL, "580.173.02"),
            (MIG_CONFIG_STATE_LABEL, "pending"),
        ]);
        match verdict(&old, &[validator(true)], &WANT) {
            Verdict::Pending(m) => assert_eq!(m.len(), 2, "{m:?}"),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn failures_stop_at_once() {
        let failed = node(&[(UPGRADE_STATE_LABEL, UPGRADE_FAILED)]);
        assert!(matches!(verdict(&failed, &[], &WANT), Verdict::Failed(_)));
        let mig = node(&[
            (UPGRADE_STATE_LABEL, UPGRADE_DONE),
            (MIG_CONFIG_STATE_LABEL, "failed"),
        ]);
        assert!(matches!(verdict(&mig, &[], &WANT), Verdict::Failed(_)));
    }

    #[test]
    fn precompiled_targets_match_by_branch() {
        let n = node(&[
            (UPGRADE_STATE_LABEL, UPGRADE_DONE),
            (DRIVER_VERSION_LABEL, "595.58.03"),
        ]);
        let want = Expectation {
            driver: "595",
            owner_cr: "pool-a",
            mig: false,
            validator: false,
        };
        assert_eq!(verdict(&n, &[], &want), Verdict::Pass);
    }
}
