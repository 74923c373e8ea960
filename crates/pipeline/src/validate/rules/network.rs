//! Network and topology: GPUDirect RDMA (GPU130-GPU137), Kueue topology levels (GPU140-GPU142),
//! kubelet NUMA alignment (GPU145-GPU149) and the NVIDIA Network Operator (GPU150-GPU156); its
//! nv-ipam address pools are `ip_pools.rs` (GPU160-GPU164).
//! Every version and limit comes from `profiles/network.yaml` (and `limits.yaml` for Kueue).

use std::collections::BTreeSet;

use super::compat::{PoolDriver, pool_drivers};
use super::{is_dns_label, is_label_key};
use crate::validate::Ctx;
use gpuctl_model::blueprint::{
    CpuManagerPolicy, DevicePlugin, DevicePluginKind, Fabric, KernelModuleType,
    MemoryManagerPolicy, NetworkOperator, NicDriverSource, NodePool, Queueing, Rdma, RdmaMechanism,
    SecondaryNetwork, SecondaryNetworkKind, TopologyManagerPolicy,
};
use gpuctl_model::profiles::network::{GpuDirectRdma, NetworkOperatorFacts, kernel_major_minor};
use gpuctl_model::version::{DriverVersion, KubeVersion, OperatorVersion};

/// The node label Kueue allows only as the lowest topology level.
pub(crate) const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

pub(super) fn check(ctx: &mut Ctx<'_>) {
    rdma(ctx);
    levels(ctx);
    kubelet(ctx);
    network_operator(ctx);
}

/// Whether the pool asks for GPUDirect RDMA.
pub fn wants_rdma(pool: &NodePool) -> bool {
    pool.topology
        .as_ref()
        .and_then(|t| t.network.as_ref())
        .is_some_and(|n| n.gpu_direct_rdma)
}

/// The kernel module flavour a pool's driver really loads: `auto` resolves to the open modules on
/// branches that default to them for GPUs that support them, to the proprietary ones otherwise.
fn effective_modules(ctx: &Ctx<'_>, pool: &NodePool, d: &PoolDriver) -> KernelModuleType {
    match d.kernel_modules {
        KernelModuleType::Auto => {
            let flavors = ctx.catalog.kernel_module_flavors();
            let gpu_open = ctx
                .catalog
                .gpu(&pool.gpu.model)
                .is_some_and(|g| g.kernel_modules.open);
            if gpu_open && d.version.branch() >= flavors.open_default_from_branch {
                KernelModuleType::Open
            } else {
                KernelModuleType::Proprietary
            }
        }
        k => k,
    }
}

fn rdma(ctx: &mut Ctx<'_>) {
    let facts = ctx.catalog.network().gpudirect_rdma.clone();
    let settings = ctx.bp.spec.gpu_operator.rdma.clone().unwrap_or_default();
    let drivers = pool_drivers(ctx);
    let any = ctx.bp.spec.node_pools.iter().any(wants_rdma);
    let rdma_path = "spec.gpuOperator.rdma";
    if !any {
        if ctx.bp.spec.gpu_operator.rdma.is_some() {
            ctx.emit(
                "GPU137",
                rdma_path,
                "`gpuOperator.rdma` is set but no pool sets `topology.network.gpuDirectRDMA: true`, so nothing uses it",
                "set `gpuDirectRDMA: true` on the pools whose NICs should reach GPU memory, or remove `gpuOperator.rdma`",
            );
        }
        return;
    }
    let needs = mechanism_needs(ctx, &settings, &facts);
    operator_floor(ctx, &needs, &settings, &facts);
    let kernel_min = kernel_major_minor(&facts.dma_buf.min_kernel);
    let mut reported_driver = BTreeSet::new();
    let bp = ctx.bp;
    for (i, pool) in bp.spec.node_pools.iter().enumerate() {
        let pool_rdma = PoolRdma {
            i,
            pool,
            driver: drivers[i].as_ref(),
            kernel_min,
        };
        pool_rdma.check(ctx, &needs, &settings, &facts, &mut reported_driver);
    }
    // nvidia-peermem needs the MOFED/DOCA NIC driver: from the Network Operator or the host.
    let net_op_driver = ctx
        .bp
        .spec
        .network_operator
        .as_ref()
        .map(|n| n.nic_driver.source);
    if settings.mechanism == RdmaMechanism::NvidiaPeermem
        && !settings.use_host_mofed
        && net_op_driver != Some(NicDriverSource::Operator)
    {
        ctx.emit(
            "GPU136",
            format!("{rdma_path}.mechanism"),
            "nvidia-peermem needs the MOFED/DOCA-OFED NIC driver, and neither the Network Operator installs it nor `useHostMofed` says the hosts carry it: the driver pods wait for it forever",
            "declare `networkOperator` (its `nicDriver.source: operator`), or set `gpuOperator.rdma.useHostMofed: true` when the hosts carry the driver",
        );
    }
    if settings.use_host_mofed && net_op_driver == Some(NicDriverSource::Operator) {
        ctx.emit(
            "GPU136",
            format!("{rdma_path}.useHostMofed"),
            "`useHostMofed: true` says the hosts carry the NIC driver, but the Network Operator is told to install it (`nicDriver.source: operator`)",
            "set `networkOperator.nicDriver.source: host`, or `useHostMofed: false`",
        );
    }
}

