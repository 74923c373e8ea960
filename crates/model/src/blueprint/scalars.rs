//! Scalar field types the blueprint's sections share: counts or percentages, Kubernetes quantities
//! and versions as written (numbers kept as their text, where YAML would change them).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An integer or a string such as `25%`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum IntOrString {
    /// A count.
    Int(i64),
    /// A percentage or other string form.
    String(String),
}

impl std::fmt::Display for IntOrString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntOrString::Int(i) => write!(f, "{i}"),
            IntOrString::String(s) => f.write_str(s),
        }
    }
}

/// A Kubernetes quantity as written (`192`, `"1500"`, `12Ti`); numbers are kept as their text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
#[serde(transparent)]
#[schemars(with = "IntOrString")]
pub struct Quantity(pub String);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            I(i64),
            F(f64),
            S(String),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("expected a quantity such as `8`, `\"1500m\"` or `12Ti`")
        })? {
            Raw::I(i) => Ok(Quantity(i.to_string())),
            Raw::F(f) => Ok(Quantity(f.to_string())),
            Raw::S(s) => Ok(Quantity(s)),
        }
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A version must be written as a string: YAML reads `12.10` as the number 12.1 and `1.30` as 1.3,
/// so accepting numbers would silently change the version. Whole numbers (`550`) are unambiguous.
pub(crate) fn version_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        I(u64),
        F(f64),
        S(String),
    }
    match Raw::deserialize(d)
        .map_err(|_| serde::de::Error::custom("expected a version string such as \"12.4\""))?
    {
        Raw::I(i) => Ok(i.to_string()),
        Raw::S(s) => Ok(s),
        Raw::F(f) => Err(serde::de::Error::custom(format!(
            "version written as the number {f}; quote it (\"{f}\") so YAML keeps every digit"
        ))),
    }
}

pub(crate) fn version_list<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    struct V(#[serde(deserialize_with = "version_text")] String);
    Ok(Vec::<V>::deserialize(d)?.into_iter().map(|v| v.0).collect())
}
