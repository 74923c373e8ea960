//! Small value types shared by the profile tables: text lists (`source:` / `note:`), partial
//! calendar dates and CUDA compute capabilities.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A `source:` or `note:` value, which a data file may write as one string or as a list of strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TextList(pub(crate) Vec<String>);

impl<'de> Deserialize<'de> for TextList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextListVisitor;

        impl<'de> Visitor<'de> for TextListVisitor {
            type Value = TextList;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a list of strings")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<TextList, E> {
                Ok(TextList(vec![v.trim().to_owned()]))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TextList, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    items.push(item.trim().to_owned());
                }
                Ok(TextList(items))
            }
        }

        deserializer.deserialize_any(TextListVisitor)
    }
}

/// Deserialises a `Vec<String>` field that the data file may write as one string or a list.
pub(crate) fn text_list<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    TextList::deserialize(deserializer).map(|list| list.0)
}

/// A date known to a year, a month or a day (`2021`, `2025-08`, `2025-08-04`), as release dates and
/// end-of-life months are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartialDate {
    year: i16,
    month: Option<i8>,
    day: Option<i8>,
}

impl PartialDate {
    /// The year.
    pub fn year(&self) -> i16 {
        self.year
    }

    /// The month (1-12), when known.
    pub fn month(&self) -> Option<i8> {
        self.month
    }

    /// The day of the month, when known.
    pub fn day(&self) -> Option<i8> {
        self.day
    }

    /// The earliest day this date can mean.
    pub fn first_day(&self) -> jiff::civil::Date {
        let date =
            jiff::civil::Date::new(self.year, self.month.unwrap_or(1), self.day.unwrap_or(1));
        // Parsing validated every field, so the fallback is never taken.
        date.unwrap_or(jiff::civil::Date::MIN)
    }

    /// The latest day this date can mean (the end of the month or year when the day is unknown).
    pub fn last_day(&self) -> jiff::civil::Date {
        let first = self.first_day();
        match (self.month, self.day) {
            (_, Some(_)) => first,
            (Some(_), None) => first.last_of_month(),
            (None, None) => first.last_of_year(),
        }
    }
}

impl FromStr for PartialDate {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("invalid date `{s}`: expected `YYYY`, `YYYY-MM` or `YYYY-MM-DD`");
        let mut parts = s.split('-');
        let mut next = |len: usize| -> Result<Option<i16>, String> {
            match parts.next() {
                None => Ok(None),
                Some(p) if p.len() == len && p.bytes().all(|b| b.is_ascii_digit()) => {
                    p.parse().map(Some).map_err(|_| bad())
                }
                Some(_) => Err(bad()),
            }
        };
        let year = next(4)?.ok_or_else(bad)?;
        let month = next(2)?.map(|m| m as i8);
        let day = next(2)?.map(|d| d as i8);
        if parts.next().is_some() {
            return Err(bad());
        }
        if day.is_some() && month.is_none() {
            return Err(bad());
        }
        // jiff checks the ranges (month 1-12, day within the month).
        jiff::civil::Date::new(year, month.unwrap_or(1), day.unwrap_or(1)).map_err(|_| bad())?;
        Ok(Self { year, month, day })
    }
}

impl fmt::Display for PartialDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}", self.year)?;
        if let Some(month) = self.month {
            write!(f, "-{month:02}")?;
        }
        if let Some(day) = self.day {
            write!(f, "-{day:02}")?;
        }
        Ok(())
    }
}

/// One row of a fact table and its provenance: where its facts come from and when that was read.
/// `gpuctl profiles --stale-after DAYS` lists the rows read longer ago than that, so the next audit
/// starts from a list; a test refuses a row without either.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FactRow {
    /// The table (`profiles/gpu-operator.yaml`).
    pub file: &'static str,
    /// The row inside it (`releases.v25.10.1`, `gpus.L40`).
    pub row: String,
    /// Its sources: the row's own, else the table's.
    pub sources: Vec<String>,
    /// When they were read: the row's own date, else the table's.
    pub read: Option<PartialDate>,
}

