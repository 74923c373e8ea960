//! GPU architectures (`profiles/architectures.yaml`): compute capabilities, the driver branches
//! that support them and the kernel-module flavours they can use.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{ComputeCapability, PartialDate, TextList, text_list};
use super::gpu::KernelModuleSupport;
use super::{ARCHITECTURES_FILE, FactRow};
use super::{ProfileError, RowLog, inconsistent, sourced};
use crate::version::{CudaVersion, DriverVersion};

/// One GPU architecture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Architecture {
    /// Architecture name (`Hopper`); filled from the map key of the data file.
    #[serde(skip_deserializing)]
    pub name: String,
    /// Compute capabilities of this architecture's chips.
    pub compute_capabilities: Vec<ComputeCapability>,
    /// A `nvidia.com/gpu.family` value GPU Feature Discovery keeps for this architecture under a
    /// compute-capability major none of its published chips has (GFD maps major 13 to `rubin`,
    /// while Rubin is 10.7 and so labelled `gfd_family`, `blackwell`, today).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gfd_reserved: Option<GfdReserved>,
    /// Whether NVIDIA supports the architecture only as a preview (CUDA "preview support").
    #[serde(default)]
    pub preview: bool,
    /// What NVIDIA has not published about it yet, as short phrases ("products", "driver floor").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpublished: Vec<String>,
    /// Value of GPU Feature Discovery's `nvidia.com/gpu.family` label on this architecture's
    /// GPUs (`ada-lovelace`): GFD derives it from the compute capability.
    pub gfd_family: String,
    /// First CUDA toolkit that targets the architecture.
    pub first_cuda: CudaVersion,
    /// Last CUDA toolkit (a whole major, e.g. `12`, means "through 12.x"); `None` while supported.
    #[serde(default)]
    pub last_cuda: Option<CudaVersion>,
    /// Oldest driver that supports the architecture; a bare branch (`384`) when only the branch
    /// is known. `None` when the reference does not give one.
    #[serde(default)]
    pub min_driver: Option<DriverVersion>,
    /// Newest driver branch that still drives the architecture (`580` for Volta); `None` while
    /// current branches support it.
    #[serde(default)]
    pub last_driver_branch: Option<u32>,
    /// Kernel-module flavours the architecture can use; `None` while unpublished (a GPU of such an
    /// architecture must state its own).
    #[serde(default)]
    pub kernel_modules: Option<KernelModuleSupport>,
    /// Where this row's facts come from, when more specific than the file's sources.
    #[serde(
        default,
        deserialize_with = "text_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub source: Vec<String>,
    /// When this row was last read, if later than the file's date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

/// A GPU Feature Discovery family label mapped from a compute-capability major that no published
/// chip of the architecture has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GfdReserved {
    /// The major GFD maps to `family` (`13`).
    pub compute_major: u32,
    /// The label value (`rubin`).
    pub family: String,
}

impl Architecture {
    /// Whether a driver of `branch` supports this architecture, by its first and last branches.
    pub fn supported_by_branch(&self, branch: u32) -> bool {
        let after_first = self
            .min_driver
            .as_ref()
            .is_none_or(|min| branch >= min.branch());
        let before_last = self.last_driver_branch.is_none_or(|last| branch <= last);
        after_first && before_last
    }
}

/// `profiles/architectures.yaml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ArchitecturesFile {
    pub(super) source: TextList,
    /// When the sources were read (every row without its own date).
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) architectures: BTreeMap<String, Architecture>,
}

pub(super) fn load_architectures(
    file: ArchitecturesFile,
    sources: &mut Vec<(&'static str, String)>,
    rows: &mut Vec<FactRow>,
) -> Result<BTreeMap<String, Architecture>, ProfileError> {
    const F: &str = ARCHITECTURES_FILE;
    sourced(sources, F, None, &file.source.0)?;
    let mut log = RowLog::new(rows, F, &file.source.0, file.read);
    let mut seen_cc = BTreeMap::new();
    let mut seen_reserved: BTreeMap<u32, String> = BTreeMap::new();
    let mut architectures = BTreeMap::new();
    // GFD maps a reserved major to its family whatever the minor, so that major cannot be the
    // major of a chip any architecture lists.
    for (name, a) in &file.architectures {
        let Some(reserved) = &a.gfd_reserved else {
            continue;
        };
        let major = reserved.compute_major;
        if let Some((other, cc)) = file.architectures.iter().find_map(|(o, oa)| {
            oa.compute_capabilities
                .iter()
                .find(|cc| cc.major == major)
                .map(|cc| (o, cc))
        }) {
            return Err(inconsistent(
                F,
                format!(
                    "compute-capability major {major} is reserved by `{name}` for GPU Feature Discovery's `{}`, but `{other}` lists {cc}",
                    reserved.family
                ),
            ));
        }
        if let Some(other) = seen_reserved.insert(major, name.clone()) {
            return Err(inconsistent(
                F,
                format!(
                    "compute-capability major {major} is reserved by both `{other}` and `{name}`"
                ),
            ));
        }
    }
    for (name, mut architecture) in file.architectures {
        if architecture.compute_capabilities.is_empty() {
            return Err(inconsistent(
                F,
                format!("architecture `{name}` lists no compute capability"),
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