/// What the chosen RDMA mechanism needs: its name, the first operator release that has it, and
/// the oldest driver it runs on with how the catalog words why.
struct MechanismNeeds {
    name: &'static str,
    min_operator: Option<String>,
    /// `(driver, why, what to use)`.
    min_driver: Option<(DriverVersion, String, String)>,
}

fn mechanism_needs(ctx: &Ctx<'_>, settings: &Rdma, facts: &GpuDirectRdma) -> MechanismNeeds {
    // The oldest driver the mechanism runs on, and how the catalog words why: DMA-BUF needs the
    // CUDA version NVIDIA's page names (its driver from cuda.yaml), nvidia-peermem a branch.
    // DMA-BUF has no documented first operator release, so only nvidia-peermem is checked there.
    let dma_buf_cuda = facts
        .dma_buf
        .min_cuda
        .parse::<gpuctl_model::version::CudaVersion>()
        .ok()
        .and_then(|c| ctx.catalog.cuda(&c).map(|req| (c, req.min_driver.clone())));
    let (name, min_operator, min_driver) = match settings.mechanism {
        RdmaMechanism::DmaBuf => (
            "DMA-BUF",
            None,
            dma_buf_cuda.as_ref().map(|(cuda, driver)| {
                (
                    driver.clone(),
                    format!("CUDA {cuda}, so driver {driver} or newer"),
                    format!("driver {driver} or newer"),
                )
            }),
        ),
        RdmaMechanism::NvidiaPeermem => {
            let branch = facts.nvidia_peermem.min_driver_branch;
            (
                "nvidia-peermem",
                Some(facts.nvidia_peermem.min_operator.clone()),
                branch.to_string().parse::<DriverVersion>().ok().map(|d| {
                    (
                        d,
                        format!("R{branch}"),
                        format!("an R{branch} or newer driver"),
                    )
                }),
            )
        }
    };
    MechanismNeeds {
        name,
        min_operator,
        min_driver,
    }
}

/// GPU134: the GPU Operator release has the mechanism and `useHostMofed`.
fn operator_floor(
    ctx: &mut Ctx<'_>,
    needs: &MechanismNeeds,
    settings: &Rdma,
    facts: &GpuDirectRdma,
) {
    let operator = ctx
        .bp
        .spec
        .gpu_operator
        .version
        .parse::<OperatorVersion>()
        .ok();
    let (mech_name, min_operator) = (needs.name, &needs.min_operator);
    if let Some(op) = &operator {
        let mut needs: Vec<(&str, String, &str)> = min_operator
            .iter()
            .map(|m| (mech_name, m.clone(), "mechanism"))
            .collect();
        if settings.use_host_mofed {
            needs.push((
                "useHostMofed",
                facts.host_mofed.min_operator.clone(),
                "useHostMofed",
            ));
        }
        for (what, min, field) in needs {
            if let Ok(min_v) = min.parse::<OperatorVersion>()
                && *op < min_v
            {
                ctx.emit(
                    "GPU134",
                    "spec.gpuOperator.version",
                    format!("GPU Operator {op} predates GPUDirect RDMA with {what} (first in {min}); `gpuOperator.rdma.{field}` would be ignored"),
                    format!("use GPU Operator {min} or newer"),
                );
            }
        }
    }
}

