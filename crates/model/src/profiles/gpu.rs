//! The GPU catalog (`profiles/gpus.yaml`): one [`GpuModel`] per key a blueprint may name in
//! `nodePools[].gpu.model`.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::common::{ComputeCapability, PartialDate, TextList, text_list};
use super::mig::MigProfile;
use super::{Architecture, FactRow, GPUS_FILE, MigSupport};
use super::{ProfileError, RowLog, inconsistent, push_sources, require_source, sourced};
use crate::version::{DriverVersion, OperatorVersion};

/// A GPU model of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuModel {
    /// Catalog key, as blueprints write it (`H100-SXM5-80GB`).
    pub key: String,
    /// The NVML product name (`NVIDIA H100 80GB HBM3`).
    pub display_name: String,
    /// Architecture name, a key of `profiles/architectures.yaml` (`Hopper`).
    pub architecture: String,
    /// CUDA compute capability (`9.0`).
    pub compute_capability: ComputeCapability,
    /// GPU memory in GB as NVIDIA lists it; `None` when no source read for the catalog gives it.
    pub memory_gb: Option<u32>,
    /// Memory technology (`HBM3`, `GDDR6`), when known.
    pub memory_type: Option<String>,
    /// Physical form factor.
    pub form_factor: FormFactor,
    /// GPU-to-GPU NVLink on this form factor, as NVIDIA describes it; `None` when there is none.
    pub nvlink: Option<String>,
    /// Data center or consumer product.
    pub segment: Segment,
    /// Values GPU Feature Discovery publishes as `nvidia.com/gpu.product` for this model; empty
    /// when none is known (nodes of it cannot be recognised by their label).
    pub gfd_products: Vec<String>,
    /// Minimum driver: the SKU's own minimum when the catalog has one, else its architecture's.
    /// `None` when neither is known.
    pub min_driver: Option<DriverVersion>,
    /// Kernel-module flavours this GPU can run: the SKU's own when the catalog has one (GH200),
    /// else its architecture's.
    pub kernel_modules: KernelModuleSupport,
    /// Whether CUDA forward compatibility (`cuda-compat`) works on this GPU; `None` when the
    /// reference does not establish it.
    pub cuda_forward_compat: Option<bool>,
    /// MIG support; `None` for GPUs without MIG.
    pub mig: Option<super::MigSupport>,
    /// The first GPU Operator release that supports this GPU, when it is newer than the oldest
    /// release of the catalog; `None`: every release of the catalog supports it.
    pub operator_since: Option<OperatorVersion>,
    /// Where `operator_since` (and `mig.operator_since`) come from.
    pub operator_since_source: Option<String>,
    /// The row's own sources, when it has more specific ones than the file's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// Facts of this row that rest on third-party or inferred evidence (field names:
    /// `memory_gb`, `gfd_products`, ...); its notes say which source.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub weak: Vec<String>,
    /// Caveats from the data file.
    pub notes: Vec<String>,
}

/// The fields of a GPU row a `weak:` list may name.
pub(super) const WEAK_FIELDS: &[&str] = &[
    "display_name",
    "compute_capability",
    "memory_gb",
    "memory_type",
    "gfd_products",
    "min_driver",
    "mig",
    "operator_since",
];

/// Physical form factor of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FormFactor {
    /// SXM2 module (V100).
    Sxm2,
    /// SXM4 module (A100).
    Sxm4,
    /// SXM5 module (H100, H200).
    Sxm5,
    /// SXM6 module (B300).
    Sxm6,
    /// SXM module whose generation the reference does not name (H20, B200).
    Sxm,
    /// PCIe card.
    Pcie,
    /// Grace superchip module (GH200, GB200).
    Superchip,
}

impl FormFactor {
    /// Whether this is an SXM module of any generation.
    pub fn is_sxm(self) -> bool {
        matches!(
            self,
            Self::Sxm2 | Self::Sxm4 | Self::Sxm5 | Self::Sxm6 | Self::Sxm
        )
    }
}

/// Market segment of a GPU, which decides which NVIDIA software supports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Segment {
    /// Data center product: supported by the data center driver and the GPU Operator.
    Datacenter,
    /// Consumer (GeForce) card: outside the GPU Operator's supported hardware, no CUDA forward
    /// compatibility.
    Consumer,
}

/// Which NVIDIA kernel-module flavours can drive a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelModuleSupport {
    /// The open kernel modules (need GSP, so Turing and newer).
    pub open: bool,
    /// The proprietary kernel modules (not supported on Blackwell and Grace Hopper).
    pub proprietary: bool,
}

/// `profiles/gpus.yaml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GpusFile {
    pub(super) source: TextList,
    /// When the sources were read (every row without its own date).
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) mig_profile_sets: BTreeMap<String, MigProfileSetFile>,
    pub(super) gpus: BTreeMap<String, GpuFile>,
}

/// A shared MIG profile table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MigProfileSetFile {
    pub(super) source: TextList,
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) compute_slices: u32,
    pub(super) memory_slices: u32,
    pub(super) max_instances: u32,
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub(super) notes: Vec<String>,
    pub(super) profiles: Vec<MigProfile>,
}

