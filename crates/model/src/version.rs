//! Version strings of the four kinds gpuctl compares: NVIDIA driver, CUDA toolkit, Kubernetes and
//! GPU Operator chart. Each is parsed once into an ordered type, so that rules compare versions
//! and never strings.
//!
//! Every type keeps the text it was parsed from for `Display` and serialisation (a user who wrote
//! `v1.34` sees `v1.34` in a message), and orders by its numeric value.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A version string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} version `{input}`: {reason}; expected {expected}")]
pub struct VersionError {
    /// Which kind of version was being parsed (`driver`, `CUDA`, `Kubernetes`, `GPU Operator`).
    pub kind: &'static str,
    /// The text as given.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
    /// The accepted format, with an example.
    pub expected: &'static str,
}

const DRIVER_EXPECTED: &str = "1 to 3 dot-separated numbers, e.g. `580.105.08`, `570.86` or `550`";
const CUDA_EXPECTED: &str = "`<major>[.<minor>[.<patch>]]`, e.g. `12.4`, `13.0` or `12`";
const KUBE_EXPECTED: &str = "`[v]<major>.<minor>[.<patch>]`, e.g. `1.34.2`, `v1.34` or `1.35`";
const OPERATOR_EXPECTED: &str = "`[v]<major>.<minor>[.<patch>]`, e.g. `v26.7.0` or `26.7`";

fn error(
    kind: &'static str,
    input: &str,
    reason: impl Into<String>,
    expected: &'static str,
) -> VersionError {
    VersionError {
        kind,
        input: input.to_owned(),
        reason: reason.into(),
        expected,
    }
}

/// Parses dot-separated unsigned decimal fields, `min..=max` of them. Only ASCII digits are accepted
/// (no signs, spaces or `x` wildcards), and every field must fit in a `u32`.
fn numeric_fields(
    kind: &'static str,
    input: &str,
    expected: &'static str,
    min: usize,
    max: usize,
) -> Result<Vec<u32>, VersionError> {
    if input.is_empty() {
        return Err(error(kind, input, "it is empty", expected));
    }
    let mut fields = Vec::with_capacity(max);
    for field in input.split('.') {
        if field.is_empty() {
            return Err(error(kind, input, "it has an empty field", expected));
        }
        if !field.bytes().all(|b| b.is_ascii_digit()) {
            return Err(error(
                kind,
                input,
                format!("`{field}` is not a number"),
                expected,
            ));
        }
        let value = field
            .parse::<u32>()
            .map_err(|_| error(kind, input, format!("`{field}` is too large"), expected))?;
        fields.push(value);
    }
    if fields.len() < min || fields.len() > max {
        let reason = format!("it has {} fields", fields.len());
        return Err(error(kind, input, reason, expected));
    }
    Ok(fields)
}

/// Serde support shared by all four types: they are written and read as strings. YAML plain
/// scalars arrive as written (`cuda: 12.10` stays `12.10`). Formats that hand over a number anyway
/// get integers accepted and floats refused, because a float cannot tell `12.1` from `12.10`.
macro_rules! string_serde {
    ($ty:ident, $what:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct VersionVisitor;

                impl Visitor<'_> for VersionVisitor {
                    type Value = $ty;

                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str(concat!($what, " version string"))
                    }

                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(E::custom)
                    }

                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_str(&v.to_string())
                    }

                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        self.visit_str(&v.to_string())
                    }

                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        Err(E::custom(format!(
                            concat!(
                                "{} is a number, not a ",
                                $what,
                                " version; quote it (\"{}\") so that e.g. 12.10 is not read as 12.1"
                            ),
                            v, v
                        )))
                    }
                }

                deserializer.deserialize_str(VersionVisitor)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

// ------------------------------------------------------------------------------------------------

/// An NVIDIA driver version such as `580.105.08`, `570.86` or a bare branch `550`.
///
/// Ordering is numeric field by field; a missing field counts as 0, so the bare branch `615` sorts
/// before every `615.x.y` release and can serve as "any R615 driver" in minimum-version tables.
/// Fields are integers: `580.105.08` and `580.105.8` compare (and hash) equal, while `Display`
/// keeps the original text.
#[derive(Debug, Clone)]
pub struct DriverVersion {
    text: String,
    /// Always three fields; missing ones are 0.
    fields: [u32; 3],
}

impl DriverVersion {
    /// The branch (the first field): `580` for `580.105.08`.
    pub fn branch(&self) -> u32 {
        self.fields[0]
    }

