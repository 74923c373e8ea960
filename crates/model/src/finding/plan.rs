//! The plan's finding ids (GPU400–GPU499, then GPU5000–GPU5999): what a plan notices about the
//! live cluster (or a snapshot) that its actions do not say, why it matters, what to do. Registered
//! in [`crate::finding`]; `gpuctl explain GPU4xx` prints an entry and docs/rules.md lists them
//! (docs/plan-apply.md describes the plan). Each area keeps a block of ten (nodes GPU400–GPU409,
//! helm GPU410–GPU419, kueue GPU420–GPU429, objects GPU430–GPU439, upgrades GPU440–GPU449,
//! uninstall GPU450–GPU459); a new area takes the next block.

use crate::finding::{Family, Rule};
use crate::located::Severity::{Error, Warning};

macro_rules! rules {
    ($($id:literal $name:literal $area:literal $sev:ident {
        title: $title:literal, why: $why:literal, fix: $fix:literal, source: $source:literal, example: $example:literal $(,)?
    })*) => {
        /// The plan's rules, ordered by id.
        pub static RULES: &[Rule] = &[$(Rule {
            id: $id, name: $name, family: Family::Plan, area: $area, severity: $sev,
            title: $title, why: $why, fix: $fix, source: $source, example: $example, fixed: "",
        }),*];
    };
}