/// One pool that asks for GPUDirect RDMA, with its driver.
struct PoolRdma<'a> {
    i: usize,
    pool: &'a NodePool,
    driver: Option<&'a PoolDriver>,
    kernel_min: Option<(u32, u32)>,
}

impl PoolRdma<'_> {
    /// GPU130-GPU133 for the pool: an RDMA fabric, its NICs, a driver new enough, and for DMA-BUF
    /// the open kernel modules, the GPU and the kernel.
    fn check(
        &self,
        ctx: &mut Ctx<'_>,
        needs: &MechanismNeeds,
        settings: &Rdma,
        facts: &GpuDirectRdma,
        reported_driver: &mut BTreeSet<String>,
    ) {
        let PoolRdma {
            i,
            pool,
            driver,
            kernel_min,
        } = *self;
        let (mech_name, min_driver) = (needs.name, &needs.min_driver);
        let Some(net) = pool.topology.as_ref().and_then(|t| t.network.as_ref()) else {
            return;
        };
        if !net.gpu_direct_rdma {
            return;
        }
        let base = format!("spec.nodePools[{i}].topology.network");
        if net.fabric == Fabric::Ethernet {
            ctx.emit(
                "GPU130",
                format!("{base}.gpuDirectRDMA"),
                format!("pool `{}` asks for GPUDirect RDMA on plain Ethernet, which has no RDMA transport", pool.name),
                "use `fabric: roce` for RDMA over Converged Ethernet NICs or `fabric: infiniband`, or set `gpuDirectRDMA: false`",
            );
        }
        if net.nics_per_node.unwrap_or(0) == 0 {
            ctx.emit(
                "GPU131",
                format!("{base}.gpuDirectRDMA"),
                format!("pool `{}` asks for GPUDirect RDMA but declares no NICs (`nicsPerNode`)", pool.name),
                "set `nicsPerNode` to the RDMA NICs per node (DGX H100: 8, one per GPU), which the runbook and the device plugin use",
            );
        }
        let Some(d) = driver else { return };
        if let Some((min, needs, want)) = &min_driver
            && d.version < *min
            && reported_driver.insert(d.path.clone())
        {
            ctx.emit(
                "GPU135",
                d.path.clone(),
                format!(
                    "driver {} (R{}) is older than GPUDirect RDMA with {mech_name} needs ({needs}), used by pool `{}`",
                    d.version,
                    d.version.branch(),
                    pool.name
                ),
                format!("use {want} for pool `{}`", pool.name),
            );
        }
        if settings.mechanism == RdmaMechanism::DmaBuf {
            dma_buf_architecture(ctx, i, pool, &facts.dma_buf.min_architecture);
            let modules = effective_modules(ctx, pool, d);
            if modules == KernelModuleType::Proprietary {
                let how = if d.kernel_modules == KernelModuleType::Auto {
                    format!(
                        "`auto` loads the proprietary modules for pool `{}` with driver {}",
                        pool.name, d.version
                    )
                } else {
                    format!("pool `{}` uses the proprietary kernel modules", pool.name)
                };
                ctx.emit(
                    "GPU132",
                    d.kernel_path.clone(),
                    format!("GPUDirect RDMA through DMA-BUF needs the open GPU kernel modules, but {how}"),
                    "set `kernelModuleType: open` (the GPU must support the open modules), or `gpuOperator.rdma.mechanism: nvidia-peermem`",
                );
            }
            if let (Some(min), Some(kernel)) = (
                kernel_min,
                pool.os.as_ref().and_then(|o| o.kernel.as_deref()),
            ) && let Some(have) = kernel_major_minor(kernel)
                && have < min
            {
                ctx.emit(
                    "GPU133",
                    format!("spec.nodePools[{i}].os.kernel"),
                    format!(
                        "kernel {kernel} of pool `{}` predates DMA-BUF registration by RDMA NICs (Linux {}.{} or newer)",
                        pool.name, min.0, min.1
                    ),
                    "upgrade the pool's kernel, or use `gpuOperator.rdma.mechanism: nvidia-peermem` with MOFED/DOCA-OFED",
                );
            }
        }
    }
}