    /// The numeric fields, padded with zeros to three.
    pub fn fields(&self) -> [u32; 3] {
        self.fields
    }

    /// The text this version was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for DriverVersion {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parsed = numeric_fields("driver", s, DRIVER_EXPECTED, 1, 3)?;
        let mut fields = [0; 3];
        fields[..parsed.len()].copy_from_slice(&parsed);
        Ok(Self {
            text: s.to_owned(),
            fields,
        })
    }
}

impl PartialEq for DriverVersion {
    fn eq(&self, other: &Self) -> bool {
        self.fields == other.fields
    }
}

impl Eq for DriverVersion {}

impl Hash for DriverVersion {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.fields.hash(state);
    }
}

impl PartialOrd for DriverVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DriverVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.fields.cmp(&other.fields)
    }
}

string_serde!(DriverVersion, "driver");

// ------------------------------------------------------------------------------------------------

/// A CUDA toolkit version: `12.4`, `13.0`, a whole major `12`, or a full `12.4.1`.
///
/// A version without a minor (`12`) means "some 12.x" and is distinct from `12.0`; it sorts before
/// `12.0`. Ordering is (major, minor, patch) with an absent part sorting first.
#[derive(Debug, Clone)]
pub struct CudaVersion {
    text: String,
    major: u32,
    minor: Option<u32>,
    patch: Option<u32>,
}

impl CudaVersion {
    /// The major version: `12` for `12.4`.
    pub fn major(&self) -> u32 {
        self.major
    }

    /// The minor version, `None` for a major-only version such as `12`.
    pub fn minor(&self) -> Option<u32> {
        self.minor
    }

    /// The patch level, present only when written (`12.4.1`).
    pub fn patch(&self) -> Option<u32> {
        self.patch
    }

    /// This version without its patch level (`12.4.1` -> `12.4`): CUDA driver requirements are
    /// published per minor release.
    pub fn without_patch(&self) -> CudaVersion {
        match self.minor {
            Some(minor) if self.patch.is_some() => CudaVersion {
                text: format!("{}.{minor}", self.major),
                major: self.major,
                minor: Some(minor),
                patch: None,
            },
            _ => self.clone(),
        }
    }

    /// The whole major (`12.4` -> `12`).
    pub fn major_only(&self) -> CudaVersion {
        CudaVersion {
            text: self.major.to_string(),
            major: self.major,
            minor: None,
            patch: None,
        }
    }

    /// The text this version was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn key(&self) -> (u32, Option<u32>, Option<u32>) {
        (self.major, self.minor, self.patch)
    }
}

impl FromStr for CudaVersion {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fields = numeric_fields("CUDA", s, CUDA_EXPECTED, 1, 3)?;
        Ok(Self {
            text: s.to_owned(),
            major: fields[0],
            minor: fields.get(1).copied(),
            patch: fields.get(2).copied(),
        })
    }
}

impl PartialEq for CudaVersion {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for CudaVersion {}

impl Hash for CudaVersion {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialOrd for CudaVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CudaVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

string_serde!(CudaVersion, "CUDA");

// ------------------------------------------------------------------------------------------------

/// Parses `[v]<major>.<minor>[.<patch>][-pre][+build]` into semver, filling a missing patch with 0.
fn semver_ish(
    kind: &'static str,
    input: &str,
    expected: &'static str,
) -> Result<semver::Version, VersionError> {
    let bare = input
        .strip_prefix('v')
        .or_else(|| input.strip_prefix('V'))
        .unwrap_or(input);
    if bare.is_empty() {
        return Err(error(kind, input, "it is empty", expected));
    }
    // The numeric core ends where a pre-release or build suffix starts.
    let core_end = bare.find(['-', '+']).unwrap_or(bare.len());
    let (core, suffix) = bare.split_at(core_end);
    let fields = numeric_fields(kind, core, expected, 2, 3).map_err(|mut e| {
        // Report the whole input, not just its numeric core.
        e.input = input.to_owned();
        e
    })?;
    // numeric_fields returned 2 or 3 fields; a missing patch is 0.
    let field = |i: usize| fields.get(i).copied().unwrap_or(0);
    let normalised = format!("{}.{}.{}{suffix}", field(0), field(1), field(2));
    semver::Version::parse(&normalised).map_err(|e| error(kind, input, e.to_string(), expected))
}

macro_rules! semver_type {
    ($(#[$doc:meta])* $ty:ident, $kind:literal, $expected:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $ty {
            text: String,
            semver: semver::Version,
        }

        impl $ty {
            /// The normalised semver value (a missing patch is 0, a leading `v` is dropped).
            pub fn semver(&self) -> &semver::Version {
                &self.semver
            }

            /// The major version.
            pub fn major(&self) -> u64 {
                self.semver.major
            }

            /// The minor version.
            pub fn minor(&self) -> u64 {
                self.semver.minor
            }

            /// The patch level (0 when it was not written).
            pub fn patch(&self) -> u64 {
                self.semver.patch
            }

            /// `(major, minor)`, the granularity support ranges are published at.
            pub fn minor_version(&self) -> (u64, u64) {
                (self.semver.major, self.semver.minor)
            }

            /// The text this version was parsed from.
            pub fn as_str(&self) -> &str {
                &self.text
            }
        }

        impl FromStr for $ty {
            type Err = VersionError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok(Self {
                    text: s.to_owned(),
                    semver: semver_ish($kind, s, $expected)?,
                })
            }
        }

        impl PartialEq for $ty {
            fn eq(&self, other: &Self) -> bool {
                self.semver == other.semver
            }
        }

        impl Eq for $ty {}

        impl Hash for $ty {
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.semver.hash(state);
            }
        }

