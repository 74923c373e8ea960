//! The facts gpuctl validates blueprints against, loaded from the YAML tables in `profiles/` (GPU
//! catalog, CUDA driver requirements, driver branches, architectures, GPU Operator releases and
//! API limits). The tables are embedded in the binary; rules query them through [`Catalog`] and
//! never hard-code a version or a limit.
//!
//! Loading checks the tables against each other (every GPU names a known architecture, every MIG
//! profile fits its GPU, versions are unique, ...), so a query never meets a dangling reference.
//!
//! One module per fact family, each with its table's types and the function that loads and checks
//! it (`load_*`): `arch` (architectures), `gpu` (GPU models, their MIG profile sets), `mig`
//! (placement), `cuda`, `driver` (branches, kernel-module flavours), `operator` (GPU Operator
//! releases, operating systems), `chart` (the operator chart's key trees), `limits`, `queueing`
//! (Kueue, Volcano), `network`, `dcgm`, `dra` (Dynamic Resource Allocation); `common` holds the
//! shared value types. This module reads the files in order ([`Catalog::from_sources`]), keeps
//! what the loaders share (sources, fact rows, errors) and answers the queries.

pub mod accounting;
mod arch;
pub mod chart;
mod common;
mod cuda;
pub mod dcgm;
pub mod dra;
mod driver;
mod gpu;
mod limits;
mod mig;
pub mod network;
mod operator;
pub mod provisioning;
mod queueing;

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

pub use arch::{Architecture, GfdReserved};
pub use common::{ComputeCapability, FactRow, PartialDate};
pub use cuda::{
    CudaRequirement, CudaSupport, CudaUpdate, ForwardCompatibility, MinorVersionCompat,
};
pub use driver::{BranchType, DriverBranch, EndOfLife, KernelModuleFlavors};
pub use gpu::{FormFactor, GpuModel, KernelModuleSupport, Segment};
pub use limits::{
    DcgmExporterLimits, DevicePluginLimits, ImmutableFields, ImmutableKind, KubernetesNameLimits,
    KueueLimits, Limits, NodeLabelLimits, PriorityClassLimits, ResourceQuotaLimits, VolcanoLimits,
};
pub use mig::{MigFitError, MigPlacement, MigProfile, MigSupport};
pub use operator::{
    KernelModuleTypeFacts, KubeRange, MinorRange, NotCaptured, OperatorFacts, OperatorRelease,
    OperatorSupport, OsSupport, OsSystem, Precompiled,
};
pub use queueing::{
    Affixes, Composition, ConfigMapKey, FrameworkResource, KUEUE_API_VERSIONS,
    KUEUE_API_VERSIONS_FROM_ALPHA, KueueChart, KueueConfiguration, KueueMessages, MultiKueueFacts,
    PolicyRule, QueueSystem, ReleaseLine, ReleaseProblem, RequiredValue, SchedulingMessages,
    VolcanoChart, VolcanoHierarchy, VolcanoMessages, VolcanoRelease,
};

use crate::version::{CudaVersion, DriverVersion, OperatorVersion};

/// File names of the tables, as `sources()` and errors report them.
pub const GPUS_FILE: &str = "profiles/gpus.yaml";
/// See [`GPUS_FILE`].
pub const CUDA_FILE: &str = "profiles/cuda.yaml";
/// See [`GPUS_FILE`].
pub const DRIVERS_FILE: &str = "profiles/drivers.yaml";
/// See [`GPUS_FILE`].
pub const ARCHITECTURES_FILE: &str = "profiles/architectures.yaml";
/// See [`GPUS_FILE`].
pub const OPERATOR_FILE: &str = "profiles/gpu-operator.yaml";
/// See [`GPUS_FILE`].
pub const LIMITS_FILE: &str = "profiles/limits.yaml";
/// See [`GPUS_FILE`].
pub const QUEUEING_FILE: &str = "profiles/queueing.yaml";
/// See [`GPUS_FILE`].
pub const NETWORK_FILE: &str = "profiles/network.yaml";
/// See [`GPUS_FILE`].
pub const DCGM_FILE: &str = "profiles/dcgm.yaml";
/// Accounting facts: metric names for the accounting rules and `gpuctl report`.
pub const ACCOUNTING_FILE: &str = "profiles/accounting.yaml";
/// See [`GPUS_FILE`].
pub const DRA_FILE: &str = "profiles/dra.yaml";
/// Provisioned node pools: instance types, Karpenter, Cluster API, readiness, driver ownership.
pub const PROVISIONING_FILE: &str = "profiles/provisioning.yaml";