/// GPU132 for the GPU itself: DMA-BUF needs a GPU of `min_architecture` or newer (NVIDIA's page:
/// Turing-or-newer data center, Quadro RTX and RTX GPUs). Architectures are ordered by their oldest
/// compute capability.
fn dma_buf_architecture(ctx: &mut Ctx<'_>, i: usize, pool: &NodePool, min_architecture: &str) {
    let Some(gpu) = ctx.catalog.gpu(&pool.gpu.model) else {
        return;
    };
    let oldest = |name: &str| {
        ctx.catalog
            .architecture(name)
            .and_then(|a| a.compute_capabilities.iter().min().copied())
    };
    if let Some(min_cc) = oldest(min_architecture)
        && gpu.compute_capability < min_cc
    {
        ctx.emit(
            "GPU132",
            format!("spec.nodePools[{i}].gpu.model"),
            format!(
                "GPUDirect RDMA through DMA-BUF needs a {min_architecture} or newer GPU, but pool `{}` has {} ({})",
                pool.name, gpu.key, gpu.architecture
            ),
            "use `gpuOperator.rdma.mechanism: nvidia-peermem` (with a MOFED/DOCA-OFED NIC driver) for this pool's GPUs",
        );
    }
}

fn levels(ctx: &mut Ctx<'_>) {
    let max = ctx.catalog.limits().kueue.max_topology_levels;
    let names = ctx.catalog.limits().kubernetes_names.clone();
    let kueue = ctx.bp.spec.scheduling.queueing == Queueing::Kueue;
    let used: BTreeSet<String> = ctx
        .bp
        .spec
        .scheduling
        .kueue
        .iter()
        .flat_map(|k| k.cluster_queues.iter())
        .flat_map(|cq| cq.resources.iter().map(|r| r.pool.clone()))
        .collect();
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let Some(t) = &pool.topology else { continue };
        if t.levels.is_empty() {
            continue;
        }
        let base = format!("spec.nodePools[{i}].topology.levels");
        if t.levels.len() > max {
            ctx.emit(
                "GPU140",
                base.clone(),
                format!(
                    "{} topology levels; a Kueue Topology holds at most {max}",
                    t.levels.len()
                ),
                "keep the levels that matter for placement (for example block, rack, NVLink domain, host)",
            );
        }
        let mut seen = BTreeSet::new();
        for (j, level) in t.levels.iter().enumerate() {
            let path = format!("{base}[{j}]");
            if !is_label_key(level, &names) {
                ctx.emit(
                    "GPU140",
                    path.clone(),
                    format!("`{}` is not a node label key", gpuctl_model::blueprint::yaml::shorten(level)),
                    "write a label key such as `topology.example.com/rack` or `kubernetes.io/hostname`",
                );
            }
            if !seen.insert(level.as_str()) {
                ctx.emit(
                    "GPU140",
                    path.clone(),
                    format!(
                        "topology level `{level}` is listed twice; Kueue requires unique levels"
                    ),
                    "remove the repeated level",
                );
            }
            if level == HOSTNAME_LABEL && j + 1 != t.levels.len() {
                ctx.emit(
                    "GPU140",
                    path,
                    format!("`{HOSTNAME_LABEL}` may only be the last (lowest) topology level"),
                    format!("move `{HOSTNAME_LABEL}` to the end of `levels`"),
                );
            }
        }
        if t.levels.last().map(String::as_str) != Some(HOSTNAME_LABEL) {
            ctx.emit(
                "GPU142",
                base.clone(),
                format!("the lowest topology level of pool `{}` is not `{HOSTNAME_LABEL}`, so Kueue assigns pods only to domains of the lowest level, never to nodes", pool.name),
                format!("append `{HOSTNAME_LABEL}` to `levels` so Kueue places each pod on a node of the chosen domain"),
            );
        }
        if !kueue || !used.contains(&pool.name) {
            ctx.emit(
                "GPU141",
                base,
                if kueue {
                    format!("pool `{}` declares topology levels but no ClusterQueue gives quota on it, so it gets no ResourceFlavor to carry its Topology", pool.name)
                } else {
                    format!("pool `{}` declares topology levels, which only Kueue's topology-aware scheduling reads, but queueing is not `kueue`", pool.name)
                },
                "use `scheduling.queueing: kueue` with a ClusterQueue on this pool, or remove `levels`",
            );
        }
    }
}