        impl PartialOrd for $ty {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $ty {
            fn cmp(&self, other: &Self) -> Ordering {
                self.semver.cmp(&other.semver)
            }
        }

        string_serde!($ty, $kind);
    };
}

semver_type!(
    /// A Kubernetes version: `1.34.2`, `v1.34` or `1.35`, normalised to semver (`1.34` -> `1.34.0`).
    /// Distribution suffixes such as `v1.30.4+k3s1` are accepted and kept as semver build metadata.
    KubeVersion,
    "Kubernetes",
    KUBE_EXPECTED
);

semver_type!(
    /// A GPU Operator chart version: `v26.7.0`, `26.7` or `v25.10.1`, normalised to semver.
    OperatorVersion,
    "GPU Operator",
    OPERATOR_EXPECTED
);

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(s: &str) -> DriverVersion {
        s.parse().unwrap()
    }

    fn cuda(s: &str) -> CudaVersion {
        s.parse().unwrap()
    }

    #[test]
    fn driver_versions_parse_and_order_numerically() {
        let v = driver("580.105.08");
        assert_eq!(v.branch(), 580);
        assert_eq!(v.fields(), [580, 105, 8]);
        assert_eq!(v.to_string(), "580.105.08");
        assert_eq!(driver("570.86").fields(), [570, 86, 0]);
        assert_eq!(driver("550").branch(), 550);

        // Numeric, not lexicographic: 580.95 < 580.105.
        assert!(driver("580.95.05") < driver("580.105.08"));
        assert!(driver("570.86.15") < driver("570.124.06"));
        assert!(driver("535.309.01") < driver("580.65.06"));
        // A bare branch is the floor of that branch.
        assert!(driver("615") < driver("615.10.02"));
        assert!(driver("614.99.99") < driver("615"));
        // Leading zeros are only digits.
        assert_eq!(driver("580.105.08"), driver("580.105.8"));
        assert_eq!(driver("570.86"), driver("570.86.0"));
    }

    #[test]
    fn driver_versions_reject_bad_input() {
        for bad in [
            "",
            "abc",
            "1..2",
            ".1",
            "1.",
            "12.x",
            "580.105.08.1",
            "-1",
            "+580",
            " 580",
            "580 ",
            "５８０",
            "99999999999",
            "580.99999999999999999999",
        ] {
            let err = bad.parse::<DriverVersion>().unwrap_err();
            assert_eq!(err.kind, "driver");
            assert_eq!(err.input, bad);
            let message = err.to_string();
            assert!(message.contains("invalid driver version"), "{message}");
            assert!(message.contains("expected"), "{message}");
        }
        let err = "99999999999".parse::<DriverVersion>().unwrap_err();
        assert_eq!(err.reason, "`99999999999` is too large");
        assert_eq!(
            "".parse::<DriverVersion>().unwrap_err().to_string(),
            "invalid driver version ``: it is empty; expected 1 to 3 dot-separated numbers, \
             e.g. `580.105.08`, `570.86` or `550`"
        );
    }

