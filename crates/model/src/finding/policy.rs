//! The policy family's ids (GPU500–GPU549, then GPU6000–GPU6999): the results of an
//! organisation's own Rego policies (`--policy DIR`, docs/policy.md). The policies say what is
//! wrong; these ids say which kind of rule said it, so CI configuration and SARIF tell a blocking
//! result from an advisory one. Registered in [`crate::finding`]; emitted by gpuctl-policy.

use crate::finding::{Family, Rule};
use crate::located::Severity::{Error, Warning};

macro_rules! rules {
    ($($id:literal $name:literal $area:literal $sev:ident {
        title: $title:literal, why: $why:literal, fix: $fix:literal, source: $source:literal, example: $example:literal $(,)?
    })*) => {
        /// The policy family's rules, ordered by id.
        pub static RULES: &[Rule] = &[$(Rule {
            id: $id, name: $name, family: Family::Policy, area: $area, severity: $sev,
            title: $title, why: $why, fix: $fix, source: $source, example: $example, fixed: "",
        }),*];
    };
}

rules! {
    "GPU500" "policy-deny" "deny" Error {
        title: "A `deny` or `violation` rule of the organisation's policies (`--policy DIR`, conftest's conventions) produced this message: the run fails.",
        why: "The organisation decided that a blueprint, plan or fleet like this one must not merge; its policy, not gpuctl's facts, says why (the message, and the rule's query after it).",
        fix: "Change the blueprint (the finding points at the line the policy named with `_loc`), or, when the policy is wrong, change it with its tests (`gpuctl policy test DIR`), or add a conftest `exception` for the rule.",
        source: "The organisation's Rego policies in the directory `--policy` names; the input they read is docs/policy.md's",
        example: "tenant dev-research: nvidia.com/gpu quota 128 on H100 pool h100-train is over 64 for a dev tenant (data.main.deny_dev_h100_quota)",
    }
    "GPU501" "policy-warn" "warn" Warning {
        title: "A `warn` rule of the organisation's policies (`--policy DIR`) produced this message: advice, the run passes (`--strict` fails on it in `validate`).",
        why: "The organisation wants this looked at before it merges, without blocking it.",
        fix: "Read the message; change the blueprint, or accept the advice deliberately.",
        source: "The organisation's Rego policies in the directory `--policy` names; the input they read is docs/policy.md's",
        example: "fleet wave rest (the last) has no bake time: no wave waits for it, but nothing watches it settle either (data.main.warn_last_wave_without_bake)",
    }
}