fn kubelet(ctx: &mut Ctx<'_>) {
    let max_numa = ctx
        .catalog
        .network()
        .kubelet
        .topology_manager_max_numa_nodes;
    for (i, pool) in ctx.bp.spec.node_pools.iter().enumerate() {
        let Some(t) = &pool.topology else { continue };
        let Some(k) = &t.kubelet else { continue };
        let base = format!("spec.nodePools[{i}].topology.kubelet");
        let policy = k
            .topology_manager_policy
            .unwrap_or(TopologyManagerPolicy::None);
        let cpu = k.cpu_manager_policy.unwrap_or(CpuManagerPolicy::None);
        let memory = k.memory_manager_policy.unwrap_or(MemoryManagerPolicy::None);
        if matches!(
            policy,
            TopologyManagerPolicy::Restricted | TopologyManagerPolicy::SingleNumaNode
        ) && cpu == CpuManagerPolicy::None
        {
            ctx.emit(
                "GPU145",
                format!("{base}.cpuManagerPolicy"),
                format!("pool `{}` aligns devices to NUMA nodes but the CPU manager policy is `none`, so pods' CPUs float across every NUMA node and the alignment buys nothing", pool.name),
                "set `cpuManagerPolicy: static` (with `reservedSystemCPUs`) so Guaranteed pods get CPUs on the GPU's NUMA node",
            );
        }
        if policy == TopologyManagerPolicy::SingleNumaNode
            && let Some(numa) = t.numa_nodes.filter(|n| *n >= 2)
            && pool.role == gpuctl_model::blueprint::Role::Training
            && pool.gpu.count > numa
        {
            let per_numa = pool.gpu.count.div_ceil(numa);
            ctx.emit(
                "GPU143",
                format!("{base}.topologyManagerPolicy"),
                format!(
                    "training pool `{}` uses `single-numa-node` on {numa} NUMA nodes: a pod asking for more than {per_numa} of its {} GPUs (a whole-node training pod) is refused with TopologyAffinityError",
                    pool.name, pool.gpu.count
                ),
                "use `restricted` (aligns to the fewest NUMA nodes that fit) for pools whose pods take more than one NUMA node's GPUs",
            );
        }
        if cpu == CpuManagerPolicy::Static
            && k.reserved_system_cpus
                .as_deref()
                .is_none_or(|s| s.trim().is_empty())
        {
            ctx.emit(
                "GPU146",
                format!("{base}.cpuManagerPolicy"),
                format!("the static CPU manager of pool `{}` has no CPU reservation; the kubelet refuses to start the static policy without one", pool.name),
                "set `reservedSystemCPUs` (e.g. `\"0-1\"`), or reserve CPUs with kube-reserved/system-reserved in the node's own kubelet configuration",
            );
        }
        if memory == MemoryManagerPolicy::Static && k.reserved_memory.is_empty() {
            ctx.emit(
                "GPU147",
                format!("{base}.memoryManagerPolicy"),
                format!("the Static memory manager of pool `{}` has no `reservedMemory`; the kubelet refuses to start without it", pool.name),
                "set `reservedMemory` per NUMA node, e.g. `{ \"0\": 1Gi, \"1\": 1Gi }`, summing to kube-reserved + system-reserved + the memory eviction threshold",
            );
        }
        for node in k.reserved_memory.keys() {
            let ok = node
                .parse::<u32>()
                .is_ok_and(|n| t.numa_nodes.is_none_or(|count| n < count));
            if !ok {
                ctx.emit_at_key(
                    "GPU147",
                    gpuctl_model::blueprint::yaml::join(&format!("{base}.reservedMemory"), node),
                    format!("`{node}` is not a NUMA node id of pool `{}`", pool.name),
                    format!(
                        "use NUMA node ids 0..{}",
                        t.numa_nodes
                            .map_or("N-1".to_string(), |n| (n.saturating_sub(1)).to_string())
                    ),
                );
            }
        }
        if policy != TopologyManagerPolicy::None
            && let Some(n) = t.numa_nodes
            && n > max_numa
        {
            ctx.emit(
                "GPU148",
                format!("{base}.topologyManagerPolicy"),
                format!("pool `{}` has {n} NUMA nodes; the Topology Manager refuses to run on more than {max_numa}", pool.name),
                format!("raise the limit with the kubelet's `topologyManagerPolicyOptions: {{max-allowable-numa-nodes: \"{n}\"}}` in the node configuration, or use `topologyManagerPolicy: none`"),
            );
        }
        if k.topology_manager_scope.is_some() && policy == TopologyManagerPolicy::None {
            ctx.emit(
                "GPU149",
                format!("{base}.topologyManagerScope"),
                format!("pool `{}` sets a Topology Manager scope but its policy is `none`, so nothing is aligned", pool.name),
                "set `topologyManagerPolicy` (e.g. `single-numa-node` for training pools), or remove the scope",
            );
        }
    }
}