/// The text of the profile tables.
#[derive(Debug, Clone, Copy)]
pub struct ProfileSources<'a> {
    /// `profiles/gpus.yaml`.
    pub gpus: &'a str,
    /// `profiles/cuda.yaml`.
    pub cuda: &'a str,
    /// `profiles/drivers.yaml`.
    pub drivers: &'a str,
    /// `profiles/architectures.yaml`.
    pub architectures: &'a str,
    /// `profiles/gpu-operator.yaml`.
    pub gpu_operator: &'a str,
    /// `profiles/limits.yaml`.
    pub limits: &'a str,
    /// `profiles/queueing.yaml`.
    pub queueing: &'a str,
    /// `profiles/network.yaml`.
    pub network: &'a str,
    /// `profiles/dcgm.yaml`.
    pub dcgm: &'a str,
    /// `profiles/dra.yaml`.
    pub dra: &'a str,
    /// `profiles/accounting.yaml`.
    pub accounting: &'a str,
    /// `profiles/provisioning.yaml`.
    pub provisioning: &'a str,
}

impl ProfileSources<'static> {
    /// The tables compiled into the binary.
    pub const EMBEDDED: ProfileSources<'static> = ProfileSources {
        gpus: include_str!("../../../../profiles/gpus.yaml"),
        cuda: include_str!("../../../../profiles/cuda.yaml"),
        drivers: include_str!("../../../../profiles/drivers.yaml"),
        architectures: include_str!("../../../../profiles/architectures.yaml"),
        gpu_operator: include_str!("../../../../profiles/gpu-operator.yaml"),
        limits: include_str!("../../../../profiles/limits.yaml"),
        queueing: include_str!("../../../../profiles/queueing.yaml"),
        network: include_str!("../../../../profiles/network.yaml"),
        dcgm: include_str!("../../../../profiles/dcgm.yaml"),
        dra: include_str!("../../../../profiles/dra.yaml"),
        accounting: include_str!("../../../../profiles/accounting.yaml"),
        provisioning: include_str!("../../../../profiles/provisioning.yaml"),
    };
}

/// A profile table that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file is not valid YAML for its schema (unknown field, wrong type, bad version string).
    #[error("cannot parse `{file}`: {source}")]
    Parse {
        /// The table's file name.
        file: &'static str,
        /// The parser's error, with line and column.
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// The file parses but contradicts itself or another table.
    #[error("`{file}` is inconsistent: {message}")]
    Inconsistent {
        /// The table's file name.
        file: &'static str,
        /// What is wrong, naming the entry.
        message: String,
    },
}

/// All facts, loaded and cross-checked.
#[derive(Debug, Clone)]
pub struct Catalog {
    gpus: BTreeMap<String, GpuModel>,
    /// `nvidia.com/gpu.product` label value -> GPU key.
    products: BTreeMap<String, String>,
    /// Minor entries (`12.4`) and major entries (`12`).
    cuda: BTreeMap<CudaVersion, CudaRequirement>,
    forward_compatibility: ForwardCompatibility,
    drivers: BTreeMap<u32, DriverBranch>,
    kernel_module_flavors: KernelModuleFlavors,
    architectures: BTreeMap<String, Architecture>,
    operator_releases: BTreeMap<OperatorVersion, OperatorRelease>,
    operator_facts: OperatorFacts,
    limits: Limits,
    queueing: Queueing,
    network: network::NetworkFacts,
    dcgm: dcgm::DcgmFacts,
    dra: dra::DraFacts,
    accounting: accounting::AccountingFacts,
    provisioning: provisioning::ProvisioningFacts,
    sources: Vec<(&'static str, String)>,
    fact_rows: Vec<FactRow>,
}

/// Kueue and Volcano releases (`profiles/queueing.yaml`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Queueing {
    /// Kueue release lines.
    pub kueue: QueueSystem,
    /// Volcano release lines.
    pub volcano: QueueSystem,
    /// Kueue's own Configuration.
    pub kueue_configuration: KueueConfiguration,
    /// How quotas and queues compose at admission.
    pub composition: Composition,
    /// Volcano's hierarchical queues.
    pub volcano_hierarchy: VolcanoHierarchy,
    /// Volcano's own Helm release.
    pub volcano_release: VolcanoRelease,
    /// The Kueue and Volcano texts the doctor matches.
    pub messages: SchedulingMessages,
    /// What MultiKueue needs rendered.
    pub multikueue: MultiKueueFacts,
}

