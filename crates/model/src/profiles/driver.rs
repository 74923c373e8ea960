//! Data center driver branches (`profiles/drivers.yaml`): type, first release, end of life, and
//! which kernel-module flavours each branch ships.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::common::{PartialDate, TextList, text_list};
use super::{DRIVERS_FILE, FactRow};
use super::{ProfileError, RowLog, inconsistent, sourced};
use crate::version::{CudaVersion, DriverVersion};

/// One driver branch, e.g. R580.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverBranch {
    /// Branch number (`580`): the first field of its driver versions.
    pub branch: u32,
    /// Long-term support, production or new-feature branch.
    #[serde(rename = "type")]
    pub branch_type: BranchType,
    /// First data center release of the branch, when the reference names it.
    #[serde(default)]
    pub first_release: Option<DriverVersion>,
    /// When the branch was first released (year, month or day precision).
    #[serde(default)]
    pub first_release_date: Option<PartialDate>,
    /// End of life as NVIDIA publishes it.
    pub end_of_life: EndOfLife,
    /// CUDA version the branch ships natively (its toolkit's version).
    #[serde(default)]
    pub native_cuda: Option<CudaVersion>,
    /// When this row was last read, if later than the file's date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<PartialDate>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl DriverBranch {
    /// Whether the branch is past its end of life on `today`. A published month counts as
    /// supported through its last day. `None` when no date is published (new-feature branches).
    pub fn is_end_of_life(&self, today: jiff::civil::Date) -> Option<bool> {
        match &self.end_of_life {
            EndOfLife::Month(month) => Some(today > month.last_day()),
            EndOfLife::Reached => Some(true),
            EndOfLife::Unpublished => None,
        }
    }
}

/// NVIDIA's driver branch types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BranchType {
    /// Long Term Support Branch: maintained about three years.
    Lts,
    /// Production Branch: bug and security fixes for up to a year.
    Production,
    /// New Feature Branch: earliest features, short-lived, no published end of life.
    NewFeature,
    /// Evaluation / developer branch (R455).
    Developer,
}

impl fmt::Display for BranchType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Lts => "long-term support",
            Self::Production => "production",
            Self::NewFeature => "new-feature",
            Self::Developer => "developer",
        })
    }
}

/// End of life of a driver branch. Written in the data file as `"YYYY-MM"`, `reached` or
/// `unpublished`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndOfLife {
    /// The published end-of-life date (usually a month).
    Month(PartialDate),
    /// NVIDIA lists the branch as end of life without a date.
    Reached,
    /// No end-of-life date is published.
    Unpublished,
}

impl FromStr for EndOfLife {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "reached" => Ok(Self::Reached),
            "unpublished" => Ok(Self::Unpublished),
            date => date
                .parse()
                .map(Self::Month)
                .map_err(|e| format!("{e}, `reached` or `unpublished`")),
        }
    }
}

impl fmt::Display for EndOfLife {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Month(date) => date.fmt(f),
            Self::Reached => f.write_str("reached"),
            Self::Unpublished => f.write_str("unpublished"),
        }
    }
}

impl Serialize for EndOfLife {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EndOfLife {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Which kernel-module flavours driver branches ship, independent of the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelModuleFlavors {
    /// Where these facts come from.
    #[serde(deserialize_with = "text_list")]
    pub source: Vec<String>,
    /// First branch that ships the open kernel modules (R515).
    pub open_available_from_branch: u32,
    /// First branch whose installers default to the open modules (R560).
    pub open_default_from_branch: u32,
    /// First branch without proprietary modules (R620); `None` if they still ship.
    #[serde(default)]
    pub proprietary_removed_from_branch: Option<u32>,
    /// Caveats from the data file.
    #[serde(default, rename = "note", deserialize_with = "text_list")]
    pub notes: Vec<String>,
}

impl KernelModuleFlavors {
    /// Whether drivers of `branch` ship the open modules.
    pub fn open_available(&self, branch: u32) -> bool {
        branch >= self.open_available_from_branch
    }

    /// Whether drivers of `branch` ship the proprietary modules.
    pub fn proprietary_available(&self, branch: u32) -> bool {
        self.proprietary_removed_from_branch
            .is_none_or(|removed| branch < removed)
    }
}

/// `profiles/drivers.yaml` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DriversFile {
    pub(super) source: TextList,
    /// When the sources were read (every row without its own date).
    #[serde(default)]
    pub(super) read: Option<PartialDate>,
    pub(super) kernel_modules: KernelModuleFlavors,
    pub(super) branches: Vec<DriverBranch>,
}

pub(super) type DriverTables = (BTreeMap<u32, DriverBranch>, KernelModuleFlavors);

pub(super) fn load_drivers(
    file: DriversFile,
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
