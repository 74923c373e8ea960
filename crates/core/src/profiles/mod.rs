//! The facts gpuctl validates blueprints against, loaded from the YAML tables in `profiles/` (GPU
//! catalog, CUDA driver requirements, driver branches, architectures, GPU Operator releases and
//! API limits). The tables are embedded in the binary; rules query them through [`Catalog`] and
//! never hard-code a version or a limit.
//!
//! Loading checks the tables against each other (every GPU names a known architecture, every MIG
//! profile fits its GPU, versions are unique, ...), so a query never meets a dangling reference.

mod arch;
pub mod chart;
mod common;
mod cuda;
pub mod dcgm;
mod driver;
mod gpu;
mod limits;
mod mig;
pub mod network;
mod operator;
mod queueing;

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

pub use arch::Architecture;
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
    Affixes, Composition, ConfigMapKey, KueueConfiguration, KueueMessages, QueueSystem,
    ReleaseLine, ReleaseProblem, RequiredValue, SchedulingMessages, VolcanoHierarchy,
    VolcanoMessages,
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

/// The text of the seven profile tables.
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
    /// The Kueue and Volcano texts the doctor matches.
    pub messages: SchedulingMessages,
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

    /// Parses and cross-checks the six tables.
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

        let mut sources = Vec::new();
        let mut rows = Vec::new();
        let architectures = load_architectures(architectures_file, &mut sources, &mut rows)?;
        let (gpus, products) = load_gpus(gpus_file, &architectures, &mut sources, &mut rows)?;
        let (cuda, forward_compatibility) = load_cuda(cuda_file, &mut sources, &mut rows)?;
        let (drivers, kernel_module_flavors) = load_drivers(drivers_file, &mut sources, &mut rows)?;
        let (operator_releases, operator_facts) =
            load_operator(operator_file, &drivers, &mut sources, &mut rows)?;
        load_limits(&limits, &mut sources)?;
        let queueing = load_queueing(queueing_file, &mut sources)?;
        let network = load_network(network_file, &architectures, &cuda, &mut sources, &mut rows)?;
        let dcgm = load_dcgm(dcgm_file, &mut sources)?;

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

    /// The architecture of compute capability `cc`: the one that lists it, else the one known only
    /// by its major (Rubin: 13.x).
    pub fn architecture_for(&self, cc: ComputeCapability) -> Option<&Architecture> {
        self.architectures
            .values()
            .find(|a| a.compute_capabilities.contains(&cc))
            .or_else(|| {
                self.architectures
                    .values()
                    .find(|a| a.compute_major == Some(cc.major))
            })
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

fn load_architectures(
    file: arch::ArchitecturesFile,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<BTreeMap<String, Architecture>, ProfileError> {
    const F: &str = ARCHITECTURES_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    let mut seen_cc = BTreeMap::new();
    let mut seen_major: BTreeMap<u32, String> = BTreeMap::new();
    let mut architectures = BTreeMap::new();
    // An architecture known by its compute-capability major alone must not share it with one
    // that lists full compute capabilities.
    for (name, a) in &file.architectures {
        if let Some(major) = a.compute_major
            && let Some(other) = file.architectures.iter().find(|(o, oa)| {
                *o != name && oa.compute_capabilities.iter().any(|cc| cc.major == major)
            })
        {
            return Err(inconsistent(
                F,
                format!(
                    "compute-capability major {major} belongs to both `{}` and `{name}`",
                    other.0
                ),
            ));
        }
    }
    for (name, mut architecture) in file.architectures {
        if architecture.compute_capabilities.is_empty() && architecture.compute_major.is_none() {
            return Err(inconsistent(
                F,
                format!("architecture `{name}` lists no compute capability and no compute_major"),
            ));
        }
        for cc in &architecture.compute_capabilities {
            if let Some(other) = seen_cc.insert(*cc, name.clone()) {
                return Err(inconsistent(
                    F,
                    format!("compute capability {cc} is listed by both `{other}` and `{name}`"),
                ));
            }
        }
        if let Some(major) = architecture.compute_major
            && let Some(other) = seen_major.insert(major, name.clone())
        {
            return Err(inconsistent(
                F,
                format!("compute-capability major {major} belongs to both `{other}` and `{name}`"),
            ));
        }
        if let (Some(min), Some(last)) = (&architecture.min_driver, architecture.last_driver_branch)
            && min.branch() > last
        {
            return Err(inconsistent(
                F,
                format!(
                    "architecture `{name}`: min_driver {min} is newer than last_driver_branch {last}"
                ),
            ));
        }
        if architecture
            .kernel_modules
            .is_some_and(|k| !k.open && !k.proprietary)
        {
            return Err(inconsistent(
                F,
                format!("architecture `{name}` supports no kernel-module flavour"),
            ));
        }
        log.row(
            format!("architectures.{name}"),
            &architecture.source,
            architecture.read,
        );
        architecture.name = name.clone();
        architectures.insert(name, architecture);
    }
    Ok(architectures)
}

type GpuTables = (BTreeMap<String, GpuModel>, BTreeMap<String, String>);

fn load_gpus(
    file: gpu::GpusFile,
    architectures: &BTreeMap<String, Architecture>,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<GpuTables, ProfileError> {
    const F: &str = GPUS_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    for (name, set) in &file.mig_profile_sets {
        require_source(F, &format!("MIG profile set `{name}`"), &set.source.0)?;
        log.row(format!("mig_profile_sets.{name}"), &set.source.0, set.read);
        push_sources(
            sources,
            F,
            Some(&format!("mig_profile_sets.{name}")),
            &set.source.0,
        );
        check_profile_set(name, set)?;
    }

    let mut used_sets = BTreeSet::new();
    let mut gpus = BTreeMap::new();
    let mut products: BTreeMap<String, String> = BTreeMap::new();
    for (key, entry) in file.gpus {
        let architecture = architectures.get(&entry.architecture).ok_or_else(|| {
            inconsistent(
                F,
                format!(
                    "GPU `{key}` names unknown architecture `{}`",
                    entry.architecture
                ),
            )
        })?;
        if !architecture
            .compute_capabilities
            .contains(&entry.compute_capability)
        {
            return Err(inconsistent(
                F,
                format!(
                    "GPU `{key}` has compute capability {}, which architecture `{}` does not list",
                    entry.compute_capability, architecture.name
                ),
            ));
        }
        // A GPU whose label value is unknown must say so.
        if entry.gfd_products.is_empty()
            && !(entry.notes.iter().any(|n| n.contains("gpu.product"))
                && entry.weak.iter().any(|w| w == "gfd_products"))
        {
            return Err(inconsistent(
                F,
                format!(
                    "GPU `{key}` lists no gfd_products (an unknown label needs `weak: [gfd_products]` and a note on nvidia.com/gpu.product)"
                ),
            ));
        }
        if let Some(bad) = entry
            .weak
            .iter()
            .find(|w| !gpu::WEAK_FIELDS.contains(&w.as_str()))
        {
            return Err(inconsistent(
                F,
                format!(
                    "GPU `{key}`: `weak` names `{bad}`, not one of {}",
                    gpu::WEAK_FIELDS.join(", ")
                ),
            ));
        }
        if !entry.weak.is_empty() && entry.notes.is_empty() {
            return Err(inconsistent(
                F,
                format!("GPU `{key}` marks weak facts but has no note saying why"),
            ));
        }
        let kernel_modules = entry
            .kernel_modules
            .or(architecture.kernel_modules)
            .ok_or_else(|| {
                inconsistent(
                    F,
                    format!(
                        "GPU `{key}`: neither it nor architecture `{}` states its kernel modules",
                        architecture.name
                    ),
                )
            })?;
        log.row(format!("gpus.{key}"), &entry.source.0, entry.read);
        for product in &entry.gfd_products {
            // GFD replaces spaces, and a label value cannot hold them.
            if product.is_empty() || product.contains(char::is_whitespace) {
                return Err(inconsistent(
                    F,
                    format!("GPU `{key}` has an invalid gfd_products value `{product}`"),
                ));
            }
            if let Some(other) = products.insert(product.clone(), key.clone()) {
                return Err(inconsistent(
                    F,
                    format!("gfd_products value `{product}` is listed by `{other}` and `{key}`"),
                ));
            }
        }
        // MIG needs compute capability 8.0 or newer (MIG user guide, Supported GPUs).
        if entry.mig.is_some() && entry.compute_capability.major < 8 {
            return Err(inconsistent(
                F,
                format!(
                    "GPU `{key}` has MIG but compute capability {}",
                    entry.compute_capability
                ),
            ));
        }
        let mig = match entry.mig {
            None => None,
            Some(reference) => {
                let set = file
                    .mig_profile_sets
                    .get(&reference.profile_set)
                    .ok_or_else(|| {
                        inconsistent(
                            F,
                            format!(
                                "GPU `{key}` names unknown MIG profile set `{}`",
                                reference.profile_set
                            ),
                        )
                    })?;
                used_sets.insert(reference.profile_set.clone());
                Some(MigSupport {
                    min_driver: reference.min_driver,
                    operator_since: entry.operator_since.as_ref().and_then(|o| o.mig.clone()),
                    compute_slices: set.compute_slices,
                    memory_slices: set.memory_slices,
                    max_instances: set.max_instances,
                    profile_set: reference.profile_set,
                    profiles: set.profiles.clone(),
                    notes: set.notes.clone(),
                    sources: set.source.0.clone(),
                })
            }
        };
        let model = GpuModel {
            key: key.clone(),
            display_name: entry.display_name,
            architecture: entry.architecture,
            compute_capability: entry.compute_capability,
            memory_gb: entry.memory_gb,
            memory_type: entry.memory_type,
            form_factor: entry.form_factor,
            nvlink: entry.nvlink,
            segment: entry.segment,
            gfd_products: entry.gfd_products,
            min_driver: entry.min_driver.or_else(|| architecture.min_driver.clone()),
            kernel_modules,
            cuda_forward_compat: entry.cuda_forward_compat,
            mig,
            operator_since: entry.operator_since.as_ref().and_then(|o| o.gpu.clone()),
            operator_since_source: entry.operator_since.map(|o| o.source),
            sources: entry.source.0,
            weak: entry.weak,
            notes: entry.notes,
        };
        gpus.insert(key, model);
    }
    if let Some(unused) = file
        .mig_profile_sets
        .keys()
        .find(|name| !used_sets.contains(*name))
    {
        return Err(inconsistent(
            F,
            format!("MIG profile set `{unused}` is used by no GPU"),
        ));
    }
    Ok((gpus, products))
}

/// Checks one MIG profile table: every profile fits the GPU's axes, names match their compute
/// slices and media-extension flag, and the set's instance maximum agrees with its profiles.
fn check_profile_set(name: &str, set: &gpu::MigProfileSetFile) -> Result<(), ProfileError> {
    const F: &str = GPUS_FILE;
    let bad = |message: String| inconsistent(F, format!("MIG profile set `{name}`: {message}"));
    if set.compute_slices == 0 || set.memory_slices == 0 || set.memory_slices > 32 {
        return Err(bad(format!(
            "compute_slices {} / memory_slices {} out of range",
            set.compute_slices, set.memory_slices
        )));
    }
    if set.profiles.is_empty() {
        return Err(bad("no profiles".into()));
    }
    let mut names = BTreeSet::new();
    for p in &set.profiles {
        if !names.insert(p.name.as_str()) {
            return Err(bad(format!("profile `{}` is listed twice", p.name)));
        }
        // `<N>g.<M>gb[suffix]`: N is the compute-slice count.
        let compute_in_name = p
            .name
            .split_once("g.")
            .and_then(|(n, _)| n.parse::<u32>().ok());
        if compute_in_name != Some(p.compute_slices) {
            return Err(bad(format!(
                "profile `{}` has compute_slices {}",
                p.name, p.compute_slices
            )));
        }
        let me_in_name = p.name.contains("+me");
        if me_in_name != p.media_extension {
            return Err(bad(format!(
                "profile `{}` has media_extension {}",
                p.name, p.media_extension
            )));
        }
        if p.compute_slices > set.compute_slices
            || p.memory_slices == 0
            || p.memory_slices > set.memory_slices
        {
            return Err(bad(format!(
                "profile `{}` does not fit the GPU's slices",
                p.name
            )));
        }
        if p.max_instances == 0 || p.max_instances > set.max_instances {
            return Err(bad(format!(
                "profile `{}` has max_instances {}",
                p.name, p.max_instances
            )));
        }
        if p.placement_starts.is_empty() || !p.placement_starts.windows(2).all(|w| w[0] < w[1]) {
            return Err(bad(format!(
                "profile `{}` needs strictly increasing placement_starts",
                p.name
            )));
        }
        for start in &p.placement_starts {
            if start
                .checked_add(p.memory_slices)
                .is_none_or(|end| end > set.memory_slices)
            {
                return Err(bad(format!(
                    "profile `{}` starting at {start} runs past the last slot",
                    p.name
                )));
            }
        }
    }
    let widest = set
        .profiles
        .iter()
        .map(|p| p.max_instances)
        .max()
        .unwrap_or(0);
    if widest != set.max_instances {
        return Err(bad(format!(
            "max_instances {} but the profiles allow at most {widest}",
            set.max_instances
        )));
    }
    Ok(())
}

type CudaTables = (BTreeMap<CudaVersion, CudaRequirement>, ForwardCompatibility);

fn load_cuda(
    file: cuda::CudaFile,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<CudaTables, ProfileError> {
    const F: &str = CUDA_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    let mvc_file = file.minor_version_compatibility;
    sourced(
        sources,
        F,
        Some("minor_version_compatibility"),
        &mvc_file.source.0,
    )?;
    log.row("minor_version_compatibility", &mvc_file.source.0, None);
    log.row(
        "forward_compatibility",
        &file.forward_compatibility.source,
        None,
    );
    require_source(
        F,
        "forward_compatibility",
        &file.forward_compatibility.source,
    )?;
    push_sources(
        sources,
        F,
        Some("forward_compatibility"),
        &file.forward_compatibility.source,
    );

    let mut mvc = BTreeMap::new();
    for (major, entry) in mvc_file.majors {
        let number: u32 = major.parse().map_err(|_| {
            inconsistent(
                F,
                format!("minor_version_compatibility key `{major}` is not a CUDA major"),
            )
        })?;
        if let Some(max) = &entry.max_driver_exclusive
            && *max <= entry.min_driver
        {
            return Err(inconsistent(
                F,
                format!("CUDA {major}: max_driver_exclusive {max} <= min_driver"),
            ));
        }
        mvc.insert(
            number,
            MinorVersionCompat {
                major: number,
                min_driver: entry.min_driver,
                max_driver_exclusive: entry.max_driver_exclusive,
                limits: mvc_file.limits.clone(),
                notes: entry.notes,
                sources: mvc_file.source.0.clone(),
            },
        );
    }

    let mut table: BTreeMap<CudaVersion, CudaRequirement> = BTreeMap::new();
    let mut previous: Option<(CudaVersion, DriverVersion)> = None;
    for release in file.releases {
        log.row(format!("releases.{}", release.cuda), &[], release.read);
        let cuda = release.cuda;
        if cuda.minor().is_none() || cuda.patch().is_some() {
            return Err(inconsistent(
                F,
                format!("release `{cuda}` must be `<major>.<minor>`"),
            ));
        }
        if let Some((prev_cuda, prev_driver)) = &previous {
            if cuda <= *prev_cuda {
                return Err(inconsistent(
                    F,
                    format!("release `{cuda}` is out of order or repeated"),
                ));
            }
            if release.min_driver < *prev_driver {
                return Err(inconsistent(
                    F,
                    format!(
                        "CUDA {cuda} needs {} but the older {prev_cuda} needs {prev_driver}",
                        release.min_driver
                    ),
                ));
            }
        }
        for update in &release.updates {
            if update.min_driver < release.min_driver {
                return Err(inconsistent(
                    F,
                    format!("CUDA {cuda} {} needs less than its GA", update.name),
                ));
            }
        }
        previous = Some((cuda.clone(), release.min_driver.clone()));
        let major = cuda.major();
        table.insert(
            cuda.clone(),
            CudaRequirement {
                cuda,
                min_driver: release.min_driver,
                released: release.released,
                updates: release.updates,
                minor_version_compat: mvc.get(&major).cloned(),
                notes: release.notes,
            },
        );
    }
    if table.is_empty() {
        return Err(inconsistent(F, "no releases"));
    }
    for major in mvc.keys() {
        if !table.keys().any(|v| v.major() == *major) {
            return Err(inconsistent(
                F,
                format!("minor_version_compatibility names CUDA {major}, which has no release"),
            ));
        }
    }

    // One entry per major, standing for "some <major>.x": full support from the newest known minor's
    // driver on. Releases are in order, so the last one of each major wins.
    let mut majors: BTreeMap<u32, (CudaVersion, DriverVersion)> = BTreeMap::new();
    for req in table.values() {
        majors.insert(req.cuda.major(), (req.cuda.clone(), req.min_driver.clone()));
    }
    for (major, (newest, driver)) in majors {
        let key = newest.major_only();
        table.insert(
            key.clone(),
            CudaRequirement {
                cuda: key,
                min_driver: driver,
                released: None,
                updates: Vec::new(),
                minor_version_compat: mvc.get(&major).cloned(),
                notes: vec![format!(
                    "any CUDA {major}.x application: every feature works from the driver of the newest known \
                     {major}.x release ({newest}) on"
                )],
            },
        );
    }
    Ok((table, file.forward_compatibility))
}

type DriverTables = (BTreeMap<u32, DriverBranch>, KernelModuleFlavors);

fn load_drivers(
    file: driver::DriversFile,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<DriverTables, ProfileError> {
    const F: &str = DRIVERS_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    log.row("kernel_modules", &file.kernel_modules.source, None);
    sourced(
        sources,
        F,
        Some("kernel_modules"),
        &file.kernel_modules.source,
    )?;
    let mut branches = BTreeMap::new();
    for branch in file.branches {
        let number = branch.branch;
        log.row(format!("branches.R{number}"), &[], branch.read);
        if let Some(first) = &branch.first_release
            && first.branch() != number
        {
            return Err(inconsistent(
                F,
                format!("R{number}: first_release {first} belongs to another branch"),
            ));
        }
        if let (EndOfLife::Month(eol), Some(first)) =
            (&branch.end_of_life, &branch.first_release_date)
            && eol.last_day() < first.first_day()
        {
            return Err(inconsistent(
                F,
                format!("R{number}: end of life {eol} is before its first release {first}"),
            ));
        }
        if branches.insert(number, branch).is_some() {
            return Err(inconsistent(F, format!("R{number} is listed twice")));
        }
    }
    Ok((branches, file.kernel_modules))
}

type OperatorTables = (BTreeMap<OperatorVersion, OperatorRelease>, OperatorFacts);

fn load_operator(
    file: operator::OperatorFile,
    drivers: &BTreeMap<u32, DriverBranch>,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<OperatorTables, ProfileError> {
    const F: &str = OPERATOR_FILE;
    sourced(sources, F, None, &file.source.0)?;
    sourced(
        sources,
        F,
        Some("kernel_module_type"),
        &file.kernel_module_type.source,
    )?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    log.row(
        "kernel_module_type",
        &file.kernel_module_type.source,
        file.kernel_module_type.read,
    );
    let mut releases = BTreeMap::new();
    for release in file.releases {
        let version = release.version.clone();
        if release.kubernetes.min > release.kubernetes.max {
            return Err(inconsistent(
                F,
                format!("{version}: kubernetes min is above max"),
            ));
        }
        if let Some(d) = release
            .unconfirmed_drivers
            .iter()
            .find(|d| release.supports_driver(d))
        {
            return Err(inconsistent(
                F,
                format!("{version}: {d} is both validated and unconfirmed"),
            ));
        }
        if !release.unconfirmed_drivers.is_empty() && release.notes.is_empty() {
            return Err(inconsistent(
                F,
                format!("{version}: unconfirmed_drivers need a note saying why"),
            ));
        }
        log.row(format!("releases.{version}"), &release.source, release.read);
        if releases.insert(version.clone(), release).is_some() {
            return Err(inconsistent(F, format!("{version} is listed twice")));
        }
    }
    if releases.is_empty() {
        return Err(inconsistent(F, "no releases"));
    }
    for missing in &file.not_captured {
        require_source(F, "a not_captured entry", &missing.source)?;
        if let Some(v) = missing.versions.iter().find(|v| releases.contains_key(*v)) {
            return Err(inconsistent(
                F,
                format!("{v} is both a release and not_captured"),
            ));
        }
        let names: Vec<String> = missing.versions.iter().map(ToString::to_string).collect();
        log.row(
            format!("not_captured.{}", names.join(",")),
            &missing.source,
            missing.read,
        );
    }
    for os in &file.os_support {
        let majors: Vec<String> = os
            .majors
            .iter()
            .map(|m| format!("{}.{}", m.major(), m.minor()))
            .collect();
        let what = format!("os_support {}", majors.join(","));
        sourced(sources, F, Some(&what), &os.source)?;
        log.row(
            format!("os_support.{}", majors.join(",")),
            &os.source,
            os.read,
        );
        check_os_support(&what, os, drivers).map_err(|m| inconsistent(F, m))?;
    }
    for version in releases.keys() {
        let covering = file
            .os_support
            .iter()
            .filter(|o| {
                o.majors
                    .iter()
                    .any(|m| m.minor_version() == version.minor_version())
            })
            .count();
        if covering != 1 {
            return Err(inconsistent(
                F,
                format!(
                    "{version}: {covering} os_support entries cover its major (need exactly one)"
                ),
            ));
        }
    }
    for os in &file.os_support {
        for m in &os.majors {
            if !releases
                .keys()
                .any(|v| v.minor_version() == m.minor_version())
            {
                return Err(inconsistent(
                    F,
                    format!("os_support names major {m}, which has no release"),
                ));
            }
        }
    }
    let facts = OperatorFacts {
        support_as_of: file.support_as_of,
        support_note: file.support_note,
        kernel_module_type: file.kernel_module_type,
        not_captured: file.not_captured,
        os_support: file.os_support,
    };
    Ok((releases, facts))
}

/// One major's operating-system list: each system named once, with a version (or, for Red Hat
/// CoreOS, an OpenShift range), kernels and precompiled rows that parse, precompiled rows that
/// name a listed system and known driver branches.
fn check_os_support(
    what: &str,
    os: &OsSupport,
    drivers: &BTreeMap<u32, DriverBranch>,
) -> Result<(), String> {
    use common::kernel_major_minor as mm;
    if os.systems.is_empty() {
        return Err(format!("{what} lists no system"));
    }
    let mut seen = BTreeSet::new();
    for s in &os.systems {
        let label = s.label();
        match (&s.version, &s.openshift) {
            (Some(v), None) if mm(v).is_some() => {}
            (None, Some(r))
                if mm(&r.min).is_some_and(|min| mm(&r.max).is_some_and(|max| min <= max)) => {}
            _ => {
                return Err(format!(
                    "{what}: `{label}` needs either a major.minor `version` or an `openshift` range"
                ));
            }
        }
        if !seen.insert(label.clone()) {
            return Err(format!("{what}: `{label}` is listed twice"));
        }
        if let Some(k) = s.kernels.iter().find(|k| mm(k).is_none()) {
            return Err(format!("{what}: `{label}` kernel `{k}` is not major.minor"));
        }
    }
    for p in &os.precompiled {
        if os.system(&p.id, &p.version).is_none() || mm(&p.kernel).is_none() {
            return Err(format!(
                "{what}: precompiled `{} {}` kernel `{}` names no listed system or no kernel series",
                p.id, p.version, p.kernel
            ));
        }
        if let Some(b) = p.branches.iter().find(|b| !drivers.contains_key(b)) {
            return Err(format!(
                "{what}: precompiled branch R{b} is not in drivers.yaml"
            ));
        }
    }
    Ok(())
}

fn load_queueing(
    file: queueing::QueueingFile,
    sources: &mut Vec<(&'static str, String)>,
) -> Result<Queueing, ProfileError> {
    const F: &str = QUEUEING_FILE;
    sourced(sources, F, None, &file.source.0)?;
    for (name, system) in [("kueue", &file.kueue), ("volcano", &file.volcano)] {
        sourced(sources, F, Some(name), &system.source)?;
        system.check().map_err(|m| inconsistent(F, m))?;
    }
    sourced(
        sources,
        F,
        Some("kueue_configuration"),
        &file.kueue_configuration.source,
    )?;
    file.kueue_configuration
        .check()
        .map_err(|m| inconsistent(F, m))?;
    sourced(sources, F, Some("composition"), &file.composition.source)?;
    sourced(
        sources,
        F,
        Some("volcano_hierarchy"),
        &file.volcano_hierarchy.source,
    )?;
    sourced(
        sources,
        F,
        Some("scheduling_messages"),
        &file.scheduling_messages.source,
    )?;
    file.scheduling_messages
        .kueue
        .check()
        .map_err(|m| inconsistent(F, m))?;
    Ok(Queueing {
        kueue: file.kueue,
        volcano: file.volcano,
        kueue_configuration: file.kueue_configuration,
        composition: file.composition,
        volcano_hierarchy: file.volcano_hierarchy,
        messages: file.scheduling_messages,
    })
}

fn load_network(
    file: network::NetworkFile,
    architectures: &BTreeMap<String, Architecture>,
    cuda: &BTreeMap<CudaVersion, CudaRequirement>,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<network::NetworkFacts, ProfileError> {
    const F: &str = NETWORK_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    log.row(
        "gpudirect_rdma",
        &file.gpudirect_rdma.source,
        file.gpudirect_rdma.read,
    );
    log.row(
        "network_operator",
        &file.network_operator.source,
        file.network_operator.read,
    );
    for r in &file.network_operator.releases {
        log.row(
            format!("network_operator.releases.{}", r.version),
            &r.source,
            r.read,
        );
    }
    log.row("kubelet", &file.kubelet.source, file.kubelet.read);
    let dma_buf = &file.gpudirect_rdma.dma_buf;
    if !architectures.contains_key(&dma_buf.min_architecture) {
        return Err(inconsistent(
            F,
            format!(
                "gpudirect_rdma.dma_buf.min_architecture `{}` is not in architectures.yaml",
                dma_buf.min_architecture
            ),
        ));
    }
    if dma_buf
        .min_cuda
        .parse::<CudaVersion>()
        .ok()
        .and_then(|v| cuda.get(&v.without_patch()))
        .is_none()
    {
        return Err(inconsistent(
            F,
            format!(
                "gpudirect_rdma.dma_buf.min_cuda `{}` is not a CUDA release of cuda.yaml",
                dma_buf.min_cuda
            ),
        ));
    }
    sourced(
        sources,
        F,
        Some("gpudirect_rdma"),
        &file.gpudirect_rdma.source,
    )?;
    sourced(
        sources,
        F,
        Some("network_operator"),
        &file.network_operator.source,
    )?;
    sourced(sources, F, Some("kubelet"), &file.kubelet.source)?;
    file.check().map_err(|m| inconsistent(F, m))?;
    Ok(network::NetworkFacts {
        gpudirect_rdma: file.gpudirect_rdma,
        network_operator: file.network_operator,
        kubelet: file.kubelet,
    })
}

fn load_dcgm(
    file: dcgm::DcgmFile,
    sources: &mut Vec<(&'static str, String)>,
) -> Result<dcgm::DcgmFacts, ProfileError> {
    const F: &str = DCGM_FILE;
    sourced(sources, F, None, &file.source.0)?;
    sourced(sources, F, Some("exporter"), &file.exporter.source)?;
    sourced(sources, F, Some("clock_events"), &file.clock_events.source)?;
    sourced(sources, F, Some("xid"), &file.xid.source)?;
    sourced(
        sources,
        F,
        Some("recovery_action"),
        &file.recovery_action.source,
    )?;
    sourced(sources, F, Some("thresholds"), &file.thresholds.source)?;
    sourced(sources, F, Some("alert_bounds"), &file.alert_bounds.source)?;
    for (what, names) in file.exporter.labels.all() {
        if names.is_empty() {
            return Err(inconsistent(
                F,
                format!("exporter.labels.{what} names no label"),
            ));
        }
        if let Some(bad) = names.iter().find(|n| !dcgm::is_prometheus_name(n, false)) {
            return Err(inconsistent(
                F,
                format!("exporter.labels.{what}: `{bad}` is not a Prometheus label name"),
            ));
        }
    }
    if let Some(bad) = file
        .exporter
        .metrics
        .all()
        .into_iter()
        .find(|n| !dcgm::is_prometheus_name(n, true))
    {
        return Err(inconsistent(
            F,
            format!("exporter.metrics: `{bad}` is not a Prometheus metric name"),
        ));
    }
    let mut mask = 0u64;
    for r in &file.clock_events.reasons {
        if !r.bit.is_power_of_two() || mask & r.bit != 0 {
            return Err(inconsistent(
                F,
                format!(
                    "clock_events `{}`: bit {} is not a single bit or is listed twice",
                    r.name, r.bit
                ),
            ));
        }
        mask |= r.bit;
    }
    file.check().map_err(|m| inconsistent(F, m))?;
    let t = &file.thresholds;
    for (what, text) in [
        ("idle_window", &t.idle_window),
        ("error_window", &t.error_window),
        ("temperature_for", &t.temperature_for),
    ] {
        match crate::quantity::parse_duration_ms(text) {
            Ok(ms) if ms > 0 => {}
            Ok(_) => return Err(inconsistent(F, format!("thresholds.{what} is zero"))),
            Err(e) => return Err(inconsistent(F, format!("thresholds.{what}: {e}"))),
        }
    }
    if !(0.0..=1.0).contains(&t.idle_engine_active)
        || !(0.0..=100.0).contains(&t.idle_gpu_util_percent)
        || !t.temperature_c.is_finite()
    {
        return Err(inconsistent(F, "thresholds are out of range"));
    }
    Ok(dcgm::DcgmFacts {
        exporter: file.exporter,
        clock_events: file.clock_events,
        xid: file.xid,
        recovery_action: file.recovery_action,
        thresholds: file.thresholds,
        alert_bounds: file.alert_bounds,
    })
}

fn load_limits(
    limits: &Limits,
    sources: &mut Vec<(&'static str, String)>,
) -> Result<(), ProfileError> {
    const F: &str = LIMITS_FILE;
    let sections: [(&str, &[String]); 10] = [
        ("the file", &limits.source),
        ("kubernetes_names", &limits.kubernetes_names.source),
        ("priority_class", &limits.priority_class.source),
        ("resource_quota", &limits.resource_quota.source),
        ("node_labels", &limits.node_labels.source),
        ("kueue", &limits.kueue.source),
        ("volcano", &limits.volcano.source),
        ("device_plugin", &limits.device_plugin.source),
        ("dcgm_exporter", &limits.dcgm_exporter.source),
        ("immutable_fields", &limits.immutable_fields.source),
    ];
    for (name, list) in sections {
        require_source(F, name, list)?;
        push_sources(sources, F, (name != "the file").then_some(name), list);
    }
    let volcano = &limits.volcano;
    if volcano.min_queue_weight > volcano.max_queue_weight
        || !(volcano.min_queue_weight..=volcano.max_queue_weight)
            .contains(&volcano.default_queue_weight)
    {
        return Err(inconsistent(F, "volcano queue weights are out of order"));
    }
    if limits.priority_class.min_value > limits.priority_class.max_user_value {
        return Err(inconsistent(
            F,
            "priority_class min_value is above max_user_value",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> &'static Catalog {
        Catalog::embedded()
    }

    type KubeVersionForTest = crate::version::KubeVersion;

    fn v<T: std::str::FromStr>(s: &str) -> T
    where
        T::Err: std::fmt::Debug,
    {
        s.parse().unwrap()
    }

    #[test]
    fn embedded_catalog_loads() {
        // `embedded()` expects; this test gives the error in full if the data is broken.
        if let Err(e) = Catalog::from_sources(&ProfileSources::EMBEDDED) {
            panic!("{e}");
        }
    }

    #[test]
    fn catalog_holds_every_required_gpu() {
        let required = [
            "A30-24GB",
            "A100-SXM4-40GB",
            "A100-SXM4-80GB",
            "A100-PCIE-40GB",
            "A100-PCIE-80GB",
            "H100-SXM5-80GB",
            "H100-PCIE-80GB",
            "H100-NVL-94GB",
            "H20-96GB",
            "H200-SXM5-141GB",
            "H200-NVL-141GB",
            "GH200-96GB",
            "B200",
            "GB200",
            "B300",
            "RTX-PRO-6000-BLACKWELL",
            "V100-SXM2-16GB",
            "V100-SXM2-32GB",
            "V100-PCIE-32GB",
            "T4",
            "A10",
            "L4",
            "L40S",
            "RTX-4090",
            // Issue 26: GPUs NVIDIA's operator lists.
            "L40",
            "L20",
            "A40",
            "A16",
            "A2",
            "A100X",
            "A30X",
            "RTX-PRO-6000D",
            "GB10",
            "RTX-PRO-5000-BLACKWELL",
            "RTX-PRO-4500-BLACKWELL",
        ];
        for key in required {
            assert!(catalog().gpu(key).is_some(), "{key} missing");
        }
        let keys: Vec<&str> = catalog().gpus().map(|g| g.key.as_str()).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted, "gpus() is sorted by key");
    }

    #[test]
    fn mig_support_matches_the_mig_guide() {
        // compat-data.md §4a: MIG-capable products and their instance maximums.
        let mig_capable = [
            ("A30-24GB", 4),
            ("A100-SXM4-40GB", 7),
            ("A100-PCIE-80GB", 7),
            ("H100-SXM5-80GB", 7),
            ("H100-NVL-94GB", 7),
            ("GH200-96GB", 7),
            ("H20-96GB", 7),
            ("H200-NVL-141GB", 7),
            ("B200", 7),
            ("GB200", 7),
            ("B300", 7),
            ("RTX-PRO-6000-BLACKWELL", 4),
            // MIG user guide Supported GPUs: "RTX PRO 5000 Blackwell ... 48GB | 2",
            // "RTX PRO 4500 Blackwell ... 32GB | 2" (read 2026-12-03).
            ("RTX-PRO-5000-BLACKWELL", 2),
            ("RTX-PRO-4500-BLACKWELL", 2),
        ];
        for (key, max) in mig_capable {
            let mig = catalog().gpu(key).and_then(|g| g.mig.as_ref());
            assert_eq!(mig.map(|m| m.max_instances), Some(max), "{key}");
        }
        // Not in the MIG guide's Supported GPUs table (A100X/A30X are GA100 parts, but unlisted).
        for key in [
            "V100-SXM2-16GB",
            "T4",
            "A10",
            "L4",
            "L40S",
            "RTX-4090",
            "L40",
            "L20",
            "A40",
            "A16",
            "A2",
            "A100X",
            "A30X",
            "RTX-PRO-6000D",
            "GB10",
        ] {
            assert!(
                catalog().gpu(key).unwrap().mig.is_none(),
                "{key} has no MIG"
            );
        }
        let h100 = catalog()
            .gpu("H100-SXM5-80GB")
            .unwrap()
            .mig
            .as_ref()
            .unwrap();
        assert_eq!(h100.min_driver, v("525.85.12"));
        let me = h100.profile("1g.10gb+me").unwrap();
        assert!(me.media_extension);
        assert_eq!(me.placement_starts, vec![0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(
            h100.profile("3g.40gb").unwrap().placement_starts,
            vec![0, 4]
        );
        assert!(h100.profile("3g.20gb").is_none());
        let a100 = catalog()
            .gpu("A100-SXM4-40GB")
            .unwrap()
            .mig
            .as_ref()
            .unwrap();
        assert_eq!(a100.profile("1g.10gb").unwrap().min_branch, Some(525));
    }

    #[test]
    fn gpu_facts_resolve_against_architectures() {
        let v100 = catalog().gpu("V100-SXM2-16GB").unwrap();
        let volta = catalog().architecture(&v100.architecture).unwrap();
        assert_eq!(volta.last_driver_branch, Some(580));
        assert!(volta.supported_by_branch(580));
        assert!(!volta.supported_by_branch(595));
        assert_eq!(
            v100.kernel_modules,
            KernelModuleSupport {
                open: false,
                proprietary: true
            }
        );

        let b200 = catalog().gpu("B200").unwrap();
        assert_eq!(b200.min_driver, Some(v("570.133.20")), "SKU minimum wins");
        assert!(
            !b200.kernel_modules.proprietary,
            "Blackwell needs open modules"
        );
        let gb200 = catalog().gpu("GB200").unwrap();
        assert_eq!(
            gb200.min_driver,
            Some(v("570.26")),
            "architecture minimum applies"
        );
        let gh200 = catalog().gpu("GH200-96GB").unwrap();
        assert!(!gh200.kernel_modules.proprietary, "Grace Hopper override");
        let h100 = catalog().gpu("H100-SXM5-80GB").unwrap();
        assert!(h100.kernel_modules.proprietary && h100.kernel_modules.open);

        let rtx = catalog().gpu("RTX-4090").unwrap();
        assert_eq!(rtx.segment, Segment::Consumer);
        assert_eq!(rtx.cuda_forward_compat, Some(false));
        assert!(!rtx.notes.is_empty());
    }

    #[test]
    fn gpus_are_found_by_their_gfd_product_label() {
        let by = |label: &str| catalog().gpu_by_product(label).map(|g| g.key.as_str());
        assert_eq!(by("NVIDIA-A100-SXM4-80GB"), Some("A100-SXM4-80GB"));
        assert_eq!(by("Tesla-V100-SXM2-16GB"), Some("V100-SXM2-16GB"));
        assert_eq!(by("NVIDIA-GeForce-RTX-4090"), Some("RTX-4090"));
        assert_eq!(by("NVIDIA-H100-80GB-HBM3"), Some("H100-SXM5-80GB"));
        assert_eq!(by("A100-SXM4-40GB-MIG-1g.5gb"), Some("A100-SXM4-40GB"));
        assert_eq!(
            by("NVIDIA-A100-80GB-PCIe-MIG-1g.10gb"),
            Some("A100-PCIE-80GB")
        );
        assert_eq!(
            by("NVIDIA-H100-80GB-HBM3-MIG-INVALID"),
            Some("H100-SXM5-80GB")
        );
        assert_eq!(by("Tesla-T4-SHARED"), Some("T4"));
        assert_eq!(by("NVIDIA-A10"), Some("A10"), "not confused with A100");
        assert_eq!(by("NVIDIA-H200"), Some("H200-SXM5-141GB"));
        assert_eq!(by("NVIDIA-H200-NVL"), Some("H200-NVL-141GB"));
        assert_eq!(
            by("NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition"),
            Some("RTX-PRO-6000-BLACKWELL")
        );
        // Label values of the GPUs issue 26 added (weak evidence, marked in the rows).
        assert_eq!(by("NVIDIA-A40"), Some("A40"));
        assert_eq!(by("NVIDIA-L40"), Some("L40"), "not confused with L40S");
        assert_eq!(by("NVIDIA-L40S"), Some("L40S"));
        assert_eq!(by("NVIDIA-A2"), Some("A2"));
        assert_eq!(by("NVIDIA-GB10"), Some("GB10"));
        assert_eq!(
            by("NVIDIA-RTX-PRO-5000-Blackwell-MIG-1g.24gb"),
            Some("RTX-PRO-5000-BLACKWELL")
        );
        for unknown in [
            "",
            "-MIG-",
            "NVIDIA-A4",
            "nvidia-a10",
            "-SHARED",
            "NVIDIA-A100",
        ] {
            assert_eq!(by(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn cuda_requirements_by_minor_and_major() {
        let req = catalog().cuda(&v("12.4")).unwrap();
        assert_eq!(req.min_driver, v("550.54.14"));
        assert_eq!(req.updates[0].min_driver, v("550.54.15"));
        assert!(!req.is_major_entry());
        let mvc = req.minor_version_compat.as_ref().unwrap();
        assert_eq!(mvc.min_driver, v("525.60.13"));
        assert!(mvc.limits.iter().any(|l| l.contains("PTX JIT")));

        assert_eq!(catalog().cuda(&v("12.4.1")).unwrap().cuda, v("12.4"));
        assert_eq!(
            catalog().cuda(&v("13.0")).unwrap().min_driver,
            v("580.65.06")
        );
        assert_eq!(
            catalog().cuda(&v("11.0")).unwrap().min_driver,
            v("450.51.05")
        );
        assert!(
            catalog().cuda(&v("12.7")).is_none(),
            "there is no CUDA 12.7"
        );
        assert!(catalog().cuda(&v("14.0")).is_none());

        let major = catalog().cuda(&v("12")).unwrap();
        assert!(major.is_major_entry());
        assert_eq!(major.min_driver, v("575.51.03"), "newest 12.x is 12.9");
        assert_eq!(
            catalog()
                .cuda(&v("11"))
                .unwrap()
                .minor_version_compat
                .as_ref()
                .unwrap()
                .min_driver,
            v("450.80.02")
        );
        assert_eq!(
            catalog()
                .cuda(&v("13"))
                .unwrap()
                .minor_version_compat
                .as_ref()
                .unwrap()
                .min_driver,
            v("580")
        );

        // 13.4 is published as a branch only: any R615 driver satisfies it.
        let r615 = catalog().cuda(&v("13.4")).unwrap();
        assert_eq!(r615.support(&v("615.10.02")), CudaSupport::Full);
        assert_eq!(
            r615.support(&v("580.105.08")),
            CudaSupport::MinorVersionCompatibility
        );
        assert_eq!(req.support(&v("550.54.14")), CudaSupport::Full);
        assert_eq!(
            req.support(&v("535.104.05")),
            CudaSupport::MinorVersionCompatibility
        );
        assert_eq!(req.support(&v("470.57.02")), CudaSupport::Unsupported);

        let minors: Vec<String> = catalog()
            .cuda_releases()
            .map(|r| r.cuda.to_string())
            .collect();
        assert_eq!(minors.first().map(String::as_str), Some("11.0"));
        assert!(
            minors
                .windows(2)
                .all(|w| v::<CudaVersion>(&w[0]) < v(&w[1]))
        );
    }

    #[test]
    fn driver_branches_and_end_of_life() {
        let r580 = catalog().driver_branch(&v("580.105.08")).unwrap();
        assert_eq!(r580.branch_type, BranchType::Lts);
        assert_eq!(r580.end_of_life, EndOfLife::Month(v("2028-06")));
        assert_eq!(
            r580.is_end_of_life(jiff::civil::date(2028, 6, 30)),
            Some(false)
        );
        assert_eq!(
            r580.is_end_of_life(jiff::civil::date(2028, 7, 1)),
            Some(true)
        );
        let r535 = catalog().driver_branch(&v("535.309.01")).unwrap();
        assert_eq!(
            r535.is_end_of_life(jiff::civil::date(2026, 8, 1)),
            Some(true)
        );
        assert_eq!(
            catalog().driver_branch(&v("550")).unwrap().end_of_life,
            EndOfLife::Reached
        );
        assert_eq!(
            catalog()
                .driver_branch(&v("615"))
                .unwrap()
                .is_end_of_life(jiff::civil::date(2030, 1, 1)),
            None
        );
        assert!(catalog().driver_branch(&v("999.1")).is_none());
        for branch in [450, 470, 535, 550, 570, 580, 590, 595, 610, 620] {
            assert!(
                catalog().driver_branches().any(|b| b.branch == branch),
                "R{branch}"
            );
        }
        let flavors = catalog().kernel_module_flavors();
        assert!(flavors.proprietary_available(580));
        assert!(!flavors.proprietary_available(620));
        assert!(!flavors.open_available(510));
    }

    /// One row per operator release under issue 26's rule (the final published per-version page:
    /// release-24.9 / release-25.3 / release-25.10 docs branches, main for 26.x; the chart tag for
    /// the default): (release, Kubernetes min, Kubernetes max, chart default driver, docs default
    /// when it differs, recommended driver, validated drivers in all). Sources, per row:
    /// - v24.9.x: release-24.9 life-cycle-policy.rst and platform-support.rst (final), read 2026-12-03;
    /// - v25.3.x: release-25.3 life-cycle-policy.rst and platform-support.rst (final), read 2026-12-03
    ///   (v25.3.1 recommends 580.65.06, v25.3.3 580.82.07, v25.3.4 580.126.16 with 15 drivers);
    /// - v25.10.0: its release notes and docs pull request #326 (the final page was not read);
    /// - v25.10.1: issue 26's audit of release-25.10 life-cycle-policy.rst (2026-11), not re-read:
    ///   1.35 and 580.178.04; 14 of the audit's 20 drivers are evidenced, 6 are unconfirmed;
    /// - v26.3.x: main life-cycle-policy.rst @d219c879 and @ee488781, platform-support.rst @d219c879;
    /// - v26.7.0: cloud-native-docs pull requests #488/#490 (1.33-1.37), values.yaml@v26.7.0.
    #[test]
    fn operator_rows_follow_the_final_pages() {
        let rows = [
            // release  Kubernetes  chart default  docs default  recommended  validated drivers
            "v24.9.0    1.24-1.31   550.127.05     -             550.127.08   5",
            "v24.9.1    1.24-1.31   550.127.08     -             550.144.03   6",
            "v24.9.2    1.24-1.31   550.144.03     -             580.65.06    16",
            "v25.3.0    1.29-1.33   570.124.06     570.172.08    580.65.06    9",
            "v25.3.1    1.29-1.33   570.148.08     570.172.08    580.65.06    8",
            "v25.3.2    1.29-1.33   570.148.08     570.172.08    580.65.06    8",
            "v25.3.3    1.29-1.33   580.82.07      -             580.82.07    9",
            "v25.3.4    1.29-1.33   580.82.07      -             580.126.16   15",
            "v25.10.0   1.30-1.34   580.95.05      -             580.95.05    6",
            "v25.10.1   1.30-1.35   580.105.08     -             580.178.04   14",
            "v26.3.0    1.32-1.36   580.126.20     -             580.173.02   11",
            "v26.3.1    1.32-1.36   580.126.20     -             580.173.02   11",
            "v26.3.2    1.32-1.36   580.126.20     -             580.173.02   11",
            "v26.3.3    1.32-1.36   580.126.20     -             580.178.04   14",
            "v26.7.0    1.33-1.37   595.91.07      -             595.91.07    4",
        ];
        for row in rows {
            let [version, kube, default, docs_default, recommended, count] =
                <[&str; 6]>::try_from(row.split_whitespace().collect::<Vec<_>>()).unwrap();
            let (kube_min, kube_max) = kube.split_once('-').unwrap();
            let r = catalog().operator_release(&v(version)).unwrap();
            assert_eq!(r.kubernetes.min, v(kube_min), "{version}");
            assert_eq!(r.kubernetes.max, v(kube_max), "{version}");
            assert!(
                r.supports_kubernetes(&v(&format!("{kube_max}.1"))),
                "{version}"
            );
            let max: KubeVersionForTest = v(kube_max);
            let next = format!("{}.{}", max.major(), max.minor() + 1);
            assert!(
                !r.supports_kubernetes(&v(&next)),
                "{version} stops at {kube_max}"
            );
            assert_eq!(r.default_driver, v(default), "{version}");
            let docs_default = (docs_default != "-").then(|| v(docs_default));
            assert_eq!(r.docs_default_driver, docs_default, "{version}");
            assert_eq!(r.recommended_driver, Some(v(recommended)), "{version}");
            // v25.3.0 counts the chart default 570.124.06 as validated although the final column
            // dropped it: Helm deploys it.
            let count: usize = count.parse().unwrap();
            assert_eq!(r.drivers().len(), count, "{version}: {:?}", r.drivers());
            assert!(
                !r.source.is_empty() && r.read.is_some(),
                "{version}: every row cites its source and the date it was read"
            );
        }
        // The rows the final pages changed, in the issue's words.
        let r = catalog().operator_release(&v("v25.10.1")).unwrap();
        assert!(
            r.supports_kubernetes(&v("1.35.0")),
            "v25.10.1 supports 1.35"
        );
        assert_eq!(
            r.unconfirmed_drivers.len(),
            6,
            "14 evidenced + 6 = the audit's 20"
        );
        assert!(
            r.source.iter().any(|s| s.starts_with("issue 26's audit")),
            "unconfirmed facts name the audit as their source"
        );
        assert!(r.notes.iter().any(|n| n.contains("Not confirmed here")));
        let r = catalog().operator_release(&v("v26.3.1")).unwrap();
        assert!(
            r.supports_kubernetes(&v("1.36.0")),
            "final 26.3 page: 1.32-1.36"
        );
        let r = catalog().operator_release(&v("v25.3.0")).unwrap();
        assert!(
            r.supports_kubernetes(&v("1.33.0")),
            "final 25.3 page: 1.29-1.33"
        );

        // Validated-driver lists: "release: drivers it lists | drivers it does not".
        let lists = [
            // release-24.9 final page: 535.216.03, not the old row's 535.216.01.
            "v24.9.0: 535.216.03 550.127.08 | 535.216.01",
            "v24.9.2: 580.65.06 570.133.20 535.261.03 550.163.01 | 590.48.01",
            // release-25.3 final page: 575.57.08 and 570.158.01 in, 570.133.20 out.
            "v25.3.1: 580.65.06 575.57.08 570.158.01 570.172.08 570.148.08 | 570.133.20 580.82.07",
            "v25.3.2: 580.65.06 570.172.08 570.148.08 535.261.03 550.163.01 535.247.01 | 580.82.07 570.133.20",
            // The five v25.3.4 gained on the final page.
            "v25.3.4: 580.126.16 590.48.01 580.126.09 570.211.01 535.288.01 | 595.58.03",
            // Unconfirmed for 25.10 (pull-request titles only) are not counted as validated.
            "v25.10.1: 590.48.01 580.126.09 570.211.01 535.288.01 580.105.08 580.178.04 580.167.08 | 595.58.03 580.173.02",
            // The five v26.3.0 gained, and 26.3.3's own additions kept out.
            "v26.3.0: 595.71.05 595.58.03 580.159.04 580.159.03 535.309.01 580.173.02 580.167.08 | 610.57.04 595.91.07 580.178.04",
            "v26.3.2: 580.173.02 580.167.08 580.159.04 | 610.57.04 595.91.07 580.178.04",
            "v26.3.3: 610.57.04 595.91.07 580.178.04 580.173.02 580.167.08 |",
        ];
        for line in lists {
            let (version, drivers) = line.split_once(": ").unwrap();
            let (listed, absent) = drivers.split_once('|').unwrap();
            let r = catalog().operator_release(&v(version)).unwrap();
            for d in listed.split_whitespace() {
                assert!(r.supports_driver(&v(d)), "{version} lists {d}");
            }
            for d in absent.split_whitespace() {
                assert!(!r.supports_driver(&v(d)), "{version} does not list {d}");
            }
        }
        let r = catalog().operator_release(&v("v25.10.1")).unwrap();
        assert!(r.maybe_supports_driver(&v("595.58.03")));
        assert!(!r.maybe_supports_driver(&v("580.105.08")));
    }

    /// v26.7.1 and v26.7.2: no trusted source confirms them, so the catalog says they are not
    /// captured instead of holding a row.
    #[test]
    fn uncaptured_operator_releases_are_named() {
        let facts = catalog().operator_facts();
        for version in ["v26.7.1", "v26.7.2"] {
            assert!(
                catalog().operator_release(&v(version)).is_none(),
                "{version}"
            );
            let missing = facts.not_captured(&v(version)).unwrap();
            assert!(!missing.source.is_empty() && missing.read.is_some());
            assert!(
                missing
                    .notes
                    .iter()
                    .any(|n| n.contains("source read for this catalog"))
            );
        }
        assert!(facts.not_captured(&v("v26.7.0")).is_none());
        // v26.7.1 likely exists (a third-party digest names it), which the entry says without
        // taking any fact from it.
        let v2671 = facts.not_captured(&v("v26.7.1")).unwrap();
        assert!(
            v2671
                .source
                .iter()
                .any(|s| s.starts_with("third-party, not authoritative"))
        );
    }

    /// The operating systems of each major's final platform page (issue 26, item 6).
    #[test]
    fn operator_os_support_per_major() {
        let facts = catalog().operator_facts();
        let os = |release: &str| facts.os_support(&v(release)).unwrap();
        // (release, id, version, listed)
        let rows: &[(&str, &str, &str, bool)] = &[
            ("v24.9.1", "ubuntu", "22.04", true),
            ("v24.9.1", "ubuntu", "24.04", false),
            ("v24.9.1", "rhel", "8.10", true),
            ("v25.3.4", "ubuntu", "24.04", true),
            ("v25.3.4", "rhel", "9.5", true),
            ("v25.10.1", "rhel", "9.5", false),
            ("v25.10.1", "ubuntu", "20.04", true),
            ("v26.3.2", "ubuntu", "20.04", false),
            ("v26.3.2", "rocky", "9.7", true),
            ("v26.7.0", "ubuntu", "26.04", true),
            ("v26.7.0", "ubuntu", "22.04.5", true),
            ("v26.7.0", "rhel", "10.2", true),
            ("v26.7.0", "rhcos", "4.22", true),
            ("v26.7.0", "rhcos", "4.17", false),
            ("v26.7.0", "windows", "2022", false),
            ("v26.7.0", "debian", "12", false),
        ];
        for (release, id, version, listed) in rows {
            assert_eq!(
                os(release).system(id, version).is_some(),
                *listed,
                "{release}: {id} {version}"
            );
        }
        let jammy = os("v26.7.0").system("ubuntu", "22.04").unwrap();
        assert!(jammy.lists_kernel((5, 15)) && jammy.lists_kernel((6, 8)));
        assert!(!jammy.lists_kernel((6, 2)));
        let p = os("v26.7.0")
            .precompiled("ubuntu", "24.04", (6, 8))
            .unwrap();
        assert_eq!(p.branches, [580, 595]);
        assert!(os("v24.9.0").precompiled.is_empty());
        for release in catalog().operator_releases() {
            assert!(
                facts.os_support(&release.version).is_some(),
                "{}",
                release.version
            );
        }
    }

    /// The GPUs NVIDIA's operator lists that issue 26 added, one row each: (key, architecture,
    /// compute capability, memory in GB or None where unpublished, a field marked weak or None,
    /// minimum driver). Sources (read 2026-12-03): developer.nvidia.com/cuda-gpus (CC), the GPU
    /// Operator platform pages (1.8, 1.10, 24.x, 25.3, 26.7), pci.ids 2023.04.10, third-party
    /// inventories for the weak values, k8s-launch-kit's DGX Spark preset.
    #[test]
    fn operator_listed_gpus() {
        let rows = [
            // key          architecture  CC    memory GB  a weak field        minimum driver
            "L40            Ada           8.9   48         memory_gb           520.61.05",
            "L20            Ada           8.9   48         memory_gb           520.61.05",
            "A40            Ampere        8.6   48         gfd_products        455.23",
            "A16            Ampere        8.6   16         memory_gb           455.23",
            "A2             Ampere        8.6   -          gfd_products        455.23",
            "A100X          Ampere        8.0   -          compute_capability  450.36.06",
            "A30X           Ampere        8.0   -          compute_capability  450.36.06",
            "RTX-PRO-6000D  Blackwell     12.0  84         memory_gb           575.57.08",
            // CC 12.1 per the CUDA GPUs page; sm_121 first in CUDA 12.9, whose driver is 575.51.03.
            "GB10           Blackwell     12.1  128        memory_gb           575.51.03",
        ];
        for row in rows {
            let [key, arch, cc, memory, weak, min_driver] =
                <[&str; 6]>::try_from(row.split_whitespace().collect::<Vec<_>>()).unwrap();
            let memory: Option<u32> = memory.parse().ok();
            let g = catalog().gpu(key).unwrap_or_else(|| panic!("{key}"));
            assert_eq!(g.architecture, arch, "{key}");
            assert_eq!(g.compute_capability, v(cc), "{key}");
            assert_eq!(g.memory_gb, memory, "{key}");
            assert!(
                g.weak.iter().any(|f| f == weak),
                "{key}: {weak} is marked weak"
            );
            assert_eq!(g.min_driver, Some(v(min_driver)), "{key}");
            assert!(g.mig.is_none(), "{key} has no MIG table");
            assert!(g.operator_since.is_none(), "{key}: no first release pinned");
            assert!(!g.sources.is_empty(), "{key} cites its own sources");
            if g.memory_gb.is_none() {
                assert!(
                    g.notes
                        .iter()
                        .any(|n| n.contains("Memory") || n.contains("memory")),
                    "{key}: an unpublished fact is noted"
                );
            }
        }
        // The RTX PRO 6000D's label value is unknown: nodes cannot be matched by label, and the
        // row says so.
        let d = catalog().gpu("RTX-PRO-6000D").unwrap();
        assert!(d.gfd_products.is_empty());
        assert!(d.notes.iter().any(|n| n.contains("gpu.product")));
        // GB10 needs the open modules, as every Blackwell GPU.
        assert!(!catalog().gpu("GB10").unwrap().kernel_modules.proprietary);
    }

    /// The RTX PRO 5000 and 4500 Blackwell MIG tables of the MIG user guide (Supported MIG
    /// Profiles, read 2026-12-03): names, counts, and what fits on the two halves.
    #[test]
    fn rtx_pro_5000_and_4500_mig_tables() {
        let mig = |key: &str| catalog().gpu(key).unwrap().mig.clone().unwrap();
        let r5000 = mig("RTX-PRO-5000-BLACKWELL");
        let names: Vec<&str> = r5000.profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "1g.24gb",
                "1g.24gb+me",
                "1g.24gb+gfx",
                "1g.24gb+me.all",
                "1g.24gb-me",
                "2g.48gb",
                "2g.48gb+gfx"
            ]
        );
        assert_eq!(r5000.min_driver, v("575.57.08"));
        let r4500 = mig("RTX-PRO-4500-BLACKWELL");
        let names: Vec<&str> = r4500.profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "1g.16gb",
                "1g.16gb+gfx",
                "1g.16gb+me.all",
                "1g.16gb-me",
                "2g.32gb",
                "2g.32gb+gfx"
            ]
        );
        assert!(
            r4500.profile("1g.16gb+me").is_none(),
            "the 4500 has only +me.all"
        );
        assert_eq!(r4500.min_driver, v("575.64"));
        // (layout, fits)
        let layouts: &[(&[(&str, u32)], bool)] = &[
            (&[("1g.24gb", 2)], true),
            (&[("2g.48gb", 1)], true),
            (&[("1g.24gb+me", 1), ("1g.24gb-me", 1)], true),
            (&[("1g.24gb", 3)], false),
            (&[("2g.48gb", 1), ("1g.24gb", 1)], false),
            (&[("1g.24gb+me", 1), ("1g.24gb+me.all", 1)], false),
        ];
        for (layout, fits) in layouts {
            assert_eq!(r5000.fit(layout).is_ok(), *fits, "{layout:?}");
        }
        assert!(r5000.fit(&[("3g.48gb", 1)]).is_err(), "invented profile");
    }

    /// Rubin: what is published (preview in CUDA 13.4, GFD family `rubin` for compute-capability
    /// major 13) and what is not; no GPU row uses it.
    #[test]
    fn rubin_is_recorded_as_preview() {
        let rubin = catalog().architecture("Rubin").unwrap();
        assert_eq!(rubin.gfd_family, "rubin");
        assert_eq!(rubin.compute_major, Some(13));
        assert!(rubin.compute_capabilities.is_empty());
        assert!(rubin.preview);
        assert!(rubin.min_driver.is_none() && rubin.kernel_modules.is_none());
        assert!(rubin.unpublished.iter().any(|u| u.contains("driver floor")));
        for (cc, family) in [
            ("13.0", Some("rubin")),
            ("13.2", Some("rubin")),
            ("10.0", Some("blackwell")),
            ("12.1", Some("blackwell")),
            ("9.0", Some("hopper")),
            ("8.9", Some("ada-lovelace")),
            ("8.6", Some("ampere")),
            ("14.0", None),
        ] {
            assert_eq!(
                catalog()
                    .architecture_for(v(cc))
                    .map(|a| a.gfd_family.as_str()),
                family,
                "{cc}"
            );
        }
        assert!(!catalog().gpus().any(|g| g.architecture == "Rubin"));
    }

    /// Network facts of issue 26: what NVIDIA's GPUDirect RDMA page documents for DMA-BUF (no
    /// operator floor), and per Network Operator release its documented Kubernetes range and the
    /// DOCA-OFED driver it ships (images-sha256 and platform-support pages, read 2026-12-03).
    #[test]
    fn network_facts_are_the_documented_ones() {
        let rdma = &catalog().network().gpudirect_rdma;
        assert!(rdma.dma_buf.open_kernel_modules);
        assert_eq!(rdma.dma_buf.min_cuda, "11.7");
        assert_eq!(rdma.dma_buf.min_architecture, "Turing");
        assert_eq!(rdma.dma_buf.min_kernel, "5.12");
        assert_eq!(
            catalog().cuda(&v("11.7")).unwrap().min_driver,
            v("515.43.04"),
            "DMA-BUF's driver floor follows from CUDA 11.7"
        );
        let no = &catalog().network().network_operator;
        // (release, Kubernetes min, max, DOCA-OFED driver shipped)
        let rows = [
            ("v26.4.0", "1.31", "1.35", "doca3.4.0-26.04-0.8.6.0-0"),
            ("v26.4.1", "1.31", "1.35", "doca3.4.1-26.04-1.1.0.0-1"),
            ("v26.7.0", "1.32", "1.36", "doca3.5.0-26.07-0.7.7.0-1"),
        ];
        for (version, min, max, doca) in rows {
            let r = no.release(version).unwrap_or_else(|| panic!("{version}"));
            let k = r.kubernetes.as_ref().unwrap();
            assert_eq!(k.min, v::<KubeVersionForTest>(min), "{version}");
            assert_eq!(k.max, v::<KubeVersionForTest>(max), "{version}");
            assert_eq!(r.doca_driver, doca, "{version}");
            assert!(!r.source.is_empty() && r.read.is_some(), "{version}");
        }
        // The chart's kubeVersion is kept apart: it is an install guard, not a support range.
        let r = no.release("v26.4.1").unwrap();
        assert_eq!(r.chart_kube_version.as_deref(), Some(">= 1.21.0-0"));
        assert!(!r.kubernetes.as_ref().unwrap().contains(&v("1.21.0")));
        assert_eq!(
            no.release("v26.7.0")
                .unwrap()
                .doca_driver_precompiled
                .as_deref(),
            Some("doca3.5.0-26.07-0.7.7.0-0")
        );
    }

    /// Issue 26 item 5: every fact row of the dated tables carries its sources and the date they
    /// were read; the tables not dated yet are exactly the ones other work owns, and they are
    /// listed as such rather than passed over.
    #[test]
    fn every_fact_row_has_a_source_and_a_read_date() {
        let rows = catalog().fact_rows();
        assert!(rows.len() > 100, "{}", rows.len());
        let bad: Vec<String> = rows
            .iter()
            .filter(|r| r.sources.iter().all(|s| s.trim().is_empty()) || r.read.is_none())
            .map(|r| format!("{} {}", r.file, r.row))
            .collect();
        assert!(
            bad.is_empty(),
            "rows without a source or a read date: {bad:#?}"
        );
        for file in [
            GPUS_FILE,
            CUDA_FILE,
            DRIVERS_FILE,
            ARCHITECTURES_FILE,
            OPERATOR_FILE,
            NETWORK_FILE,
        ] {
            assert!(rows.iter().any(|r| r.file == file), "{file} has no rows");
        }
        // Not dated yet: limits.yaml and queueing.yaml (plans work) and dcgm.yaml (metrics work).
        // When they gain dates this list shrinks, and the assertion with it.
        assert_eq!(
            catalog().undated_files(),
            [LIMITS_FILE, QUEUEING_FILE, DCGM_FILE]
        );
        for row in [
            "releases.v25.10.1",
            "gpus.GB10",
            "architectures.Rubin",
            "network_operator.releases.v26.7.0",
        ] {
            assert!(rows.iter().any(|r| r.row == row), "{row}");
        }
    }

    /// A row without a source or a date fails the check above: strip them from one row and the
    /// loader still loads (the date is optional per row) but the row is reported.
    #[test]
    fn an_undated_row_is_caught() {
        let text: &'static str = Box::leak(
            ProfileSources::EMBEDDED
                .architectures
                .replacen("read: \"2026-11\"\n", "", 1)
                .into_boxed_str(),
        );
        let src = ProfileSources {
            architectures: text,
            ..ProfileSources::EMBEDDED
        };
        let c = Catalog::from_sources(&src).unwrap();
        let undated: Vec<&str> = c
            .fact_rows()
            .iter()
            .filter(|r| r.read.is_none())
            .map(|r| r.row.as_str())
            .collect();
        assert!(undated.contains(&"architectures.Volta"), "{undated:?}");
        assert!(
            !undated.contains(&"architectures.Rubin"),
            "Rubin has its own date"
        );
        let today = jiff::civil::date(2026, 12, 3);
        assert!(
            c.stale_rows(today, 10_000)
                .iter()
                .any(|r| r.row == "architectures.Volta")
        );
    }

    /// `--stale-after`: ages count from the earliest day a date can mean.
    #[test]
    fn stale_rows_by_age() {
        let today = jiff::civil::date(2026, 12, 3);
        let ages = |days| -> Vec<String> {
            catalog()
                .stale_rows(today, days)
                .iter()
                .map(|r| r.row.clone())
                .collect()
        };
        // "2026-11" counts from 2026-11-01 (32 days); rows read 2026-12-03 are 0 days old.
        assert!(ages(31).iter().any(|r| r == "gpus.V100-SXM2-16GB"));
        assert!(!ages(32).iter().any(|r| r == "gpus.V100-SXM2-16GB"));
        assert!(!ages(0).iter().any(|r| r == "releases.v25.10.1"));
        assert!(ages(400).is_empty());
        let row = catalog()
            .fact_rows()
            .iter()
            .find(|r| r.row == "gpus.GB10")
            .unwrap();
        assert_eq!(row.age_days(today), Some(0));
        assert_eq!(row.age_days(jiff::civil::date(2027, 1, 2)), Some(30));
    }

    /// The GPUs added for late-2026 clusters, with their label values, MIG tables and the first
    /// operator release that supports them.
    #[test]
    fn added_gpus_and_first_operator_releases() {
        // (key, a GFD product value, MIG profile set, first operator release)
        let rows: &[(&str, &str, Option<&str>, Option<&str>)] = &[
            (
                "GB300",
                "NVIDIA-GB300",
                Some("gb300-278gb"),
                Some("v25.10.0"),
            ),
            (
                "GH200-144GB",
                "NVIDIA-GH200-144G-HBM3e",
                Some("gh200-144gb"),
                None,
            ),
            (
                "RTX-PRO-5000-BLACKWELL",
                "NVIDIA-RTX-PRO-5000-Blackwell",
                Some("rtx-pro-5000-48gb"),
                None,
            ),
            (
                "RTX-PRO-4500-BLACKWELL",
                "NVIDIA-RTX-PRO-4500-Blackwell",
                Some("rtx-pro-4500-32gb"),
                Some("v26.3.0"),
            ),
            (
                "H100-SXM5-94GB",
                "NVIDIA-H100-SXM5-94GB",
                Some("h100-94gb"),
                None,
            ),
            ("A800-SXM4-80GB", "NVIDIA-A800-SXM4-80GB", None, None),
            ("H800-SXM5-80GB", "NVIDIA-H800", None, None),
            ("B200", "NVIDIA-B200", Some("b200-180gb"), Some("v25.3.0")),
            (
                "GB200",
                "NVIDIA-GB200",
                Some("gb200-186gb"),
                Some("v25.3.0"),
            ),
            (
                "B300",
                "NVIDIA-B300-SXM6-AC",
                Some("b300-288gb"),
                Some("v25.10.0"),
            ),
        ];
        for (key, product, set, since) in rows {
            let gpu = catalog()
                .gpu(key)
                .unwrap_or_else(|| panic!("{key} is in the catalog"));
            assert!(gpu.gfd_products.iter().any(|p| p == product), "{key}");
            assert_eq!(
                catalog().gpu_by_product(product).map(|g| g.key.as_str()),
                Some(*key)
            );
            assert_eq!(
                gpu.mig.as_ref().map(|m| m.profile_set.as_str()),
                *set,
                "{key}"
            );
            assert_eq!(gpu.operator_since, since.map(v), "{key}");
            if since.is_some() {
                assert!(
                    gpu.operator_since_source.is_some(),
                    "{key} cites its source"
                );
            }
        }
        // GB300 NVL72's MIG floor is the driver of v25.10.0, the operator release that added it
        // (values.yaml@v25.10.0 and release-notes.rst 25.10.0: 580.95.05, read 2026-12-03); the
        // MIG guide's 595.58.03 row is for the GB300 DGX Station only.
        let gb300 = catalog().gpu("GB300").unwrap().mig.as_ref().unwrap();
        assert_eq!(gb300.min_driver, v("580.95.05"));
        let since = catalog()
            .gpu("GB300")
            .unwrap()
            .operator_since
            .clone()
            .unwrap();
        let added = catalog().operator_release(&since).unwrap();
        assert_eq!(added.default_driver, gb300.min_driver);
        assert!(added.supports_driver(&gb300.min_driver));
        let names: Vec<&str> = gb300.profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "1g.35gb",
                "1g.35gb+me",
                "1g.70gb",
                "2g.70gb",
                "3g.139gb",
                "4g.139gb",
                "7g.278gb"
            ]
        );
        let gh200 = catalog().gpu("GH200-144GB").unwrap();
        assert!(!gh200.kernel_modules.proprietary);
        let names: Vec<&str> = gh200
            .mig
            .as_ref()
            .unwrap()
            .profiles
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "1g.18gb",
                "1g.18gb+me",
                "1g.36gb",
                "2g.36gb",
                "3g.72gb",
                "4g.72gb",
                "7g.144gb"
            ]
        );
        // MIG on the RTX PRO 6000 Blackwell: from operator v25.3.4; the GPU itself has no recorded
        // first release.
        let rtx = catalog().gpu("RTX-PRO-6000-BLACKWELL").unwrap();
        assert_eq!(rtx.operator_since, None);
        assert_eq!(rtx.mig.as_ref().unwrap().operator_since, Some(v("v25.3.4")));
        assert!(
            rtx.operator_since_source
                .as_deref()
                .unwrap()
                .contains("v25.3.4")
        );
    }

    /// The RTX PRO 6000 Blackwell's placements are on the 12-unit axis `nvidia-smi mig -lgipp`
    /// prints, and every layout fits there exactly when it fits on the quarter axis (starts and
    /// widths divided by 3).
    #[test]
    fn rtx_pro_6000_placement_axis_is_nvidia_smis() {
        let mig = catalog()
            .gpu("RTX-PRO-6000-BLACKWELL")
            .unwrap()
            .mig
            .clone()
            .unwrap();
        assert_eq!(mig.memory_slices, 12);
        let lgipp = |name: &str| {
            let p = mig.profile(name).unwrap();
            (p.placement_starts.clone(), p.memory_slices)
        };
        assert_eq!(lgipp("1g.24gb"), (vec![0, 3, 6, 9], 3));
        assert_eq!(lgipp("2g.48gb"), (vec![0, 6], 6));
        assert_eq!(lgipp("4g.96gb"), (vec![0], 12));

        let mut quarter = mig.clone();
        quarter.memory_slices = 4;
        for p in &mut quarter.profiles {
            p.memory_slices /= 3;
            p.placement_starts = p.placement_starts.iter().map(|s| s / 3).collect();
        }
        let names: Vec<String> = mig.profiles.iter().map(|p| p.name.clone()).collect();
        // Every combination of up to two profiles with 0..=4 instances each.
        let mut checked = 0;
        for a in &names {
            for b in &names {
                for na in 0..=4u32 {
                    for nb in 0..=4u32 {
                        let layout: Vec<(&str, u32)> = if a == b {
                            vec![(a.as_str(), na + nb)]
                        } else {
                            vec![(a.as_str(), na), (b.as_str(), nb)]
                        };
                        let wide = mig.fit(&layout).is_ok();
                        assert_eq!(wide, quarter.fit(&layout).is_ok(), "{layout:?}");
                        checked += usize::from(wide);
                    }
                }
            }
        }
        assert!(
            checked > 50,
            "the comparison covered fitting layouts too ({checked})"
        );
        assert!(mig.fit(&[("1g.24gb", 2), ("2g.48gb", 1)]).is_ok());
        assert!(mig.fit(&[("4g.96gb", 1), ("1g.24gb", 1)]).is_err());
    }

    #[test]
    fn operator_releases_cover_v24_9_to_v26_7() {
        let versions: Vec<String> = catalog()
            .operator_releases()
            .map(|r| r.version.to_string())
            .collect();
        assert_eq!(versions.first().map(String::as_str), Some("v24.9.0"));
        assert_eq!(versions.last().map(String::as_str), Some("v26.7.0"));
        for version in ["v24.9.2", "v25.3.4", "v25.10.1", "v26.3.3"] {
            assert!(versions.iter().any(|x| x == version), "{version}");
        }

        let latest = catalog().operator_release(&v("v26.7")).unwrap();
        assert_eq!(latest.default_driver, v("595.91.07"));
        assert!(latest.supports_kubernetes(&v("1.34.2")));
        assert!(latest.supports_kubernetes(&v("v1.36")));
        // cloud-native-docs pull request #488 (2026-09-04) documents Kubernetes 1.37 for 26.7.0.
        assert!(latest.supports_kubernetes(&v("1.37.0")));
        assert!(!latest.supports_kubernetes(&v("1.32.9")));
        assert!(latest.supports_driver(&v("580.173.02")));
        assert!(!latest.supports_driver(&v("580.105.08")));
        assert_eq!(latest.driver_branches(), vec![610, 595, 580, 535]);
        assert_eq!(latest.support, Some(OperatorSupport::Supported));
        assert!(catalog().operator_release(&v("v26.7.1")).is_none());
        assert_eq!(
            catalog()
                .operator_facts()
                .kernel_module_type
                .auto_min_driver,
            v("570.86.15")
        );

        // Every default driver belongs to a branch drivers.yaml knows.
        for release in catalog().operator_releases() {
            for driver in release.drivers() {
                assert!(
                    catalog().driver_branch(driver).is_some(),
                    "{}: {driver}",
                    release.version
                );
            }
        }
    }

    #[test]
    fn limits_are_data() {
        let limits = catalog().limits();
        assert_eq!(limits.priority_class.max_user_value, 1_000_000_000);
        assert_eq!(limits.priority_class.reserved_name_prefix, "system-");
        assert_eq!(limits.kueue.max_resource_groups, 16);
        assert_eq!(limits.kueue.max_flavors_per_group, 64);
        assert_eq!(limits.kueue.max_cohort_depth, None);
        assert_eq!(
            (
                limits.volcano.min_queue_weight,
                limits.volcano.max_queue_weight
            ),
            (1, 65535)
        );
        assert_eq!(limits.volcano.max_queue_depth, 5);
        assert_eq!(limits.dcgm_exporter.min_collect_interval_ms, 100);
        assert_eq!(limits.kubernetes_names.dns1123_label_max_length, 63);
        assert_eq!(limits.kubernetes_names.dns1123_subdomain_max_length, 253);
        assert_eq!(limits.device_plugin.min_sharing_replicas, 2);
        let quota = &limits.resource_quota;
        assert!(
            quota.is_standard_key("requests.cpu")
                && quota.is_standard_key("requests.hugepages-2Mi")
        );
        assert!(!quota.is_standard_key("gpu") && !quota.is_standard_key("limits.storage"));
        let labels = &limits.node_labels;
        assert!(labels.is_operator_owned("nvidia.com/gpu.product"));
        assert!(labels.is_operator_owned("feature.node.kubernetes.io/pci-10de.present"));
        assert!(labels.is_operator_owned("nvidia.com/mig-1g.10gb.count"));
        assert!(!labels.is_operator_owned("nvidia.com/mig.config"));
        assert!(!labels.is_operator_owned("nvidia.com/device-plugin.config"));
        assert!(!labels.is_operator_owned("gpu.example.com/tier"));
    }

    #[test]
    fn every_table_cites_its_sources() {
        let sources = catalog().sources();
        for file in [
            GPUS_FILE,
            CUDA_FILE,
            DRIVERS_FILE,
            ARCHITECTURES_FILE,
            OPERATOR_FILE,
            LIMITS_FILE,
            QUEUEING_FILE,
        ] {
            assert!(
                sources.iter().any(|(f, _)| *f == file),
                "{file} cites nothing"
            );
        }
        assert!(
            sources
                .iter()
                .any(|(_, s)| s.starts_with("mig_profile_sets.a100-40gb: "))
        );
        assert!(sources.iter().any(|(_, s)| s.starts_with("kueue: ")));
        assert!(
            sources
                .iter()
                .all(|(_, s)| !s.is_empty() && !s.contains('\n'))
        );
    }

    /// Broken tables are rejected with the file and entry named, never with a panic.
    #[test]
    fn inconsistent_tables_are_rejected() {
        let with = |patch: fn(&mut ProfileSources<'static>, &'static str), text: &'static str| {
            let mut src = ProfileSources::EMBEDDED;
            patch(&mut src, text);
            Catalog::from_sources(&src).unwrap_err().to_string()
        };
        let gpus_leaked = |from: &str, to: &str| -> &'static str {
            Box::leak(
                ProfileSources::EMBEDDED
                    .gpus
                    .replacen(from, to, 1)
                    .into_boxed_str(),
            )
        };

        let err = with(
            |s, t| s.gpus = t,
            gpus_leaked("architecture: Volta", "architecture: Votla"),
        );
        assert!(err.contains("unknown architecture `Votla`"), "{err}");

        let err = with(
            |s, t| s.gpus = t,
            gpus_leaked("placement_starts: [0, 4] }", "placement_starts: [0, 5] }"),
        );
        assert!(err.contains("runs past the last slot"), "{err}");

        let err = with(
            |s, t| s.gpus = t,
            gpus_leaked("display_name:", "display_nam:"),
        );
        assert!(
            err.starts_with("cannot parse `profiles/gpus.yaml`"),
            "{err}"
        );

        let err = with(|s, t| s.cuda = t, "releases: []\n");
        assert!(
            err.starts_with("cannot parse `profiles/cuda.yaml`"),
            "{err}"
        );

        let err = with(|s, t| s.limits = t, "");
        assert!(err.contains("profiles/limits.yaml"), "{err}");

        let unordered: &'static str = Box::leak(
            ProfileSources::EMBEDDED
                .queueing
                .replacen("line: v0.13,", "line: v0.20,", 1)
                .into_boxed_str(),
        );
        let err = with(|s, t| s.queueing = t, unordered);
        assert!(err.contains("profiles/queueing.yaml"), "{err}");
        assert!(err.contains("not in ascending order"), "{err}");

        let bad_driver: &'static str = Box::leak(
            ProfileSources::EMBEDDED
                .gpu_operator
                .replacen("\"595.91.07\"", "\"595..91\"", 1)
                .into_boxed_str(),
        );
        let err = with(|s, t| s.gpu_operator = t, bad_driver);
        assert!(err.contains("invalid driver version `595..91`"), "{err}");

        // Issue 26's shapes: each broken one is refused with the entry named.
        let patched = |text: &str, from: &str, to: &str| -> &'static str {
            assert!(text.contains(from), "{from}");
            Box::leak(text.replacen(from, to, 1).into_boxed_str())
        };
        let op = ProfileSources::EMBEDDED.gpu_operator;
        let err = with(
            |s, t| s.gpu_operator = t,
            patched(op, "  - majors: [\"26.3\"]", "  - majors: [\"26.4\"]"),
        );
        assert!(err.contains("os_support entries cover its major"), "{err}");
        let err = with(
            |s, t| s.gpu_operator = t,
            patched(
                op,
                "unconfirmed_drivers: [\"595.71.05\"",
                "unconfirmed_drivers: [\"580.105.08\"",
            ),
        );
        assert!(
            err.contains("580.105.08 is both validated and unconfirmed"),
            "{err}"
        );
        let err = with(
            |s, t| s.gpu_operator = t,
            patched(
                op,
                "{ id: ubuntu, version: \"24.04\", kernel: \"6.8\", branches: [580, 595] }",
                "{ id: ubuntu, version: \"24.04\", kernel: \"6.8\", branches: [580, 597] }",
            ),
        );
        assert!(err.contains("R597 is not in drivers.yaml"), "{err}");
        let err = with(
            |s, t| s.gpu_operator = t,
            patched(op, "versions: [\"v26.7.1\"]", "versions: [\"v26.7.0\"]"),
        );
        assert!(err.contains("both a release and not_captured"), "{err}");
        let err = with(
            |s, t| s.gpus = t,
            gpus_leaked(
                "weak: [memory_gb, memory_type, gfd_products]",
                "weak: [memroy_gb]",
            ),
        );
        assert!(err.contains("`weak` names `memroy_gb`"), "{err}");
        let err = with(
            |s, t| s.gpus = t,
            gpus_leaked("gfd_products: [\"NVIDIA-L40\"]", "gfd_products: []"),
        );
        assert!(err.contains("GPU `L40` lists no gfd_products"), "{err}");
        let err = with(
            |s, t| s.network = t,
            patched(
                ProfileSources::EMBEDDED.network,
                "min_architecture: Turing",
                "min_architecture: Turning",
            ),
        );
        assert!(err.contains("min_architecture `Turning`"), "{err}");
        let err = with(
            |s, t| s.network = t,
            patched(
                ProfileSources::EMBEDDED.network,
                "min_cuda: \"11.7\"",
                "min_cuda: \"11.9\"",
            ),
        );
        assert!(err.contains("min_cuda `11.9`"), "{err}");
        let err = with(
            |s, t| s.architectures = t,
            patched(
                ProfileSources::EMBEDDED.architectures,
                "compute_major: 13",
                "compute_major: 12",
            ),
        );
        assert!(err.contains("major 12 belongs to both"), "{err}");
    }
    /// `profiles/dcgm.yaml`: the classes the alerts and doctor rely on, and broken tables refused.
    #[test]
    fn dcgm_facts() {
        use dcgm::XidClass;
        let d = catalog().dcgm();
        assert_eq!(d.xid.of_class(XidClass::OffBus), [79]);
        assert!(d.xid.of_class(XidClass::Hardware).contains(&48));
        assert!(d.xid.of_class(XidClass::Application).contains(&13));
        assert!(d.xid.url().starts_with("https://docs.nvidia.com/"));
        assert_eq!(d.clock_events.faults_in(64 | 1), ["hw_thermal"]);
        let broken = |from: &str, to: &str| {
            let text: &'static str = Box::leak(
                ProfileSources::EMBEDDED
                    .dcgm
                    .replacen(from, to, 1)
                    .into_boxed_str(),
            );
            let src = ProfileSources {
                dcgm: text,
                ..ProfileSources::EMBEDDED
            };
            Catalog::from_sources(&src).unwrap_err().to_string()
        };
        let e = broken("{ xid: 31,", "{ xid: 13,");
        assert!(e.contains("xid 13 is listed twice"), "{e}");
        let e = broken("bit: 64,", "bit: 65,");
        assert!(e.contains("not a single bit"), "{e}");
        let e = broken("gpu_temp: DCGM_FI_DEV_GPU_TEMP", "gpu_temp: DCGM-GPU-TEMP");
        assert!(e.contains("not a Prometheus metric name"), "{e}");
        let e = broken("idle_window: 1h", "idle_window: soon");
        assert!(
            e.contains("profiles/dcgm.yaml") && e.contains("idle_window"),
            "{e}"
        );
        let e = broken("pod: [exported_pod, pod]", "pod: []");
        assert!(e.contains("exporter.labels.pod names no label"), "{e}");
    }
}