impl Catalog {
    /// The catalog built from the tables embedded in the binary, parsed once.
    pub fn embedded() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| {
            Catalog::from_sources(&ProfileSources::EMBEDDED).expect(
                "embedded profiles are valid (checked by profiles::tests::embedded_catalog_loads)",
            )
        })
    }

    /// Parses and cross-checks the tables.
    pub fn from_sources(src: &ProfileSources<'_>) -> Result<Catalog, ProfileError> {
        let architectures_file: arch::ArchitecturesFile =
            parse(ARCHITECTURES_FILE, src.architectures)?;
        let gpus_file: gpu::GpusFile = parse(GPUS_FILE, src.gpus)?;
        let cuda_file: cuda::CudaFile = parse(CUDA_FILE, src.cuda)?;
        let drivers_file: driver::DriversFile = parse(DRIVERS_FILE, src.drivers)?;
        let operator_file: operator::OperatorFile = parse(OPERATOR_FILE, src.gpu_operator)?;
        let limits: Limits = parse(LIMITS_FILE, src.limits)?;
        let queueing_file: queueing::QueueingFile = parse(QUEUEING_FILE, src.queueing)?;
        let network_file: network::NetworkFile = parse(NETWORK_FILE, src.network)?;
        let dcgm_file: dcgm::DcgmFile = parse(DCGM_FILE, src.dcgm)?;
        let dra_file: dra::DraFile = parse(DRA_FILE, src.dra)?;
        let accounting_file: accounting::AccountingFile = parse(ACCOUNTING_FILE, src.accounting)?;
        let provisioning_file: provisioning::ProvisioningFile =
            parse(PROVISIONING_FILE, src.provisioning)?;

        let mut sources = Vec::new();
        let mut rows = Vec::new();
        let architectures = arch::load_architectures(architectures_file, &mut sources, &mut rows)?;
        let (gpus, products) = gpu::load_gpus(gpus_file, &architectures, &mut sources, &mut rows)?;
        let (cuda, forward_compatibility) = cuda::load_cuda(cuda_file, &mut sources, &mut rows)?;
        let (drivers, kernel_module_flavors) =
            driver::load_drivers(drivers_file, &mut sources, &mut rows)?;
        let (operator_releases, operator_facts) =
            operator::load_operator(operator_file, &drivers, &mut sources, &mut rows)?;
        limits::load_limits(&limits, &mut sources, &mut rows)?;
        let queueing = queueing::load_queueing(queueing_file, &mut sources, &mut rows)?;
        let network =
            network::load_network(network_file, &architectures, &cuda, &mut sources, &mut rows)?;
        let dcgm = dcgm::load_dcgm(dcgm_file, &mut sources, &mut rows)?;
        let dra = dra::load_dra(dra_file, &mut sources, &mut rows)?;
        let accounting = accounting::load_accounting(accounting_file, &mut sources, &mut rows)?;
        let provisioning =
            provisioning::load_provisioning(provisioning_file, &gpus, &mut sources, &mut rows)?;

        Ok(Catalog {
            gpus,
            products,
            cuda,
            forward_compatibility,
            drivers,
            kernel_module_flavors,
            architectures,
            operator_releases,
            operator_facts,
            limits,
            queueing,
            network,
            dcgm,
            dra,
            accounting,
            provisioning,
            sources,
            fact_rows: rows,
        })
    }

    /// The GPU model with this catalog key (`H100-SXM5-80GB`); keys are case-sensitive.
    pub fn gpu(&self, key: &str) -> Option<&GpuModel> {
        self.gpus.get(key)
    }

    /// Every GPU model, sorted by key.
    pub fn gpus(&self) -> impl Iterator<Item = &GpuModel> {
        self.gpus.values()
    }

    /// The GPU model a node's `nvidia.com/gpu.product` label value names. Besides the plain value
    /// (`NVIDIA-A100-SXM4-40GB`) this accepts the forms GPU Feature Discovery derives from it: a
    /// `-SHARED` suffix (time-slicing without renaming) and a `-MIG-<profile>` suffix (MIG `single`,
    /// including `-MIG-INVALID`).
    pub fn gpu_by_product(&self, gfd_product: &str) -> Option<&GpuModel> {
        let lookup = |value: &str| self.products.get(value).and_then(|key| self.gpus.get(key));
        if let Some(model) = lookup(gfd_product) {
            return Some(model);
        }
        let unshared = gfd_product.strip_suffix("-SHARED").unwrap_or(gfd_product);
        if let Some(model) = lookup(unshared) {
            return Some(model);
        }
        let (base, _profile) = unshared.rsplit_once("-MIG-")?;
        lookup(base)
    }

    /// What the driver needs for CUDA `v`: the entry of its minor release (`12.4`; a patch level is
    /// ignored), or for a major-only version (`12`) the major's entry. A minor the tables do not
    /// know (`12.7`) gives `None` rather than a guess.
    pub fn cuda(&self, v: &CudaVersion) -> Option<&CudaRequirement> {
        self.cuda.get(&v.without_patch())
    }

    /// Every CUDA entry, major and minor, oldest first (`gpuctl profiles -o json`).
    pub fn cuda_entries(&self) -> impl Iterator<Item = &CudaRequirement> {
        self.cuda.values()
    }

    /// Every CUDA minor release, oldest first (major entries are left out).
    pub fn cuda_releases(&self) -> impl Iterator<Item = &CudaRequirement> {
        self.cuda.values().filter(|req| !req.is_major_entry())
    }

    /// CUDA forward compatibility (`cuda-compat`) and the hardware it works on.
    pub fn forward_compatibility(&self) -> &ForwardCompatibility {
        &self.forward_compatibility
    }

    /// The branch driver `d` belongs to (by its first field), if the tables know it.
    pub fn driver_branch(&self, d: &DriverVersion) -> Option<&DriverBranch> {
        self.drivers.get(&d.branch())
    }

    /// Every known driver branch, oldest first.
    pub fn driver_branches(&self) -> impl Iterator<Item = &DriverBranch> {
        self.drivers.values()
    }

    /// Which kernel-module flavours driver branches ship.
    pub fn kernel_module_flavors(&self) -> &KernelModuleFlavors {
        &self.kernel_module_flavors
    }

    /// The architecture of this name (`Hopper`).
    pub fn architecture(&self, name: &str) -> Option<&Architecture> {
        self.architectures.get(name)
    }

    /// Every architecture, sorted by name.
    pub fn architectures(&self) -> impl Iterator<Item = &Architecture> {
        self.architectures.values()
    }

    /// The operator release with exactly this version (`v26.7` matches `v26.7.0`).
    pub fn operator_release(&self, v: &OperatorVersion) -> Option<&OperatorRelease> {
        self.operator_releases.get(v)
    }

    /// Every operator release, oldest first.
    pub fn operator_releases(&self) -> impl Iterator<Item = &OperatorRelease> {
        self.operator_releases.values()
    }

    /// Operator facts that are not per release (lifecycle date, `kernelModuleType`).
    pub fn operator_facts(&self) -> &OperatorFacts {
        &self.operator_facts
    }

    /// API limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Kueue and Volcano releases and the API versions they serve.
    pub fn queueing(&self) -> &Queueing {
        &self.queueing
    }

    /// The GPU Operator chart of `version` (`v26.7.0` or `26.7.0`): its values' key tree and
    /// defaults, from `profiles/gpu-operator-values/`.
    pub fn chart_release(&self, version: &str) -> Option<&'static chart::ChartRelease> {
        chart::chart_release(version)
    }

    /// The operator versions whose chart key tree the catalog has.
    pub fn chart_versions(&self) -> Vec<&'static str> {
        chart::known_releases()
    }

    /// Network, topology and kubelet facts (`profiles/network.yaml`).
    pub fn network(&self) -> &network::NetworkFacts {
        &self.network
    }

    /// DCGM metric and label names, the Xid classification, doctor's thresholds
    /// (`profiles/dcgm.yaml`).
    pub fn dcgm(&self) -> &dcgm::DcgmFacts {
        &self.dcgm
    }

    /// Provisioned-pool facts (`profiles/provisioning.yaml`).
    pub fn provisioning(&self) -> &provisioning::ProvisioningFacts {
        &self.provisioning
    }

    /// Accounting facts (`profiles/accounting.yaml`).
    pub fn accounting(&self) -> &accounting::AccountingFacts {
        &self.accounting
    }

    /// Dynamic Resource Allocation facts: Kubernetes' DRA gates and quota keys, NVIDIA's DRA
    /// driver releases and what their devices publish, GPUCluster, Kueue (`profiles/dra.yaml`).
    pub fn dra(&self) -> &dra::DraFacts {
        &self.dra
    }

    /// Every source the tables cite, as `(file, text)` in file order; a table-level source is
    /// prefixed with the table's name (`mig_profile_sets.a100-40gb: ...`).
    pub fn sources(&self) -> Vec<(&'static str, String)> {
        self.sources.clone()
    }

    /// Every fact row of the dated tables with its sources and the date they were read, in file
    /// order (`gpuctl profiles --stale-after`).
    pub fn fact_rows(&self) -> &[FactRow] {
        &self.fact_rows
    }

    /// The rows undated or read more than `days` days before `today`.
    pub fn stale_rows(&self, today: jiff::civil::Date, days: u32) -> Vec<&FactRow> {
        self.fact_rows
            .iter()
            .filter(|r| r.is_stale(today, days))
            .collect()
    }

    /// The tables whose rows carry no read date yet (every fact in them is of unknown age).
    pub fn undated_files(&self) -> Vec<&'static str> {
        ALL_FILES
            .iter()
            .copied()
            .filter(|f| !self.fact_rows.iter().any(|r| r.file == *f))
            .collect()
    }

    /// The architecture of compute capability `cc`: the one that lists it (Rubin for 10.7). A
    /// major GPU Feature Discovery only keeps a family label for (13, `rubin`) names none: no
    /// chip of it is published.
    pub fn architecture_for(&self, cc: ComputeCapability) -> Option<&Architecture> {
        self.architectures
            .values()
            .find(|a| a.compute_capabilities.contains(&cc))
    }
}