fn network_operator(ctx: &mut Ctx<'_>) {
    let rdma_fabrics: Vec<Fabric> = ctx
        .bp
        .spec
        .node_pools
        .iter()
        .filter_map(|p| p.topology.as_ref()?.network.as_ref().map(|n| n.fabric))
        .filter(|f| *f != Fabric::Ethernet)
        .collect();
    let provided = ctx
        .bp
        .spec
        .network_operator
        .as_ref()
        .map(|n| n.device_plugin.resource());
    quota_resources(ctx, provided.as_deref());
    let Some(no) = ctx.bp.spec.network_operator.clone() else {
        return;
    };
    let facts = ctx.catalog.network().network_operator.clone();
    let base = "spec.networkOperator";
    release(ctx, &no, &facts);
    nic_driver(ctx, &no, &facts);
    if rdma_fabrics.is_empty() {
        ctx.emit(
            "GPU153",
            base,
            "the Network Operator is declared but no pool has an InfiniBand or RoCE network (`topology.network.fabric`)",
            "declare the pools' fabric, or remove `networkOperator`",
        );
    }
    names(ctx, &no);
    if let Some(sn) = &no.secondary_network {
        secondary_network(ctx, sn, &no.device_plugin, &rdma_fabrics);
    }
}

/// GPU150 and GPU156: the release is in the catalog, supports the cluster's Kubernetes, and its
/// chart has the keys `values` sets.
fn release(ctx: &mut Ctx<'_>, no: &NetworkOperator, facts: &NetworkOperatorFacts) {
    let base = "spec.networkOperator";
    match facts.release(&no.version) {
        None => ctx.emit(
            "GPU150",
            format!("{base}.version"),
            format!(
                "Network Operator `{}` is not in the catalog",
                gpuctl_model::blueprint::yaml::shorten(&no.version)
            ),
            format!("use one of: {}", facts.known()),
        ),
        Some(r) => {
            if let (Ok(k), Some(range)) = (
                ctx.bp.spec.kubernetes.version.parse::<KubeVersion>(),
                &r.kubernetes,
            ) && !range.contains(&k)
            {
                let supporting: Vec<&str> = facts
                    .releases
                    .iter()
                    .filter(|o| o.kubernetes.as_ref().is_some_and(|kr| kr.contains(&k)))
                    .map(|o| o.version.as_str())
                    .collect();
                ctx.emit(
                    "GPU150",
                    format!("{base}.version"),
                    format!(
                        "Network Operator {} supports Kubernetes {} to {}, not {k}",
                        r.version, range.min, range.max
                    ),
                    if supporting.is_empty() {
                        format!("no Network Operator release in the catalog supports Kubernetes {k}: change the cluster's Kubernetes version (`gpuctl profiles -o json` lists each release's range)")
                    } else {
                        format!("use a release that supports it ({})", supporting.join(", "))
                    },
                );
            }
            if let Some(chart) = gpuctl_model::profiles::chart::network_operator_release(&r.version)
            {
                for problem in chart.unknown_paths(&no.values) {
                    ctx.emit_at_key(
                        "GPU156",
                        format!("{base}.values.{}", problem.yaml_path),
                        format!(
                            "`{}` {} (Network Operator {} chart)",
                            gpuctl_model::blueprint::yaml::shorten(&problem.path),
                            problem.message,
                            r.version
                        ),
                        "use a key of the chart (`helm show values nvidia/network-operator --version <release>`), or remove it",
                    );
                }
            } else {
                ctx.emit(
                    "GPU156",
                    format!("{base}.version"),
                    format!(
                        "gpuctl has no chart key tree for Network Operator {}",
                        r.version
                    ),
                    format!("use one of: {}", facts.known()),
                );
            }
        }
    }
}

