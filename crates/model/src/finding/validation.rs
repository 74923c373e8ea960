//! Every validation rule gpuctl checks: id, severity, what, why, how to fix, where the facts come
//! from. One of the finding families of [`crate::finding`]: `gpuctl explain` prints from there and
//! docs/rules.md is generated from it (a test keeps it current).

use crate::finding::Family;
use crate::located::Severity;

pub use crate::finding::Rule;

use Severity::{Error, Warning};

macro_rules! rules {
    ($($id:literal $name:literal $family:literal $sev:ident {
        checks: $checks:literal, why: $why:literal, fix: $fix:literal, source: $source:literal, example: $example:literal, fixed: $fixed:literal $(,)?
    })*) => {
        /// All validation rules, ordered by id.
        pub static RULES: &[Rule] = &[$(Rule {
            id: $id, name: $name, family: Family::Validation, area: $family, severity: $sev,
            title: $checks, why: $why, fix: $fix, source: $source, example: $example, fixed: $fixed,
        }),*];
    };
}

rules! {
    "GPU001" "yaml-syntax" "structure" Error {
        checks: "The file is readable UTF-8 text holding exactly one YAML document without duplicate keys, unsupported tags or runaway aliases.",
        why: "Nothing else can be checked in a file that does not parse; duplicate keys are silently collapsed by most YAML tools, so the value you read may not be the one applied.",
        fix: "Fix the syntax at the reported line and column; keep one of each duplicated key.",
        source: "YAML 1.2 core schema",
        example: "spec:\n  tenants: [ {name: team-a}\n",
        fixed: "spec:\n  tenants: [ {name: team-a} ]\n",
    }
    "GPU002" "unknown-field" "structure" Error {
        checks: "Every field is part of the gpuctl.dev/v1alpha1 contract.",
        why: "A misspelt field is otherwise ignored and its intent silently lost (a quota that is never set, a taint never applied).",
        fix: "Use the suggested field name, or remove the field. `gpuctl schema` gives editors completion for every field.",
        source: "docs/blueprint.md",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      gpus: {model: H100-SXM5-80GB, count: 8}   # gpu, not gpus\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      gpu: {model: H100-SXM5-80GB, count: 8}\n",
    }
    "GPU003" "invalid-value" "structure" Error {
        checks: "Every value has the type the contract expects (numbers, booleans, strings, lists, accepted enum values); versions are quoted strings.",
        why: "YAML reads `12.10` as the number 12.1 and `no` as a string in YAML 1.2; a value of the wrong type means something other than what was written.",
        fix: "Write a value of the expected type; quote versions (`\"12.4\"`).",
        source: "docs/blueprint.md",
        example: "spec:\n  kubernetes:\n    version: 1.34   # a number: 1.30 would be read as 1.3\n",
        fixed: "spec:\n  kubernetes:\n    version: \"1.34\"\n",
    }
    "GPU004" "missing-field" "structure" Error {
        checks: "Required fields are present.",
        why: "gpuctl never guesses required intent such as a pool's GPU model or node count.",
        fix: "Add the field named in the finding.",
        source: "docs/blueprint.md",
        example: "spec:\n  nodePools:\n    - name: a100\n      selector: {gpuctl.dev/pool: a100}\n      gpu: {model: A100-SXM4-80GB, count: 8}   # nodes is missing\n",
        fixed: "spec:\n  nodePools:\n    - name: a100\n      selector: {gpuctl.dev/pool: a100}\n      nodes: 4\n      gpu: {model: A100-SXM4-80GB, count: 8}\n",
    }
    "GPU005" "api-version" "structure" Error {
        checks: "`apiVersion` is `gpuctl.dev/v1alpha1` and `kind` is `ClusterBlueprint`.",
        why: "Another version of the contract may mean different things by the same fields.",
        fix: "Set `apiVersion: gpuctl.dev/v1alpha1` and `kind: ClusterBlueprint`.",
        source: "docs/blueprint.md",
        example: "apiVersion: gpuctl.dev/v1\nkind: ClusterBlueprint\n",
        fixed: "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\n",
    }
    "GPU009" "tenant-without-namespaces" "structure" Error {
        checks: "Every tenant lists at least one namespace.",
        why: "A tenant is rendered into its namespaces: each gets the tenant label, the ResourceQuota, the LimitRange and the Kueue LocalQueue. Without a namespace gpuctl renders nothing for the tenant, so its quota, defaults and queue are declared, reviewed and counted, but nothing enforces or uses them.",
        fix: "List the namespaces the tenant's workloads run in, or remove the tenant.",
        source: "docs/blueprint.md",
        example: "spec:\n  tenants:\n    - {name: research, namespaces: [], queue: cq-team-a}\n",
        fixed: "spec:\n  tenants:\n    - {name: research, namespaces: [research], queue: cq-team-a}\n",
    }
    "GPU010" "invalid-name" "structure" Error {
        checks: "Names that become Kubernetes object names, namespaces, file names or label values (blueprint, operator namespace, pools, tenants, namespaces, cohorts, queues) are DNS-1123 labels (lower case alphanumerics and `-`, at most 63 characters); PriorityClass names are DNS-1123 subdomains.",
        why: "The API server rejects such objects at apply time, after other objects were already changed.",
        fix: "Rename to lower case letters, digits and `-`, starting and ending with an alphanumeric.",
        source: "profiles/limits.yaml (Kubernetes object names)",
        example: "spec:\n  tenants:\n    - {name: Team_B, namespaces: [team-b], queue: cq-team-a}\n",
        fixed: "spec:\n  tenants:\n    - {name: team-b, namespaces: [team-b], queue: cq-team-a}\n",
    }
    "GPU011" "duplicate-name" "structure" Error {
        checks: "Pools, tenants, priority classes, cohorts, cluster queues and Volcano queues have unique names, no namespace belongs to two tenants or to a tenant and the GPU Operator, and no pool declares one taint (key and effect) twice.",
        why: "Two declarations of one object overwrite each other; a namespace shared by two tenants gets two quotas and two LocalQueues.",
        fix: "Rename or merge the duplicates.",
        source: "docs/blueprint.md",
        example: "spec:\n  tenants:\n    - {name: a, namespaces: [ml], queue: cq-team-a}\n    - {name: b, namespaces: [ml], queue: cq-team-a}\n",
        fixed: "spec:\n  tenants:\n    - {name: a, namespaces: [ml-a], queue: cq-team-a}\n    - {name: b, namespaces: [ml-b], queue: cq-team-a}\n",
    }
    "GPU012" "dangling-reference" "structure" Error {
        checks: "Every reference resolves: tenant priority class and queue, cluster queue cohort and pools, cohort parent, Volcano queue parent.",
        why: "Kueue and the API server accept dangling references and the workloads then wait forever (an inactive ClusterQueue, a missing PriorityClass rejects pods).",
        fix: "Declare the referenced object or correct the name (a suggestion is given when one is close).",
        source: "docs/blueprint.md; Kueue ClusterQueue status conditions",
        example: "spec:\n  tenants:\n    - {name: team-a, queue: cq-tema-a}\n",
        fixed: "spec:\n  tenants:\n    - {name: team-a, queue: cq-team-a}\n",
    }
    "GPU013" "pool-selector" "structure" Error {
        checks: "Every pool has a non-empty selector and no two pools can select the same node (one selector is not a subset of another).",
        why: "A node matched by two pools gets two MIG configs, two driver CRs and two sets of labels; the GPU Operator rejects overlapping NVIDIADriver selectors.",
        fix: "Give each pool a label that only its nodes carry.",
        source: "profiles/gpu-operator.yaml (NVIDIADriver node selectors must not overlap)",
        example: "spec:\n  nodePools:\n    - {name: h100-train, selector: {gpu: h100}}\n    - {name: h100-infer, selector: {gpu: h100, role: inference}}\n",
        fixed: "spec:\n  nodePools:\n    - {name: h100-train, selector: {gpu: h100, role: training}}\n    - {name: h100-infer, selector: {gpu: h100, role: inference}}\n",
    }
    "GPU014" "label-key" "structure" Error {
        checks: "Pool labels, taints and selectors use valid label keys and values, and pool labels do not write keys owned by the GPU Operator or Node Feature Discovery (`nvidia.com/gpu.*`, `nvidia.com/mig.*`, `feature.node.kubernetes.io/*`, `nvidia.com/cuda.*`).",
        why: "Those labels are rewritten by their controllers; gpuctl and the operator would fight over them on every reconcile.",
        fix: "Use your own prefix (e.g. `gpu.example.com/tier`); select on operator labels, never set them.",
        source: "docs/blueprint.md; GPU Operator and GFD label sets",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      labels: {nvidia.com/gpu.product: H100}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      labels: {gpu.example.com/product: H100}\n",
    }
    "GPU015" "unknown-gpu-model" "structure" Error {
        checks: "A pool's `gpu.model` is a key of the GPU catalog.",
        why: "Every compatibility, MIG and capacity check depends on the model's facts.",
        fix: "Use a catalog key (`gpuctl profiles` lists them); a suggestion is given when one is close.",
        source: "profiles/gpus.yaml",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      gpu: {model: H100-80GB, count: 8}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      gpu: {model: H100-SXM5-80GB, count: 8}\n",
    }
    "GPU016" "queueing-config" "structure" Error {
        checks: "`scheduling.queueing` has its section (`kueue` or `volcano`), and tenants name a queue only when a queueing system is chosen (the section's `version` is checked by GPU076 and GPU084).",
        why: "Queues declared for the other system are never rendered, and tenants bound to them are never admitted.",
        fix: "Set `scheduling.queueing` to the system whose section you wrote, or remove the other section.",
        source: "docs/blueprint.md",
        example: "spec:\n  scheduling:\n    queueing: none   # but a kueue section follows, and tenants name its queues\n",
        fixed: "spec:\n  scheduling:\n    queueing: kueue\n",
    }
    "GPU017" "driver-cr-name" "structure" Error {
        checks: "The NVIDIADriver CR of a pool with its own driver gets a valid name: `pool-<pool>-<driver version>` with `upgrades.strategy: blue-green` (the default; `pool-h100-train-595-91-07`), `pool-<pool>` with `rolling`. The pool's nodes carry that name as the value of the label `gpuctl.dev/driver`, so it is a DNS-1123 label of at most 63 characters.",
        why: "The API server rejects a label value longer than 63 characters, so apply would fail half way, after the CRs and other nodes changed. Blue-green CRs carry their version so that the CR a driver upgrade moves a pool to is exactly the one the blueprint renders once it declares the new driver.",
        fix: "Shorten the pool name to the length the finding gives (63 minus `pool-` and, with blue-green, `-<version>`).",
        source: "profiles/limits.yaml (Kubernetes object names); docs/render.md (NVIDIADriver CRs)",
        example: "spec:\n  nodePools:\n    - name: h100-sxm5-80gb-training-pool-for-the-foundation-model-team\n      selector: {gpuctl.dev/pool: h100-sxm5-80gb-training-pool-for-the-foundation-model-team}\n      nodes: 2\n      gpu: {model: H100-SXM5-80GB, count: 8}\n      driver: {version: \"595.91.07\"}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-foundation-model\n      selector: {gpuctl.dev/pool: h100-foundation-model}\n      nodes: 2\n      gpu: {model: H100-SXM5-80GB, count: 8}\n      driver: {version: \"595.91.07\"}\n",
    }
    "GPU018" "count-bounds" "structure" Error {
        checks: "GPUs per node, nodes per pool and in all, and time-slicing or MPS replicas stay within what can exist: at most 32 GPUs in one system (the NVIDIA driver's limit), 5,000 nodes in one cluster (Kubernetes' tested maximum), 1,024 replicas per GPU (gpuctl's bound).",
        why: "Capacity, MIG layouts and device-plugin configs are computed from these counts; a typo such as `count: 4294967295` would otherwise be taken at its word, and capacity arithmetic would overflow.",
        fix: "Write the pool's real counts; split a fleet larger than one cluster into several blueprints.",
        source: "profiles/limits.yaml (node_pools)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      gpu: {model: H100-SXM5-80GB, count: 4294967295}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      gpu: {model: H100-SXM5-80GB, count: 8}\n",
    }
    "GPU019" "operator-chart-values" "structure" Error {
        checks: "gpuctl has the chart's key tree for the blueprint's GPU Operator release, and every key path under `gpuOperator.values` exists in that chart.",
        why: "Helm silently ignores values the chart does not have, so a misspelt key (`drivr`) changes nothing on the cluster; render refuses such values, and validate reports them first, with their position.",
        fix: "Use the key the finding suggests, a key from `helm show values nvidia/gpu-operator --version <release>`, or a release gpuctl renders.",
        source: "profiles/gpu-operator-values/ (key trees generated from each chart's values.yaml)",
        example: "spec:\n  gpuOperator:\n    values: {drivr: {enabled: false}}\n",
        fixed: "spec:\n  gpuOperator:\n    values: {driver: {enabled: false}}\n",
    }
    "GPU020" "driver-version" "compatibility" Error {
        checks: "Driver versions parse and belong to a known data center driver branch.",
        why: "A version the catalog does not know cannot be checked against CUDA, GPUs or the operator.",
        fix: "Use a released driver version such as `580.105.08`; `gpuctl profiles` lists the branches.",
        source: "profiles/drivers.yaml",
        example: "spec:\n  gpuOperator:\n    driver: {version: \"581.x\"}\n",
        fixed: "spec:\n  gpuOperator:\n    driver: {version: \"580.173.02\"}\n",
    }
    "GPU021" "cuda-driver-minimum" "compatibility" Error {
        checks: "The driver on every pool a tenant can use is at least the minimum for each CUDA version the tenant declares, even with minor-version compatibility.",
        why: "Containers built for a newer CUDA fail at start (`libcudart.so` missing or `CUDA driver version is insufficient`) while the scheduler still places them; teams have spent days finding this.",
        fix: "Raise the pool's driver, or rebuild the tenant's images for an older CUDA.",
        source: "profiles/cuda.yaml",
        example: "spec:\n  gpuOperator: {driver: {version: \"535.309.01\"}}\n  tenants:\n    - {name: team-a, cuda: [\"13.0\"]}\n",
        fixed: "spec:\n  gpuOperator: {driver: {version: \"580.173.02\"}}\n  tenants:\n    - {name: team-a, cuda: [\"13.0\"]}\n",
    }
    "GPU022" "cuda-minor-version-compat" "compatibility" Warning {
        checks: "A tenant's CUDA version runs only through minor-version compatibility (driver below the toolkit's own driver but within the major's range).",
        why: "Minor-version compatibility has limits: no JIT of PTX newer than the driver, some APIs return errors; frameworks that JIT kernels fail at run time.",
        fix: "Prefer the toolkit's own minimum driver, or confirm the images ship SASS for the GPUs.",
        source: "profiles/cuda.yaml",
        example: "spec:\n  gpuOperator: {driver: {version: \"580.173.02\"}}\n  tenants:\n    - {name: team-a, cuda: [\"13.1\"]}   # 13.1's own driver is 590.44.01\n",
        fixed: "spec:\n  gpuOperator: {driver: {version: \"595.91.07\"}}\n  tenants:\n    - {name: team-a, cuda: [\"13.1\"]}\n",
    }
    "GPU023" "driver-architecture" "compatibility" Error {
        checks: "The driver branch supports the pool's GPU architecture and SKU (e.g. Volta last supported by R580; Blackwell needs R570 or newer).",
        why: "The driver loads but does not see the GPU, so the device plugin registers nothing (for example a V100 node that advertises zero `nvidia.com/gpu`).",
        fix: "Pick a driver branch inside the architecture's supported range, per pool if pools differ.",
        source: "profiles/architectures.yaml, profiles/gpus.yaml",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      gpu: {model: V100-SXM2-32GB, count: 8}\n      driver: {version: \"595.91.07\", kernelModuleType: proprietary}   # R580 is Volta's last branch\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      gpu: {model: V100-SXM2-32GB, count: 8}\n      driver: {version: \"580.173.02\", kernelModuleType: proprietary}\n",
    }
    "GPU024" "kernel-module-type" "compatibility" Error {
        checks: "The kernel module flavour fits the GPU and the driver: Blackwell requires the open modules; architectures before Turing require the proprietary ones; open modules exist only from their first branch on; `auto` needs a driver new enough for the operator to choose.",
        why: "The wrong flavour fails to bind the GPU and the driver pod crash-loops.",
        fix: "Set `kernelModuleType` (cluster or pool driver) to the supported flavour, or `auto`.",
        source: "profiles/architectures.yaml",
        example: "spec:\n  gpuOperator: {driver: {kernelModuleType: proprietary}}\n  nodePools:\n    - name: h100-train\n      gpu: {model: B200, count: 8}\n",
        fixed: "spec:\n  gpuOperator: {driver: {kernelModuleType: open}}\n  nodePools:\n    - name: h100-train\n      gpu: {model: B200, count: 8}\n",
    }
    "GPU025" "mig-driver-minimum" "compatibility" Error {
        checks: "Pools that use MIG run at least the GPU's minimum driver for MIG.",
        why: "Older drivers do not know the GPU's MIG profiles, and MIG Manager marks the node `mig.config.state=failed`.",
        fix: "Raise the pool's driver to the MIG minimum shown.",
        source: "profiles/gpus.yaml",
        example: "spec:\n  nodePools:\n    - name: h100-infer   # MIG on H100 needs 525.85.12\n      driver: {version: \"525.60.13\"}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-infer\n      driver: {version: \"580.173.02\"}\n",
    }
    "GPU026" "driver-end-of-life" "compatibility" Warning {
        checks: "The driver branch is not past its end of life (relative to today, or `--today`).",
        why: "End-of-life branches receive no security fixes and drop out of the operator's validated set.",
        fix: "Plan an upgrade to a supported production or LTS branch (`gpuctl upgrade driver`).",
        source: "profiles/drivers.yaml",
        example: "spec:\n  gpuOperator: {driver: {version: \"535.309.01\"}}\n",
        fixed: "spec:\n  gpuOperator: {driver: {version: \"580.173.02\"}}\n",
    }
    "GPU027" "operator-kubernetes" "compatibility" Error {
        checks: "The GPU Operator release is known and supports the cluster's Kubernetes minor version (the range of the release's final published platform page).",
        why: "Out-of-range combinations are untested by NVIDIA; API removals break operands. A release the catalog does not hold (v26.7.1 and v26.7.2 are not captured: no published NVIDIA page read gives their Kubernetes range or drivers) has no facts to check against; the finding says why when the catalog records it.",
        fix: "Choose an operator release whose range includes the Kubernetes version (`gpuctl profiles`).",
        source: "profiles/gpu-operator.yaml (releases[].kubernetes, not_captured)",
        example: "spec:\n  kubernetes: {version: \"1.25.4\"}\n  gpuOperator: {version: v26.7.0}\n",
        fixed: "spec:\n  kubernetes: {version: \"1.33.5\"}\n  gpuOperator: {version: v26.7.0}\n",
    }
    "GPU028" "operator-driver" "compatibility" Warning {
        checks: "Every driver version is one the operator release lists as default, recommended or validated on its final published life-cycle page.",
        why: "Other drivers may work but are not validated with that operator's operands. Where a release's final page could not be read, drivers it may list are named as unconfirmed in the message rather than counted as validated (none since the final 25.10 page was read).",
        fix: "Use the release's default, its recommended driver or one of its validated drivers.",
        source: "profiles/gpu-operator.yaml (default_driver, recommended_driver, other_drivers, unconfirmed_drivers)",
        example: "spec:\n  gpuOperator: {version: v26.7.0, driver: {version: \"535.104.05\"}}\n",
        fixed: "spec:\n  gpuOperator: {version: v26.7.0, driver: {version: \"580.173.02\"}}\n",
    }
    "GPU029" "consumer-gpu" "compatibility" Warning {
        checks: "Pools of consumer (GeForce) GPUs that leave the operator's driver on are flagged: the GPU Operator's data center driver containers do not support them.",
        why: "Such nodes need a host-installed driver, and get no MIG and no data center support. Without `nodePools[].operands.driver: false` the operator schedules its driver container on them, which fails.",
        fix: "Install the driver on the hosts of this pool and set `operands: {driver: false}` on the pool (gpuctl labels its nodes `nvidia.com/gpu.deploy.driver=false`, so the operator leaves the driver to the host), or keep GeForce cards out of the cluster. The finding is not reported once the pool disables the operator's driver.",
        source: "profiles/gpus.yaml (segment); GPU Operator node labels `nvidia.com/gpu.deploy.<operand>` (crates/model/src/names.rs)",
        example: "spec:\n  nodePools:\n    - name: rtx4090\n      selector: {gpuctl.dev/pool: rtx4090}\n      nodes: 2\n      gpu: {model: RTX-4090, count: 4}   # no operands: {driver: false}\n",
        fixed: "spec:\n  nodePools:\n    - name: rtx4090\n      selector: {gpuctl.dev/pool: rtx4090}\n      nodes: 2\n      gpu: {model: RTX-4090, count: 4}\n      operands: {driver: false}\n",
    }
    "GPU030" "mig-unsupported" "mig" Error {
        checks: "Pools with `partitioning.mode: mig` use a MIG-capable GPU.",
        why: "MIG Manager cannot partition the GPU; the node keeps `mig.config.state=failed` and exposes no resources.",
        fix: "Use time-slicing or MPS on this GPU, or move the MIG layout to a MIG-capable pool.",
        source: "profiles/gpus.yaml",
        example: "spec:\n  nodePools:\n    - name: l40s\n      selector: {gpuctl.dev/pool: l40s}\n      nodes: 2\n      gpu: {model: L40S, count: 4}\n      partitioning: {mode: mig, mig: {strategy: mixed, layout: {1g.12gb: 4}}}\n",
        fixed: "spec:\n  nodePools:\n    - name: l40s\n      selector: {gpuctl.dev/pool: l40s}\n      nodes: 2\n      gpu: {model: L40S, count: 4}\n      partitioning: {mode: time-slicing, timeSlicing: {replicas: 4}}\n",
    }
    "GPU031" "mig-profile" "mig" Error {
        checks: "Every MIG profile in a layout exists for the pool's GPU model.",
        why: "Profiles are per model (`3g.40gb` exists on 80 GB parts only); an unknown profile makes MIG Manager fail the node.",
        fix: "Use one of the profiles listed in the finding.",
        source: "profiles/gpus.yaml",
        example: "spec:\n  nodePools:\n    - name: a100\n      selector: {gpuctl.dev/pool: a100}\n      nodes: 2\n      gpu: {model: A100-SXM4-40GB, count: 8}\n      partitioning: {mode: mig, mig: {strategy: mixed, layout: {3g.40gb: 2}}}\n",
        fixed: "spec:\n  nodePools:\n    - name: a100\n      selector: {gpuctl.dev/pool: a100}\n      nodes: 2\n      gpu: {model: A100-SXM4-40GB, count: 8}\n      partitioning: {mode: mig, mig: {strategy: mixed, layout: {3g.20gb: 2}}}\n",
    }
    "GPU032" "mig-layout-fit" "mig" Error {
        checks: "The instances requested per GPU fit: per-profile maximums, 7 compute and 8 memory slices, one media-extension (`+me`) instance, and real placement start slots.",
        why: "A layout that does not fit is rejected by the driver when MIG Manager applies it, leaving the node unschedulable.",
        fix: "Reduce the instances or choose smaller profiles; the finding says which limit failed.",
        source: "profiles/gpus.yaml (placements)",
        example: "spec:\n  nodePools:\n    - name: a100\n      selector: {gpuctl.dev/pool: a100}\n      nodes: 2\n      gpu: {model: A100-SXM4-40GB, count: 8}\n      partitioning: {mode: mig, mig: {strategy: mixed, layout: {4g.20gb: 2}}}\n",
        fixed: "spec:\n  nodePools:\n    - name: a100\n      selector: {gpuctl.dev/pool: a100}\n      nodes: 2\n      gpu: {model: A100-SXM4-40GB, count: 8}\n      partitioning: {mode: mig, mig: {strategy: mixed, layout: {4g.20gb: 1}}}\n",
    }
    "GPU033" "mig-single-strategy" "mig" Error {
        checks: "The `single` MIG strategy is used only when every GPU of the node runs MIG with exactly one profile.",
        why: "Otherwise GPU Feature Discovery labels the node `<model>-MIG-INVALID` and advertises zero GPUs.",
        fix: "Use `strategy: mixed`, or a layout with a single profile on every GPU.",
        source: "GPU Operator docs, MIG strategies",
        example: "spec:\n  nodePools:\n    - name: h100-infer\n      partitioning: {mode: mig, mig: {strategy: single, layout: {3g.40gb: 1, 1g.10gb: 2}}}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-infer\n      partitioning: {mode: mig, mig: {strategy: mixed, layout: {3g.40gb: 1, 1g.10gb: 2}}}\n",
    }
    "GPU034" "mig-config-shape" "mig" Error {
        checks: "`mode: mig` has a `mig` section with exactly one of `layout` and `devices`; `devices` groups name each GPU index once and within the node's GPU count; a `mig` section appears only with `mode: mig`.",
        why: "An ambiguous layout cannot be turned into one mig-parted config.",
        fix: "Keep either `layout` (same on every GPU) or `devices` (per GPU group), with valid indices.",
        source: "docs/blueprint.md; mig-parted config format",
        example: "spec:\n  nodePools:\n    - name: h100-infer\n      partitioning: {mode: mig, mig: {strategy: mixed, devices: [{gpus: [0, 8], layout: {3g.40gb: 2}}]}}   # 8 GPUs: 0-7\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-infer\n      partitioning: {mode: mig, mig: {strategy: mixed, devices: [{gpus: [0, 7], layout: {3g.40gb: 2}}]}}\n",
    }
    "GPU035" "mig-strategy-cluster-wide" "mig" Error {
        checks: "Every MIG pool uses the same strategy, and no MPS pool shares a cluster with the `mixed` strategy.",
        why: "The GPU Operator sets one MIG strategy for the device plugin on every node (`mig.strategy`), and the device plugin refuses MPS sharing under the `mixed` strategy: the MPS pool would advertise no GPUs.",
        fix: "Give every MIG pool one strategy; with an MPS pool, use `single` (one profile per node), or time-slicing instead of MPS.",
        source: "GPU Operator chart values (mig.strategy); k8s-device-plugin (MPS is not supported with the mixed strategy)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      partitioning: {mode: mps, mps: {replicas: 4}}   # beside h100-infer's mixed MIG\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      partitioning: {mode: time-slicing, timeSlicing: {replicas: 4}}\n",
    }
    "GPU036" "operator-too-old-for-gpu" "compatibility" Error {
        checks: "The GPU Operator release is at least the first release that supports each pool's GPU, and, for a MIG pool, the first release whose MIG Manager supports MIG on that GPU (HGX B200 and GB200 from v25.3.0, B300 and GB300 from v25.10.0, MIG on the RTX PRO 6000 Blackwell from v25.3.4, RTX PRO 4500 Blackwell from v26.3.0).",
        why: "An older operator does not know the GPU: its driver containers, device plugin and MIG Manager are not validated for it, and MIG Manager fails the node (`mig.config.state=failed`) on a profile table it does not have.",
        fix: "Raise `gpuOperator.version` to the release the finding names or newer (`gpuctl profiles` lists the releases).",
        source: "profiles/gpus.yaml (operator_since, from the GPU Operator release notes and platform support)",
        example: "spec:\n  gpuOperator: {version: v25.3.0}\n  nodePools:\n    - name: h100-train\n      gpu: {model: B300, count: 8}\n",
        fixed: "spec:\n  gpuOperator: {version: v26.7.0}\n  nodePools:\n    - name: h100-train\n      gpu: {model: B300, count: 8}\n",
    }
    "GPU037" "operator-os" "compatibility" Error {
        checks: "Each pool's declared `os` (`id` and `version` as /etc/os-release's ID and VERSION_ID; Red Hat CoreOS by its OpenShift minor) is one the GPU Operator release's platform page lists.",
        why: "The operator publishes driver and toolkit containers only for the systems it supports: on any other (Windows, Debian, a retired Ubuntu or RHEL minor) the driver pod has no image to pull or fails to build, and the node never gets GPUs.",
        fix: "Run the pool on a listed system, or choose an operator release that lists this one (`gpuctl profiles -o json`, `operator.os_support`).",
        source: "profiles/gpu-operator.yaml (os_support, from NVIDIA/cloud-native-docs gpu-operator/platform-support.rst per major)",
        example: "spec:\n  gpuOperator: {version: v26.7.0}\n  nodePools:\n    - name: h100-train\n      os: {id: ubuntu, version: \"20.04\"}   # dropped after 25.10\n",
        fixed: "spec:\n  gpuOperator: {version: v26.7.0}\n  nodePools:\n    - name: h100-train\n      os: {id: ubuntu, version: \"22.04\"}\n",
    }
    "GPU038" "operator-kernel" "compatibility" Warning {
        checks: "A pool's `os.kernel` is a kernel series the operator's platform page lists for its system (where it lists any), and with `usePrecompiled: true` one with a precompiled container of the pool's driver branch.",
        why: "The driver container compiles against the node's kernel, and NVIDIA tests only the listed series; with precompiled drivers there is no image at all for another kernel or branch, so the driver pod cannot start.",
        fix: "Run a listed kernel series, or turn precompiled drivers off (`gpuOperator.driver.usePrecompiled: false`).",
        source: "profiles/gpu-operator.yaml (os_support[].systems[].kernels, os_support[].precompiled)",
        example: "spec:\n  gpuOperator: {version: v26.7.0}\n  nodePools:\n    - name: h100-train\n      os: {id: ubuntu, version: \"22.04\", kernel: \"6.2.0-39-generic\"}\n",
        fixed: "spec:\n  gpuOperator: {version: v26.7.0}\n  nodePools:\n    - name: h100-train\n      os: {id: ubuntu, version: \"22.04\", kernel: \"6.8.0-1015-aws\"}\n",
    }
    "GPU040" "sharing-replicas" "sharing" Error {
        checks: "Time-slicing and MPS use at least 2 replicas, and the mode has its section.",
        why: "The device plugin rejects `replicas` below 2 and fails to start on the node.",
        fix: "Set `replicas` to 2 or more, or use `mode: none`.",
        source: "k8s-device-plugin config (sharing.replicas >= 2)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      partitioning: {mode: time-slicing, timeSlicing: {replicas: 1}}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      partitioning: {mode: time-slicing, timeSlicing: {replicas: 2}}\n",
    }
    "GPU041" "sharing-inference" "sharing" Warning {
        checks: "Time-slicing on a pool whose role is `inference`.",
        why: "Time-sliced GPUs have no memory or fault isolation and context-switch latency; latency-sensitive serving misses its P99; MIG gives inference isolated slices.",
        fix: "Use MIG on MIG-capable GPUs, or MPS, for inference pools.",
        source: "NVIDIA k8s-device-plugin docs (time-slicing and MPS sharing); NVIDIA MIG user guide",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      role: inference\n      partitioning: {mode: time-slicing, timeSlicing: {replicas: 4}}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      role: development\n      partitioning: {mode: time-slicing, timeSlicing: {replicas: 4}}\n",
    }
    "GPU042" "sharing-config-shape" "sharing" Error {
        checks: "Sharing sections match the mode (`timeSlicing` only with `time-slicing`, `mps` only with `mps`).",
        why: "A section for another mode is never rendered, so its intent is silently lost.",
        fix: "Remove the section or change the mode.",
        source: "docs/blueprint.md",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      partitioning: {mode: none, timeSlicing: {replicas: 4}}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      partitioning: {mode: time-slicing, timeSlicing: {replicas: 4}}\n",
    }
    "GPU050" "quota-limits-extended" "quota" Error {
        checks: "Tenant quotas do not use `limits.<extended resource>` (such as `limits.nvidia.com/gpu`).",
        why: "The API server accepts the key but never enforces it: extended resources are quota-limited only as `requests.<name>`, a common mistake in GPU quota examples.",
        fix: "Write the bare name (`nvidia.com/gpu: 16`); gpuctl renders `requests.nvidia.com/gpu`.",
        source: "profiles/limits.yaml (ResourceQuota extended resources)",
        example: "spec:\n  tenants:\n    - name: team-a\n      quota: {limits.nvidia.com/gpu: 64}\n",
        fixed: "spec:\n  tenants:\n    - name: team-a\n      quota: {nvidia.com/gpu: 64}\n",
    }
    "GPU051" "quota-key" "quota" Error {
        checks: "Quota keys are ResourceQuota keys or resource names, and amounts (tenant quotas and defaults, queue quotas and limits, Volcano queue amounts) are valid, non-negative Kubernetes quantities.",
        why: "The API server rejects the whole ResourceQuota for one bad key or amount.",
        fix: "Use keys such as `pods`, `requests.cpu`, `limits.memory`, or an extended resource name; amounts such as `200`, `500m`, `12Ti`.",
        source: "profiles/limits.yaml (ResourceQuota keys)",
        example: "spec:\n  tenants:\n    - name: team-a\n      quota: {nvidia.com/gpu: 64, requests.storage: 12TB}   # TB is no quantity: 12T or 12Ti\n",
        fixed: "spec:\n  tenants:\n    - name: team-a\n      quota: {nvidia.com/gpu: 64, requests.storage: 12Ti}\n",
    }
    "GPU052" "gpu-whole-number" "quota" Error {
        checks: "GPU amounts (quotas, defaults, queue quotas) are whole, non-negative numbers.",
        why: "Extended resources cannot be overcommitted or split; a fractional GPU request is rejected.",
        fix: "Write a whole number; use MIG or time-slicing to share GPUs.",
        source: "Kubernetes extended resources",
        example: "spec:\n  tenants:\n    - name: team-a\n      defaults: {nvidia.com/gpu: 0.5}\n",
        fixed: "spec:\n  tenants:\n    - name: team-a\n      defaults: {nvidia.com/gpu: 1}\n",
    }
    "GPU053" "quota-no-capacity" "quota" Error {
        checks: "Every GPU resource named in a tenant quota, tenant default or queue quota is provided by some pool (by the pool named, for queues).",
        why: "Quota for a resource no node advertises admits nothing: pods stay Pending with `Insufficient nvidia.com/mig-...`.",
        fix: "Use the resource names the pools advertise (`gpuctl capacity`): `nvidia.com/gpu`, or `nvidia.com/mig-<profile>` under the mixed MIG strategy.",
        source: "docs/blueprint.md (resource names follow the partitioning)",
        example: "spec:\n  tenants:\n    - name: team-infer\n      quota: {nvidia.com/mig-1g.10gb: 4}   # no pool has 1g.10gb instances\n",
        fixed: "spec:\n  tenants:\n    - name: team-infer\n      quota: {nvidia.com/mig-3g.40gb: 4}\n",
    }
    "GPU054" "limitrange-default" "quota" Error {
        checks: "Tenant defaults (LimitRange) do not exceed the tenant's own quota for the same resource.",
        why: "Every pod that relies on the default is then rejected by ResourceQuota admission.",
        fix: "Lower the default or raise the quota.",
        source: "Kubernetes LimitRange and ResourceQuota admission",
        example: "spec:\n  tenants:\n    - {name: team-infer, defaults: {nvidia.com/mig-3g.40gb: 8}}   # its quota is 4\n",
        fixed: "spec:\n  tenants:\n    - {name: team-infer, defaults: {nvidia.com/mig-3g.40gb: 1}}\n",
    }
    "GPU055" "capacity-overcommit" "quota" Warning {
        checks: "The sum over tenants (quota x namespaces) and over cluster queues (nominal quota) of each GPU resource stays within the capacity of the pools. Under Kueue a tenant's resource its ClusterQueue covers is left out of the tenants' sum: the queues' nominal quotas are what must fit, and the tenant's quota is meant to cover its queue's nominal quota plus borrowing (GPU112), which adds up to more than the pools whenever queues borrow.",
        why: "Quotas above capacity promise GPUs that do not exist; some tenant will wait behind another's quota.",
        fix: "Lower quotas, add nodes, or accept the over-commit deliberately (`gpuctl capacity` shows headroom).",
        source: "docs/blueprint.md (capacity of a pool = nodes x per-node amount)",
        example: "spec:\n  nodePools:\n    - {name: h100-train, nodes: 4}   # 32 GPUs, but cq-team-a's nominal quota is 64\n",
        fixed: "spec:\n  nodePools:\n    - {name: h100-train, nodes: 8}\n",
    }
    "GPU056" "gpu-resource-typo" "quota" Error {
        checks: "Extended resource names in tenant quotas and defaults are not near misses of a GPU resource (`nvidia.com/gpu`, `nvidia.com/gpu.shared`, or a MIG resource a pool provides).",
        why: "The API server accepts any well-formed resource name: a quota on `n4idia.com/gpu` limits nothing, and a default of it makes every pod request a device no node has, so it stays Pending.",
        fix: "Use the suggested resource name.",
        source: "docs/blueprint.md (resource names follow the partitioning)",
        example: "spec:\n  tenants:\n    - name: team-a\n      defaults: {n4idia.com/gpu: 1}\n",
        fixed: "spec:\n  tenants:\n    - name: team-a\n      defaults: {nvidia.com/gpu: 1}\n",
    }
    "GPU060" "priority-value" "priority" Error {
        checks: "PriorityClass values are at most 1,000,000,000 (higher is reserved for system classes) and not below the int32 minimum.",
        why: "The API server rejects the PriorityClass.",
        fix: "Use a value up to 1000000000.",
        source: "profiles/limits.yaml (PriorityClass)",
        example: "spec:\n  priorityClasses:\n    - {name: top, value: 2000000000}\n",
        fixed: "spec:\n  priorityClasses:\n    - {name: top, value: 1000000000}\n",
    }
    "GPU061" "priority-system-prefix" "priority" Error {
        checks: "PriorityClass names do not start with `system-`.",
        why: "The prefix is reserved; the API server rejects user classes that use it.",
        fix: "Rename the class.",
        source: "profiles/limits.yaml (PriorityClass)",
        example: "spec:\n  priorityClasses:\n    - {name: system-gpu, value: 1000}\n",
        fixed: "spec:\n  priorityClasses:\n    - {name: gpu-system, value: 1000}\n",
    }
    "GPU062" "priority-global-default" "priority" Error {
        checks: "At most one PriorityClass has `globalDefault: true`.",
        why: "With two, the API server admits pods with the lowest of them, which is rarely what was meant.",
        fix: "Keep `globalDefault: true` on one class.",
        source: "profiles/limits.yaml (PriorityClass)",
        example: "spec:\n  priorityClasses:\n    - {name: a, value: 10, globalDefault: true}\n    - {name: b, value: 20, globalDefault: true}\n",
        fixed: "spec:\n  priorityClasses:\n    - {name: a, value: 10, globalDefault: true}\n    - {name: b, value: 20}\n",
    }
    "GPU070" "kueue-limits" "kueue" Error {
        checks: "A ClusterQueue stays within Kueue's limits: resource groups, flavors per group and resources per group; each resource belongs to one resource group (flavors that share a resource must cover the same resources); fair-sharing weights of cohorts and queues are non-negative quantities.",
        why: "The ClusterQueue CRD validation rejects the object.",
        fix: "Give pools used by one queue the same resource names, or split the queue.",
        source: "profiles/limits.yaml (Kueue v1beta2 ClusterQueue)",
        example: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: q\n          resources:   # cpu and memory on both flavors, which cover different resources\n            - {pool: h100-train, quota: {cpu: 100, memory: 1Ti}}\n            - {pool: h100-infer, quota: {nvidia.com/mig-3g.40gb: 4, cpu: 100, memory: 1Ti}}\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: q\n          resources:\n            - {pool: h100-train, quota: {cpu: 100, memory: 1Ti}}\n            - {pool: h100-infer, quota: {nvidia.com/mig-3g.40gb: 4}}\n",
    }
    "GPU071" "kueue-limits-need-cohort" "kueue" Error {
        checks: "`borrowingLimit` and `lendingLimit` appear only on ClusterQueues in a cohort.",
        why: "Kueue rejects borrowing and lending limits on a ClusterQueue without a cohort.",
        fix: "Put the queue in a cohort or remove the limits.",
        source: "profiles/limits.yaml (Kueue v1beta2 ClusterQueue)",
        example: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - {name: q, resources: [{pool: h100-infer, quota: {nvidia.com/mig-3g.40gb: 4}, borrowingLimit: {nvidia.com/mig-3g.40gb: 2}}]}   # no cohort\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - {name: q, resources: [{pool: h100-infer, quota: {nvidia.com/mig-3g.40gb: 4}}]}\n",
    }
    "GPU072" "kueue-lending-limit" "kueue" Error {
        checks: "`lendingLimit` is at most the nominal quota, and limits name resources that have a quota.",
        why: "Kueue rejects a lending limit above the nominal quota.",
        fix: "Lower the lending limit to the nominal quota or less.",
        source: "profiles/limits.yaml (Kueue v1beta2 ClusterQueue)",
        example: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 64, cpu: 600, memory: 4Ti}, lendingLimit: {nvidia.com/gpu: 80}}]\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 64, cpu: 600, memory: 4Ti}, lendingLimit: {nvidia.com/gpu: 32}}]\n",
    }
    "GPU073" "kueue-cohort-cycle" "kueue" Error {
        checks: "Cohort parents form a tree (no cycles).",
        why: "Kueue marks every cohort in a cycle inactive; none of their queues admit work.",
        fix: "Break the cycle by removing one `parent`.",
        source: "Kueue Cohort API",
        example: "spec:\n  scheduling:\n    kueue:\n      cohorts:\n        - {name: a, parent: b}\n        - {name: b, parent: a}\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      cohorts:\n        - {name: a, parent: b}\n        - {name: b}\n",
    }
    "GPU074" "kueue-tenant-unreachable" "kueue" Error {
        checks: "Under Kueue, every tenant with GPU quota is bound to a ClusterQueue (so its namespaces get a LocalQueue the queue selects).",
        why: "Workloads in a namespace without a LocalQueue are never admitted by Kueue.",
        fix: "Set the tenant's `queue` to a ClusterQueue.",
        source: "Kueue LocalQueue and namespaceSelector",
        example: "spec:\n  tenants:\n    - {name: a, namespaces: [a], quota: {nvidia.com/gpu: 64}}   # no queue\n",
        fixed: "spec:\n  tenants:\n    - {name: a, namespaces: [a], quota: {nvidia.com/gpu: 64}, queue: cq-team-a}\n",
    }
    "GPU075" "kueue-resource-uncovered" "kueue" Error {
        checks: "Every resource a tenant's pods request is covered by its ClusterQueue: `cpu` and `memory` (every pod requests them), each resource its quota names (`nvidia.com/gpu`, `requests.ephemeral-storage`, ...; object counts such as `pods` and DRA device-class keys `<class>.deviceclass.resource.k8s.io/devices`, which the API server charges from claims, are not requests) and each resource of its LimitRange `defaults`. Kueue's resource transformations (`scheduling.kueue.config.resources.transformations`) are applied first (their outputs must be covered; a `Replace`d input need not be); resources matching `config.resources.excludeResourcePrefixes` are skipped, and nothing is checked under `config.resources.quotaCheckStrategy: IgnoreUndeclared`, mirroring the Kueue configuration the blueprint declares.",
        why: "With Kueue's default quota check (`BlockUndeclared`), a workload requesting a resource its ClusterQueue does not cover stays pending forever (`resource cpu unavailable in ClusterQueue`); a queue that covers only GPUs admits nothing, because every pod also requests cpu and memory.",
        fix: "Add the resource to every `quota` of the ClusterQueue (on a pool that provides it, for GPUs); or, if your Kueue's configuration ignores it, say so in `scheduling.kueue.config.resources` (`excludeResourcePrefixes` or `quotaCheckStrategy: IgnoreUndeclared`).",
        source: "Kueue ClusterQueue resourceGroups; Kueue Configuration `resources.excludeResourcePrefixes` and `resources.quotaCheckStrategy` (kubernetes-sigs/kueue apis/config/v1beta2/configuration_types.go, v0.19.2)",
        example: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - {name: cq-team-a, resources: [{pool: h100-train, quota: {nvidia.com/gpu: 64}}]}   # no cpu, no memory\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - {name: cq-team-a, resources: [{pool: h100-train, quota: {nvidia.com/gpu: 64, cpu: 600, memory: 4Ti}}]}\n",
    }
    "GPU076" "kueue-release" "kueue" Error {
        checks: "`scheduling.kueue.version` is a Kueue release gpuctl knows (`gpuctl profiles` lists the release lines) and serves `kueue.x-k8s.io/v1beta2`, the API version gpuctl writes (Kueue v0.15 and later); `config.resources.quotaCheckStrategy: IgnoreUndeclared` is used only on releases that have it (v0.18 and later) and never together with `config.resources.excludeResourcePrefixes`.",
        why: "Objects written for an API version the cluster's Kueue does not serve are refused by the API server at apply time (`no matches for kind ClusterQueue in version kueue.x-k8s.io/v1beta2`); a version gpuctl does not know cannot be checked at all. Kueue refuses a configuration that sets both quota-check settings.",
        fix: "Write the release you run as `v<major>.<minor>.<patch>`; below v0.15 upgrade Kueue first.",
        source: "profiles/queueing.yaml (Kueue releases and the API versions they serve: Kueue release notes, CHANGELOG-0.15)",
        example: "spec:\n  scheduling:\n    kueue:\n      version: \"0.13\"\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      version: v0.19.2\n",
    }
    "GPU080" "volcano-weight" "volcano" Error {
        checks: "Volcano queue weight is within 1..65535.",
        why: "Volcano's admission webhook rejects the queue.",
        fix: "Use a weight in range.",
        source: "profiles/limits.yaml (Volcano Queue)",
        example: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: cq-team-a, weight: 0}\n",
        fixed: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: cq-team-a, weight: 1}\n",
    }
    "GPU081" "volcano-guarantee-deserved-capability" "volcano" Error {
        checks: "Per resource: guarantee <= deserved <= capability; every guaranteed resource also has a deserved amount (a missing one is not `unlimited` to Volcano); a queue's capability does not exceed that of its nearest ancestor that caps the resource.",
        why: "Volcano v1.15's queue admission webhook refuses such a queue (`deserved[nvidia.com/gpu] must be >= guarantee[nvidia.com/gpu]=8`, `deserved[cpu]=... must be <= capability[cpu]=...`, `queue q capability[nvidia.com/gpu]=... exceeds its ancestor's capability=...`), so apply fails at that queue.",
        fix: "Order the amounts guarantee <= deserved <= capability, give every guaranteed resource a deserved amount, and keep children's capabilities within their ancestors'.",
        source: "profiles/queueing.yaml (volcano_hierarchy: volcano-sh/volcano v1.15.1 pkg/webhooks/admission/queues/validate/validate_queue.go)",
        example: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: cq-team-a, guarantee: {nvidia.com/gpu: 8}}   # no deserved\n",
        fixed: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: cq-team-a, guarantee: {nvidia.com/gpu: 8}, deserved: {nvidia.com/gpu: 8}}\n",
    }
    "GPU082" "volcano-hierarchy" "volcano" Error {
        checks: "The queue hierarchy is at most the supported depth and has no cycles.",
        why: "Volcano's hierarchical queue support is bounded; deeper trees are rejected.",
        fix: "Flatten the hierarchy.",
        source: "profiles/limits.yaml (Volcano Queue)",
        example: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: a, parent: b}\n        - {name: b, parent: a}\n",
        fixed: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: a, parent: b}\n        - {name: b, parent: root}\n",
    }
    "GPU083" "volcano-leaf-queue" "volcano" Error {
        checks: "Tenants are bound only to leaf queues.",
        why: "Volcano does not schedule jobs submitted to a queue that has child queues.",
        fix: "Bind the tenant to a leaf queue, or remove the children.",
        source: "Volcano hierarchical queues",
        example: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: team-a-batch, parent: cq-team-a}   # team-a's queue cq-team-a is now a parent\n",
        fixed: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: team-a-batch, parent: cq-team-a}\n  tenants:\n    - {name: team-a, queue: team-a-batch}\n",
    }
    "GPU084" "volcano-release" "volcano" Error {
        checks: "`scheduling.volcano.version` is a Volcano release gpuctl knows (`gpuctl profiles` lists the release lines) and serves `scheduling.volcano.sh/v1beta1` Queues, the API version gpuctl writes.",
        why: "A version gpuctl does not know cannot be checked, and objects of an API version the cluster does not serve are refused at apply time.",
        fix: "Write the release you run as `v<major>.<minor>.<patch>`, one of the listed release lines.",
        source: "profiles/queueing.yaml (Volcano releases and the Queue API version they serve)",
        example: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      version: latest\n",
        fixed: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      version: v1.15.1\n",
    }
    "GPU090" "dcgm-interval" "monitoring" Error {
        checks: "The dcgm-exporter collection interval parses and is at least the minimum.",
        why: "Below the minimum, DCGM's field watches load the GPU and the exporter itself.",
        fix: "Use `30s` or another interval at or above the minimum.",
        source: "profiles/limits.yaml (dcgm-exporter)",
        example: "spec:\n  gpuOperator:\n    dcgmExporter: {interval: 50ms}\n",
        fixed: "spec:\n  gpuOperator:\n    dcgmExporter: {interval: 30s}\n",
    }
    "GPU091" "monitoring-without-exporter" "monitoring" Warning {
        checks: "Monitoring (ServiceMonitor, alerts) is asked for while dcgm-exporter is disabled.",
        why: "Alerts on metrics nobody exports never fire: silent monitoring.",
        fix: "Enable `gpuOperator.dcgmExporter`, or drop the alerts.",
        source: "docs/blueprint.md",
        example: "spec:\n  gpuOperator: {dcgmExporter: {enabled: false}}\n  monitoring: {alerts: {xid: true}}\n",
        fixed: "spec:\n  gpuOperator: {dcgmExporter: {enabled: true}}\n  monitoring: {alerts: {xid: true}}\n",
    }
    "GPU092" "alert-bounds" "monitoring" Error {
        checks: "`spec.monitoring.alerts.temperatureC` is within what a GPU reports: above the profile's lower bound (the bottom of ASHRAE's recommended inlet air range) and at most its upper bound (above every GPU shutdown temperature the profile cites).",
        why: "A threshold above the temperature at which GPUs shut themselves down never fires, so an overheating fleet stays silent; one every GPU is above fires on all of them and gets muted.",
        fix: "Use a threshold between the bounds, e.g. the default 85.",
        source: "profiles/dcgm.yaml (alert_bounds)",
        example: "spec:\n  monitoring:\n    alerts: {temperatureC: 1000}\n",
        fixed: "spec:\n  monitoring:\n    alerts: {temperatureC: 85}\n",
    }
    "GPU095" "upgrade-policy" "upgrades" Error {
        checks: "Upgrade settings parse: blue-green batch is a count >= 1 or a percentage in (0, 100], drain timeout a duration, colour label a valid key; `maxUnavailable` likewise.",
        why: "An upgrade that cannot compute its batches cannot run.",
        fix: "Write `batch: \"25%\"` or `batch: 2`, `drainTimeout: 30m`.",
        source: "docs/blueprint.md",
        example: "spec:\n  upgrades:\n    blueGreen: {batch: \"0%\"}\n",
        fixed: "spec:\n  upgrades:\n    blueGreen: {batch: \"25%\"}\n",
    }
    "GPU100" "chart-source" "install" Error {
        checks: "`gpuOperator.chart` (and `scheduling.kueue.chart`, `networkOperator.chart`) names at most one source: a Helm repository URL (`https://`), an OCI reference (`oci://host/path`) or a chart archive or directory relative to the blueprint file, inside its directory.",
        why: "Air-gapped clusters cannot reach NVIDIA's Helm repository; a chart path that leaves the blueprint's directory would let a pull request point gpuctl at any file on the machine that applies it.",
        fix: "Keep one source; write URLs with their scheme and paths relative to the blueprint (`charts/gpu-operator-v26.7.0.tgz`).",
        source: "Helm documentation: `helm install` chart references (repository URL with `--repo`, `oci://` registries, local archives and directories)",
        example: "spec:\n  gpuOperator:\n    install: helm\n    chart: {path: ../../etc/passwd}\n",
        fixed: "spec:\n  gpuOperator:\n    install: helm\n    chart: {repository: \"https://charts.internal/nvidia\"}\n",
    }
    "GPU101" "image-mirror" "install" Error {
        checks: "`gpuOperator.images.registry` is `host[:port][/path]` (no scheme, tag, digest or credentials) and every `pullSecrets` entry is a Secret name, listed once.",
        why: "Every image the operator deploys is rewritten to the mirror; a malformed registry makes every operand pod fail to pull.",
        fix: "Write the mirror as container tools do, e.g. `registry.internal:5000/nvidia-mirror`, and name existing pull Secrets in the operator namespace.",
        source: "OCI distribution specification (repository name grammar); Kubernetes `imagePullSecrets`",
        example: "spec:\n  gpuOperator:\n    images: {registry: \"https://registry.internal/nvidia\"}   # no scheme\n    chart: {repository: \"https://charts.internal/nvidia\"}\n",
        fixed: "spec:\n  gpuOperator:\n    images: {registry: registry.internal/nvidia}\n    chart: {repository: \"https://charts.internal/nvidia\"}\n",
    }
    "GPU102" "air-gap-consistency" "install" Warning {
        checks: "An image mirror comes with a chart that is not fetched from NVIDIA's public repository, and a chart source (`gpuOperator.chart`, `scheduling.kueue.chart`, `networkOperator.chart`) is only given when gpuctl installs that chart (`install: helm`).",
        why: "A cluster that needs an image mirror usually cannot reach the public Helm repository either: the apply would fail at the chart download; a chart source gpuctl never uses is a misunderstanding worth pointing out.",
        fix: "Set `gpuOperator.chart` to the mirrored chart (archive path, OCI reference or internal repository), or `install: helm` when gpuctl should install it.",
        source: "docs/blueprint.md",
        example: "spec:\n  gpuOperator:\n    install: helm\n    images: {registry: registry.internal/nvidia}\n",
        fixed: "spec:\n  gpuOperator:\n    install: helm\n    images: {registry: registry.internal/nvidia}\n    chart: {repository: \"https://charts.internal/nvidia\"}\n",
    }
    "GPU110" "volcano-hierarchy-sums" "volcano" Error {
        checks: "For every Volcano queue with children: the children's `deserved` and their `guarantee`, summed per resource (cpu, memory and extended resources; in the order the queues are created), stay within the parent's own `deserved` and `guarantee`, where a resource the parent does not list counts as zero. A parent that declares only a `capability` therefore cannot have children that declare `deserved`.",
        why: "Volcano v1.15's admission webhook refuses the child queue that takes the sum over the parent's amount (`parent queue serving validation failed: sum of children's deserved (cpu 0.00, memory 0.00, nvidia.com/gpu 16000.00) exceeds parent's deserved limit (cpu 0.00, memory 0.00)`), so apply of the hierarchy fails on every cluster that runs Volcano's webhook.",
        fix: "Give the parent `deserved` (and `guarantee`, if children have one) for every resource its children list, at least their sum; or lower the children's amounts.",
        source: "profiles/queueing.yaml (volcano_hierarchy: validate_queue.go validateSiblingsSum and validateChildrenConstraints, Resource.LessPartly with api.Zero)",
        example: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: serving, parent: root, capability: {nvidia.com/gpu: 64}}   # no deserved\n        - {name: online, parent: serving, deserved: {nvidia.com/gpu: 48}}\n",
        fixed: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      queues:\n        - {name: serving, parent: root, capability: {nvidia.com/gpu: 64}, deserved: {nvidia.com/gpu: 48}}\n        - {name: online, parent: serving, deserved: {nvidia.com/gpu: 48}}\n",
    }
    "GPU111" "kueue-crd-rules" "kueue" Error {
        checks: "The CEL rules (`x-kubernetes-validations`) of Kueue's v1beta2 CRDs on fields gpuctl renders that no other rule covers: a ClusterQueue that never reclaims (`reclaimWithinCohort: Never`) may not preempt while borrowing (`borrowWithinCohort` other than `Never`). (The other CEL rules on rendered fields are GPU070's resource-group shape and GPU071's borrowing limit without a cohort; a test maps every CEL rule of the CRDs to its gpuctl rule.)",
        why: "The API server evaluates the CRD's CEL rules and refuses the ClusterQueue (`reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never`), so apply fails at that queue after other objects changed.",
        fix: "Set `borrowWithinCohort: Never`, or let the queue reclaim (`reclaimWithinCohort: LowerPriority` or `Any`).",
        source: "Kueue v0.19.2 CRD kueue.x-k8s.io_clusterqueues.yaml (v1beta2 spec.preemption x-kubernetes-validations)",
        example: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - {name: cq-team-a, preemption: {reclaimWithinCohort: Never, borrowWithinCohort: LowerPriority}}\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - {name: cq-team-a, preemption: {reclaimWithinCohort: Any, borrowWithinCohort: LowerPriority}}\n",
    }
    "GPU112" "queue-admits-above-quota" "composition" Error {
        checks: "Per tenant and resource its ResourceQuota limits (bare or `requests.` key): what its ClusterQueue can admit into one of its namespaces (nominal quota on every flavor plus what it can borrow: the smaller of its `borrowingLimit` and what the other queues of its cohort tree lend on that flavor) is not more than the namespace's ResourceQuota. Resources Kueue transforms (`config.resources.transformations`) are left out: the two sides count different things.",
        why: "Kueue admits a workload against the ClusterQueue only; the Job controller then creates its pods and the API server's quota admission refuses those over the namespace quota (`exceeded quota: dev-quota, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16`): the job runs partly, holding GPUs it cannot use, until it is evicted.",
        fix: "Raise the quota to what the queue admits, or make the queue admit at most the quota (lower the nominal quota, set a `borrowingLimit`); tenants sharing a queue share its whole quota, so give each its own queue in the cohort; or leave the resource out of the quota and let Kueue govern it.",
        source: "profiles/queueing.yaml (composition: Kueue cohort borrowing and lending); Kubernetes ResourceQuota admission",
        example: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a   # 48 of its own, and up to 16 borrowed from cq-burst\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 48, cpu: 600, memory: 4Ti}, borrowingLimit: {nvidia.com/gpu: 16}}]\n        - name: cq-burst\n          cohort: gpu-all\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 16, cpu: 100, memory: 1Ti}}]\n  tenants:\n    - {name: team-a, quota: {nvidia.com/gpu: 48}}   # the queue admits 64\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 48, cpu: 600, memory: 4Ti}, borrowingLimit: {nvidia.com/gpu: 16}}]\n        - name: cq-burst\n          cohort: gpu-all\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 16, cpu: 100, memory: 1Ti}}]\n  tenants:\n    - {name: team-a, quota: {nvidia.com/gpu: 64}}\n",
    }
    "GPU113" "quota-requires-requests" "composition" Error {
        checks: "A tenant whose quota tracks `cpu`, `memory`, `requests.cpu`, `requests.memory`, `limits.cpu` or `limits.memory` has a default for that resource in `defaults` (its LimitRange, which gpuctl renders as both `default` and `defaultRequest`).",
        why: "When a ResourceQuota tracks cpu or memory, the API server refuses every pod with a container that does not set the value (`must specify requests.cpu for: main; requests.memory for: main`). A job that asks only for GPUs is admitted by Kueue and then has every pod refused.",
        fix: "Add the resource to the tenant's `defaults` (the per-container amount pods get when they set none), or remove the key from its quota.",
        source: "profiles/queueing.yaml (composition.keys_requiring_container_values: kubernetes pkg/quota/v1/evaluator/core/pods.go validationSet)",
        example: "spec:\n  tenants:\n    - {name: team-a, quota: {nvidia.com/gpu: 64, requests.cpu: \"600\"}, defaults: {nvidia.com/gpu: 1}}   # no cpu default\n",
        fixed: "spec:\n  tenants:\n    - {name: team-a, quota: {nvidia.com/gpu: 64, requests.cpu: \"600\"}, defaults: {nvidia.com/gpu: 1, cpu: \"1\"}}\n",
    }
    "GPU114" "kueue-dead-limit" "composition" Warning {
        checks: "A `borrowingLimit` (other than 0) on a flavor and resource that no other ClusterQueue of the cohort tree has quota for, and a `lendingLimit` on one that no other queue of the tree covers.",
        why: "Such a limit can never take effect: the queue has nothing to borrow (Kueue keeps workloads above the nominal quota pending: `insufficient unused quota for nvidia.com/gpu in flavor a, 4 more needed`), or nobody can borrow what it would lend. It usually means the cohort or the pools are not what was intended.",
        fix: "Give another queue of the cohort quota on that flavor, or remove the limit.",
        source: "profiles/queueing.yaml (composition: Kueue cohort borrowing and lending)",
        example: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a   # no other queue of gpu-all has h100-train\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 64, cpu: 600, memory: 4Ti}, borrowingLimit: {nvidia.com/gpu: 8}}]\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 64, cpu: 600, memory: 4Ti}}]\n",
    }
    "GPU115" "kueue-weight-without-fair-sharing" "composition" Warning {
        checks: "`fairSharingWeight` on a cohort or ClusterQueue only when the blueprint's Kueue configuration turns fair sharing on (`scheduling.kueue.config.fairSharing`).",
        why: "Kueue uses the weights only with fair sharing on; without it they are silently ignored and borrowing is first come, first served.",
        fix: "Add `config: {fairSharing: {}}` under `scheduling.kueue` and run Kueue with it (gpuctl renders it with `install: helm` or `gitops`; a live plan compares it with the running Kueue's configuration under `install: none`), or remove the weights.",
        source: "profiles/queueing.yaml (kueue_configuration: Kueue v0.19.2 configuration_types.go FairSharing)",
        example: "spec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - {name: cq-team-a, fairSharingWeight: 80}   # no config.fairSharing\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      config: {fairSharing: {}}\n      clusterQueues:\n        - {name: cq-team-a, fairSharingWeight: 80}\n",
    }
    "GPU116" "kueue-config" "kueue-config" Error {
        checks: "`scheduling.kueue.config` holds settings Kueue's configuration validation accepts: fair-sharing preemption strategy lists Kueue knows, resource transformations with an input (each once) and quantities as outputs, integrated frameworks Kueue knows (each once), a `waitForPodsReady` timeout that parses, no empty excluded prefix; with `install: helm` or `gitops`, a Kueue release whose chart gpuctl renders `managerConfig` for. The quota-check settings live under `config.resources`: at their old place (`scheduling.kueue.excludeResourcePrefixes`, `quotaCheckStrategy`) they are reported here.",
        why: "Kueue refuses to start with a configuration it does not accept, so no workload is admitted at all; a setting at its old place would otherwise be ignored.",
        fix: "Use the values the finding lists; move the quota-check settings under `config.resources`.",
        source: "profiles/queueing.yaml (kueue_configuration: configuration_types.go and pkg/config/validation.go of Kueue v0.19.2)",
        example: "spec:\n  scheduling:\n    kueue:\n      config:\n        integrations: {frameworks: [batch/jobs]}\n",
        fixed: "spec:\n  scheduling:\n    kueue:\n      config:\n        integrations: {frameworks: [batch/job]}\n",
    }
    "GPU117" "quota-above-queue" "composition" Warning {
        checks: "Per tenant and GPU resource its ResourceQuota limits (`nvidia.com/gpu`, MIG profiles, shared GPUs; bare or `requests.` key): the quota is not above everything its ClusterQueue can ever admit, that is the queue's nominal quota on every flavor plus what it can borrow (the smaller of its `borrowingLimit` and what the other queues of its cohort tree lend of that resource on that flavor). Resources Kueue transforms are left out, as for GPU112.",
        why: "Kueue admits the tenant's GPU workloads against the ClusterQueue, so the quota above what the queue can admit is never reached: it is unreachable capacity, and reviewers and capacity plans read it as GPUs the tenant has. Often the queue's quota was lowered, or the cohort lost a lender, and the tenant's quota was not. (Only pods that bypass Kueue, those of jobs without a queue name when Kueue does not manage such jobs, could use the difference: that is what such a quota really grants, hence a warning.)",
        fix: "Lower the tenant's quota to what the queue admits (the finding gives the figure), or raise the queue's nominal quota or what its cohort lends.",
        source: "profiles/queueing.yaml (composition: Kueue cohort borrowing and lending)",
        example: "spec:\n  tenants:\n    - {name: team-a, quota: {nvidia.com/gpu: 128}}   # cq-team-a admits 64\n",
        fixed: "spec:\n  tenants:\n    - {name: team-a, quota: {nvidia.com/gpu: 64}}\n",
    }
    "GPU118" "volcano-release" "volcano" Error {
        checks: "With `scheduling.volcano.install: helm` or `gitops`: a Volcano release whose chart gpuctl knows (`profiles/queueing.yaml` `volcano_release.charts`), and `scheduling.volcano.values` keys only among the chart's top-level value sections (`basic`, `custom`, `service`); with `install: none`, no `values` (gpuctl renders none).",
        why: "gpuctl installs Volcano's chart at the version of the declared release: for a release it has no chart facts for it would pin a chart version nobody checked. Helm ignores values the chart does not read, so a misplaced key (`scheduler_replicas` at the top instead of under `custom`) changes nothing and says nothing.",
        fix: "Use a release the finding lists, or `install: none` when Volcano is installed by someone else; put each value under its section (`custom: {scheduler_replicas: 2}`).",
        source: "profiles/queueing.yaml (volcano_release: Volcano v1.15.1's chart, installer/helm/chart/volcano)",
        example: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      install: helm\n      values: {scheduler_replicas: 2}\n",
        fixed: "spec:\n  scheduling:\n    queueing: volcano\n    volcano:\n      install: helm\n      values: {custom: {scheduler_replicas: 2}}\n",
    }
    "GPU130" "rdma-fabric" "network" Error {
        checks: "A pool that sets `topology.network.gpuDirectRDMA: true` has an RDMA fabric (`infiniband` or `roce`).",
        why: "Plain Ethernet has no RDMA transport: NCCL falls back to TCP sockets and multi-node training runs at a fraction of the expected bandwidth, with nothing failing loudly.",
        fix: "Declare the fabric the NICs really run (`roce` for RDMA over Converged Ethernet), or set `gpuDirectRDMA: false`.",
        source: "profiles/network.yaml (gpudirect_rdma)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: ethernet, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: roce, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU131" "rdma-nic-count" "network" Error {
        checks: "A pool with GPUDirect RDMA declares how many RDMA NICs each node has (`nicsPerNode` > 0).",
        why: "GPUDirect RDMA pairs GPUs with their nearest NICs; without the count gpuctl cannot render the device plugin's view or the runbook's per-NIC checks, and a pool without NICs cannot do RDMA at all.",
        fix: "Set `nicsPerNode` (DGX H100 and GB200 compute trays: 8 compute NICs, or 4 per tray on GB200).",
        source: "docs/blueprint.md",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU132" "rdma-dma-buf-kernel-modules" "network" Error {
        checks: "With `gpuOperator.rdma.mechanism: dma-buf` (the default) every RDMA pool's driver loads the open GPU kernel modules (`open`, or `auto` on a branch that defaults to them for that GPU), and its GPU is of the oldest architecture NVIDIA documents for DMA-BUF (Turing) or newer.",
        why: "DMA-BUF export of GPU memory exists only in the open kernel modules; with the proprietary ones NCCL silently loses GPUDirect RDMA and copies through host memory.",
        fix: "Set `kernelModuleType: open` for the pool's driver, or choose `mechanism: nvidia-peermem` (legacy) with a MOFED/DOCA NIC driver.",
        source: "profiles/network.yaml (gpudirect_rdma.dma_buf: NVIDIA GPU Operator GPUDirect RDMA page); profiles/drivers.yaml (kernel_modules); profiles/architectures.yaml",
        example: "spec:\n  gpuOperator:\n    driver: {version: \"580.173.02\", kernelModuleType: proprietary}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  gpuOperator:\n    driver: {version: \"580.173.02\", kernelModuleType: open}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU133" "rdma-dma-buf-kernel" "network" Error {
        checks: "With DMA-BUF, every RDMA pool's declared `os.kernel` is at least the kernel that lets RDMA NICs register DMA-BUF memory.",
        why: "On older kernels the NIC driver cannot import the GPU's DMA-BUF and GPUDirect RDMA is unavailable.",
        fix: "Upgrade the pool's kernel, or use `mechanism: nvidia-peermem` with MOFED/DOCA-OFED.",
        source: "profiles/network.yaml (gpudirect_rdma.dma_buf.min_kernel)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      os: {id: rhel, version: \"8.10\", kernel: \"4.18.0-553.el8_10.x86_64\"}\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      os: {id: rhel, version: \"9.6\", kernel: \"5.14.0-570.el9_6.x86_64\"}\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU134" "rdma-operator-release" "network" Error {
        checks: "The GPU Operator release supports nvidia-peermem (from v1.8) and `useHostMofed` (from v1.9) when they are used. DMA-BUF has no documented first operator release, so none is checked.",
        why: "An older operator ignores the settings and the driver pods come up without GPUDirect RDMA.",
        fix: "Use the GPU Operator release the finding names or newer.",
        source: "profiles/network.yaml (gpudirect_rdma minimum operator releases)",
        example: "spec:\n  gpuOperator:\n    version: v1.7.1   # before nvidia-peermem support\n    rdma: {mechanism: nvidia-peermem, useHostMofed: true}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  gpuOperator:\n    version: v26.7.0\n    rdma: {mechanism: nvidia-peermem, useHostMofed: true}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU135" "rdma-driver" "network" Error {
        checks: "Every RDMA pool's driver supports the chosen mechanism: nvidia-peermem ships from R470; DMA-BUF needs CUDA 11.7 (NVIDIA's GPUDirect RDMA page), so that toolkit's driver (cuda.yaml) or newer.",
        why: "The module or the DMA-BUF export the operator relies on does not exist in older drivers.",
        fix: "Use a driver of the named branch or newer for the pool.",
        source: "profiles/network.yaml (gpudirect_rdma.nvidia_peermem.min_driver_branch, gpudirect_rdma.dma_buf.min_cuda); profiles/cuda.yaml",
        example: "spec:\n  gpuOperator:\n    rdma: {mechanism: nvidia-peermem, useHostMofed: true}\n    driver: {version: \"460.106.00\"}   # nvidia-peermem ships from R470\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  gpuOperator:\n    rdma: {mechanism: nvidia-peermem, useHostMofed: true}\n    driver: {version: \"580.173.02\"}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU136" "rdma-nic-driver" "network" Error {
        checks: "nvidia-peermem has a MOFED/DOCA-OFED NIC driver (the Network Operator installs it, or `useHostMofed: true`), and `useHostMofed` does not contradict a Network Operator that installs the driver.",
        why: "The driver pod's init container waits for the MOFED driver before loading nvidia-peermem; without one the GPU driver never becomes ready on the node.",
        fix: "Declare `networkOperator` with `nicDriver.source: operator`, or set `useHostMofed: true` when the hosts carry the driver (and `nicDriver.source: host`).",
        source: "profiles/network.yaml (gpudirect_rdma); GPU Operator GPUDirect RDMA page",
        example: "spec:\n  gpuOperator:\n    rdma: {mechanism: nvidia-peermem}   # no MOFED\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  gpuOperator:\n    rdma: {mechanism: nvidia-peermem, useHostMofed: true}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU137" "rdma-settings-unused" "network" Warning {
        checks: "`gpuOperator.rdma` is only set when a pool asks for GPUDirect RDMA.",
        why: "Settings nothing reads usually mean the pool's `gpuDirectRDMA: true` was forgotten.",
        fix: "Set `topology.network.gpuDirectRDMA: true` on the RDMA pools, or remove `gpuOperator.rdma`.",
        source: "docs/blueprint.md",
        example: "spec:\n  gpuOperator:\n    rdma: {mechanism: dma-buf}   # no pool has gpuDirectRDMA\n",
        fixed: "spec:\n  gpuOperator:\n    rdma: {mechanism: dma-buf}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU140" "topology-levels" "network" Error {
        checks: "A pool's `topology.levels` follow Kueue's Topology rules: valid label keys, unique, at most the Topology API's limit, and `kubernetes.io/hostname` only as the last level.",
        why: "The API server refuses such a Topology (its CRD's CEL rules), at apply time, after other objects changed.",
        fix: "List unique node label keys from the widest domain to the narrowest, hostname last.",
        source: "profiles/limits.yaml (kueue.max_topology_levels); Kueue v1beta2 Topology CRD (CEL: unique levels, hostname lowest)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        levels: [kubernetes.io/hostname, topology.example.com/rack]\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        levels: [topology.example.com/rack, kubernetes.io/hostname]\n",
    }
    "GPU141" "topology-levels-unused" "network" Warning {
        checks: "A pool with topology levels is given quota by a Kueue ClusterQueue (so it gets a ResourceFlavor that names its Topology).",
        why: "Only Kueue's topology-aware scheduling reads the levels; without a flavor, the Topology is never used and \"same rack\" requests cannot be admitted.",
        fix: "Use `scheduling.queueing: kueue` with a ClusterQueue on the pool, or remove `levels`.",
        source: "Kueue topology-aware scheduling documentation",
        example: "spec:\n  nodePools:\n    - name: h100-new   # no ClusterQueue has quota on it\n      selector: {gpuctl.dev/pool: h100-new}\n      nodes: 2\n      gpu: {model: H100-SXM5-80GB, count: 8}\n      topology: {levels: [topology.example.com/rack, kubernetes.io/hostname]}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-new\n      selector: {gpuctl.dev/pool: h100-new}\n      nodes: 2\n      gpu: {model: H100-SXM5-80GB, count: 8}\n",
    }
    "GPU142" "topology-hostname-level" "network" Warning {
        checks: "The lowest topology level is `kubernetes.io/hostname`.",
        why: "Kueue assigns pods to domains of the lowest level; without the hostname level it never picks nodes, so \"same rack\" placement cannot also pack pods per node.",
        fix: "Append `kubernetes.io/hostname` to `levels`.",
        source: "Kueue topology-aware scheduling documentation; Kueue v1beta2 Topology CRD",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      topology: {levels: [topology.example.com/block, topology.example.com/rack]}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology: {levels: [topology.example.com/block, topology.example.com/rack, kubernetes.io/hostname]}\n",
    }
    "GPU143" "kubelet-single-numa-whole-node" "network" Warning {
        checks: "A training pool with `topologyManagerPolicy: single-numa-node` has no more GPUs per node than fit one NUMA node.",
        why: "The kubelet refuses any pod whose GPUs span NUMA nodes; a training pod that takes the whole node never starts (TopologyAffinityError).",
        fix: "Use `restricted`, which aligns to the fewest NUMA nodes the pod needs, or size pods to one NUMA node.",
        source: "profiles/network.yaml (kubelet: Topology Manager policies)",
        example: "spec:\n  nodePools:\n    - name: h100-train   # a training pool of 8 GPUs per node\n      topology:\n        numaNodes: 2\n        kubelet: {topologyManagerPolicy: single-numa-node, cpuManagerPolicy: static, reservedSystemCPUs: \"0-1\"}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        numaNodes: 2\n        kubelet: {topologyManagerPolicy: restricted, cpuManagerPolicy: static, reservedSystemCPUs: \"0-1\"}\n",
    }
    "GPU145" "kubelet-numa-defeated" "network" Warning {
        checks: "A pool whose Topology Manager policy is `restricted` or `single-numa-node` also runs the static CPU manager.",
        why: "With `cpuManagerPolicy: none` pods' CPUs float across every NUMA node: GPUs and NICs are aligned but the CPU feeding them is not, which is the cross-NUMA traffic the policy was meant to stop.",
        fix: "Set `cpuManagerPolicy: static` with `reservedSystemCPUs`.",
        source: "profiles/network.yaml (kubelet: Kubernetes Topology Manager and CPU management policies)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        kubelet: {topologyManagerPolicy: restricted, cpuManagerPolicy: none}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        kubelet: {topologyManagerPolicy: restricted, cpuManagerPolicy: static, reservedSystemCPUs: \"0-1\"}\n",
    }
    "GPU146" "kubelet-cpu-reservation" "network" Error {
        checks: "The static CPU manager has a CPU reservation (`reservedSystemCPUs`).",
        why: "The kubelet refuses to start the static policy with no CPUs reserved for the system, and the node goes NotReady.",
        fix: "Set `reservedSystemCPUs` (e.g. `\"0-1\"`), or reserve CPUs in the node's own kubelet configuration.",
        source: "profiles/network.yaml (kubelet: CPU management policies)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        kubelet: {cpuManagerPolicy: static}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        kubelet: {cpuManagerPolicy: static, reservedSystemCPUs: \"0-1\"}\n",
    }
    "GPU147" "kubelet-memory-reservation" "network" Error {
        checks: "The Static memory manager has `reservedMemory`, keyed by NUMA node ids the pool has.",
        why: "The kubelet refuses to start the Static memory manager without a per-NUMA-node reservation.",
        fix: "Set `reservedMemory: {\"0\": 1Gi, \"1\": 1Gi}` (summing to kube-reserved + system-reserved + the memory eviction threshold).",
        source: "profiles/network.yaml (kubelet: Memory Manager)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        kubelet: {memoryManagerPolicy: Static}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        numaNodes: 2\n        kubelet: {memoryManagerPolicy: Static, reservedMemory: {\"0\": 1Gi, \"1\": 1Gi}}\n",
    }
    "GPU148" "kubelet-numa-node-limit" "network" Error {
        checks: "A pool with a Topology Manager policy has no more NUMA nodes than the Topology Manager accepts by default.",
        why: "On machines with more NUMA nodes the kubelet refuses to start with a Topology Manager policy, unless the limit is raised.",
        fix: "Raise it with the kubelet's `max-allowable-numa-nodes` policy option in the node configuration, or use `topologyManagerPolicy: none`.",
        source: "profiles/network.yaml (kubelet.topology_manager_max_numa_nodes)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        numaNodes: 16\n        kubelet: {topologyManagerPolicy: best-effort}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        numaNodes: 8\n        kubelet: {topologyManagerPolicy: best-effort}\n",
    }
    "GPU149" "kubelet-scope-without-policy" "network" Warning {
        checks: "`topologyManagerScope` is only set with a Topology Manager policy other than `none`.",
        why: "The scope says what is aligned together; with policy `none` nothing is aligned, which is usually not what was meant.",
        fix: "Set `topologyManagerPolicy`, or remove the scope.",
        source: "profiles/network.yaml (kubelet: Topology Manager)",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        kubelet: {topologyManagerScope: pod}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      topology:\n        kubelet: {topologyManagerScope: pod, topologyManagerPolicy: best-effort}\n",
    }
    "GPU150" "network-operator-release" "network" Error {
        checks: "`networkOperator.version` is a Network Operator release gpuctl knows, and its documented Kubernetes support range (the platform page, not the chart's `kubeVersion` install guard) includes the cluster's version.",
        why: "gpuctl renders the NicClusterPolicy's images and the chart values for a known release; an unknown one would be installed with mismatched components.",
        fix: "Use a release from the hint.",
        source: "profiles/network.yaml (network_operator.releases)",
        example: "spec:\n  networkOperator: {version: v9.9.9}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  networkOperator: {version: v26.4.1}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU151" "network-operator-nic-driver" "network" Error {
        checks: "When the Network Operator installs the NIC driver, gpuctl knows its DOCA-OFED version (the blueprint's `nicDriver.version`, else the one the release ships); when the hosts carry the driver, no version is given.",
        why: "The NicClusterPolicy needs the DOCA-OFED driver container version; without one the driver pods cannot pull an image and RDMA stays down. A version given with `source: host` is never read, so the blueprint says something that does not happen.",
        fix: "Leave `nicDriver.version` out to get the version the release ships, or pin one; with `source: host`, remove `version`.",
        source: "profiles/network.yaml (network_operator.releases[].doca_driver, from each release's hack/release.yaml)",
        example: "spec:\n  networkOperator:\n    version: v26.4.1\n    nicDriver: {source: host, version: doca3.4.1-26.04-1.1.0.0-1}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  networkOperator:\n    version: v26.4.1\n    nicDriver: {source: host}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU152" "network-operator-fabric" "network" Error {
        checks: "The secondary network fits the fabric: IPoIB needs an InfiniBand pool, macvlan a RoCE pool, host-device the SR-IOV device plugin.",
        why: "The CNI plugin cannot attach the interface and pods stay in ContainerCreating.",
        fix: "Use `ipoib` on InfiniBand, `macvlan` on RoCE, or `host-device` with `devicePlugin.kind: sriov`.",
        source: "Network Operator IPoIBNetwork, MacvlanNetwork and HostDeviceNetwork CRDs (upstream/network-operator/v26.4.1)",
        example: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: macvlan, master: ibp12s0, range: 192.168.0.0/16}   # on InfiniBand\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, range: 192.168.0.0/16}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU153" "network-operator-unused" "network" Warning {
        checks: "The Network Operator is declared only when a pool has an InfiniBand or RoCE network.",
        why: "Without such a pool it installs NIC drivers and device plugins nothing uses.",
        fix: "Declare the pools' `topology.network.fabric`, or remove `networkOperator`.",
        source: "docs/blueprint.md",
        example: "spec:\n  networkOperator: {version: v26.4.1, nicDriver: {source: host}}   # no pool has InfiniBand or RoCE\n",
        fixed: "spec:\n  networkOperator: {version: v26.4.1, nicDriver: {source: host}}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU154" "rdma-resource-quota" "network" Error {
        checks: "Tenant and ClusterQueue quota on RDMA resources (`rdma/...`) names the resource the Network Operator's device plugin advertises.",
        why: "Quota on a resource no node has admits nothing, and pods requesting it stay Pending.",
        fix: "Write the resource the hint names, or declare `networkOperator`.",
        source: "docs/blueprint.md; k8s-rdma-shared-dev-plugin resource naming",
        example: "spec:\n  networkOperator: {version: v26.4.1}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 64, cpu: 600, memory: 4Ti, rdma/hca: 64}}]\n",
        fixed: "spec:\n  networkOperator: {version: v26.4.1}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources: [{pool: h100-train, quota: {nvidia.com/gpu: 64, cpu: 600, memory: 4Ti, rdma/rdma_shared_device_a: 64}}]\n",
    }
    "GPU155" "network-operator-config" "network" Error {
        checks: "The Network Operator's namespace, device-plugin resource name, `hcaMax`, and secondary network name, namespace and `master` are valid, and its namespace is its own (the network's addresses are checked by GPU160-GPU164).",
        why: "The API server or the CNI plugins refuse them at apply or pod start.",
        fix: "Correct the field the finding names.",
        source: "docs/blueprint.md; Network Operator CRDs",
        example: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, range: 192.168.0.0/16}   # no master\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, range: 192.168.0.0/16}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU156" "network-operator-chart-values" "network" Error {
        checks: "Every key path in `networkOperator.values` exists in that release's chart values.",
        why: "Helm ignores unknown keys; a misspelt override is silently lost.",
        fix: "Use a key of the chart (`helm show values nvidia/network-operator`), or remove it.",
        source: "profiles/network-operator-values/<version>.yaml (generated from the chart's values.yaml)",
        example: "spec:\n  networkOperator:\n    version: v26.4.1\n    values: {operatr: {}}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  networkOperator:\n    version: v26.4.1\n    values: {operator: {}}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU157" "dra-kubernetes-gate" "dra" Warning {
        checks: "Each feature gate of NVIDIA's DRA driver that is on and needs a Kubernetes feature gate (DynamicMIG: DRAPartitionableDevices) finds that gate on by default on the declared Kubernetes minor.",
        why: "An alpha Kubernetes gate is off unless the control plane and kubelets turn it on; the API server then drops the fields it guards on write (the ResourceSlices' shared counters), so the driver publishes partitions nobody can allocate, without an error anywhere.",
        fix: "Turn the Kubernetes gate on in kube-apiserver, kube-scheduler, kube-controller-manager and every kubelet (`--feature-gates=DRAPartitionableDevices=true`), or move to a Kubernetes release where it is on by default (1.36).",
        source: "profiles/dra.yaml (driver.gates[].kubernetes_gates, kubernetes.gates)",
        example: "spec:\n  kubernetes: {version: \"1.34.2\"}\n  dra:\n    driver: {deployment: gpuCluster, featureGates: {DynamicMIG: true}}\n",
        fixed: "spec:\n  kubernetes: {version: \"1.36.0\"}\n  dra:\n    driver: {deployment: gpuCluster, featureGates: {DynamicMIG: true}}\n",
    }
    "GPU158" "dra-extended-resources" "dra" Error {
        checks: "`spec.dra.extendedResources` (DRA serving the `nvidia.com/gpu` and `nvidia.com/mig-<profile>` requests pods already make) is declared where it works: the declared Kubernetes minor has DRAExtendedResource on by default (1.36+), `spec.dra.driver` says which chart class already serves a name, some pool is served by DRA, and a declared Kueue has its extended-resource integration on (v0.19+).",
        why: "On Kubernetes 1.35 the gate is alpha and the API server drops DeviceClass `spec.extendedResourceName` on write, silently: pods asking `nvidia.com/gpu` never reach DRA on migrated pools and stay Pending, and a `requests.nvidia.com/gpu` quota does not count claims. Two classes serving one name make the scheduler pick the newer one; an older Kueue charges the pods nothing for DRA-served GPUs.",
        fix: "Declare Kubernetes 1.36 or later (and Kueue v0.19+), name the driver deployment, move pools with `gpuPlugin: dra`; or remove `extendedResources` and move workloads to the shapes' claim templates.",
        source: "profiles/dra.yaml (kubernetes.gates DRAExtendedResource, extended_resource_gate; driver.device_classes extended_resource_name and extended_resource_since; kueue.extended_resource)",
        example: "spec:\n  kubernetes: {version: \"1.35.4\"}\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n    extendedResources: true\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra}\n",
        fixed: "spec:\n  kubernetes: {version: \"1.36.3\"}\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n    extendedResources: true\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra}\n",
    }
    "GPU159" "dra-device-taints" "dra" Error {
        checks: "Device taints are declared where the declared Kubernetes keeps them: `spec.dra.maintenance` DeviceTaintRules need DRADeviceTaints on by default and a DeviceTaintRule API on that minor (1.36+; DRADeviceTaintRules itself is beta and off there), `tenants[].deviceTolerations` need DRADeviceTaints; maintenance names are unique DNS labels, nodes are node names, a toleration with `Exists` has no value and an empty key goes with `Exists`.",
        why: "Where the gate is off the API server drops claim tolerations and slice taints on write and serves no DeviceTaintRule, so a GPU taken out for maintenance keeps getting claims, and a tenant's tolerations vanish silently.",
        fix: "Declare Kubernetes 1.36 or later and turn on DRADeviceTaintRules with `--runtime-config=resource.k8s.io/v1beta2=true` on the API server (and the gate on the scheduler and controller manager); correct the names and tolerations the finding names.",
        source: "profiles/dra.yaml (kubernetes.gates DRADeviceTaints, DRADeviceTaintRules; kubernetes.device_taints)",
        example: "spec:\n  kubernetes: {version: \"1.35.4\"}\n  dra:\n    maintenance:\n      - {name: node7-rma, node: gpu-node-7}\n",
        fixed: "spec:\n  kubernetes: {version: \"1.36.3\"}\n  dra:\n    maintenance:\n      - {name: node7-rma, node: gpu-node-7}\n",
    }
    "GPU160" "ip-range" "network" Error {
        checks: "Every address range the blueprint declares is an IPv4 or IPv6 CIDR: nv-ipam pool ranges (a `cidrpool`'s written at its network address and holding more than one address), the secondary network's `range`, and `kubernetes.podCIDR` / `serviceCIDR` (one CIDR per address family); pool exclusions are addresses of the pool's range, `endIP` not before `startIP`.",
        why: "Under the Network Operator the nv-ipam webhook is off and the API server stores any string, so a bad range is only found when pods start without a secondary address; an exclusion outside the range protects nothing.",
        fix: "Write the range as a CIDR at its network address (`10.210.0.0/16`, `fd00:10:210::/48`), and exclusions as addresses inside it.",
        source: "profiles/network.yaml (nv_ipam: nv-ipam's IPPool and CIDRPool validation)",
        example: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pool}\n    ipPools:\n      - {name: ib-pool, kind: cidrpool, range: 10.210.3.0/16, perNodeNetworkPrefix: 24}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pool}\n    ipPools:\n      - {name: ib-pool, kind: cidrpool, range: 10.210.0.0/16, perNodeNetworkPrefix: 24}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU161" "ip-pool-gateway" "network" Error {
        checks: "An `ippool`'s `gateway` is a host address of its range (not the network or IPv4 broadcast address); a `cidrpool`'s `gatewayIndex` is a host address of each node subnet; `defaultGateway` comes with a gateway.",
        why: "Pods get a gateway they cannot reach, so traffic beyond the secondary subnet (or every route, with `defaultGateway`) goes nowhere.",
        fix: "Use an address inside the range, usually its first host; for a `cidrpool`, `gatewayIndex: 1`.",
        source: "profiles/network.yaml (nv_ipam: ippool_validate.go, cidrpool_validate.go, GetGatewayForSubnet)",
        example: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pool}\n    ipPools:\n      - {name: ib-pool, range: 10.210.0.0/16, gateway: 10.211.0.1}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pool}\n    ipPools:\n      - {name: ib-pool, range: 10.210.0.0/16, gateway: 10.210.0.1}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU162" "ip-pool-capacity" "network" Error {
        checks: "An `ippool`'s `perNodeBlockSize` is at least nv-ipam's minimum and fits its range, and the range holds a block for every node of the node pools it serves; a `cidrpool` has a `perNodeNetworkPrefix` between its range's prefix and the address length, and enough node subnets for those nodes.",
        why: "nv-ipam hands out blocks until the range is used up: the nodes after that get no block, and their pods fail to start with 'no free IP ranges available'.",
        fix: "Use smaller blocks (or a longer node prefix), or a larger range; the hint gives the sizes that fit.",
        source: "profiles/network.yaml (nv_ipam: min_per_node_block_size, reserved_addresses; nv-ipam's allocator)",
        example: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pool}\n    ipPools:\n      - {name: ib-pool, range: 10.210.0.0/24, perNodeBlockSize: 64}   # 8 nodes, 4 blocks\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pool}\n    ipPools:\n      - {name: ib-pool, range: 10.210.0.0/22, perNodeBlockSize: 64}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU163" "ip-pool-overlap" "network" Error {
        checks: "No two nv-ipam pools share an address, and no pool overlaps the cluster's pod or Service range when `kubernetes.podCIDR` / `serviceCIDR` are declared.",
        why: "Two pools hand the same address to two pods; a pool inside the pod or Service range gives pods secondary addresses the cluster network routes elsewhere.",
        fix: "Give each pool its own range, outside the cluster's pod and Service ranges.",
        source: "docs/network.md (IP pools)",
        example: "spec:\n  kubernetes: {version: \"1.34.2\", podCIDR: 10.0.0.0/8}\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pool}\n    ipPools:\n      - {name: ib-pool, range: 10.210.0.0/16}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  kubernetes: {version: \"1.34.2\", podCIDR: 10.0.0.0/12}\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pool}\n    ipPools:\n      - {name: ib-pool, range: 10.210.0.0/16}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU164" "ip-pool-config" "network" Error {
        checks: "nv-ipam pools have unique DNS-1123 names (the implicit pool of `secondaryNetwork.range` is named after the network), name node pools that exist and set only their kind's fields; the secondary network gives exactly one of `range` and `ipPool`, and `ipPool` names a declared pool.",
        why: "A network whose pool does not exist gets no addresses, two pools of one name are one object, and a field of the other kind is never rendered.",
        fix: "Correct the name or field the finding names.",
        source: "docs/blueprint.md; nv-ipam IPPool and CIDRPool CRDs (upstream/nvidia-k8s-ipam)",
        example: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pol}\n    ipPools:\n      - {name: ib-pool, range: 10.210.0.0/16}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
        fixed: "spec:\n  networkOperator:\n    version: v26.4.1\n    secondaryNetwork: {kind: ipoib, master: ibp12s0, ipPool: ib-pool}\n    ipPools:\n      - {name: ib-pool, range: 10.210.0.0/16}\n  nodePools:\n    - name: h100-train\n      topology:\n        network: {fabric: infiniband, nicsPerNode: 8, gpuDirectRDMA: true}\n",
    }
    "GPU165" "dra-standalone" "dra" Error {
        checks: "With `spec.dra.driver.deployment: standalone`: `version` names a release of NVIDIA's DRA driver gpuctl knows, Kubernetes is 1.34.2+, every pool declared `gpuPlugin: dra` runs NVIDIA driver 565+, and the feature gates exist in that release and agree; `gpuPlugin: dra` only on that path; `install`, `chart` and `values` only on that path.",
        why: "The chart's name and home, its values and the upgrade order follow from the release (renamed at v0.4.0, no downgrade); the driver serves resource.k8s.io/v1 from Kubernetes 1.34.2 and GPUs from driver 565; under GPUCluster every node is DRA, and without a deployed driver a pool labelled for DRA has no plugin at all.",
        fix: "Pin a known `version`, upgrade the control plane or the pool's driver, fix the gates, or set `deployment: standalone`.",
        source: "profiles/dra.yaml (driver.releases, driver.prerequisites, driver.gates, standalone)",
        example: "spec:\n  dra:\n    driver: {deployment: standalone}   # no version\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra}\n",
        fixed: "spec:\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra}\n",
    }
    "GPU166" "dra-pool-device-plugin" "dra" Error {
        checks: "On the standalone path no node gets both GPU plugins: a pool with `gpuPlugin: dra` does not turn the device plugin on (`operands.devicePlugin: true`) nor set the device-plugin or DRA kubelet-plugin labels otherwise than gpuctl does, and a pool on the device plugin is not labelled for the DRA kubelet plugin.",
        why: "Both plugins would hand out the same GPUs to different pods; the DRA chart refuses GPU resources unless told (`gpuResourcesEnabledOverride`) that something keeps them apart, and gpuctl tells it so only because it labels each node for one plugin.",
        fix: "Remove the operand switch or the label: gpuctl sets them from `gpuPlugin`.",
        source: "profiles/dra.yaml (standalone: pool_label, device_plugin_label); the DRA chart's templates/validation.yaml",
        example: "spec:\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra, operands: {devicePlugin: true}}\n",
        fixed: "spec:\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra}\n",
    }
    "GPU167" "dra-pool-sharing" "dra" Warning {
        checks: "A pool served by DRA on the standalone path does not share GPUs through the device plugin's time-slicing or MPS.",
        why: "The device plugin is off on the pool's nodes: its sharing settings do nothing, and pods get what their claims ask for.",
        fix: "Remove the pool's `partitioning` (the DRA driver shares GPUs through its alpha TimeSlicingSettings and MPSSupport gates), or keep the pool on the device plugin.",
        source: "profiles/dra.yaml (standalone, driver.gates)",
        example: "spec:\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra, partitioning: {mode: time-slicing, timeSlicing: {replicas: 4}}}\n",
        fixed: "spec:\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra}\n",
    }
    "GPU168" "dra-standalone-unused" "dra" Warning {
        checks: "The standalone DRA driver chart serves at least one pool (`gpuPlugin: dra`).",
        why: "Its kubelet plugin runs only on nodes labelled for it: with no DRA pool it runs nowhere, claims are never allocated, and every GPU stays with the device plugin.",
        fix: "Declare `gpuPlugin: dra` on the pools to move (one at a time), or drop `spec.dra.driver` until then.",
        source: "profiles/dra.yaml (standalone.pool_label)",
        example: "spec:\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}   # no pool has gpuPlugin: dra\n",
        fixed: "spec:\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra}\n",
    }
    "GPU169" "dra-shape-no-dra-pool" "dra" Error {
        checks: "On the standalone path, some pool that has devices of a shape is served by DRA (`gpuPlugin: dra`).",
        why: "The DRA kubelet plugin runs, and publishes devices, on DRA pools only: a shape only device-plugin pools could hold is accepted by the API server, but nothing will ever allocate its claims, and their pods stay Pending.",
        fix: "Move one of those pools to DRA, or leave the shape unclaimed until then.",
        source: "profiles/dra.yaml (standalone.pool_label); the blueprint's pools and shapes",
        example: "spec:\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n    shapes: [{name: mig, mig: {profile: 3g.40gb}}]   # only h100-infer has 3g.40gb\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra}\n",
        fixed: "spec:\n  dra:\n    driver: {deployment: standalone, version: v25.12.0}\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n  nodePools:\n    - {name: h100-train, gpuPlugin: dra}\n",
    }
    "GPU170" "dra-kubernetes" "dra" Error {
        checks: "A blueprint with DRA device shapes declares a Kubernetes release NVIDIA's DRA driver supports (profiles/dra.yaml prerequisites, 1.34.2 today).",
        why: "Older control planes do not serve `resource.k8s.io/v1` by default: the DeviceClasses and templates are refused at apply, or the driver does not run.",
        fix: "Upgrade the control plane, or drop `spec.dra`.",
        source: "profiles/dra.yaml (driver.prerequisites, kubernetes.v1_from)",
        example: "spec:\n  kubernetes: {version: \"1.33.5\"}\n  dra:\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n",
        fixed: "spec:\n  kubernetes: {version: \"1.34.2\"}\n  dra:\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n",
    }
    "GPU171" "dra-shape" "dra" Error {
        checks: "Every DRA device shape has a unique DNS-1123 name, claims either whole GPUs or MIG devices, at least one device per claim, a GPU model of the catalog, a MIG profile that model (or some GPU) offers, a memory floor that is a quantity and version floors of numbers; and every constraint reads an attribute or capacity NVIDIA's DRA driver publishes for that device type.",
        why: "gpuctl writes the DeviceClass's CEL from these; a selector on an attribute the driver does not publish fails at scheduling time (`no such key`), so pods wait without an error at apply.",
        fix: "Correct the field the finding names; `gpuctl profiles` lists models and MIG profiles.",
        source: "profiles/dra.yaml (device_types, device_classes); profiles/gpus.yaml",
        example: "spec:\n  dra:\n    shapes:\n      - {name: small, mig: {profile: 3g.20gb, model: H100-SXM5-80GB}}   # an A100-40GB profile\n",
        fixed: "spec:\n  dra:\n    shapes:\n      - {name: small, mig: {profile: 3g.40gb, model: H100-SXM5-80GB}}\n",
    }
    "GPU172" "dra-shape-unsatisfiable" "dra" Error {
        checks: "Some node pool has nodes with at least `count` devices of each shape: whole GPUs (not partitioned into MIG) or MIG instances of the profile in the pool's layout, of the model, compute capability, driver and memory the shape asks for.",
        why: "A claim's devices come from one node. A shape no node has is accepted by the API server, and every pod claiming it stays Pending with `cannot allocate all claims`.",
        fix: "Relax the shape (model, floors, `count`), or add a pool with such devices.",
        source: "profiles/gpus.yaml (model, compute capability, memory); the blueprint's pools and MIG layouts",
        example: "spec:\n  dra:\n    shapes: [{name: big, gpu: {model: H100-SXM5-80GB}, count: 16}]   # 8 per node\n",
        fixed: "spec:\n  dra:\n    shapes: [{name: big, gpu: {model: H100-SXM5-80GB}, count: 8}]\n",
    }
    "GPU173" "dra-tenant-claims" "dra" Error {
        checks: "A tenant's `claims` name declared shapes and allow at least one claim of each; under Kueue, its release has DRA integration on, the tenant's ClusterQueue has quota for the resource each claimed shape is charged to (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`), and at most 8 shapes share one such resource.",
        why: "A claim of an undeclared shape has no template; an allowance below one claim's devices makes the quota refuse every claim; Kueue admits a claim only when its class is mapped (gpuctl maps each shape) and the ClusterQueue covers the mapped resource, and refuses to start with more than 8 classes in one mapping.",
        fix: "Declare the shape, raise the amount, give the ClusterQueue quota for the shape's resource, or upgrade Kueue.",
        source: "profiles/dra.yaml (kueue: dra_since, resource_names, max_classes_per_mapping, refused: unmapped_class)",
        example: "spec:\n  dra:\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n  tenants:\n    - {name: team-a, claims: {h10: 8}}\n",
        fixed: "spec:\n  dra:\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n  tenants:\n    - {name: team-a, claims: {h100: 8}}\n",
    }
    "GPU174" "dra-quota-key" "dra" Error {
        checks: "A tenant quota key on a device class (`<class>.deviceclass.resource.k8s.io/devices`) names a class a shape or NVIDIA's DRA driver defines, without a `requests.` prefix.",
        why: "The API server accepts any class name in such a key, and the `requests.` form too, and never charges either: the limit is never enforced.",
        fix: "Name the shape's class (`<shape>.shapes.gpuctl.dev`) or a driver class (`gpu.nvidia.com`), or use `claims`.",
        source: "profiles/dra.yaml (kubernetes.quota, driver.device_classes)",
        example: "spec:\n  dra:\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n  tenants:\n    - {name: team-a, quota: {gpu.nvdia.com.deviceclass.resource.k8s.io/devices: 8}}\n",
        fixed: "spec:\n  dra:\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n  tenants:\n    - {name: team-a, quota: {gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 8}}\n",
    }
    "GPU175" "dra-driver" "dra" Error {
        checks: "With `spec.dra.driver.deployment: gpuCluster`: the GPU Operator release has GPUCluster (v26.7.0+), the DRA driver release is one gpuctl knows, every pool's NVIDIA driver is of the branch GPUCluster supports (580+), and the driver's feature gates exist in that release, exclude none of each other and have what they require on.",
        why: "An older operator has no GPUCluster CRD; an unknown release or gate makes the driver fail to start; NVIDIA's driver refuses excluded gate pairs (DynamicMIG with MPSSupport, PassthroughSupport or NVMLDeviceHealthCheck).",
        fix: "Upgrade the operator or the node drivers, name a known release, or fix the gates.",
        source: "profiles/dra.yaml (gpu_operator.gpu_cluster, driver.releases, driver.gates)",
        example: "spec:\n  gpuOperator: {version: v25.10.1}\n  dra:\n    driver: {deployment: gpuCluster}\n",
        fixed: "spec:\n  gpuOperator: {version: v26.7.0}\n  dra:\n    driver: {deployment: gpuCluster}\n",
    }
    "GPU176" "dra-gpu-cluster-sharing" "dra" Error {
        checks: "Under GPUCluster no pool shares GPUs through time-slicing or MPS.",
        why: "GPUCluster deploys no device plugin, and time-slicing and MPS are settings of the device plugin: nothing applies them, and pods get whole GPUs through claims.",
        fix: "Remove the pool's `partitioning`, or keep the ClusterPolicy (no `spec.dra.driver`).",
        source: "profiles/dra.yaml (gpu_operator); NVIDIA GPU Operator 26.7.0 docs: GPUCluster deploys no device plugin, GFD, MIG Manager or toolkit",
        example: "spec:\n  dra:\n    driver: {deployment: gpuCluster}\n  nodePools:\n    - {name: h100-train, partitioning: {mode: time-slicing, timeSlicing: {replicas: 4}}}\n",
        fixed: "spec:\n  dra:\n    driver: {deployment: gpuCluster}\n  nodePools:\n    - {name: h100-train, partitioning: {mode: none}}\n",
    }
    "GPU177" "dra-gpu-cluster-mig" "dra" Warning {
        checks: "Under GPUCluster a pool's MIG layout is made by someone: the hosts, or the DRA driver's DynamicMIG gate.",
        why: "GPUCluster deploys no MIG Manager: the layout is applied by nobody, and MIG shapes match no device until the instances exist.",
        fix: "Create the instances on the hosts before the DRA driver starts, or turn on `DynamicMIG` (alpha).",
        source: "profiles/dra.yaml (driver.gates: DynamicMIG); NVIDIA GPU Operator 26.7.0 docs",
        example: "spec:\n  dra:\n    driver: {deployment: gpuCluster}   # h100-infer has a MIG layout\n",
        fixed: "spec:\n  kubernetes: {version: \"1.36.0\"}\n  dra:\n    driver: {deployment: gpuCluster, featureGates: {DynamicMIG: true}}\n",
    }
    "GPU178" "dra-operator-namespace-quota" "dra" Error {
        checks: "Under GPUCluster no tenant puts a device-class quota (claims or `<class>.deviceclass.resource.k8s.io/devices` keys) into the GPU Operator's namespace.",
        why: "The operator's DCGM, exporter and validator pods claim all devices with admin access in its namespace, and quota charges admin-access claims too: they would be refused.",
        fix: "Keep the operator's namespace out of tenants.",
        source: "profiles/dra.yaml (gpu_operator.gpu_cluster.admin_claims_in_operator_namespace, kubernetes.quota)",
        example: "spec:\n  dra:\n    driver: {deployment: gpuCluster}\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n  tenants:\n    - {name: ops, namespaces: [gpu-operator], queue: cq-team-a, claims: {h100: 8}}\n",
        fixed: "spec:\n  dra:\n    driver: {deployment: gpuCluster}\n    shapes: [{name: h100, gpu: {model: H100-SXM5-80GB}}]\n  tenants:\n    - {name: ops, namespaces: [gpu-ops], queue: cq-team-a, claims: {h100: 8}}\n",
    }
    "GPU179" "dra-compute-domains" "dra" Error {
        checks: "Tenants with `computeDomains` can run them: Kubernetes 1.34.2+, the DRA driver gpuctl deploys has compute domains on, some pool names NVIDIA's NVLink-domain label (`nvidia.com/gpu.clique`) in `topology.levels` and runs driver 570.158.01+, and under Kueue the tenant's ClusterQueue has quota for `gpuctl.dev/compute-domain-channel` (each pod's channel claim).",
        why: "ComputeDomains exist only on multi-node NVLink racks (GB200/GB300 NVL72) whose nodes carry the clique label; older drivers have no IMEX channels; Kueue refuses jobs whose channel class it cannot charge, so they never admit.",
        fix: "Add the clique label to the NVL72 pool's topology, upgrade the driver, give the ClusterQueue channel quota, or drop `computeDomains`.",
        source: "profiles/dra.yaml (driver.prerequisites, driver.compute_domains, kueue.resource_names)",
        example: "spec:\n  tenants:\n    - {name: team-a, computeDomains: 2}   # no NVLink-domain pool, no channel quota\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      nodes: 16\n      gpu: {model: GB200, count: 4}\n      topology: {levels: [nvidia.com/gpu.clique, kubernetes.io/hostname]}\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources:\n            - pool: h100-train\n              quota: {nvidia.com/gpu: 64, cpu: 600, memory: 4Ti, gpuctl.dev/compute-domain-channel: 64}\n  tenants:\n    - {name: team-a, computeDomains: 2}\n",
    }
    "GPU180" "extends" "overlay" Error {
        checks: "A blueprint's `extends` names a parent blueprint by a relative path that stays inside the root (the fleet file's directory; for a single blueprint, its repository, or its own directory outside one) once symbolic links are resolved, that can be read (a regular file under the blueprint size limit, UTF-8, a ClusterBlueprint), and the chain of parents is at most `fleet.max_extends_depth` deep and never loops back.",
        why: "A pull request must not make gpuctl read files outside the repository it checks, a loop or an unbounded chain would never finish, and a deep chain hides where a value comes from.",
        fix: "Write the parent's path relative to the file that extends it, keep it inside the fleet's directory, and end every chain at a base that extends nothing.",
        source: "profiles/limits.yaml (fleet.max_extends_depth); docs/fleet.md",
        example: "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: ../../etc/base.yaml   # outside the root\n",
        fixed: "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: base.yaml\n",
    }
    "GPU181" "overlay-patch" "overlay" Error {
        checks: "An item of a keyed list (`x-kubernetes-list-type: map`) with `$patch: delete` removes an item a parent has, and `$patch` is `delete` or `replace`.",
        why: "A deletion that matches nothing is a typo in a key: the item it meant to remove stays in the cluster.",
        fix: "Match the item's keys (`name`, `pool`, `key` and `effect`) to the parent's item, or remove the deletion.",
        source: "docs/fleet.md (merge rules); Kubernetes strategic merge patch directives",
        example: "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: base.yaml\nspec:\n  tenants:\n    - {name: team-infr, $patch: delete}   # the base's tenant is team-infer\n",
        fixed: "apiVersion: gpuctl.dev/v1alpha1\nkind: ClusterBlueprint\nextends: base.yaml\nspec:\n  tenants:\n    - {name: team-infer, $patch: delete}\n",
    }
    "GPU182" "fleet-clusters" "fleet" Error {
        checks: "Every cluster of a fleet file has its own name, a DNS-1123 label, and a fleet file holds at most `fleet.max_clusters` (1,000) clusters.",
        why: "The name picks the cluster's rendered directory, its wave and its MultiKueue role: two clusters of one name overwrite each other, and a name with `/` or `..` would write outside the rendered tree.",
        fix: "Rename the cluster (lower case letters, digits and `-`); split a larger fleet into several files.",
        source: "docs/fleet.md",
        example: "spec:\n  clusters:\n    - {name: us-east, blueprint: clusters/us-east.yaml, context: gke-us-east}\n    - {name: us-east, blueprint: clusters/eu-onprem.yaml, context: dgx-eu}\n",
        fixed: "spec:\n  clusters:\n    - {name: us-east, blueprint: clusters/us-east.yaml, context: gke-us-east}\n    - {name: eu-onprem, blueprint: clusters/eu-onprem.yaml, context: dgx-eu}\n",
    }
    "GPU183" "fleet-duplicate-context" "fleet" Error {
        checks: "No two clusters of a fleet file name the same kubeconfig context.",
        why: "Two blueprints applied through one context fight over one cluster: each apply undoes the other's, and prune deletes the other's objects.",
        fix: "Give each cluster its own context, or merge the two blueprints into one cluster.",
        source: "docs/fleet.md",
        example: "spec:\n  clusters:\n    - {name: us-east, context: prod}\n    - {name: eu-onprem, context: prod}\n",
        fixed: "spec:\n  clusters:\n    - {name: us-east, context: prod-us}\n    - {name: eu-onprem, context: prod-eu}\n",
    }
    "GPU184" "fleet-wave-coverage" "fleet" Error {
        checks: "Every cluster is in exactly one rollout wave: named by one wave's `clusters`, or matched by a wave's `selector` before any other wave takes it.",
        why: "A cluster in no wave is never rolled out; a cluster in two waves would be applied twice, before and after its bake time.",
        fix: "Name the cluster in one wave, or end the list of waves with `selector: {}` (every cluster no earlier wave took).",
        source: "docs/fleet.md",
        example: "spec:\n  waves:\n    - {name: canary, clusters: [us-canary]}\n    - {name: us, clusters: [us-canary, us-east]}\n",
        fixed: "spec:\n  waves:\n    - {name: canary, clusters: [us-canary]}\n    - {name: us, clusters: [us-east]}\n",
    }
    "GPU185" "fleet-unknown-cluster" "fleet" Error {
        checks: "Waves and the MultiKueue section name clusters the fleet file declares.",
        why: "A misspelt cluster in a wave or as a MultiKueue worker is silently never rolled out or never dispatched to.",
        fix: "Use a name from `spec.clusters`.",
        source: "docs/fleet.md",
        example: "spec:\n  waves:\n    - {name: canary, clusters: [us-canery]}\n",
        fixed: "spec:\n  waves:\n    - {name: canary, clusters: [us-canary]}\n",
    }
    "GPU186" "fleet-blueprint-path" "fleet" Error {
        checks: "Every cluster's `blueprint` is a relative path that stays inside the fleet file's directory once symbolic links are resolved.",
        why: "A pull request must not make gpuctl read (and render, and apply) a file outside the repository it checks.",
        fix: "Keep the blueprints in the fleet's directory and name them relative to the fleet file.",
        source: "docs/fleet.md",
        example: "spec:\n  clusters:\n    - {name: us-east, blueprint: /etc/passwd}\n",
        fixed: "spec:\n  clusters:\n    - {name: us-east, blueprint: clusters/us-east.yaml}\n",
    }
    "GPU187" "multikueue-manager-is-worker" "fleet" Error {
        checks: "The MultiKueue manager is not one of its own workers.",
        why: "Kueue does not support a manager that is its own worker (MultiKueue limitations): its workloads would be dispatched to itself.",
        fix: "Remove the manager from `workers`; run workloads on the manager through a ClusterQueue without the MultiKueue check.",
        source: "kubernetes-sigs/kueue v0.19.2 site/content/en/docs/concepts/multikueue.md (Limitations)",
        example: "spec:\n  multiKueue: {manager: hub, workers: [hub, us-east]}\n",
        fixed: "spec:\n  multiKueue: {manager: hub, workers: [eu-onprem, us-east]}\n",
    }
    "GPU188" "multikueue-workers" "fleet" Error {
        checks: "A MultiKueue manager has between 1 and `fleet.multikueue_max_workers` (20) workers, each listed once.",
        why: "Kueue's MultiKueueConfig refuses an empty list, more than 20 clusters or a cluster twice (`spec.clusters`: minItems 1, maxItems 20, unique).",
        fix: "List each worker once, at most 20; split a larger fleet over several managers.",
        source: "profiles/limits.yaml (fleet.multikueue_max_workers); kueue v0.19.2 kueue.x-k8s.io_multikueueconfigs.yaml",
        example: "spec:\n  multiKueue: {manager: hub, workers: [us-east, us-east]}\n",
        fixed: "spec:\n  multiKueue: {manager: hub, workers: [us-east]}\n",
    }
    "GPU189" "fleet-wave" "fleet" Error {
        checks: "Each wave has a unique name and says which clusters it holds (`clusters`, `selector`, or both), and a bake time is a duration such as `30m` or `24h`.",
        why: "A wave without members rolls out nothing and hides a mistake; two waves of one name cannot be told apart by `fleet apply --wave`.",
        fix: "Name each wave once, give it `clusters` or a `selector`, and write bake times as a number and a unit (`s`, `m`, `h`).",
        source: "docs/fleet.md",
        example: "spec:\n  waves:\n    - {name: canary, bake: one day}\n",
        fixed: "spec:\n  waves:\n    - {name: canary, bake: 24h}\n",
    }
    "GPU190" "gitops-source" "fleet" Error {
        checks: "A fleet's `gitops` section names its source without credentials: Argo CD gets a `repoURL` with no `user:secret@`, a non-empty `revision` when one is given, a `path` relative to the repository root without `..`, and no `{{` in what Argo CD evaluates as a template.",
        why: "The ApplicationSet and Kustomizations are committed to Git: a token in the URL would be published with them, and a path leaving the repository or a template in a literal would sync something other than the rendered trees.",
        fix: "Keep credentials in the engine's repository Secret; give the render directory relative to the repository root.",
        source: "docs/fleet.md (GitOps); argo-cd v3.5.1 docs/operator-manual/applicationset/GoTemplate.md",
        example: "spec:\n  gitops: {engine: argocd, repoURL: \"https://bot:ghp_x@git.example.com/fleet.git\", path: rendered}\n",
        fixed: "spec:\n  gitops: {engine: argocd, repoURL: \"https://git.example.com/fleet.git\", path: rendered}\n",
    }
    "GPU191" "gitops-engine" "fleet" Error {
        checks: "The `gitops` settings are the chosen engine's (`argocd` or `flux`), name valid objects (DNS-1123 labels: fleet, namespaces, project, source, and the waves Argo CD matches by label), Flux has a `sourceRef` of a source kind it knows and an `interval` its CRD accepts.",
        why: "Settings of the other engine are silently unused; a name the API server refuses, or an interval such as `1d` outside the Kustomization's pattern, makes the generated objects fail at apply, after review.",
        fix: "Remove the other engine's settings, rename, name the Flux source, write the interval in ms, s, m or h.",
        source: "flux v2.9.4 kustomize.toolkit.fluxcd.io_kustomizations.yaml (interval pattern, sourceRef.kind enum)",
        example: "spec:\n  gitops: {engine: flux, path: rendered, flux: {sourceRef: {name: fleet}, interval: 1d}}\n",
        fixed: "spec:\n  gitops: {engine: flux, path: rendered, flux: {sourceRef: {name: fleet}, interval: 24h}}\n",
    }
    "GPU192" "gitops-output-dir" "fleet" Error {
        checks: "No cluster is named like the directory `fleet render` writes the engine's objects to (`argocd` or `flux`).",
        why: "The cluster's rendered tree and the GitOps objects would share one directory: one would overwrite or be synced as the other.",
        fix: "Rename the cluster.",
        source: "docs/fleet.md (GitOps)",
        example: "spec:\n  clusters:\n    - {name: flux, blueprint: clusters/eu-onprem.yaml, context: dgx-eu}\n  gitops: {engine: flux, path: rendered, flux: {sourceRef: {name: fleet}}}\n",
        fixed: "spec:\n  clusters:\n    - {name: eu-onprem, blueprint: clusters/eu-onprem.yaml, context: dgx-eu}\n  gitops: {engine: flux, path: rendered, flux: {sourceRef: {name: fleet}}}\n",
    }
    "GPU193" "multikueue-cluster-queues" "fleet" Error {
        checks: "The MultiKueue manager and every worker use Kueue, and each of `multiKueue.clusterQueues` is a ClusterQueue the manager's effective blueprint declares, listed once.",
        why: "MultiKueue is part of Kueue: a worker without it never runs a dispatched Workload. gpuctl gives each listed ClusterQueue exactly one MultiKueue check at ClusterQueue level (never per flavor, never on a worker, never beside a ProvisioningRequest check, which the blueprint cannot declare): a misspelt name would silently leave the real queue without it, so its jobs run on the manager.",
        fix: "Declare Kueue in the manager's and workers' blueprints (or their base); name ClusterQueues of the manager, each once.",
        source: "kubernetes-sigs/kueue v0.19.2 pkg/cache/scheduler/clusterqueue.go (a ClusterQueue with two MultiKueue checks, one per flavor, or one beside a ProvisioningRequest check is inactive)",
        example: "spec:\n  multiKueue: {clusterQueues: [cq-team-a, cq-team-a]}\n",
        fixed: "spec:\n  multiKueue: {clusterQueues: [cq-team-a]}\n",
    }
    "GPU194" "multikueue-mirrored-queues" "fleet" Error {
        checks: "Every namespace whose LocalQueue feeds a dispatching ClusterQueue on the manager has, on every worker, a tenant with that namespace and a queue (so the LocalQueue `default` exists there).",
        why: "Kueue creates the remote copy of a Workload in the same namespace and LocalQueue on the worker; on a worker that lacks them the copy is never admitted, and the job waits on the manager without a clear error.",
        fix: "Declare the tenant with that namespace and a `queue` (a ClusterQueue of the worker; it may differ from the manager's) in the shared base or in the worker's overlay.",
        source: "kubernetes-sigs/kueue v0.19.2 site/content/en/docs/tasks/manage/setup_multikueue.md (workers mirror the manager's namespaces and LocalQueues)",
        example: "# a worker's overlay (us-east) deletes the tenant team-a, whose namespace team-a-train the\n# manager (hub) dispatches from through cq-team-a\nspec:\n  tenants:\n    - {name: team-a, $patch: delete}\n",
        fixed: "# the worker's overlay keeps the tenant team-a\nspec:\n  tenants:\n    - {name: team-a, quota: {nvidia.com/gpu: 128}}\n",
    }
    "GPU195" "multikueue-frameworks" "fleet" Error {
        checks: "Every job framework the manager's Kueue enables (its `integrations.frameworks`, or the chart's default list when the blueprint declares none) is enabled on every worker, except the kinds of Kubernetes itself (`multikueue.builtin_frameworks`: batch/job, pod, deployment, statefulset).",
        why: "Kueue's MultiKueue controller opens a watch on every worker for each enabled framework's kind and does not connect a worker where one fails (its CRD is missing): that worker's MultiKueueCluster stays inactive and nothing is dispatched to it.",
        fix: "Enable (and install) the framework on every worker, or declare on the manager only the frameworks every worker runs.",
        source: "kubernetes-sigs/kueue v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go:351-366; profiles/queueing.yaml (multikueue.builtin_frameworks, kueue_configuration.chart_defaults)",
        example: "# the manager's overlay (hub): its Kueue runs PyTorchJobs, which the workers' (the chart's default list) do not\nspec:\n  scheduling:\n    kueue:\n      config: {integrations: {frameworks: [batch/job, kubeflow.org/mpijob, kubeflow.org/pytorchjob]}}\n",
        fixed: "# the manager's overlay: the frameworks every worker runs\nspec:\n  scheduling:\n    kueue:\n      config: {integrations: {frameworks: [batch/job, kubeflow.org/mpijob]}}\n",
    }
    "GPU196" "multikueue-quota" "fleet" Warning {
        checks: "Per resource, a dispatching ClusterQueue's nominal quota on the manager (summed over its flavors) is at most the sum of the workers' quotas of the ClusterQueues their mirrored LocalQueues point to.",
        why: "The manager admits against its own quota, then dispatches: quota the workers do not have lets the manager admit jobs that then wait on the workers (Kueue: ideally the manager's quota equals the total quota of the workers). Borrowing within a worker's cohort is not counted.",
        fix: "Lower the manager's quota to the workers' total, or raise the workers'.",
        source: "kubernetes-sigs/kueue v0.19.2 site/content/en/docs/concepts/multikueue.md",
        example: "# the manager's overlay (hub): cq-team-a admits 256 GPUs; its workers' have 128 (us-east) + 64 (eu-onprem)\nspec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources:\n            - {pool: h100-train, quota: {nvidia.com/gpu: 256}}\n",
        fixed: "# the manager's overlay: cq-team-a admits what its workers have\nspec:\n  scheduling:\n    kueue:\n      clusterQueues:\n        - name: cq-team-a\n          resources:\n            - {pool: h100-train, quota: {nvidia.com/gpu: 192}}\n",
    }
    "GPU197" "accounting-values" "accounting" Error {
        checks: "`accounting` names pools, GPU models, tenants and MIG profiles the blueprint has; prices are finite and not negative, each for exactly one pool or model, at most once; the currency is an ISO 4217 code; a `table` weighting gives every MIG profile of the pools a share in (0, 1]; the idle threshold is a percentage in (0, 100] held for a duration of a minute to a week.",
        why: "A price or cost centre for a name the blueprint does not have is silently never charged; a MIG profile without a weight would have to be guessed (a 1g slice counted as a whole GPU is the error OpenCost and Kubecost make); a threshold of 0% or a window shorter than a scrape makes every GPU idle or none.",
        fix: "Use the names of `nodePools`, their `gpu.model` and `tenants`; give one price per pool or model; list every MIG profile of the pools under `weights`; write the idle threshold as a percentage and a duration such as `30m`.",
        source: "docs/report.md; profiles/gpus.yaml (MIG compute and memory slices)",
        example: "spec:\n  accounting:\n    prices:\n      - {pool: h100-trian, perGpuHour: 2.5}\n",
        fixed: "spec:\n  accounting:\n    prices:\n      - {pool: h100-train, perGpuHour: 2.5}\n",
    }
    "GPU198" "accounting-unmeasurable" "accounting" Error {
        checks: "The figures `accounting` asks for can come from the metrics gpuctl renders: engine activity (used and idle GPU-hours) needs dcgm-exporter on the pools, and the idle window must span more than one dcgm-exporter collection interval.",
        why: "Without dcgm-exporter there is no engine activity: a report would have to call the pool's GPUs idle or busy by guess. An idle window shorter than two collections decides on one sample, so the alert fires on every pause between kernels.",
        fix: "Enable dcgm-exporter (`gpuOperator.dcgmExporter.enabled`, `nodePools[].operands.dcgmExporter`), or accept that the pool's used and idle hours are reported as unknown by leaving it out of accounting with dcgm-exporter off only there; lengthen `idle.for` or shorten the interval.",
        source: "NVIDIA dcgm-exporter etc/default-counters.csv (DCGM_FI_PROF_GR_ENGINE_ACTIVE) and issue 430 (no GPU utilisation on MIG); profiles/accounting.yaml",
        example: "spec:\n  gpuOperator:\n    dcgmExporter: {enabled: false}\n  accounting:\n    idle: {activityBelowPercent: 5, for: 30m}\n",
        fixed: "spec:\n  gpuOperator:\n    dcgmExporter: {enabled: true}\n  accounting:\n    idle: {activityBelowPercent: 5, for: 30m}\n",
    }
    "GPU1400" "readiness-key" "provisioning" Error {
        checks: "`nodeReadiness.taintKey` is one key under `readiness.k8s.io/` with one `/`; no pool carries another readiness key; raw operator values that replace `daemonsets.tolerations` or NFD's worker tolerations still tolerate it; no managed GKE or AKS pool relies on it.",
        why: "The same key must match in the NodePool's startup taints, the NodeReadinessRule and the GPU Operator's and NFD's tolerations: the Node Readiness Controller refuses other prefixes, an operand that does not tolerate the key never starts, so the taint is never removed, and the managed GKE/AKS autoscalers honour only their own startup-taint prefix and scale up again (gpu-operator examples/cluster-autoscaler).",
        fix: "Use one key such as `readiness.k8s.io/nvidia-gpu-not-ready`; let gpuctl render the tolerations; gate managed GKE/AKS pools differently.",
        source: "NVIDIA/gpu-operator examples/cluster-autoscaler README (PR #2573); kubernetes-sigs/node-readiness-controller v0.5.0 nodereadinessrule_types.go; profiles/provisioning.yaml (readiness)",
        example: "spec:\n  nodeReadiness: {taintKey: nvidia.com/gpu-not-ready}\n",
        fixed: "spec:\n  nodeReadiness: {taintKey: readiness.k8s.io/nvidia-gpu-not-ready}\n",
    }
    "GPU1401" "scale-from-zero-resources" "provisioning" Error {
        checks: "A MIG, MPS or renamed time-slicing pool that can scale to zero declares the resources its nodes will advertise: a Karpenter NodeOverlay, one GPU resource in the Cluster API annotations, or `templateResources` of a managed node group.",
        why: "No provider infers MIG or shared-GPU resources from the instance type: a pod asking for `nvidia.com/mig-1g.10gb` on a pool at zero never makes the autoscaler add a node (gpu-operator examples/cluster-autoscaler, Scale-from-zero; karpenter-provider-aws PR #8710).",
        fix: "Keep the NodeOverlay on, declare the resources on the node group, or keep `minNodes` at 1 or more.",
        source: "NVIDIA/gpu-operator examples/cluster-autoscaler README; kubernetes/autoscaler cluster-autoscaler/cloudprovider/clusterapi/README.md; profiles/provisioning.yaml",
        example: "spec:\n  nodePools:\n    - name: h100-infer\n      nodes: 0\n      provisioner: {type: karpenter, platform: eks, nodeClass: gpu, minNodes: 0, maxNodes: 2, instanceTypes: [p5.48xlarge], nodeOverlay: false}\n      taints: [{key: gpuctl.dev/mig, value: infer, effect: NoSchedule}]\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-infer\n      nodes: 0\n      provisioner: {type: karpenter, platform: eks, nodeClass: gpu, minNodes: 0, maxNodes: 2, instanceTypes: [p5.48xlarge]}\n      taints: [{key: gpuctl.dev/mig, value: infer, effect: NoSchedule}]\n",
    }
    "GPU1402" "dra-pool-at-zero" "provisioning" Error {
        checks: "A pool that serves GPUs through DRA does not scale to zero under a provisioner that cannot template its ResourceSlices (Karpenter; the Cluster Autoscaler for MIG claims; managed EKS and AKS groups).",
        why: "At zero there are no ResourceSlices, and the provisioner cannot imagine them: Karpenter skips pods with claims (`ignoreDRARequests` defaults to true) and no provider ships GPU slice templates; the Cluster Autoscaler's template has whole GPUs only (kubernetes/autoscaler #10199, karpenter #3228).",
        fix: "Keep `minNodes` at 1 or more on DRA pools, or use the device plugin there.",
        source: "kubernetes/autoscaler #10199, cluster-autoscaler docs/dra_support.md; kubernetes-sigs/karpenter #3228; aws/karpenter-provider-aws #9519; profiles/provisioning.yaml",
        example: "spec:\n  nodePools:\n    - name: dra\n      gpuPlugin: dra\n      provisioner: {type: karpenter, minNodes: 0, maxNodes: 2}\n",
        fixed: "spec:\n  nodePools:\n    - name: dra\n      gpuPlugin: dra\n      provisioner: {type: karpenter, minNodes: 1, maxNodes: 2}\n",
    }
    "GPU1403" "driver-ownership" "provisioning" Error {
        checks: "Who installs the driver fits the platform and the operands: no operator driver on an image that has one (EKS), no host driver with `operands.driver: true`, no operator driver with the toolkit off, and DRA pools agreeing on one driver root.",
        why: "Driver ownership is one coordinated setting: the operator's driver on an EKS NVIDIA AMI fights the preinstalled one, a toolkit off while the driver is on is a hybrid no image satisfies, and the DRA driver's `nvidiaDriverRoot` (`/` or `/run/nvidia/driver`) is one value for all its pools (NVIDIA/aicr #1757).",
        fix: "Set `provisioner.driver` to `host` on images that bring the driver; leave the operands to gpuctl; give the DRA pools one owner.",
        source: "EKS user guide ml-eks-optimized-ami.adoc; NVIDIA/aicr #1680, #1756, #1757; dra-driver-nvidia-gpu v25.12.0 values.yaml; profiles/provisioning.yaml (driver_ownership)",
        example: "spec:\n  nodePools:\n    - name: train\n      provisioner: {type: karpenter, platform: eks, driver: operator, maxNodes: 4}\n",
        fixed: "spec:\n  nodePools:\n    - name: train\n      provisioner: {type: karpenter, platform: eks, driver: host, maxNodes: 4}\n",
    }
    "GPU1404" "instance-type-gpu" "provisioning" Error {
        checks: "Every instance type of a pool is in the catalog, has the pool's GPU model and count, and belongs to the pool's platform.",
        why: "The instance types become the NodePool's requirement: a type with another GPU launches nodes whose capacity, MIG profiles and driver needs are not the pool's.",
        fix: "List only catalogued types with the pool's GPU, or add a sourced row to profiles/provisioning.yaml.",
        source: "profiles/provisioning.yaml (instance_types), karpenter-provider-aws instance-types reference",
        example: "spec:\n  nodePools:\n    - name: train\n      gpu: {model: H100-SXM5-80GB, count: 8}\n      provisioner: {type: karpenter, instanceTypes: [p4d.24xlarge]}\n",
        fixed: "spec:\n  nodePools:\n    - name: train\n      gpu: {model: H100-SXM5-80GB, count: 8}\n      provisioner: {type: karpenter, instanceTypes: [p5.48xlarge]}\n",
    }
    "GPU1405" "mig-overlay-whole-gpu" "provisioning" Error {
        checks: "A Karpenter MIG pool whose NodeOverlay declares MIG resources has a NoSchedule taint of its own that no whole-GPU pool has.",
        why: "A NodeOverlay only adds resources: Karpenter still counts the instance's whole `nvidia.com/gpu`, so it places whole-GPU pods on the MIG pool's nodes, where the device plugin offers none and they stay pending (observed with Karpenter's KWOK provider).",
        fix: "Give the MIG pool its own taint that only MIG workloads tolerate.",
        source: "kubernetes-sigs/karpenter v1.15.0 designs/node-overlay.md (capacity adds only); profiles/provisioning.yaml",
        example: "spec:\n  nodePools:\n    - name: h100-infer\n      provisioner: {type: karpenter, platform: eks, nodeClass: gpu, maxNodes: 2, instanceTypes: [p5.48xlarge]}\n      taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-infer\n      provisioner: {type: karpenter, platform: eks, nodeClass: gpu, maxNodes: 2, instanceTypes: [p5.48xlarge]}\n      taints: [{key: gpuctl.dev/mig, value: infer, effect: NoSchedule}]\n",
    }
    "GPU1406" "capacity-only-at-max" "provisioning" Warning {
        checks: "The ClusterQueues' nominal quotas on a scaling pool, summed per pool and resource (every queue that draws on the pool's flavor), fit what the pool has with `nodes` now; sums above that but within `maxNodes` are reported (above `maxNodes` is GPU055).",
        why: "Capacity checks use the pool's maximum; a quota that fits only there admits jobs that then wait for the provisioner to scale up, or for ever when it cannot.",
        fix: "Fine for an elastic pool; otherwise lower the quota or raise `nodes` and `minNodes`.",
        source: "docs/node-pools.md",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      nodes: 4\n      provisioner: {type: karpenter, platform: eks, nodeClass: gpu, maxNodes: 8, instanceTypes: [p5.48xlarge]}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      nodes: 8\n      provisioner: {type: karpenter, platform: eks, nodeClass: gpu, maxNodes: 8, instanceTypes: [p5.48xlarge]}\n",
    }
    "GPU1407" "training-consolidation" "provisioning" Error {
        checks: "A Karpenter training pool neither consolidates busy nodes (`WhenEmptyOrUnderutilized` or `Balanced` without a budget of 0 for `Underutilized`) nor expires its nodes.",
        why: "Consolidation ends a multi-day run on a node Karpenter finds underutilized, and expiry is not blocked by `karpenter.sh/do-not-disrupt` (kubernetes-sigs/karpenter #701, #3185; dynamical-org/reformatters PR #945).",
        fix: "Leave `disruption` and `expireAfter` to gpuctl (WhenEmpty, 1h, Never) or add a budget `{nodes: \"0\", reasons: [Underutilized]}`.",
        source: "kubernetes-sigs/karpenter v1.15.0 pkg/apis/v1/nodepool.go, labels.go; profiles/provisioning.yaml (karpenter.training_defaults)",
        example: "spec:\n  nodePools:\n    - name: train\n      role: training\n      provisioner: {type: karpenter, disruption: {consolidationPolicy: WhenEmptyOrUnderutilized}}\n",
        fixed: "spec:\n  nodePools:\n    - name: train\n      role: training\n      provisioner: {type: karpenter, disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 1h}}\n",
    }
    "GPU1408" "provisioner-settings" "provisioning" Error {
        checks: "The provisioner's settings hold together: a scaling pool has `maxNodes` with `minNodes` ≤ `nodes` ≤ `maxNodes`; a static pool sets none of them; each type gets only its own settings (Karpenter: instance types, platform, NodeClass, valid durations, policies and budgets; Cluster API: a MachineDeployment; managed: a platform).",
        why: "A setting the chosen provisioner does not read is silently lost, and a Karpenter NodePool with a malformed duration or budget is refused by its CRD at apply, after review.",
        fix: "Set the fields the finding names, or remove the ones of another provisioner.",
        source: "kubernetes-sigs/karpenter v1.15.0 karpenter.sh_nodepools.yaml (patterns); docs/node-pools.md",
        example: "spec:\n  nodePools:\n    - name: h100-train\n      provisioner: {type: karpenter, platform: eks, nodeClass: gpu, instanceTypes: [p5.48xlarge], minNodes: 10, maxNodes: 8}\n",
        fixed: "spec:\n  nodePools:\n    - name: h100-train\n      provisioner: {type: karpenter, platform: eks, nodeClass: gpu, instanceTypes: [p5.48xlarge], minNodes: 0, maxNodes: 8}\n",
    }
    "GPU1500" "dra-first-available" "dra" Error {
        checks: "A shape with `firstAvailable` names 1 to 8 other shapes of `spec.dra.shapes` (each of whole GPUs or MIG devices, none itself a list of alternatives, none twice), sets no device, floor, `count` or `memoryShare` of its own, on a Kubernetes release where DRAPrioritizedList is on by default; no tenant claims it through a Kueue queue.",
        why: "The template's `firstAvailable` subrequests take their classes from the named shapes; the API server refuses more than 8, and drops the field where the gate is off. Kueue v0.19 leaves every workload with a `firstAvailable` claim inadmissible (\"FirstAvailable device selection is not supported\", pkg/dra/claims.go).",
        fix: "Name declared shapes; under Kueue claim one of the alternatives instead, or run the workloads without a queue.",
        source: "profiles/dra.yaml (shapes.first_available, kubernetes.gates DRAPrioritizedList, kueue.refused first_available); k8s.io/api v0.36.3 resource/v1 FirstAvailableDeviceRequestMaxSize",
        example: "spec:\n  dra:\n    shapes:\n      - {name: h100, gpu: {model: H100-SXM5-80GB}}\n      - {name: h100-pair, gpu: {model: H100-SXM5-80GB}, count: 2}\n      - {name: any-h100, firstAvailable: [h100-pair, h100]}\n  tenants:\n    - {name: team-a, claims: {any-h100: 4}}\n",
        fixed: "spec:\n  dra:\n    shapes:\n      - {name: h100, gpu: {model: H100-SXM5-80GB}}\n      - {name: h100-pair, gpu: {model: H100-SXM5-80GB}, count: 2}\n      - {name: any-h100, firstAvailable: [h100-pair, h100]}\n  tenants:\n    - {name: team-a, claims: {h100-pair: 8}}\n",
    }
    "GPU1501" "dra-memory-share" "dra" Error {
        checks: "A shape's `memoryShare` (consumable capacity: a part of one GPU's `memory`) is a quantity above 0, at most the shape's GPU model's memory, on a whole-GPU shape, on a Kubernetes release where DRAConsumableCapacity is on by default (1.36+).",
        why: "Where the gate is off the API server drops `capacity.requests` silently and each claim takes a whole GPU; a MIG device is allocated whole; a share larger than the device never fits.",
        fix: "Declare Kubernetes 1.36 or later, write a share such as `20Gi`, or drop `memoryShare`.",
        source: "profiles/dra.yaml (shapes.consumable_capacity, kubernetes.gates DRAConsumableCapacity); k8s.io/dynamic-resource-allocation v0.36.3 consumable_capacity.go",
        example: "spec:\n  dra:\n    shapes:\n      - {name: h100-slice, gpu: {model: H100-SXM5-80GB}, memoryShare: 20Gi}\n",
        fixed: "spec:\n  kubernetes: {version: \"1.36.3\"}\n  dra:\n    shapes:\n      - {name: h100-slice, gpu: {model: H100-SXM5-80GB}, memoryShare: 20Gi}\n",
    }
    "GPU1502" "dra-shape-charge" "dra" Warning {
        checks: "For each claimed shape whose devices quota or the queue does not charge as the tenant's `claims` amount reads: a `memoryShare` shape (ResourceQuota's `<class>.deviceclass.resource.k8s.io/devices` counts each share as one device, no key charges memory; Kueue v0.19 charges each share as a whole device), and a `firstAvailable` shape through a Volcano queue (not charged to the queue).",
        why: "The 1.36.3 quota evaluator charges devices per class and never `capacity.requests`; Volcano v1.15.1 skips DRA quota tracking for `firstAvailable` requests. A quota sized in GPU memory would not hold.",
        fix: "Size `claims` of a share shape as a number of shares; cap a `firstAvailable` shape under Volcano with the namespace's ResourceQuota (the tenant's `claims`).",
        source: "profiles/dra.yaml (shapes: k8s.io/kubernetes v1.36.3 pkg/quota/v1/evaluator/core/resource_claims.go; sigs.k8s.io/kueue v0.19.2 KueueDRAIntegrationConsumableCapacity; volcano.sh/volcano v1.15.1 pkg/scheduler/cache/cache.go)",
        example: "spec:\n  kubernetes: {version: \"1.36.3\"}\n  dra:\n    shapes:\n      - {name: h100, gpu: {model: H100-SXM5-80GB}}\n      - {name: h100-slice, gpu: {model: H100-SXM5-80GB}, memoryShare: 20Gi}\n  tenants:\n    - {name: team-a, claims: {h100-slice: 4}}\n",
        fixed: "spec:\n  kubernetes: {version: \"1.36.3\"}\n  dra:\n    shapes:\n      - {name: h100, gpu: {model: H100-SXM5-80GB}}\n      - {name: h100-slice, gpu: {model: H100-SXM5-80GB}, memoryShare: 20Gi}\n  tenants:\n    - {name: team-a, claims: {h100: 4}}\n",
    }
}

/// Looks a validation rule up by id (case-insensitive); [`crate::finding::rule`] looks up any id.
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id.eq_ignore_ascii_case(id))
}