/// Every table, in the order `sources()` reports them.
const ALL_FILES: &[&str] = &[
    ARCHITECTURES_FILE,
    GPUS_FILE,
    CUDA_FILE,
    DRIVERS_FILE,
    OPERATOR_FILE,
    LIMITS_FILE,
    QUEUEING_FILE,
    NETWORK_FILE,
    DCGM_FILE,
    DRA_FILE,
    ACCOUNTING_FILE,
];

/// Records a table's fact rows: each with its own sources and date or, without them, the table's.
struct RowLog<'a> {
    rows: &'a mut Vec<FactRow>,
    file: &'static str,
    sources: Vec<String>,
    read: Option<PartialDate>,
}

impl<'a> RowLog<'a> {
    fn new(
        rows: &'a mut Vec<FactRow>,
        file: &'static str,
        sources: &[String],
        read: Option<PartialDate>,
    ) -> Self {
        Self {
            rows,
            file,
            sources: sources.to_vec(),
            read,
        }
    }

    fn row(&mut self, row: impl Into<String>, sources: &[String], read: Option<PartialDate>) {
        let own = sources.iter().any(|s| !s.trim().is_empty());
        self.rows.push(FactRow {
            file: self.file,
            row: row.into(),
            sources: if own {
                sources.to_vec()
            } else {
                self.sources.clone()
            },
            read: read.or(self.read),
        });
    }
}

