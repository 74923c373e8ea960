//! The doctor's finding ids (GPU200–GPU249): what each finds, why, how to fix it, where its facts
//! come from. Registered in [`crate::finding`]; `gpuctl explain GPU2xx` prints an entry and
//! docs/rules.md lists them (docs/doctor.md shows each with an example).

use crate::finding::{Family, Rule};
use crate::located::Severity::{Error, Warning};

macro_rules! rules {
    ($($id:literal $name:literal $area:literal $sev:ident {
        title: $title:literal, why: $why:literal, fix: $fix:literal, source: $source:literal, example: $example:literal $(,)?
    })*) => {
        /// The doctor's rules, ordered by id.
        pub static RULES: &[Rule] = &[$(Rule {
            id: $id, name: $name, family: Family::Doctor, area: $area, severity: $sev,
            title: $title, why: $why, fix: $fix, source: $source, example: $example, fixed: "",
        }),*];
    };
}

rules! {
    "GPU200" "pending-insufficient-gpu" "scheduling" Error {
        title: "A Pending accelerator pod: not enough of a GPU resource is free on the nodes it may use (its pool's Ready, schedulable nodes).",
        why: "The pod waits until GPUs free up; nothing else is wrong with it, so the queue only moves when capacity does.",
        fix: "Wait, lower the pod's request, or raise the pool's `nodes` in the blueprint and `gpuctl apply`; the finding names the pool and how many units are free.",
        source: "The pod's PodScheduled condition and FailedScheduling events; node allocatable minus the requests of the pods bound to it (kube-scheduler's NodeResourcesFit)",
        example: "pod/team-a/big is Pending: insufficient `nvidia.com/gpu` (needs 4, 0 free in pool h100-train)",
    }
    "GPU201" "pending-untolerated-taint" "scheduling" Error {
        title: "A Pending accelerator pod does not tolerate the taint of the pool that has its resources.",
        why: "The scheduler never places a pod on a node whose NoSchedule taint it does not tolerate, however many GPUs are free there.",
        fix: "Add the `tolerations:` entry the finding gives, or submit the pod through the tenant's LocalQueue (Kueue adds the flavor's tolerations).",
        source: "The blueprint's pool taints; the pod's tolerations (kube-scheduler's TaintToleration)",
        example: "pod/team-a/train-0 is Pending: it does not tolerate the taint of pool h100-train",
    }
    "GPU202" "pending-selector-mismatch" "scheduling" Error {
        title: "A Pending accelerator pod's node selector or node affinity matches no node that has its resources.",
        why: "The pod can only go where its selector allows, and none of those nodes advertise what it requests.",
        fix: "Correct the selector (the finding names it and the pools that do have the resource), or give those nodes the label through the blueprint's pool `labels`.",
        source: "The pod's nodeSelector and required node affinity; node labels (kube-scheduler's NodeAffinity)",
        example: "pod/team-a/train-0 is Pending: its node selector or affinity matches no node that has `8 nvidia.com/gpu`",
    }
    "GPU203" "pending-resource-not-advertised" "scheduling" Error {
        title: "A Pending pod requests a MIG profile or shared resource that no pool advertises.",
        why: "No node will ever have the resource, so the pod stays Pending forever; usually a profile of another GPU or partitioning.",
        fix: "Request a resource a pool advertises (the cause lists them), or change the pool's partitioning in the blueprint and `gpuctl apply`.",
        source: "Node allocatable of the cluster's nodes; the blueprint's partitioning (docs/blueprint.md: resource names follow the partitioning)",
        example: "pod/online-infer/embed-0 is Pending: no pool advertises `nvidia.com/mig-2g.20gb`",
    }
    "GPU204" "quota-exhausted" "scheduling" Error {
        title: "A namespace's ResourceQuota is exhausted: a controller's pods are refused at creation.",
        why: "The API server refuses the pods, so they never exist to be scheduled; the Job or Deployment only shows `FailedCreate` events.",
        fix: "Raise the tenant's quota in the blueprint and `gpuctl apply`, or wait for the namespace's running pods to finish.",
        source: "The controller's FailedCreate events; the ResourceQuota's status (used and hard)",
        example: "ResourceQuota dev-test/gpuctl-quota is exhausted: pods of job/dev-test/cuda13-sweep are refused",
    }
    "GPU205" "quota-needs-default" "scheduling" Error {
        title: "Pods are refused because a ResourceQuota needs requests (or limits) that neither the pod nor a LimitRange default gives.",
        why: "A quota on `requests.cpu` makes every pod in the namespace declare it; pods without it are refused at creation.",
        fix: "Give the tenant `defaults` for the resource in the blueprint (gpuctl renders the LimitRange) and `gpuctl apply`, or set the request in the pod.",
        source: "The controller's FailedCreate events (the API server's `must specify` message); the namespace's LimitRange",
        example: "pods of job/dev-test/sweep are refused: the quota needs `requests.cpu` and no LimitRange default gives it",
    }
    "GPU206" "kueue-quota-in-use" "scheduling" Error {
        title: "A Kueue Workload is not admitted: its ClusterQueue's quota is in use or too small (also the finding for any Pending Workload whose message gpuctl does not classify).",
        why: "Kueue keeps the Workload suspended until its ClusterQueue has unused nominal quota (or can borrow); its pods are not even created.",
        fix: "Wait for the queue's running Workloads, lower the request, or raise the ClusterQueue's nominal quota in the blueprint and `gpuctl apply`.",
        source: "The Workload's QuotaReserved condition, classified by the messages in profiles/queueing.yaml (read per Kueue release)",
        example: "workload/team-a/job-train-8f2c1 is not admitted: ClusterQueue cq-team-a has no room for `nvidia.com/gpu`",
    }
    "GPU207" "kueue-cohort-exhausted" "scheduling" Error {
        title: "A Kueue Workload waits on its cohort: the ClusterQueue's own quota is used and nothing is left to borrow.",
        why: "Borrowing only uses what other queues of the cohort leave unused; while they run, the Workload waits.",
        fix: "Check the cohort's usage (`kubectl get clusterqueues -o custom-columns=...` as the finding gives), then raise the queue's own quota or the others' lending limits in the blueprint.",
        source: "The Workload's QuotaReserved condition (profiles/queueing.yaml); the ClusterQueues' status",
        example: "workload/team-b-train/job-vision-ft-large-3f9a1 is waiting on cohort gpu-all: not enough unused `nvidia.com/gpu` to borrow",
    }
    "GPU208" "kueue-namespace-not-selected" "scheduling" Error {
        title: "A Kueue Workload's namespace is not selected by its ClusterQueue's namespaceSelector.",
        why: "Kueue never admits a Workload from a namespace its ClusterQueue does not select.",
        fix: "Add the namespace to the tenant that owns the queue in the blueprint (gpuctl labels it), and `gpuctl apply`.",
        source: "The Workload's QuotaReserved condition (profiles/queueing.yaml)",
        example: "workload/ml/job-a is not admitted: namespace ml is not selected by ClusterQueue cq-team-a",
    }
    "GPU209" "kueue-resource-not-covered" "scheduling" Error {
        title: "A Kueue Workload requests a resource its ClusterQueue does not cover.",
        why: "Kueue admits only Workloads whose every requested resource has quota in the queue's flavors (unless the resource is excluded).",
        fix: "Add the resource to the queue's quota in the blueprint, or exclude it (`scheduling.kueue.config.resources.excludeResourcePrefixes`).",
        source: "The Workload's QuotaReserved condition (profiles/queueing.yaml)",
        example: "workload/ml/job-a is not admitted: ClusterQueue cq-team-a does not cover `cpu`",
    }
    "GPU210" "kueue-queue-inactive" "scheduling" Error {
        title: "A Kueue Workload is inadmissible: its LocalQueue or ClusterQueue is missing, stopped or inactive.",
        why: "An inactive ClusterQueue (a missing flavor or cohort) admits nothing; Workloads pile up behind it.",
        fix: "`kubectl describe clusterqueue NAME` for the reason; declare the missing object in the blueprint and `gpuctl apply`.",
        source: "The Workload's QuotaReserved condition and the queues' Active condition (profiles/queueing.yaml)",
        example: "workload/team-a/job-x is inadmissible: ClusterQueue cq-team-a is inactive",
    }
    "GPU211" "volcano-podgroup-stuck" "scheduling" Error {
        title: "A Volcano PodGroup stays Pending or Inqueue with an Unschedulable condition: its gang cannot be placed.",
        why: "Volcano starts a gang only when `minMember` pods fit at once; until then none of them runs.",
        fix: "Lower the job's `minAvailable`, free capacity in the queue, or raise the queue's capability in the blueprint.",
        source: "The PodGroup's phase and Unschedulable condition (profiles/queueing.yaml, Volcano's PodGroup CRD)",
        example: "podgroup/team-a/pg is stuck in Inqueue: 1 of 4 members running",
    }
    "GPU212" "priorityclass-missing" "scheduling" Error {
        title: "A PriorityClass the blueprint declares, or a refused pod names, does not exist in the cluster.",
        why: "The Priority admission plugin refuses every pod that names a missing PriorityClass.",
        fix: "`gpuctl apply` the blueprint (it creates its PriorityClasses), or correct the pod's `priorityClassName`.",
        source: "The blueprint's priority classes; the cluster's PriorityClasses; FailedCreate events",
        example: "PriorityClass batch-low does not exist in the cluster",
    }
    "GPU213" "pending-with-room" "scheduling" Warning {
        title: "A Pending accelerator pod although a node of its pool has room for its GPUs now.",
        why: "GPUs are not what keeps it waiting: another of its requests (CPU, memory, a volume, a port) or a scheduling constraint is.",
        fix: "`kubectl describe pod` and read the scheduler's message, which the evidence quotes.",
        source: "The pod's PodScheduled condition and FailedScheduling events; node allocatable",
        example: "pod/team-a/train-0 is Pending although a node has room for `4 nvidia.com/gpu` now",
    }
    "GPU214" "claim-refused-by-quota" "scheduling" Error {
        title: "A pod's DRA claim cannot be created from its template because a ResourceQuota on device classes is used up: the pod stays Pending.",
        why: "The resourceclaim controller creates the claim; the API server refuses it for quota, so the pod never has its claim, no scheduler considers it, and `kubectl get pods` shows only Pending.",
        fix: "Raise the tenant's `claims` in the blueprint and `gpuctl apply`, or wait for the namespace's claims to be released.",
        source: "The pod's FailedResourceClaimCreation events (resourceclaim controller); the pod's status.resourceClaimStatuses; the ResourceQuota's status",
        example: "ResourceQuota research/research-dra-quota refuses the claim `gpu` of pod/research/train-0: the pod stays Pending",
    }
    "GPU215" "claim-unallocatable" "scheduling" Error {
        title: "A Pending pod's DRA claims cannot be allocated: no node has devices every selector matches, or a selector fails on the devices.",
        why: "The API server accepts any claim; the scheduler keeps the pod Pending (`cannot allocate all claims`, or `CEL runtime error` for a selector on an attribute the device does not publish), and nothing else says why.",
        fix: "Compare the claim with the cluster's ResourceSlices; relax the shape in the blueprint, or free devices of it.",
        source: "The pod's PodScheduled condition and FailedScheduling events from kube-scheduler's DynamicResources plugin",
        example: "pod/research/train-0 is Pending: the scheduler cannot allocate its DRA claims",
    }
    "GPU216" "kueue-dra-claim-refused" "scheduling" Error {
        title: "A Kueue Workload is inadmissible because Kueue refuses the form of its DRA claims: a device class not mapped in its configuration, a claim not made from a template, a prioritized list, admin access, or allocation mode All.",
        why: "Kueue v0.19 charges a claim to a ClusterQueue only through `resources.deviceClassMappings` and an exact count from a template; any other form leaves the Workload inadmissible whatever the quota, and only its condition says so.",
        fix: "Claim through the tenant's ResourceClaimTemplates (gpuctl maps their classes), or declare the device as a shape.",
        source: "The Workload's QuotaReserved condition, matched against Kueue's messages in profiles/dra.yaml (kueue.refused)",
        example: "workload/research/job-unmapped-7c1d2 is inadmissible: Kueue refuses its DRA claims",
    }
    "GPU217" "dra-device-xid-taint" "scheduling" Warning {
        title: "NVIDIA's DRA driver tainted a device after an Xid (`gpu.nvidia.com/xid=<Xid>`): what the Xid is and NVIDIA's action for it.",
        why: "With its health check on, the driver taints a device that reported a critical Xid NoSchedule (a non-fatal one with effect None) and keeps the taint until its kubelet plugin restarts: the GPU stays out of service after it recovered, and only the ResourceSlice says why.",
        fix: "Follow NVIDIA's action for the Xid, then restart the DRA kubelet plugin on the node.",
        source: "ResourceSlice device taints; profiles/dra.yaml (kubernetes.device_taints.xid_taint_key) and the Xid catalog (profiles/dcgm.yaml)",
        example: "node/gpu-a-3/gpu-5: NVIDIA's DRA driver tainted the device after Xid 79 (...) (gpu.nvidia.com/xid=79:NoSchedule)",
    }
    "GPU218" "dra-pod-pending-on-tainted-devices" "scheduling" Error {
        title: "A Pending pod's DRA devices are tainted (a DeviceTaintRule, or the driver after an Xid), and its claims do not tolerate the taint.",
        why: "The scheduler silently skips tainted devices; the pod's condition says only that claims cannot be allocated, not which taint or rule holds the devices.",
        fix: "End the maintenance (remove the `spec.dra.maintenance` entry and apply: gpuctl deletes its DeviceTaintRule), recover the GPU, or let the tenant tolerate the taint.",
        source: "The pod's PodScheduled condition; ResourceSlice device taints and DeviceTaintRules",
        example: "pod/research/train-0 is Pending: devices it could use are tainted (device gpu-3 of node gpu-a-3 tainted gpuctl.dev/maintenance=rma:NoSchedule by DeviceTaintRule gpuctl-maintenance-rma)",
    }
    "GPU220" "fragmentation-gpus" "scheduling" Warning {
        title: "Fragmentation: enough GPUs are free in the pool, but no single node has enough for the pod.",
        why: "A pod's GPUs must be on one node; free GPUs spread over many nodes cannot serve it.",
        fix: "Run pods of at most the largest free block (the cause gives it), or drain one node's small pods to free it whole.",
        source: "Node allocatable minus bound pods' requests, per node of the pool",
        example: "pod/team-a-train/eval-4gpu-0 is Pending: 8 `nvidia.com/gpu` are free in pool h100-train but spread over 4 nodes",
    }
    "GPU221" "fragmentation-mig" "scheduling" Warning {
        title: "Fragmentation: free MIG slices of a profile no pending request asks for, while pending requests want another profile of the same pool.",
        why: "MIG slices are fixed until the layout changes; capacity of the wrong shape sits idle while work waits.",
        fix: "Change the pool's MIG layout in the blueprint toward the profiles that are asked for, and `gpuctl apply`.",
        source: "Node allocatable of `nvidia.com/mig-*` resources; pending pods' requests; profiles/gpus.yaml (MIG profiles)",
        example: "12 free `nvidia.com/mig-3g.40gb` slices in pool h100-infer that no pending request can use",
    }
    "GPU225" "pending-pool-at-limit" "scheduling" Error {
        title: "A Pending accelerator pod that a Karpenter NodePool could take, while that NodePool is at its `spec.limits`.",
        why: "Karpenter drops every instance type whose capacity exceeds what the pool's limits leave, so it launches nothing and the pod waits until the pool's nodes go away.",
        fix: "Raise the pool's `provisioner.maxNodes` in the blueprint (gpuctl renders the NodePool's GPU limit from it) and `gpuctl apply`, or wait for the pool's pods to finish; the finding names the pod, the NodePool, its limit and its usage.",
        source: "The NodePool's spec.limits and status.resources; Karpenter's FailedScheduling event on the pod (\"all available instance types exceed limits for nodepool\", karpenter v1.15.0 pkg/controllers/provisioning/scheduling/scheduler.go); profiles/provisioning.yaml",
        example: "pods are Pending: NodePool h100-train is at its limit of 32 `nvidia.com/gpu` (32 in use)",
    }
    "GPU230" "operand-not-ready" "container-start" Error {
        title: "GPU Operator operand pods are not Ready (driver, container toolkit, device plugin, MIG Manager, GPU Feature Discovery, DCGM exporter, validator), per operand and pool.",
        why: "Each operand is a step the node needs before GPU pods can start; one that is not Ready stops the steps after it on that node.",
        fix: "`kubectl logs -n gpu-operator POD --all-containers --previous` (the finding names the pod); restarts and the last exit message are in the evidence.",
        source: "Pods of the operator's namespace, by their `app` label; their Ready condition and container statuses",
        example: "device plugin pods are not Ready on pool h100-infer (CrashLoopBackOff)",
    }
    "GPU231" "clusterpolicy-not-ready" "container-start" Error {
        title: "The GPU Operator's ClusterPolicy is not ready.",
        why: "The operator reconciles every operand from the ClusterPolicy; while it is not ready, some operand is failing or waiting.",
        fix: "`kubectl describe clusterpolicy` for its Error condition; then the operand pods it names.",
        source: "The ClusterPolicy's `status.state` and conditions (GPU Operator CRD)",
        example: "ClusterPolicy cluster-policy is notReady",
    }
    "GPU232" "nvidiadriver-not-ready" "container-start" Error {
        title: "An NVIDIADriver CR is not ready.",
        why: "Its driver pods have not come up on the nodes it selects, so those nodes have no usable GPU driver.",
        fix: "`kubectl describe nvidiadriver NAME`; the driver pods' logs on the nodes it selects.",
        source: "The NVIDIADriver's `status.state` and conditions (GPU Operator CRD)",
        example: "NVIDIADriver cluster-default is notReady",
    }
    "GPU233" "mig-config-failed" "container-start" Error {
        title: "A pool's nodes report `nvidia.com/mig.config.state=failed`: MIG Manager could not apply the layout.",
        why: "The node keeps its old (or no) MIG layout and advertises none of the MIG resources the blueprint promises.",
        fix: "Read MIG Manager's logs (the fix gives the command), correct the layout, then re-label the node to retry.",
        source: "Node labels `nvidia.com/mig.config` and `nvidia.com/mig.config.state` (crates/model/src/names.rs)",
        example: "MIG configuration all-3g.40gb failed on pool h100-infer",
    }
    "GPU234" "driver-differs" "container-start" Warning {
        title: "A pool's nodes run a driver other than the one the blueprint declares for the pool (nodes a driver upgrade is moving are left out).",
        why: "The cluster drifted from the blueprint, or an upgrade stopped half way; compatibility checked at validation no longer holds.",
        fix: "`gpuctl upgrade driver BLUEPRINT --pool POOL --to VERSION`, or declare the running driver in the blueprint.",
        source: "GPU Feature Discovery's node label `nvidia.com/cuda.driver-version.full` (crates/model/src/names.rs)",
        example: "pool h100-train runs driver 550.163.01; the blueprint says 580.173.02",
    }
    "GPU235" "driver-too-old-for-cuda" "container-start" Error {
        title: "A pool's running driver is too old for a tenant's declared CUDA version (a warning when only minor-version compatibility makes it work).",
        why: "Containers built for that CUDA fail at start with `CUDA driver version is insufficient for CUDA runtime version`.",
        fix: "Upgrade the pool's driver (`gpuctl upgrade driver`), or rebuild the tenant's images for an older CUDA.",
        source: "profiles/cuda.yaml (minimum drivers); the node's driver label; crashing containers' messages",
        example: "driver 550.163.01 on pool h100-train is too old for tenant dev's CUDA 13.0",
    }
    "GPU236" "gpu-container-not-starting" "container-start" Error {
        title: "GPU pods bound to a node whose containers do not start (container runtime or toolkit errors) or crash at once on a CUDA or NVML error.",
        why: "The scheduler did its part; the node's GPU stack (toolkit hook, runtime class, driver libraries) fails the container.",
        fix: "`kubectl describe pod` for the waiting reason; the container toolkit's pod logs on that node.",
        source: "Container statuses' waiting and terminated reasons and messages",
        example: "GPU containers do not start on pool h100-train",
    }
    "GPU240" "node-not-ready" "node-hardware" Error {
        title: "A pool's nodes are NotReady.",
        why: "No new pod is placed on a NotReady node and its running pods are evicted after the timeout.",
        fix: "`kubectl describe node NAME` for the Ready condition's message; the kubelet's logs on the node.",
        source: "The node's Ready condition",
        example: "nodes of pool h100-train are NotReady",
    }
    "GPU241" "node-no-gpus" "node-hardware" Error {
        title: "A Ready pool node advertises no GPU resource: the device plugin did not register (on a pool served by DRA: the DRA driver published no ResourceSlice for it).",
        why: "The node looks healthy but no GPU pod can be placed on it.",
        fix: "Check the device plugin (or DRA kubelet plugin) and driver pods on the node (`kubectl get pods -n gpu-operator -o wide --field-selector spec.nodeName=NODE`; DRA: `kubectl get resourceslices --field-selector spec.nodeName=NODE`).",
        source: "Node allocatable (`nvidia.com/gpu`, `nvidia.com/mig-*`, shared resources); on DRA pools the node's ResourceSlices, whose GPUs also serve `nvidia.com/gpu` and MIG names through DeviceClasses with `extendedResourceName` (Kubernetes 1.36)",
        example: "nodes of pool h100-infer advertise no GPUs",
    }
    "GPU245" "startup-taint-lingers" "node-hardware" Error {
        title: "A node is Ready but still carries the blueprint's GPU readiness taint (`spec.nodeReadiness.taintKey`) longer than a provisioner waits for a new node.",
        why: "The taint keeps every GPU pod off the node: its GPUs are paid for and unused, and the component that should remove it (the Node Readiness Controller once Node Problem Detector reports the GPU ready, or the cluster's own) is not doing so.",
        fix: "Follow the finding's command: check the node's GPU condition, the GPU stack's pods on it, and the component the finding names as the one that removes the taint on that platform.",
        source: "Node taints and the Ready condition's transition time; profiles/provisioning.yaml readiness (startup_taint_grace_minutes: Karpenter's 15 min registration timeout, the Cluster Autoscaler's --max-node-provision-time)",
        example: "node kwok-train-x of pool h100-train is Ready but still carries the startup taint readiness.k8s.io/nvidia-gpu-not-ready after 40m",
    }
    "GPU246" "nodeclaim-not-launched" "node-hardware" Error {
        title: "A Karpenter NodeClaim failed to launch, register or initialize (a lifecycle condition False, or Unknown for a reason that is not progress), or was deleted for lack of capacity.",
        why: "The node the provisioner decided on never comes, so the pods it was made for stay Pending while Karpenter retries.",
        fix: "`kubectl describe nodeclaim NAME` and Karpenter's log; check the NodePool's instance types are offered and catalogued (GPU1404) and its NodeClass is Ready.",
        source: "NodeClaim status conditions Launched, Registered, Initialized (karpenter v1.15.0 pkg/controllers/nodeclaim/lifecycle); InsufficientCapacityError events; profiles/provisioning.yaml karpenter",
        example: "NodeClaim h100-train-x7k2p of NodePool h100-train failed to launch: LaunchFailed",
    }
    "GPU249" "kind-not-read" "scheduling" Error {
        title: "A kind the doctor reads could not be read: not served while the blueprint queues work with it (error), or forbidden, failed or cut at its bound (warning: findings about it may be missing).",
        why: "A queueing system the blueprint relies on that the cluster does not serve never admits the work queued for it; a kind not read whole hides findings.",
        fix: "Install what the blueprint declares (`gpuctl apply`), or grant `list` on the kind to the identity gpuctl runs as.",
        source: "The API server's answers to the LIST requests (404, 403, errors, the read bound)",
        example: "Workload.kueue.x-k8s.io could not be read: not served",
    }
}