/// GPU151: the NIC driver's source and version agree.
fn nic_driver(ctx: &mut Ctx<'_>, no: &NetworkOperator, facts: &NetworkOperatorFacts) {
    let base = "spec.networkOperator";
    // With `source: operator` and no version, the release's own DOCA-OFED driver is rendered
    // (profiles/network.yaml); only a release gpuctl does not know leaves nothing to render, and
    // GPU150 already names that.
    let shipped = facts.release(&no.version).map(|r| r.doca_driver.clone());
    match (no.nic_driver.source, &no.nic_driver.version) {
        (NicDriverSource::Operator, None) if shipped.is_none() => ctx.emit(
            "GPU151",
            format!("{base}.nicDriver"),
            "the Network Operator is to install the NIC driver, no DOCA-OFED driver version is given and gpuctl does not know which one this release ships",
            "set `nicDriver.version` to the DOCA-OFED container tag of the Network Operator release notes, or `nicDriver.source: host`",
        ),
        (NicDriverSource::Host, Some(_)) => ctx.emit(
            "GPU151",
            format!("{base}.nicDriver.version"),
            "`nicDriver.version` is only read with `source: operator`; the hosts carry the driver",
            "remove `version`, or set `source: operator`",
        ),
        _ => {}
    }
}

/// GPU155: the namespace is a free DNS-1123 label, the device plugin's resource name is valid and
/// its `hcaMax` lets pods in.
fn names(ctx: &mut Ctx<'_>, no: &NetworkOperator) {
    let base = "spec.networkOperator";
    let limits = ctx.catalog.limits().kubernetes_names.clone();
    let label_max = limits.dns1123_label_max_length;
    if !is_dns_label(&no.namespace, label_max) {
        ctx.emit(
            "GPU155",
            format!("{base}.namespace"),
            format!(
                "`{}` is not a DNS-1123 label",
                gpuctl_model::blueprint::yaml::shorten(&no.namespace)
            ),
            "use lower-case letters, digits and `-`",
        );
    }
    let taken = no.namespace == ctx.bp.spec.gpu_operator.namespace
        || ctx
            .bp
            .spec
            .tenants
            .iter()
            .any(|t| t.namespaces.contains(&no.namespace));
    if taken {
        ctx.emit(
            "GPU155",
            format!("{base}.namespace"),
            format!(
                "namespace `{}` already belongs to the GPU Operator or a tenant",
                no.namespace
            ),
            "give the Network Operator its own namespace (default `nvidia-network-operator`)",
        );
    }
    let dp = &no.device_plugin;
    if !is_dns_label(&dp.resource_name.replace('_', "-"), label_max) {
        ctx.emit(
            "GPU155",
            format!("{base}.devicePlugin.resourceName"),
            format!(
                "`{}` is not a valid resource name",
                gpuctl_model::blueprint::yaml::shorten(&dp.resource_name)
            ),
            "use lower-case letters, digits, `-` and `_`, e.g. `rdma_shared_device_a`",
        );
    }
    if dp.kind == DevicePluginKind::RdmaShared && dp.hca_max == 0 {
        ctx.emit(
            "GPU155",
            format!("{base}.devicePlugin.hcaMax"),
            "`hcaMax: 0` lets no pod use the RDMA devices",
            "set `hcaMax` to the pods per node that may share the HCAs (the plugin's samples use 63)",
        );
    }
}