fn parse<T: serde::de::DeserializeOwned>(
    file: &'static str,
    text: &str,
) -> Result<T, ProfileError> {
    serde_saphyr::from_str(text).map_err(|source| ProfileError::Parse {
        file,
        source: Box::new(source),
    })
}

fn inconsistent(file: &'static str, message: impl Into<String>) -> ProfileError {
    ProfileError::Inconsistent {
        file,
        message: message.into(),
    }
}

fn push_sources(
    sources: &mut Vec<(&'static str, String)>,
    file: &'static str,
    table: Option<&str>,
    list: &[String],
) {
    for text in list {
        let text = match table {
            Some(table) => format!("{table}: {text}"),
            None => text.clone(),
        };
        sources.push((file, text));
    }
}

/// Refuses a table without a source, then records its sources (`table: None` is the whole file).
fn sourced(
    sources: &mut Vec<(&'static str, String)>,
    file: &'static str,
    table: Option<&str>,
    list: &[String],
) -> Result<(), ProfileError> {
    require_source(file, table.unwrap_or("the file"), list)?;
    push_sources(sources, file, table, list);
    Ok(())
}

fn require_source(file: &'static str, what: &str, list: &[String]) -> Result<(), ProfileError> {
    if list.iter().all(|s| s.trim().is_empty()) {
        return Err(inconsistent(file, format!("{what} has no `source:`")));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