impl FactRow {
    /// Whole days from the earliest day `read` can mean to `today` (a month-precision date counts
    /// from its first day, so it is never reported younger than it may be); `None` when undated.
    pub fn age_days(&self, today: jiff::civil::Date) -> Option<i64> {
        let read = self.read?.first_day();
        today
            .since((jiff::Unit::Day, read))
            .ok()
            .map(|span| i64::from(span.get_days()))
    }

    /// Whether the row is undated or was read more than `days` days before `today`.
    pub fn is_stale(&self, today: jiff::civil::Date, days: u32) -> bool {
        self.age_days(today).is_none_or(|age| age > i64::from(days))
    }
}

/// `major.minor` of a kernel release such as `5.15.0-1055-aws` (or of a version such as `22.04`,
/// `4.18`); `None` if it does not start so.
pub fn kernel_major_minor(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// A CUDA compute capability such as `8.0` or `12.0` (`sm_80`, `sm_120`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    /// The major number (`8` for `8.6`); it is what GPU Feature Discovery publishes as
    /// `nvidia.com/gpu.compute.major`.
    pub major: u32,
    /// The minor number (`6` for `8.6`).
    pub minor: u32,
}

impl FromStr for ComputeCapability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad =
            || format!("invalid compute capability `{s}`: expected `<major>.<minor>`, e.g. `8.0`");
        let (major, minor) = s.split_once('.').ok_or_else(bad)?;
        let number = |p: &str| -> Result<u32, String> {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            p.parse().map_err(|_| bad())
        };
        Ok(Self {
            major: number(major)?,
            minor: number(minor)?,
        })
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Implements string serde for a `FromStr<Err = String>` + `Display` type.
macro_rules! string_serde {
    ($ty:ty, $what:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct StrVisitor;

                impl Visitor<'_> for StrVisitor {
                    type Value = $ty;

                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }

                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(E::custom)
                    }

                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_str(&v.to_string())
                    }
                }

                deserializer.deserialize_str(StrVisitor)
            }
        }
    };
}

string_serde!(
    PartialDate,
    "a date string `YYYY`, `YYYY-MM` or `YYYY-MM-DD`"
);
string_serde!(
    ComputeCapability,
    "a compute capability string such as `8.0`"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_dates_parse_and_bound() {
        let month: PartialDate = "2028-06".parse().unwrap();
        assert_eq!(month.to_string(), "2028-06");
        assert_eq!(month.first_day(), jiff::civil::date(2028, 6, 1));
        assert_eq!(month.last_day(), jiff::civil::date(2028, 6, 30));
        let year: PartialDate = "2021".parse().unwrap();
        assert_eq!(year.last_day(), jiff::civil::date(2021, 12, 31));
        let day: PartialDate = "2025-08-04".parse().unwrap();
        assert_eq!(day.last_day(), jiff::civil::date(2025, 8, 4));
        for bad in [
            "",
            "2025-13",
            "2025-02-30",
            "25-01",
            "2025-1",
            "2025-01-01-01",
            "abcd",
            "2025--01",
        ] {
            assert!(bad.parse::<PartialDate>().is_err(), "{bad}");
        }
    }

    #[test]
    fn compute_capabilities_parse() {
        let cc: ComputeCapability = "12.0".parse().unwrap();
        assert_eq!((cc.major, cc.minor), (12, 0));
        assert!("8.6".parse::<ComputeCapability>().unwrap() < cc);
        for bad in ["", "8", "8.", ".0", "8.x", "8.0.1", "99999999999.0"] {
            assert!(bad.parse::<ComputeCapability>().is_err(), "{bad}");
        }
    }

    #[test]
    fn text_lists_accept_a_string_or_a_list() {
        let one: TextList = serde_saphyr::from_str("\"a\"\n").unwrap();
        assert_eq!(one.0, vec!["a"]);
        let many: TextList = serde_saphyr::from_str("- a\n- b\n").unwrap();
        assert_eq!(many.0, vec!["a", "b"]);
    }
}
