//! Shrinking a failing input to a small reproducer, and showing inputs briefly.

use serde_json::Value;

use super::emit::{Seg, all_paths};

/// Removes whole subtrees (largest first) while `still_fails` holds. At most `budget` tries.
pub fn tree(
    mut v: Value,
    budget: &mut usize,
    still_fails: &mut dyn FnMut(&Value) -> bool,
) -> Value {
    loop {
        let mut progressed = false;
        // Shallow paths first: dropping `spec.tenants` beats dropping each tenant.
        let mut paths: Vec<Vec<Seg>> = all_paths(&v)
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
        paths.sort_by_key(Vec::len);
        for p in paths {
            if *budget == 0 {
                return v;
            }
            let mut candidate = v.clone();
            if !remove(&mut candidate, &p) {
                continue;
            }
            *budget -= 1;
            if still_fails(&candidate) {
                v = candidate;
                progressed = true;
                break;
            }
        }
        if !progressed {
            return v;
        }
    }
}

fn remove(v: &mut Value, path: &[Seg]) -> bool {
    let Some((last, parent)) = path.split_last() else {
        return false;
    };
    match (super::emit::get_mut(v, parent), last) {
        (Some(Value::Object(m)), Seg::Key(k)) => m.shift_remove(k.as_str()).is_some(),
        (Some(Value::Array(a)), Seg::Idx(i)) if *i < a.len() => {
            a.remove(*i);
            true
        }
        _ => false,
    }
}

/// Removes chunks of lines (halving the chunk size) while `still_fails` holds, then shortens long
/// lines. At most `budget` tries.
pub fn lines(
    text: &[u8],
    budget: &mut usize,
    still_fails: &mut dyn FnMut(&[u8]) -> bool,
) -> Vec<u8> {
    let mut cur: Vec<Vec<u8>> = text
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    let mut chunk = cur.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        while i < cur.len() {
            if *budget == 0 {
                return cur.concat();
            }
            let end = (i + chunk).min(cur.len());
            let candidate: Vec<u8> = cur[..i]
                .iter()
                .chain(&cur[end..])
                .flatten()
                .copied()
                .collect();
            *budget -= 1;
            if still_fails(&candidate) {
                cur.drain(i..end);
            } else {
                i += chunk;
            }
        }
        if chunk == 1 {
            break;
        }
        chunk = chunk.div_ceil(2);
    }
    // Long lines (long strings, fan-outs): cut the middle out, as much as still fails.
    for li in 0..cur.len() {
        while cur[li].len() > 120 && *budget > 0 {
            let line = &cur[li];
            let cut = line.len() / 2;
            let start = line.len() / 4;
            let mut candidate_line = line[..start].to_vec();
            candidate_line.extend_from_slice(&line[start + cut..]);
            let candidate: Vec<u8> = cur[..li]
                .iter()
                .chain(std::iter::once(&candidate_line))
                .chain(&cur[li + 1..])
                .flatten()
                .copied()
                .collect();
            *budget -= 1;
            if still_fails(&candidate) {
                cur[li] = candidate_line;
            } else {
                break;
            }
        }
    }
    cur.concat()
}

/// The input for a report: lossy UTF-8, runs of one character collapsed (`<'a' x 50000>`), long
/// lines cut, at most `max_lines` lines, control characters visible.
pub fn excerpt(bytes: &[u8], max_lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let total = text.lines().count();
    for (n, line) in text.split('\n').enumerate().take(max_lines) {
        let mut shown = String::new();
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let run = chars[i..].iter().take_while(|d| **d == c).count();
            if run > 16 {
                shown.push_str(&format!("<{c:?} x {run}>"));
            } else {
                for _ in 0..run {
                    match c {
                        '\t' => shown.push_str("\\t"),
                        '\r' => shown.push_str("\\r"),
                        c if c.is_control() || c == '\u{feff}' => {
                            shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)))
                        }
                        c => shown.push(c),
                    }
                }
            }
            i += run;
        }
        if shown.chars().count() > 160 {
            let head: String = shown.chars().take(140).collect();
            shown = format!("{head}… ({} chars)", chars.len());
        }
        out.push_str(&format!("    {:>4} | {shown}\n", n + 1));
    }
    if total > max_lines {
        out.push_str(&format!("    ... ({} more lines)\n", total - max_lines));
    }
    out
}