    #[test]
    fn cuda_versions_parse_and_order() {
        let v = cuda("12.4");
        assert_eq!((v.major(), v.minor(), v.patch()), (12, Some(4), None));
        assert_eq!(cuda("12").minor(), None);
        assert!(cuda("12") < cuda("12.0"));
        assert!(cuda("12.9") < cuda("12.10"));
        assert!(cuda("12.10") < cuda("13.0"));
        assert_ne!(cuda("12"), cuda("12.0"));
        assert_eq!(cuda("12.4.1").without_patch(), cuda("12.4"));
        assert_eq!(cuda("12.4.1").without_patch().to_string(), "12.4");
        assert_eq!(cuda("12.4").major_only().to_string(), "12");
        assert_eq!(cuda("13.0").to_string(), "13.0");
    }

    #[test]
    fn cuda_versions_reject_bad_input() {
        for bad in [
            "",
            "abc",
            "1..2",
            "12.x",
            "12.4.1.0",
            "v12.4",
            "12.",
            "4294967296",
        ] {
            let err = bad.parse::<CudaVersion>().unwrap_err();
            assert_eq!(err.kind, "CUDA");
            assert!(err.to_string().starts_with("invalid CUDA version"), "{err}");
        }
    }

    #[test]
    fn kube_versions_normalise_to_semver() {
        let v: KubeVersion = "1.34.2".parse().unwrap();
        assert_eq!(v.minor(), 34);
        assert_eq!(v.semver(), &semver::Version::new(1, 34, 2));
        let short: KubeVersion = "v1.34".parse().unwrap();
        assert_eq!(short.semver(), &semver::Version::new(1, 34, 0));
        assert_eq!(short.to_string(), "v1.34");
        assert_eq!(short, "1.34.0".parse::<KubeVersion>().unwrap());
        assert!(short < v);
        assert_eq!(
            "1.35".parse::<KubeVersion>().unwrap().minor_version(),
            (1, 35)
        );
        let k3s: KubeVersion = "v1.30.4+k3s1".parse().unwrap();
        assert_eq!(k3s.minor_version(), (1, 30));
    }

    #[test]
    fn kube_versions_reject_bad_input() {
        for bad in [
            "",
            "v",
            "abc",
            "1",
            "1..2",
            "1.x",
            "1.34.2.1",
            "1.99999999999999999999",
            "v1.34-",
        ] {
            let err = bad.parse::<KubeVersion>().unwrap_err();
            assert_eq!(err.kind, "Kubernetes");
            assert_eq!(err.input, bad);
        }
    }

    #[test]
    fn operator_versions_normalise_to_semver() {
        let v: OperatorVersion = "v26.7.0".parse().unwrap();
        assert_eq!(v, "26.7".parse::<OperatorVersion>().unwrap());
        assert!("v25.10.1".parse::<OperatorVersion>().unwrap() < v);
        assert!("v25.3.4".parse::<OperatorVersion>().unwrap() < "v25.10.0".parse().unwrap());
        for bad in ["", "26", "latest", "v26.x", "26..7"] {
            assert!(bad.parse::<OperatorVersion>().is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_round_trip_through_serde_as_strings() {
        let d: DriverVersion = serde_json::from_str("\"580.105.08\"").unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"580.105.08\"");
        // YAML plain scalars reach the parser as written: `12.10` stays 12.10, `550` stays 550.
        let c: Vec<CudaVersion> = serde_saphyr::from_str("[12.10, \"13.0\", 12]\n").unwrap();
        assert_eq!(
            c.iter().map(CudaVersion::as_str).collect::<Vec<_>>(),
            ["12.10", "13.0", "12"]
        );
        assert_eq!(c[0].minor(), Some(10));
        let d: DriverVersion = serde_saphyr::from_str("550\n").unwrap();
        assert_eq!(d.branch(), 550);
        let k: KubeVersion = serde_saphyr::from_str("1.30\n").unwrap();
        assert_eq!(k.minor(), 30);
        let k: KubeVersion = serde_saphyr::from_str("v1.34\n").unwrap();
        assert_eq!(k.minor(), 34);
        let o: OperatorVersion = serde_saphyr::from_str("\"v26.7.0\"\n").unwrap();
        assert_eq!(o.to_string(), "v26.7.0");
        assert!(serde_json::from_str::<DriverVersion>("\"1..2\"").is_err());
        assert!(serde_json::from_str::<DriverVersion>("-1").is_err());
    }
}