/// GPU152 and GPU155: the secondary network's names are valid and its kind fits the pools'
/// fabric and the device plugin (its addresses are the IP pool rules', `ip_pools.rs`).
fn secondary_network(
    ctx: &mut Ctx<'_>,
    sn: &SecondaryNetwork,
    dp: &DevicePlugin,
    rdma_fabrics: &[Fabric],
) {
    let base = "spec.networkOperator";
    let label_max = ctx
        .catalog
        .limits()
        .kubernetes_names
        .dns1123_label_max_length;
    let sbase = format!("{base}.secondaryNetwork");
    if !is_dns_label(&sn.name, label_max) {
        ctx.emit(
            "GPU155",
            format!("{sbase}.name"),
            format!(
                "`{}` is not a DNS-1123 label",
                gpuctl_model::blueprint::yaml::shorten(&sn.name)
            ),
            "use lower-case letters, digits and `-`",
        );
    }
    if let Some(ns) = &sn.network_namespace
        && !is_dns_label(ns, label_max)
    {
        ctx.emit(
            "GPU155",
            format!("{sbase}.networkNamespace"),
            format!(
                "`{}` is not a DNS-1123 label",
                gpuctl_model::blueprint::yaml::shorten(ns)
            ),
            "use lower-case letters, digits and `-`",
        );
    }
    let has_ib = rdma_fabrics.contains(&Fabric::Infiniband);
    let has_roce = rdma_fabrics.contains(&Fabric::Roce);
    match sn.kind {
        SecondaryNetworkKind::Ipoib if !has_ib => ctx.emit(
            "GPU152",
            format!("{sbase}.kind"),
            "an IPoIB network needs InfiniBand, and no pool has `fabric: infiniband`",
            "use `kind: macvlan` (or `host-device` with SR-IOV) on RoCE",
        ),
        SecondaryNetworkKind::Macvlan if !has_roce => ctx.emit(
            "GPU152",
            format!("{sbase}.kind"),
            "macvlan needs an Ethernet (RoCE) interface, and no pool has `fabric: roce`; InfiniBand ports cannot carry macvlan",
            "use `kind: ipoib` on InfiniBand",
        ),
        SecondaryNetworkKind::HostDevice if dp.kind != DevicePluginKind::Sriov => ctx.emit(
            "GPU152",
            format!("{sbase}.kind"),
            "a host-device network moves whole devices into pods, which only the SR-IOV device plugin hands out",
            "set `devicePlugin.kind: sriov`, or use `ipoib` / `macvlan`",
        ),
        _ => {}
    }
    if matches!(
        sn.kind,
        SecondaryNetworkKind::Ipoib | SecondaryNetworkKind::Macvlan
    ) && sn.master.as_deref().is_none_or(|m| m.trim().is_empty())
    {
        ctx.emit(
            "GPU155",
            format!("{sbase}.master"),
            "an IPoIB or macvlan network needs the host interface to attach to (`master`)",
            "set `master` to the interface name on the nodes, e.g. `ibp12s0`",
        );
    }
}

/// Tenant and ClusterQueue quota on RDMA resources must name what the Network Operator's device
/// plugin advertises.
fn quota_resources(ctx: &mut Ctx<'_>, provided: Option<&str>) {
    let is_rdma = |r: &str| {
        let bare = r.strip_prefix("requests.").unwrap_or(r);
        bare.starts_with("rdma/") || Some(bare) == provided
    };
    let mut findings = Vec::new();
    for (i, t) in ctx.bp.spec.tenants.iter().enumerate() {
        for key in t.quota.keys() {
            if is_rdma(key) {
                findings.push((
                    gpuctl_model::blueprint::yaml::join(&format!("spec.tenants[{i}].quota"), key),
                    key.clone(),
                ));
            }
        }
    }
    if let Some(k) = &ctx.bp.spec.scheduling.kueue {
        for (i, cq) in k.cluster_queues.iter().enumerate() {
            for (j, r) in cq.resources.iter().enumerate() {
                for key in r.quota.keys() {
                    if is_rdma(key) {
                        findings.push((
                            gpuctl_model::blueprint::yaml::join(
                                &format!(
                                    "spec.scheduling.kueue.clusterQueues[{i}].resources[{j}].quota"
                                ),
                                key,
                            ),
                            key.clone(),
                        ));
                    }
                }
            }
        }
    }
    for (path, key) in findings {
        let bare = key.strip_prefix("requests.").unwrap_or(&key);
        if Some(bare) == provided {
            continue;
        }
        ctx.emit_at_key(
            "GPU154",
            path,
            match provided {
                Some(p) => format!("`{bare}` is not the RDMA resource the Network Operator advertises (`{p}`)"),
                None => format!("quota on `{bare}`, but no Network Operator is declared to advertise RDMA devices"),
            },
            match provided {
                Some(p) => format!("write `{p}`"),
                None => "declare `networkOperator` with its `devicePlugin`, or remove the quota".to_string(),
            },
        );
    }
}