/// One GPU entry as written; resolved against its architecture and profile set at load time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GpuFile {
    pub(super) display_name: String,
    pub(super) architecture: String,
    pub(super) compute_capability: ComputeCapability,
    #[serde(default)]
    pub(super) memory_gb: Option<u32>,
    #[serde(default)]
    pub(super) memory_type: Option<String>,
    pub(super) form_factor: FormFactor,
    #[serde(default)]
    pub(super) nvlink: Option<String>,
    pub(super) segment: Segment,
    pub(super) gfd_products: Vec<String>,
    #[serde(default)]
    pub(super) min_driver: Option<DriverVersion>,
    #[serde(default)]
    pub(super) kernel_modules: Option<KernelModuleSupport>,
    #[serde(default)]
    pub(super) cuda_forward_compat: Option<bool>,
    #[serde(default)]
    pub(super) mig: Option<MigRefFile>,
    #[serde(default)]
    pub(super) operator_since: Option<OperatorSinceFile>,
    #[serde(default)]
    pub(super) source: TextList,
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    #[serde(default)]
    pub(super) weak: Vec<String>,
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub(super) notes: Vec<String>,
}

/// The first GPU Operator releases that support a GPU and MIG on it, with their source.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OperatorSinceFile {
    /// First release that supports the GPU (absent: every release of the catalog).
    #[serde(default)]
    pub(super) gpu: Option<OperatorVersion>,
    /// First release whose MIG Manager supports MIG on it (absent: the same as `gpu`).
    #[serde(default)]
    pub(super) mig: Option<OperatorVersion>,
    pub(super) source: String,
}

/// A GPU's MIG entry: its driver floor and the profile table it uses.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MigRefFile {
    pub(super) profile_set: String,
    pub(super) min_driver: DriverVersion,
}

pub(super) type GpuTables = (BTreeMap<String, GpuModel>, BTreeMap<String, String>);

pub(super) fn load_gpus(
    file: GpusFile,
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
        check_gpu_entry(&key, &entry, architecture)?;
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
        register_products(&key, &entry.gfd_products, &mut products)?;
        let mig = mig_support(&key, &entry, &file.mig_profile_sets, &mut used_sets)?;
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

/// Checks a GPU entry against its architecture and itself: the architecture lists its compute
/// capability, an unknown product label and weak facts are explained.
fn check_gpu_entry(
    key: &str,
    entry: &GpuFile,
    architecture: &Architecture,
) -> Result<(), ProfileError> {
    const F: &str = GPUS_FILE;
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
        .find(|w| !WEAK_FIELDS.contains(&w.as_str()))
    {
        return Err(inconsistent(
            F,
            format!(
                "GPU `{key}`: `weak` names `{bad}`, not one of {}",
                WEAK_FIELDS.join(", ")
            ),
        ));
    }
    if !entry.weak.is_empty() && entry.notes.is_empty() {
        return Err(inconsistent(
            F,
            format!("GPU `{key}` marks weak facts but has no note saying why"),
        ));
    }
    Ok(())
}

/// Records which GPU each `nvidia.com/gpu.product` value names: a value is a valid label value
/// and names one GPU only.
fn register_products(
    key: &str,
    gfd_products: &[String],
    products: &mut BTreeMap<String, String>,
) -> Result<(), ProfileError> {
    const F: &str = GPUS_FILE;
    for product in gfd_products {
        // GFD replaces spaces, and a label value cannot hold them.
        if product.is_empty() || product.contains(char::is_whitespace) {
            return Err(inconsistent(
                F,
                format!("GPU `{key}` has an invalid gfd_products value `{product}`"),
            ));
        }
        if let Some(other) = products.insert(product.clone(), key.to_string()) {
            return Err(inconsistent(
                F,
                format!("gfd_products value `{product}` is listed by `{other}` and `{key}`"),
            ));
        }
    }
    Ok(())
}

/// A GPU's MIG support from the profile set it names (recorded in `used_sets`); MIG needs compute
/// capability 8.0 or newer.
fn mig_support(
    key: &str,
    entry: &GpuFile,
    sets: &BTreeMap<String, MigProfileSetFile>,
    used_sets: &mut BTreeSet<String>,
) -> Result<Option<MigSupport>, ProfileError> {
    let Some(reference) = &entry.mig else {
        return Ok(None);
    };
    // MIG needs compute capability 8.0 or newer (MIG user guide, Supported GPUs).
    if entry.compute_capability.major < 8 {
        return Err(inconsistent(
            GPUS_FILE,
            format!(
                "GPU `{key}` has MIG but compute capability {}",
                entry.compute_capability
            ),
        ));
    }
    let set = sets.get(&reference.profile_set).ok_or_else(|| {
        inconsistent(
            GPUS_FILE,
            format!(
                "GPU `{key}` names unknown MIG profile set `{}`",
                reference.profile_set
            ),
        )
    })?;
    used_sets.insert(reference.profile_set.clone());
    Ok(Some(MigSupport {
        min_driver: reference.min_driver.clone(),
        operator_since: entry.operator_since.as_ref().and_then(|o| o.mig.clone()),
        compute_slices: set.compute_slices,
        memory_slices: set.memory_slices,
        max_instances: set.max_instances,
        profile_set: reference.profile_set.clone(),
        profiles: set.profiles.clone(),
        notes: set.notes.clone(),
        sources: set.source.0.clone(),
    }))
}

/// Checks one MIG profile table: every profile fits the GPU's axes, names match their compute
/// slices and media-extension flag, and the set's instance maximum agrees with its profiles.
fn check_profile_set(name: &str, set: &MigProfileSetFile) -> Result<(), ProfileError> {
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
