//! Blueprint mutations: on the parsed tree (re-emitted as YAML) and on the text itself.

use serde_json::{Map, Value, json};

use super::Rng;
use super::emit::{self, RAW, Seg, all_paths, get, get_mut, show_path};

/// A seed blueprint from `blueprints/`.
pub struct Seed {
    /// File name.
    pub name: String,
    /// Its text.
    pub text: String,
    /// Its tree (as gpuctl's loader reads it).
    pub tree: Value,
}

/// One generated input.
pub struct Input {
    /// The seed blueprint it came from.
    pub seed: String,
    /// What was done to it, in order.
    pub mutations: Vec<String>,
    /// The bytes fed to the loader (not always UTF-8).
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mutation {
    // On the tree.
    TypeSwap,
    Delete,
    DuplicateItem,
    HugeNumber,
    NegativeQuantity,
    LongString,
    HostileName,
    HostileKey,
    DeepNesting,
    ManyItems,
    AliasFanout,
    UnknownKey,
    NumberTweak,
    CrossValue,
    Graft,
    TaggedValue,
    // On the text.
    Bom,
    UnicodePrefix,
    ControlChar,
    Tag,
    Directive,
    Anchors,
    ExplicitKey,
    MultiDoc,
    Truncate,
    ByteFlip,
    DuplicateKeyLine,
    Tabs,
    LineEndings,
    IndentShift,
    FlowBreak,
    BlockScalar,
}

use Mutation::*;

/// Mutations and their weights. Tree mutations dominate: they keep the YAML readable, so the input
/// reaches validation, render and plan instead of stopping at a syntax error.
const MUTATIONS: &[(Mutation, usize)] = &[
    (TypeSwap, 10),
    (Delete, 8),
    (DuplicateItem, 6),
    (HugeNumber, 7),
    (NegativeQuantity, 5),
    (LongString, 4),
    (HostileName, 10),
    (HostileKey, 4),
    (DeepNesting, 3),
    (ManyItems, 1),
    (AliasFanout, 2),
    (UnknownKey, 3),
    (NumberTweak, 7),
    (CrossValue, 7),
    (Graft, 6),
    (TaggedValue, 2),
    (Bom, 3),
    (UnicodePrefix, 2),
    (ControlChar, 3),
    (Tag, 3),
    (Directive, 2),
    (Anchors, 3),
    (ExplicitKey, 3),
    (MultiDoc, 2),
    (Truncate, 4),
    (ByteFlip, 4),
    (DuplicateKeyLine, 3),
    (Tabs, 2),
    (LineEndings, 2),
    (IndentShift, 2),
    (FlowBreak, 2),
    (BlockScalar, 2),
];

fn is_text(m: Mutation) -> bool {
    matches!(
        m,
        Bom | UnicodePrefix
            | ControlChar
            | Tag
            | Directive
            | Anchors
            | ExplicitKey
            | MultiDoc
            | Truncate
            | ByteFlip
            | DuplicateKeyLine
            | Tabs
            | LineEndings
            | IndentShift
            | FlowBreak
            | BlockScalar
    )
}

/// Input `index` of the corpus under `master`.
pub fn generate(index: usize, master: u64, seeds: &[Seed]) -> Input {
    let mut rng = Rng::new(super::input_seed(master, index));
    let seed = rng.pick(seeds);
    let weights: Vec<usize> = MUTATIONS.iter().map(|(_, w)| *w).collect();
    let count = 1 + rng.weighted(&[5, 3, 2]);
    let chosen: Vec<Mutation> = (0..count)
        .map(|_| MUTATIONS[rng.weighted(&weights)].0)
        .collect();
    let mut mutations = Vec::new();
    let tree_muts: Vec<Mutation> = chosen.iter().copied().filter(|m| !is_text(*m)).collect();
    let text = if tree_muts.is_empty() && rng.chance(1, 2) {
        seed.text.clone()
    } else {
        let mut tree = seed.tree.clone();
        for m in tree_muts {
            mutations.push(mutate_tree(m, &mut tree, seeds, &mut rng));
        }
        emit::yaml(&tree, &mut rng)
    };
    let mut bytes = text.into_bytes();
    for m in chosen.into_iter().filter(|m| is_text(*m)) {
        mutations.push(mutate_text(m, &mut bytes, &mut rng));
    }
    Input {
        seed: seed.name.clone(),
        mutations,
        bytes,
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile values

const TRAVERSAL: &[&str] = &[
    "../../x",
    "/abs",
    "a/b",
    "..",
    ".",
    "../",
    "a\\b",
    "~/x",
    "./x",
    "x/../../../etc/passwd",
    "//x",
    "C:\\x",
];
const UNICODE: &[&str] = &[
    "tëam-α",
    "团队",
    "😀",
    "\u{202e}evil",
    "a\u{200b}b",
    "ｔｅａｍ",
    "e\u{301}",
    "\u{feff}x",
    "İ",
    "ß",
    "\u{10ffff}",
    "\u{fffd}",
];
const CONTROL: &[&str] = &[
    "a\u{0}b",
    "\u{7}",
    "a\tb",
    "a\rb",
    "a\nb",
    "\u{1b}[31mred",
    "a\u{7f}",
    "a\u{85}b",
    "a\u{2028}b",
    " ",
    "",
    "  lead",
    "trail  ",
];
const ODD: &[&str] = &[
    "-",
    "0",
    "null",
    "true",
    "1e3",
    "A",
    "UPPER",
    "a.b",
    "a_b",
    "a:b",
    "*",
    "{}",
    "[]",
    "#x",
    "a b",
    "x-",
    "-x",
    "a..b",
    "kube-system",
    "default",
    "gpu-operator",
    "nvidia.com/gpu",
    "cpu",
];

/// A hostile string and what kind it is.
fn hostile_string(rng: &mut Rng) -> (String, &'static str) {
    match rng.below(6) {
        0 => (rng.pick(TRAVERSAL).to_string(), "path traversal"),
        1 => (rng.pick(UNICODE).to_string(), "unicode"),
        2 => (rng.pick(CONTROL).to_string(), "control/blank"),
        3 => (rng.pick(ODD).to_string(), "odd"),
        4 => {
            // Kubernetes length boundaries: DNS label 63, subdomain 253, label value 63.
            let n = *rng.pick(&[62usize, 63, 64, 200, 253, 254, 300]);
            let s: String = if rng.chance(1, 2) {
                "a".repeat(n)
            } else {
                "ab-".repeat(n / 3 + 1)[..n]
                    .trim_end_matches('-')
                    .to_string()
                    + "z"
            };
            (s, "length boundary")
        }
        _ => (long_string(rng), "long"),
    }
}

fn long_string(rng: &mut Rng) -> String {
    let n = rng.range(10_000, 100_000);
    match rng.below(3) {
        0 => "a".repeat(n),
        1 => "ab-".repeat(n / 3),
        _ => "é".repeat(n / 2),
    }
}

const HUGE: &[&str] = &[
    "4294967295",
    "9223372036854775807",
    "1e308",
    "-1",
    "-2147483648",
    "18446744073709551615",
    "-9223372036854775808",
    "0",
    "2147483648",
    "4294967296",
    "1e-300",
    "-1e308",
    "65536",
    "0.5",
];

fn huge_value(rng: &mut Rng) -> (Value, String) {
    let s = *rng.pick(HUGE);
    let v: Value = serde_json::from_str(s).unwrap_or(Value::Null);
    (v, s.to_string())
}

const QUANTITIES: &[&str] = &[
    "-1",
    "-5Gi",
    "-0.5",
    "1e400",
    "-1e3",
    "0",
    "1Ei",
    "99999999999999999999",
    "9223372036854775807",
    "1.5",
    "1m",
    "1n",
    "+3",
    "0x10",
    "Infinity",
    "NaN",
    "1Gi ",
    "1 Gi",
    "--1",
    "1e-9",
    "",
    "9999999Ei",
];

fn type_swap_value(rng: &mut Rng) -> Value {
    let choices = [
        json!("x"),
        json!("12"),
        json!(7),
        json!(-3),
        json!(1.5),
        json!(true),
        json!(false),
        Value::Null,
        json!([]),
        json!({}),
        json!(["x"]),
        json!({"a": 1}),
        json!([1, 2, 3]),
    ];
    rng.pick(&choices).clone()
}

// ---------------------------------------------------------------------------------------------
// Tree mutations

fn pick_path(
    tree: &Value,
    rng: &mut Rng,
    want: impl Fn(&[Seg], &Value) -> bool,
) -> Option<Vec<Seg>> {
    let paths: Vec<Vec<Seg>> = all_paths(tree)
        .into_iter()
        .filter(|p| get(tree, p).is_some_and(|v| want(p, v)))
        .collect();
    (!paths.is_empty()).then(|| rng.pick(&paths).clone())
}

fn last_key(p: &[Seg]) -> Option<&str> {
    p.iter().rev().find_map(|s| match s {
        Seg::Key(k) => Some(k.as_str()),
        Seg::Idx(_) => None,
    })
}

const NAME_KEYS: &[&str] = &[
    "name",
    "namespace",
    "namespaces",
    "queue",
    "cohort",
    "priorityClass",
    "pool",
    "parent",
    "colorLabel",
    "key",
    "value",
    "model",
];

fn name_like(p: &[Seg], v: &Value) -> bool {
    v.is_string() && last_key(p).is_some_and(|k| NAME_KEYS.contains(&k))
}

fn quota_like(p: &[Seg], v: &Value) -> bool {
    !v.is_object()
        && !v.is_array()
        && p.iter().any(|s| {
            matches!(s, Seg::Key(k) if matches!(k.as_str(),
                "quota" | "capability" | "deserved" | "guarantee" | "lendingLimit"
                    | "borrowingLimit" | "defaults" | "layout"))
        })
}

fn set(tree: &mut Value, path: &[Seg], v: Value) {
    if let Some(slot) = get_mut(tree, path) {
        *slot = v;
    }
}

fn remove(tree: &mut Value, path: &[Seg]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    match (get_mut(tree, parent), last) {
        (Some(Value::Object(m)), Seg::Key(k)) => {
            m.shift_remove(k.as_str());
        }
        (Some(Value::Array(a)), Seg::Idx(i)) if *i < a.len() => {
            a.remove(*i);
        }
        _ => {}
    }
}

fn rename_key(tree: &mut Value, path: &[Seg], new: &str) {
    let Some((Seg::Key(old), parent)) = path.split_last() else {
        return;
    };
    if let Some(Value::Object(m)) = get_mut(tree, parent) {
        let entries: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
        let mut out = Map::new();
        for (k, v) in entries {
            if k == *old {
                out.insert(new.to_string(), v);
            } else if k != new {
                out.insert(k, v);
            }
        }
        *m = out;
    }
}

fn short(s: &str) -> String {
    let n = s.chars().count();
    if n > 40 {
        let head: String = s.chars().take(12).collect();
        format!("{head:?}… ({n} chars)")
    } else {
        format!("{s:?}")
    }
}

fn mutate_tree(m: Mutation, tree: &mut Value, seeds: &[Seed], rng: &mut Rng) -> String {
    let any = |p: &[Seg], _: &Value| !p.is_empty();
    let scalar = |p: &[Seg], v: &Value| !p.is_empty() && !v.is_object() && !v.is_array();
    match m {
        TypeSwap => {
            let Some(p) = pick_path(tree, rng, any) else {
                return "type swap: no node".into();
            };
            let v = type_swap_value(rng);
            let d = format!("type swap at {} -> {}", show_path(&p), v);
            set(tree, &p, v);
            d
        }
        Delete => {
            let Some(p) = pick_path(tree, rng, any) else {
                return "delete: no node".into();
            };
            remove(tree, &p);
            format!("delete {}", show_path(&p))
        }
        DuplicateItem => {
            let Some(p) = pick_path(tree, rng, |_, v| {
                v.as_array().is_some_and(|a| !a.is_empty())
            }) else {
                return "duplicate item: no list".into();
            };
            if let Some(Value::Array(a)) = get_mut(tree, &p) {
                let i = rng.below(a.len());
                let item = a[i].clone();
                a.insert(i + 1, item);
                return format!("duplicate item {}[{i}]", show_path(&p));
            }
            "duplicate item: none".into()
        }
        HugeNumber => {
            let prefer_numbers = rng.chance(3, 4);
            let Some(p) = pick_path(tree, rng, |p, v| {
                scalar(p, v) && (!prefer_numbers || v.is_number())
            }) else {
                return "huge number: no scalar".into();
            };
            let (v, s) = huge_value(rng);
            set(tree, &p, v);
            format!("huge number at {} -> {s}", show_path(&p))
        }
        NegativeQuantity => {
            let p = pick_path(tree, rng, quota_like)
                .or_else(|| pick_path(tree, rng, |p, v| scalar(p, v) && v.is_number()));
            let Some(p) = p else {
                return "negative quantity: no quantity".into();
            };
            let q = *rng.pick(QUANTITIES);
            let v = if rng.chance(1, 3) {
                serde_json::from_str(q).unwrap_or_else(|_| json!(q))
            } else {
                json!(q)
            };
            let d = format!("quantity at {} -> {v}", show_path(&p));
            set(tree, &p, v);
            d
        }
        LongString => {
            let names = rng.chance(2, 3);
            let Some(p) = pick_path(tree, rng, |p, v| {
                if names { name_like(p, v) } else { scalar(p, v) }
            }) else {
                return "long string: no string".into();
            };
            let s = long_string(rng);
            let d = format!("long string at {} -> {}", show_path(&p), short(&s));
            set(tree, &p, json!(s));
            d
        }
        HostileName => {
            let names = rng.chance(3, 4);
            let Some(p) = pick_path(tree, rng, |p, v| {
                if names {
                    name_like(p, v)
                } else {
                    scalar(p, v) && v.is_string()
                }
            }) else {
                return "hostile name: no string".into();
            };
            let (s, kind) = hostile_string(rng);
            let d = format!("{kind} string at {} -> {}", show_path(&p), short(&s));
            set(tree, &p, json!(s));
            d
        }
        HostileKey => {
            let Some(p) = pick_path(tree, rng, |p, _| matches!(p.last(), Some(Seg::Key(_)))) else {
                return "hostile key: no key".into();
            };
            let (s, kind) = hostile_string(rng);
            rename_key(tree, &p, &s);
            format!("{kind} key: {} renamed to {}", show_path(&p), short(&s))
        }
        DeepNesting => {
            // Just under the loader's depth limit inside free-form Helm values (reaches render),
            // or well past it anywhere.
            let (p, depth) = if rng.chance(1, 3) {
                let gpu_op = vec![Seg::Key("spec".into()), Seg::Key("gpuOperator".into())];
                if let Some(Value::Object(m)) = get_mut(tree, &gpu_op) {
                    m.entry("values").or_insert_with(|| json!({}));
                }
                let mut p = gpu_op;
                p.push(Seg::Key("values".into()));
                (p, rng.range(50, 62))
            } else {
                let Some(p) = pick_path(tree, rng, any) else {
                    return "deep nesting: no node".into();
                };
                (p, rng.range(50, 200))
            };
            let seq = rng.chance(1, 2);
            let mut v = json!("x");
            for _ in 0..depth {
                v = if seq { json!([v]) } else { json!({ "a": v }) };
            }
            set(tree, &p, v);
            format!(
                "deep nesting at {}: {depth} levels of {}",
                show_path(&p),
                if seq { "sequences" } else { "mappings" }
            )
        }
        ManyItems => {
            let preferred = rng.chance(3, 4);
            let Some(p) = pick_path(tree, rng, |p, v| {
                v.as_array().is_some_and(|a| !a.is_empty())
                    && (!preferred
                        || last_key(p).is_some_and(|k| {
                            matches!(
                                k,
                                "tenants"
                                    | "nodePools"
                                    | "priorityClasses"
                                    | "clusterQueues"
                                    | "namespaces"
                                    | "queues"
                                    | "taints"
                            )
                        }))
            }) else {
                return "many items: no list".into();
            };
            let unique = rng.chance(3, 4);
            if let Some(Value::Array(a)) = get_mut(tree, &p) {
                let template = a[0].clone();
                a.clear();
                for i in 0..2000 {
                    let mut item = template.clone();
                    if unique {
                        uniquify(&mut item, i);
                    }
                    a.push(item);
                }
            }
            format!(
                "2000 items at {} ({})",
                show_path(&p),
                if unique { "renamed -<i>" } else { "identical" }
            )
        }
        AliasFanout => {
            let width = rng.range(3, 10);
            let mut depth = 2;
            while width.pow(depth + 1) <= 600_000 && rng.chance(3, 4) {
                depth += 1;
            }
            let mut raw = String::from("[");
            raw.push_str(&format!("&h0 [{}]", vec!["x"; width].join(", ")));
            for d in 1..depth {
                let prev = format!("*h{}", d - 1);
                raw.push_str(&format!(
                    ", &h{d} [{}]",
                    vec![prev.as_str(); width].join(", ")
                ));
            }
            raw.push(']');
            let in_values = rng.chance(2, 3);
            let p = if in_values {
                let gpu_op = vec![Seg::Key("spec".into()), Seg::Key("gpuOperator".into())];
                if let Some(Value::Object(m)) = get_mut(tree, &gpu_op) {
                    let values = m.entry("values").or_insert_with(|| json!({}));
                    if let Value::Object(v) = values {
                        v.insert("fanout".into(), Value::Null);
                    }
                }
                let mut p = gpu_op;
                p.push(Seg::Key("values".into()));
                p.push(Seg::Key("fanout".into()));
                Some(p)
            } else {
                pick_path(tree, rng, any)
            };
            let Some(p) = p else {
                return "alias fan-out: no node".into();
            };
            set(tree, &p, json!(format!("{RAW}{raw}")));
            format!(
                "alias fan-out at {}: width {width}, depth {depth} (~{} nodes)",
                show_path(&p),
                width.pow(depth)
            )
        }
        UnknownKey => {
            let Some(p) = pick_path(tree, rng, |_, v| v.is_object()) else {
                return "unknown key: no mapping".into();
            };
            let k = rng
                .pick(&[
                    "extra",
                    "nmae",
                    "Name",
                    "<<",
                    "spec",
                    "x-custom",
                    "",
                    "apiVersion",
                ])
                .to_string();
            let v = type_swap_value(rng);
            if let Some(Value::Object(m)) = get_mut(tree, &p) {
                m.insert(k.clone(), v.clone());
            }
            format!("unknown key {k:?}: {v} in {}", show_path(&p))
        }
        NumberTweak => {
            let Some(p) = pick_path(tree, rng, |p, v| scalar(p, v) && v.is_number()) else {
                return "number tweak: no number".into();
            };
            let n = get(tree, &p).and_then(Value::as_f64).unwrap_or(0.0);
            let i = n as i64;
            let v = match rng.below(7) {
                0 => json!(0),
                1 => json!(i + 1),
                2 => json!(i - 1),
                3 => json!(i.saturating_mul(1000)),
                4 => json!(-i),
                5 => json!(n + 0.5),
                _ => json!(i.to_string()),
            };
            let d = format!("number at {} -> {v}", show_path(&p));
            set(tree, &p, v);
            d
        }
        CrossValue => {
            let Some(p) = pick_path(tree, rng, scalar) else {
                return "cross value: no scalar".into();
            };
            let donor = rng.pick(seeds);
            let Some(dp) = pick_path(&donor.tree, rng, scalar) else {
                return "cross value: donor has no scalar".into();
            };
            let v = get(&donor.tree, &dp).cloned().unwrap_or(Value::Null);
            let d = format!(
                "value at {} -> {v} (from {} {})",
                show_path(&p),
                donor.name,
                show_path(&dp)
            );
            set(tree, &p, v);
            d
        }
        Graft => {
            let donor = rng.pick(seeds);
            let Some(p) = pick_path(tree, rng, |p, _| matches!(p.last(), Some(Seg::Key(_)))) else {
                return "graft: no key".into();
            };
            let k = last_key(&p).unwrap_or_default().to_string();
            let Some(dp) = pick_path(
                &donor.tree,
                rng,
                |dp, _| matches!(dp.last(), Some(Seg::Key(dk)) if *dk == k),
            ) else {
                return format!("graft: {} has no `{k}`", donor.name);
            };
            let v = get(&donor.tree, &dp).cloned().unwrap_or(Value::Null);
            set(tree, &p, v);
            format!(
                "graft {} from {} {}",
                show_path(&p),
                donor.name,
                show_path(&dp)
            )
        }
        TaggedValue => {
            let Some(p) = pick_path(tree, rng, scalar) else {
                return "tagged value: no scalar".into();
            };
            let tagged = *rng.pick(&[
                "!!python/object:os.system \"x\"",
                "!!bool 16",
                "!custom x",
                "!!int \"12\"",
                "!!str 12",
                "!!float 1",
                "!!binary aGk=",
                "!<tag:yaml.org,2002:str> x",
                "!!null ''",
                "!!map {}",
                "!!seq []",
                "!!timestamp 2001-12-14",
                "!!int 0x1F",
                "! x",
                "!!bool yes",
                "!!float .inf",
                "!!int 99999999999999999999",
            ]);
            set(tree, &p, json!(format!("{RAW}{tagged}")));
            format!("tagged value at {}: `{tagged}`", show_path(&p))
        }
        _ => unreachable!("text mutation {m:?} applied to the tree"),
    }
}

/// Makes the names in a copied list item unique (`name` fields and namespace lists).
fn uniquify(item: &mut Value, i: usize) {
    match item {
        Value::String(s) => *s = format!("{s}-{i}"),
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                match (k.as_str(), v) {
                    ("name", Value::String(s)) => *s = format!("{s}-{i}"),
                    ("namespaces", Value::Array(a)) => {
                        for ns in a.iter_mut() {
                            if let Value::String(s) = ns {
                                *s = format!("{s}-{i}");
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Text mutations

/// Byte offsets of line starts.
fn line_starts(b: &[u8]) -> Vec<usize> {
    let mut out = vec![0];
    out.extend(
        b.iter()
            .enumerate()
            .filter(|(_, c)| **c == b'\n')
            .map(|(i, _)| i + 1)
            .filter(|i| *i < b.len()),
    );
    out
}

fn line_at(b: &[u8], start: usize) -> &[u8] {
    let end = b[start..]
        .iter()
        .position(|c| *c == b'\n')
        .map_or(b.len(), |e| start + e);
    &b[start..end]
}

/// A char boundary near a random offset.
fn boundary(b: &[u8], rng: &mut Rng) -> usize {
    let mut i = rng.below(b.len() + 1);
    while i < b.len() && (b[i] & 0xC0) == 0x80 {
        i += 1;
    }
    i
}

fn splice(b: &mut Vec<u8>, at: usize, text: &[u8]) {
    b.splice(at..at, text.iter().copied());
}

/// Lines `indent key: value` with a scalar value: (line start, offset of the value, line number).
fn value_lines(b: &[u8]) -> Vec<(usize, usize, usize)> {
    line_starts(b)
        .into_iter()
        .enumerate()
        .filter_map(|(n, s)| {
            let line = line_at(b, s);
            let text = std::str::from_utf8(line).ok()?;
            let trimmed = text.trim_start();
            if trimmed.starts_with('#') {
                return None;
            }
            let colon = text.find(": ")?;
            let value = text[colon + 2..].trim_start();
            if value.is_empty() || value.starts_with(['{', '[', '#', '&', '*', '!', '|', '>']) {
                return None;
            }
            let voff = text.len() - value.len();
            Some((s, s + voff, n + 1))
        })
        .collect()
}

fn show_line(b: &[u8], start: usize) -> String {
    let l = String::from_utf8_lossy(line_at(b, start)).to_string();
    short(&l)
}

fn mutate_text(m: Mutation, b: &mut Vec<u8>, rng: &mut Rng) -> String {
    if b.is_empty() {
        b.extend_from_slice(b"x: 1\n");
    }
    let starts = line_starts(b);
    match m {
        Bom => {
            if rng.chance(2, 3) {
                splice(b, 0, "\u{feff}".as_bytes());
                "text: BOM prefix".into()
            } else {
                let i = rng.below(starts.len());
                splice(b, starts[i], "\u{feff}".as_bytes());
                format!("text: BOM at the start of line {}", i + 1)
            }
        }
        UnicodePrefix => {
            let u = *rng.pick(&[
                "\u{200b}",
                "\u{a0}",
                "\u{200f}",
                "\u{2028}",
                "\u{85}",
                "\u{3000}",
                "\u{fffe}",
                "é",
                "\u{1f600}",
            ]);
            let i = if rng.chance(1, 2) {
                0
            } else {
                rng.below(starts.len())
            };
            splice(b, starts[i], u.as_bytes());
            format!("text: {u:?} at the start of line {}", i + 1)
        }
        ControlChar => {
            let c = *rng.pick(&[
                0x00u8, 0x01, 0x07, 0x08, 0x0b, 0x0c, 0x1b, 0x7f, b'\r', b'\t',
            ]);
            let at = boundary(b, rng);
            splice(b, at, &[c]);
            format!("text: control byte {c:#04x} at byte {at}")
        }
        Tag => {
            let lines = value_lines(b);
            if lines.is_empty() {
                return "text: tag: no value line".into();
            }
            let (s, v, n) = *rng.pick(&lines);
            let tag = *rng.pick(&[
                "!!python/object:os.system ",
                "!!bool ",
                "!custom ",
                "!!int ",
                "!!str ",
                "!!float ",
                "!!binary ",
                "!<tag:yaml.org,2002:int> ",
                "!!null ",
                "!e!x ",
                "!!seq ",
            ]);
            let d = format!(
                "text: tag `{}` on line {n} ({})",
                tag.trim(),
                show_line(b, s)
            );
            splice(b, v, tag.as_bytes());
            d
        }
        Directive => {
            let d = *rng.pick(&[
                "%YAML 9.9\n---\n",
                "%YAML 1.1\n---\n",
                "%YAML 1.2\n%YAML 1.2\n---\n",
                "%TAG !e! tag:example.com,2000:\n---\n",
                "%FOO bar baz\n---\n",
                "%YAML 9.9\n",
                "%YAML 2.0\n---\n",
            ]);
            splice(b, 0, d.as_bytes());
            format!("text: directive prefix {d:?}")
        }
        Anchors => {
            let lines = value_lines(b);
            if lines.len() < 2 {
                return "text: anchors: too few value lines".into();
            }
            let i = rng.below(lines.len() - 1);
            let j = rng.range(i + 1, lines.len() - 1);
            let (s1, v1, n1) = lines[i];
            let (s2, v2, n2) = lines[j];
            let variant = rng.below(3);
            let d = format!(
                "text: {} line {n1} ({}) and line {n2} ({})",
                [
                    "anchor/alias",
                    "alias to an unknown anchor",
                    "alias before its anchor"
                ][variant],
                show_line(b, s1),
                show_line(b, s2)
            );
            // Edit the later line first so the earlier offsets stay valid.
            let end2 = s2 + line_at(b, s2).len();
            match variant {
                0 => {
                    b.splice(v2..end2, b"*a1".iter().copied());
                    splice(b, v1, b"&a1 ");
                }
                1 => {
                    b.splice(v2..end2, b"*nope".iter().copied());
                }
                _ => {
                    splice(b, v2, b"&a2 ");
                    let end1 = s1 + line_at(b, s1).len();
                    b.splice(v1..end1, b"*a2".iter().copied());
                }
            }
            d
        }
        ExplicitKey => {
            let lines = value_lines(b);
            if lines.is_empty() || rng.chance(1, 3) {
                let i = rng.below(starts.len());
                let line = line_at(b, starts[i]);
                let indent = line.iter().take_while(|c| **c == b' ').count();
                let pad = " ".repeat(indent);
                let key = *rng.pick(&["[a, b]", "{a: 1}", "|\n  block", "x"]);
                let text = format!("{pad}? {key}\n{pad}: v\n");
                splice(b, starts[i], text.as_bytes());
                return format!("text: explicit key `? {key}` before line {}", i + 1);
            }
            let (s, v, n) = *rng.pick(&lines);
            let line = line_at(b, s).to_vec();
            let text = String::from_utf8_lossy(&line).to_string();
            let indent = text.len() - text.trim_start().len();
            let key_end = text.find(": ").unwrap_or(indent);
            let pad = &text[..indent];
            let key = text[indent..key_end].trim_start_matches("- ");
            let dash = if text[indent..].starts_with("- ") {
                "- "
            } else {
                ""
            };
            let inner = if dash.is_empty() {
                pad.to_string()
            } else {
                format!("{pad}  ")
            };
            let value = String::from_utf8_lossy(&b[v..s + line.len()]).to_string();
            let new = format!("{pad}{dash}? {key}\n{inner}: {value}");
            b.splice(s..s + line.len(), new.bytes());
            format!("text: explicit `? key` on line {n} ({})", short(&text))
        }
        MultiDoc => {
            let original = b.clone();
            match rng.below(5) {
                0 => {
                    b.extend_from_slice(b"\n---\n");
                    b.extend_from_slice(&original);
                    "text: second document (copy)".into()
                }
                1 => {
                    b.extend_from_slice(b"\n...\njunk: 1\n");
                    "text: `...` then junk".into()
                }
                2 => {
                    splice(b, 0, b"---\n---\n");
                    "text: empty first document".into()
                }
                3 => {
                    let i = rng.below(starts.len());
                    splice(b, starts[i], b"---\n");
                    format!("text: `---` before line {}", i + 1)
                }
                _ => {
                    splice(b, 0, b"--- !!map\n");
                    "text: `--- !!map` header".into()
                }
            }
        }
        Truncate => {
            let at = rng.below(b.len());
            b.truncate(at);
            format!("text: truncated at byte {at}")
        }
        ByteFlip => {
            let n = rng.range(1, 8);
            let mut at = Vec::new();
            for _ in 0..n {
                let i = rng.below(b.len());
                if rng.chance(1, 2) {
                    b[i] ^= 1 << rng.below(8);
                } else {
                    b[i] = rng.below(256) as u8;
                }
                at.push(i);
            }
            format!("text: {n} byte flip(s) at {at:?}")
        }
        DuplicateKeyLine => {
            let keyed: Vec<(usize, usize)> = starts
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    let l = line_at(b, **s);
                    let t = String::from_utf8_lossy(l);
                    let t = t.trim_start();
                    !t.starts_with('#') && !t.starts_with("- ") && t.contains(':')
                })
                .map(|(n, s)| (n, *s))
                .collect();
            if keyed.is_empty() {
                return "text: duplicate key: no key line".into();
            }
            let (n, s) = *rng.pick(&keyed);
            let mut line = line_at(b, s).to_vec();
            line.push(b'\n');
            let d = format!("text: duplicate key line {} ({})", n + 1, show_line(b, s));
            splice(b, s, &line);
            d
        }
        Tabs => {
            let indented: Vec<usize> = starts
                .iter()
                .copied()
                .filter(|s| b.get(*s) == Some(&b' '))
                .collect();
            if indented.is_empty() {
                return "text: tabs: no indented line".into();
            }
            let s = *rng.pick(&indented);
            let n = b[s..].iter().take_while(|c| **c == b' ').count();
            b.splice(s..s + n, std::iter::once(b'\t'));
            format!("text: tab indentation on {}", show_line(b, s))
        }
        LineEndings => match rng.below(3) {
            0 => {
                let crlf: Vec<u8> = b
                    .iter()
                    .flat_map(|c| {
                        if *c == b'\n' {
                            vec![b'\r', b'\n']
                        } else {
                            vec![*c]
                        }
                    })
                    .collect();
                *b = crlf;
                "text: CRLF line endings".into()
            }
            1 => {
                let i = rng.below(starts.len());
                let s = starts[i];
                let end = s + line_at(b, s).len();
                splice(b, end, b"\r");
                format!("text: CR at the end of line {}", i + 1)
            }
            _ => {
                let i = rng.below(starts.len());
                let s = starts[i];
                let end = s + line_at(b, s).len();
                if end < b.len() {
                    b[end] = b'\r';
                }
                format!("text: lone CR ending line {}", i + 1)
            }
        },
        IndentShift => {
            let i = rng.below(starts.len());
            let s = starts[i];
            if rng.chance(1, 2) && b.get(s) == Some(&b' ') {
                b.remove(s);
                format!("text: one space less on line {}", i + 1)
            } else {
                splice(b, s, b"  ");
                format!("text: two spaces more on line {}", i + 1)
            }
        }
        FlowBreak => {
            let c = *rng.pick(b"[]{},:&*!|>'\"%@`#-?");
            let at = boundary(b, rng);
            splice(b, at, &[c]);
            format!("text: `{}` inserted at byte {at}", c as char)
        }
        BlockScalar => {
            let lines = value_lines(b);
            if lines.is_empty() {
                return "text: block scalar: no value line".into();
            }
            let (s, v, n) = *rng.pick(&lines);
            let line = line_at(b, s).to_vec();
            let indent = line.iter().take_while(|c| **c == b' ').count();
            let style = *rng.pick(&["|", ">-", "|+", "|2", ">"]);
            let value = b[v..s + line.len()].to_vec();
            let mut new = format!("{style}\n{}", " ".repeat(indent + 4)).into_bytes();
            new.extend_from_slice(&value);
            b.splice(v..s + line.len(), new);
            format!("text: block scalar `{style}` on line {n}")
        }
        _ => unreachable!("tree mutation {m:?} applied to the text"),
    }
}