rules! {
    "GPU400" "pool-node-count" "nodes" Warning {
        title: "A pool's node selector matches another number of nodes than the pool declares (`nodePools[].nodes`; for a pool a provisioner scales, a number outside `provisioner.minNodes`..`maxNodes`).",
        why: "Quotas, queues and capacity were sized for the declared count: nodes are missing (not joined, relabelled) or the selector also matches nodes of another pool.",
        fix: "Check the nodes the selector matches (`kubectl get nodes -l SELECTOR`); join or label the missing ones, or set `nodes` to what the pool has.",
        source: "The live nodes matching the pool's rendered selector; the blueprint's `nodePools[].nodes` (`provisioner.minNodes`/`maxNodes` for a provisioned pool)",
        example: "pool `h100-train` expects 4 nodes but 3 match `nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3`",
    }
    "GPU401" "gpu-model-mismatch" "nodes" Error {
        title: "A node of a pool reports (GPU Feature Discovery's `nvidia.com/gpu.product`) a GPU model the pool does not declare.",
        why: "Every decision validation made for the pool (MIG layouts, drivers, memory, resource names) assumed the declared model; apply refuses a plan with this error.",
        fix: "Fix `nodePools[].gpu.model` to the GPU the nodes have, or the pool's selector so it matches only nodes with the declared GPU.",
        source: "The node's `nvidia.com/gpu.product` label (GPU Feature Discovery); the GPU catalog's product names (profiles/gpus.yaml)",
        example: "node `gpu-a-3` of pool `h100-train` reports GPU `NVIDIA-A100-SXM4-80GB`; the blueprint says NVIDIA-H100-80GB-HBM3",
    }
    "GPU402" "topology-label-missing" "nodes" Warning {
        title: "Nodes of a pool whose Kueue topology (`scheduling.kueue.topology`) names a level lack that level's label.",
        why: "Kueue's topology-aware scheduling reads every level label from every node of the flavor: a node without one is invisible to topology placement.",
        fix: "Label the nodes (from the fabric manager or the provider's topology labels), or drop the level from the topology.",
        source: "The live nodes' labels; the blueprint's topology levels",
        example: "2 node(s) of pool `h100-train` lack the topology level label `cloud.provider.com/topology-block` (gpu-a-3, gpu-a-4): Kueue's topology-aware scheduling cannot place pods on them; label them (for example from the fabric manager or your provider's topology labels)",
    }
    "GPU403" "node-driver-differs" "nodes" Warning {
        title: "Nodes of a pool run another driver (`nvidia.com/cuda.driver-version.full`) than the blueprint declares for the pool.",
        why: "The GPU Operator moves them to the declared driver after apply, restarting the driver on each: running GPU pods on them are disturbed.",
        fix: "Apply when the pool can take the rollout, or move the nodes with `gpuctl upgrade driver` (blue-green: batched, drained, resumable).",
        source: "The node's `nvidia.com/cuda.driver-version.full` label (GPU Feature Discovery); the blueprint's driver for the pool",
        example: "3 node(s) of pool `h100-train` run driver 570.172.08 (gpu-a-1, gpu-a-2, gpu-a-3); the blueprint says 580.95.05: the GPU Operator moves them after apply (or use `gpuctl upgrade driver` for a blue-green rollout)",
    }
    "GPU404" "driver-cr-move" "nodes" Error {
        title: "Applying would move nodes of a pool from one NVIDIADriver CR to another all at once (their `gpuctl.dev/driver` label changes). An error under `upgrades.strategy: blue-green`, a warning otherwise.",
        why: "The driver pod on every one of those nodes restarts at once, and nothing cordons or drains them first.",
        fix: "Under blue-green, move the pool with `gpuctl upgrade driver BLUEPRINT --pool POOL --to VERSION`, or set `upgrades.strategy: rolling`; otherwise apply when the pool can take it.",
        source: "The nodes' `gpuctl.dev/driver` label against the rendered node patch",
        example: "4 node(s) of pool `h100-train` (gpu-a-1, gpu-a-2, gpu-a-3, gpu-a-4) would move from NVIDIADriver `cluster-default` to `h100-train-580` all at once: the driver pod on every one of them restarts, and nothing cordons or drains them first; apply when the pool can take that",
    }
    "GPU405" "dra-device-plugin-still-advertised" "nodes" Warning {
        title: "Nodes of a pool switched to DRA still advertise device-plugin GPUs in their allocatable.",
        why: "The GPU Operator has not removed the device plugin there yet; until it does, the scheduler can place device-plugin pods on GPUs the DRA driver also hands out.",
        fix: "Keep the nodes cordoned until their allocatable shows no device-plugin GPU (runbooks/dra-migration.md, step 4).",
        source: "The nodes' device-plugin switch label and `status.allocatable`",
        example: "1 node(s) of pool `h100-train` (gpu-a-1) are switched to DRA (`nvidia.com/gpu.deploy.device-plugin=false`) but still advertise device-plugin GPUs (nvidia.com/gpu): the GPU Operator has not removed the device plugin there yet, and until it does the scheduler can place device-plugin pods on GPUs the DRA driver also hands out; keep the nodes cordoned until their allocatable shows none (runbooks/dra-migration.md, step 4)",
    }
    "GPU406" "dra-migration-pods-not-read" "nodes" Warning {
        title: "Nodes move from the device plugin to DRA, and the pods on them were not read (a snapshot plan).",
        why: "A pod holding device-plugin GPUs there would lose its accounting: the device plugin leaves the node under it.",
        fix: "Make sure no pod on those nodes holds `nvidia.com/gpu` or `nvidia.com/mig-*` before applying (runbooks/dra-migration.md), or plan against the live cluster.",
        source: "The nodes' device-plugin switch label; the snapshot, which holds no pods",
        example: "2 node(s) of pool `h100-train` (gpu-a-1, gpu-a-2) move from the device plugin to DRA, and the pods on them were not read (a snapshot): make sure none holds `nvidia.com/gpu` or `nvidia.com/mig-*` before applying (runbooks/dra-migration.md)",
    }
    "GPU407" "dra-migration-pods-hold-gpus" "nodes" Error {
        title: "Nodes move from the device plugin to DRA while running pods hold device-plugin GPUs there. An error, a warning with `--force-migration`.",
        why: "The device plugin leaves those nodes under the pods and the scheduler stops accounting for their GPUs.",
        fix: "Cordon the nodes and drain those pods first (runbooks/dra-migration.md), or re-run with `--force-migration`.",
        source: "The nodes' device-plugin switch label; the live pods on them and their GPU requests",
        example: "pool `h100-train` moves 1 node(s) (gpu-a-1) from the device plugin to DRA while 1 pod(s) hold device-plugin GPUs there: ml/train-0 (nvidia.com/gpu: 8 on gpu-a-1); the device plugin leaves those nodes under them and the scheduler stops accounting for their GPUs. Cordon the nodes and drain those pods first (runbooks/dra-migration.md), or re-run with --force-migration",
    }
    "GPU410" "release-not-in-snapshot" "helm" Warning {
        title: "The snapshot a plan reads does not record a Helm release (other than the GPU Operator's) the blueprint installs with helm.",
        why: "The plan cannot say whether `helm upgrade --install` changes the release: the snapshot was captured by an older gpuctl, or before the blueprint installed it.",
        fix: "Capture the snapshot again (`gpuctl snapshot`).",
        source: "The snapshot's recorded releases (format 2 and later)",
        example: "the snapshot does not record the Kueue Helm release kueue-system/kueue (captured by an older gpuctl, or before the blueprint installed it with helm): the plan cannot say whether `helm upgrade --install` changes it; capture the snapshot again",
    }
    "GPU411" "release-unreadable" "helm" Warning {
        title: "A live Helm release the blueprint installs could not be read.",
        why: "The plan cannot say whether the release step changes anything; the step still runs `helm upgrade --install`, which is right whatever the live state.",
        fix: "Check the permission to read Secrets in the release's namespace (Helm's storage), then plan again.",
        source: "Helm's release Secrets in the release's namespace",
        example: "cannot read the live Helm release gpu-operator/gpu-operator (secrets is forbidden); the plan cannot say whether `helm upgrade --install` changes it",
    }
    "GPU412" "operator-stack-switch" "helm" Error {
        title: "The installed GPU Operator release deploys the ClusterPolicy (device plugin) and the blueprint the GPUCluster (DRA), or the other way round.",
        why: "NVIDIA supports no in-place migration between them: the upgrade would take the GPU stack away from every running GPU workload.",
        fix: "Build a new cluster from the blueprint and move workloads, or keep `spec.dra.driver` as the cluster has it (docs/dra.md, Migration).",
        source: "The live release's values (`gpuCluster.deployCR`) against the rendered ones",
        example: "the installed GPU Operator release gpu-operator/gpu-operator (revision 3) deploys the ClusterPolicy (device plugin), the blueprint the GPUCluster (DRA): NVIDIA supports no in-place migration between them, and the upgrade would take the GPU stack away from every running GPU workload; build a new cluster from this blueprint and move workloads, or keep `spec.dra.driver` as the cluster has it (docs/dra.md, Migration)",
    }
    "GPU413" "dra-driver-downgrade" "helm" Error {
        title: "The blueprint's NVIDIA DRA driver release is older than the installed one.",
        why: "The driver supports no downgrade: its kubelet plugin's checkpoint cannot be read by an older release.",
        fix: "Keep `spec.dra.driver.version` at the installed version or later.",
        source: "profiles/dra.yaml (the DRA driver's releases); the live release's chart version",
        example: "the installed NVIDIA DRA driver release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu is 25.8.0, the blueprint's 25.3.2 is older: the driver supports no downgrade (its kubelet plugin's checkpoint cannot be read by an older release); keep `spec.dra.driver.version` at 25.8.0 or later",
    }
    "GPU414" "dra-driver-chart-rename" "helm" Error {
        title: "The NVIDIA DRA driver release moves across the release where its chart was renamed. An error without the documented `nameOverride`, a warning with it (its new CRDs are applied by hand first).",
        why: "Without `nameOverride` the renamed chart installs beside the old one's objects; its CRDs are not upgraded by Helm.",
        fix: "Set `spec.dra.driver.values.nameOverride` as the finding says and apply the new CRDs by hand before this apply (runbooks/dra-migration.md, Upgrading the DRA driver).",
        source: "profiles/dra.yaml (standalone: the rename, its release and the `nameOverride` value)",
        example: "the NVIDIA DRA driver release nvidia-dra-driver-gpu/nvidia-dra-driver-gpu moves from 0.3.0 to 25.3.2, across 0.4.0 where the chart was renamed (`nvidia-dra-driver-gpu`, OCI registry): apply the CRDs of 25.3.2 by hand before this apply (runbooks/dra-migration.md, Upgrading the DRA driver)",
    }
    "GPU415" "release-chart-replaced" "helm" Warning {
        title: "A live Helm release of the name the blueprint installs is another chart.",
        why: "The upgrade replaces one chart with the other under the same release name: what the old chart installed may be removed.",
        fix: "Check the release (`helm list -n NAMESPACE`); rename the blueprint's release, or uninstall the other chart first.",
        source: "The live release's chart name against the rendered chart",
        example: "Helm release kueue-system/kueue is chart `kueue-custom`, the blueprint installs `kueue` under that name: the upgrade replaces one chart with the other",
    }
    "GPU416" "release-not-deployed" "helm" Warning {
        title: "A live Helm release the blueprint installs is not in `deployed` state (failed, pending).",
        why: "Apply runs `helm upgrade --install` again; a helm operation still running would conflict with it.",
        fix: "If a helm operation is still running, wait for it (`helm history RELEASE -n NAMESPACE`); otherwise apply.",
        source: "The live release's status in Helm's storage",
        example: "Helm release gpu-operator/gpu-operator revision 4 is `failed`, not `deployed`: apply runs `helm upgrade --install` again; if a helm operation is still running, wait for it (`helm history gpu-operator -n gpu-operator`)",
    }
    "GPU420" "kueue-config-missing" "kueue" Warning {
        title: "The blueprint says someone else installs Kueue (`scheduling.kueue.install: none`), and Kueue's manager ConfigMap does not exist.",
        why: "Kueue is not installed, or not where its chart puts it; the queue rules assumed the blueprint's `config`.",
        fix: "Install Kueue, or check where it is installed; then plan again.",
        source: "profiles/queueing.yaml (kueue_configuration: the manager ConfigMap's namespace, name and key)",
        example: "the blueprint says Kueue is installed by someone else (`scheduling.kueue.install: none`) but ConfigMap kueue-system/kueue-manager-config key controller_manager_config.yaml does not exist: Kueue is not installed here, or not where its chart puts it; the queue rules assumed the blueprint's `config`",
    }
    "GPU421" "kueue-config-unreadable" "kueue" Warning {
        title: "The running Kueue's configuration could not be read (permissions, connection).",
        why: "The queue rules assumed the blueprint's `config`, which nothing checked against Kueue.",
        fix: "Grant read access to Kueue's manager ConfigMap, then plan again.",
        source: "profiles/queueing.yaml (kueue_configuration: the manager ConfigMap)",
        example: "could not read the running Kueue's configuration (ConfigMap kueue-system/kueue-manager-config key controller_manager_config.yaml): configmaps is forbidden; the queue rules assumed the blueprint's `config`",
    }
    "GPU422" "kueue-config-unparsable" "kueue" Warning {
        title: "The running Kueue's configuration is not YAML gpuctl can read, or not a mapping.",
        why: "Nothing can be compared with the blueprint's `config`: the queue rules assumed the blueprint's settings.",
        fix: "Check Kueue's manager ConfigMap; Kueue itself refuses a configuration it cannot read.",
        source: "profiles/queueing.yaml (kueue_configuration: the manager ConfigMap)",
        example: "the running Kueue's ConfigMap kueue-system/kueue-manager-config key controller_manager_config.yaml: its configuration is not a YAML mapping",
    }
    "GPU423" "kueue-config-contradicts" "kueue" Warning {
        title: "The running Kueue's configuration contradicts a setting of the blueprint's `scheduling.kueue.config` (fair sharing, resources, device classes, frameworks, waiting for pods ready).",
        why: "The queue rules checked the blueprint's setting; Kueue behaves by its own.",
        fix: "Fix whichever is wrong: `scheduling.kueue.config`, or Kueue's configuration.",
        source: "Kueue's manager ConfigMap against the blueprint's declared settings (Kueue's defaults where it declares none)",
        example: "the running Kueue contradicts the blueprint (ConfigMap kueue-system/kueue-manager-config key controller_manager_config.yaml): integrated frameworks: the blueprint says [batch/job, jobset.x-k8s.io/jobset], the running Kueue [batch/job]; the queue rules checked the blueprint's setting, so fix whichever is wrong (`scheduling.kueue.config`, or Kueue's configuration)",
    }
    "GPU430" "protected-kind-kept" "objects" Warning {
        title: "A member of the blueprint's set the blueprint no longer declares is of a protected kind (namespaces, quotas, queues): it is kept, not pruned.",
        why: "Pruning a protected kind can take tenants' work or quota with it; gpuctl deletes those only when asked.",
        fix: "Delete it by hand, or apply with `--prune-protected`; or declare it again.",
        source: "The ApplySet's live members against the rendered set",
        example: "Namespace/team-c is no longer in the blueprint but is kept: Namespace objects are pruned only with --prune-protected",
    }
    "GPU440" "upgrade-journals-unreadable" "upgrades" Error {
        title: "The driver upgrade journals in the operator namespace could not be read.",
        why: "gpuctl does not apply while it cannot tell whether an upgrade is moving a pool: the apply would fight it.",
        fix: "Grant read access to ConfigMaps in the operator namespace, then plan again.",
        source: "The upgrade journals (ConfigMaps in the operator namespace)",
        example: "cannot read the driver upgrade journals in namespace gpu-operator (configmaps is forbidden); gpuctl does not apply while it cannot tell whether an upgrade is moving a pool",
    }
    "GPU441" "upgrade-unfinished" "upgrades" Error {
        title: "A pool of the blueprint has a driver upgrade that is not finished (running, failed or being rolled back).",
        why: "The upgrade owns the pool's driver labels, colours and taints; applying now would move them under it.",
        fix: "Finish it (`gpuctl upgrade driver --resume --pool POOL`) or undo it (`gpuctl upgrade rollback --pool POOL`), then plan again.",
        source: "The pool's upgrade journal (docs/upgrade.md)",
        example: "pool `h100-train` has a driver upgrade stopped on a failure (570.172.08 -> 580.95.05, journal ConfigMap gpu-operator/gpuctl-upgrade-h100-train); applying now would move the labels it manages. Finish it with `gpuctl upgrade driver --resume --pool h100-train`, or undo it with `gpuctl upgrade rollback --pool h100-train`, then plan again",
    }
    "GPU442" "upgraded-driver-undeclared" "upgrades" Error {
        title: "A completed driver upgrade moved a pool to a driver the blueprint does not declare.",
        why: "Applying the blueprint would move every node of the pool back to the old driver.",
        fix: "Make the edit the upgrade asked for (the journal's blueprint change), then plan again.",
        source: "The pool's upgrade journal (docs/upgrade.md); the blueprint's driver for the pool",
        example: "pool `h100-train` was upgraded to driver 580.95.05 by `gpuctl upgrade` (journal ConfigMap gpu-operator/gpuctl-upgrade-h100-train), but the blueprint declares 570.172.08: applying it would move every node back. Make the edit the upgrade asked for (set nodePools[0].driver.version: 580.95.05), then plan again",
    }
    "GPU450" "owned-releases-unreadable" "uninstall" Warning {
        title: "The Helm releases gpuctl installed for the blueprint could not be read.",
        why: "The plan cannot say whether a release of a component the blueprint dropped should be uninstalled.",
        fix: "Grant read access to Helm's release Secrets, then plan again.",
        source: "Helm's release Secrets labelled with the blueprint",
        example: "cannot read which Helm releases gpuctl installed for blueprint `lab` (secrets is forbidden); the plan cannot say whether a release of a component the blueprint dropped should be uninstalled",
    }
    "GPU451" "uninstall-objects-unlisted" "uninstall" Warning {
        title: "The objects of the kinds a release to uninstall serves could not be listed.",
        why: "Uninstalling a controller while objects of its kinds exist leaves them behind with finalizers nobody answers; apply checks again before it uninstalls.",
        fix: "Grant list access to those API groups, then plan again.",
        source: "The live objects of the release's API groups",
        example: "cannot list the objects of kueue.x-k8s.io (forbidden); apply checks again before it uninstalls HelmRelease/kueue-system/kueue",
    }
    "GPU452" "uninstall-blocked" "uninstall" Warning {
        title: "A release of a component the blueprint dropped is not uninstalled while objects of its kinds exist.",
        why: "Without their controller they would stay behind, and their finalizers never be answered.",
        fix: "Delete them first (or apply a blueprint that still declares the component but not them), then apply again; or apply with `--force-uninstall`.",
        source: "The live objects of the release's API groups",
        example: "HelmRelease/kueue-system/kueue (Kueue release) is not uninstalled while objects of its kinds exist: ClusterQueue/cq-team-a. Without their controller they would stay behind, and their finalizers never be answered: delete them first (or apply a blueprint that still declares scheduling.kueue but not them), then apply again; or apply with --force-uninstall to uninstall anyway",
    }
    "GPU453" "release-left-alone" "uninstall" Warning {
        title: "A Helm release gpuctl installed for the blueprint, of a component it still declares, is no longer one gpuctl installs (renamed, moved, or now `gitops` or `none`).",
        why: "gpuctl never uninstalls it: it may still be what runs the component.",
        fix: "`helm uninstall RELEASE -n NAMESPACE` once nothing needs it.",
        source: "Helm's release Secrets labelled with the blueprint, against the rendered releases",
        example: "Helm release kueue-system/kueue (kueue chart 0.13.4) was installed by gpuctl for this blueprint, which still declares scheduling.kueue but does not have gpuctl install that release now: gpuctl leaves it alone (`helm uninstall kueue -n kueue-system` removes it, once nothing needs it)",
    }
}
