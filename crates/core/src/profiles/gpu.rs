//! The GPU catalog (`profiles/gpus.yaml`): one [`GpuModel`] per key a blueprint may name in
//! `nodePools[].gpu.model`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{ComputeCapability, PartialDate, TextList, text_list};
use super::mig::MigProfile;
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
