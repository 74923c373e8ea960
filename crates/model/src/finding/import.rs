//! Import's warning ids (GPU300–GPU349): what each says, why, how to act on it. Registered in
//! [`crate::finding`]; `gpuctl explain GPU30x` prints an entry and docs/rules.md lists them
//! (docs/import.md describes the mapping).

use crate::finding::{Family, Rule};
use crate::located::Severity::Warning;

macro_rules! rules {
    ($($id:literal $name:literal $area:literal $sev:ident {
        title: $title:literal, why: $why:literal, fix: $fix:literal, source: $source:literal, example: $example:literal $(,)?
    })*) => {
        /// Import's rules, ordered by id.
        pub static RULES: &[Rule] = &[$(Rule {
            id: $id, name: $name, family: Family::Import, area: $area, severity: $sev,
            title: $title, why: $why, fix: $fix, source: $source, example: $example, fixed: "",
        }),*];
    };
}

rules! {
    "GPU300" "not-expressed" "mapping" Warning {
        title: "Something the cluster has that the imported blueprint cannot express, or expresses only approximately: it is left out (or a choice was made), and the blueprint carries an `import:` comment at the place it would belong.",
        why: "Applying the imported blueprint manages only what it expresses; what was left out stays as it is in the cluster, unmanaged, or a later apply changes it toward the choice import made.",
        fix: "Read the comment at the path the warning names; express the setting by hand where gpuctl has a field for it, or accept that gpuctl leaves it alone.",
        source: "The mapping of each kind (docs/import.md); the cluster's objects and Helm releases as read",
        example: "spec.nodePools: ResourceFlavor `h100` selects GPU nodes that differ in GPU, partitioning, driver or taints; they are imported as separate pools",
    }
    "GPU301" "does-not-round-trip" "self-check" Warning {
        title: "A plan of the imported blueprint against the same cluster would change, conflict on or upgrade something: the import does not round-trip there.",
        why: "The first `gpuctl apply` of the blueprint as imported would change the cluster, which an import is meant not to do.",
        fix: "Edit the blueprint until `gpuctl plan` of it shows no change for the object the warning names, or accept the change deliberately.",
        source: "The self-check plan of the imported blueprint against the same live view (docs/import.md)",
        example: "a plan of this blueprint would change ResourceQuota/team-a/gpuctl-quota (spec.hard)",
    }
    "GPU302" "not-valid" "self-check" Warning {
        title: "The imported blueprint does not pass `gpuctl validate`: each finding is a comment above its field.",
        why: "The cluster holds something validation refuses (an unknown driver, a quota no pool can serve); gpuctl will not plan or apply the blueprint until it is fixed.",
        fix: "Run `gpuctl validate` on the written file and fix each finding (the comments name the rule: `gpuctl explain GPUxxx`).",
        source: "Validation of the imported blueprint (the validation rules, GPU001–GPU199 and GPU1000–GPU1999)",
        example: "the imported blueprint does not pass `gpuctl validate`: each finding is a comment above its field",
    }
}
