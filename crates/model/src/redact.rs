//! Secret masking for everything gpuctl prints (plans, doctor reports, snapshots): human, Markdown and JSON plans go to terminals, CI
//! logs and PR comments, so a credential in a Helm value, an object manifest or a live release's
//! old values is replaced by `(sensitive)` before it leaves gpuctl. Pure: no IO, and masking never
//! reorders anything (maps keep their order, lists their length).
//!
//! A value is sensitive by where it sits or by what it looks like:
//! - its key names a credential (`password`, `token`, `apiKey`, `tls.key`, ...), unless the key
//!   names a reference to one (`secretName`, `*Ref`, `existingSecret`, `imagePullSecrets`);
//! - it is the `value` of an environment entry `{name, value}` whose name looks like a credential
//!   (`NGC_API_KEY`, `DB_PASSWORD`);
//! - its text holds one: URL userinfo (`http://user:pass@host`), `--token=...` / `TOKEN=...`
//!   assignments, a `--password VALUE` pair in an argument list, `Bearer ...`, a known token
//!   prefix (`nvapi-`, `ghp_`, `AKIA...`, JWTs, ...), a PEM private key, or a `password: ...`
//!   line of an embedded config file.
//!
//! Booleans and nulls are never masked (`auth: false` hides nothing and says something useful).

use serde_json::Value;

/// What a masked value is replaced by.
pub const MASK: &str = "(sensitive)";

/// Fragments of a (lower-cased, `-_.`-stripped) key that name a credential.
const SENSITIVE_KEY_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "sessionkey",
    "privatekey",
    "signingkey",
    "encryptionkey",
    "sshkey",
    "authkey",
    "credential",
    "bearer",
    "dockerconfigjson",
    "dockercfg",
    "connectionstring",
];

/// Key endings that make a key a reference to a credential (a Secret's name, a file's path), not
/// one: reviewers need to see which Secret a chart reads.
const REFERENCE_SUFFIXES: &[&str] = &[
    "name",
    "names",
    "ref",
    "refs",
    "path",
    "file",
    "dir",
    "pullsecret",
    "pullsecrets",
];

/// Chart keys that look like credentials but hold a Secret's name. GPU Operator:
/// `driver.secretEnv` is "Name of Kubernetes Secret which contains secrets to be passed in as
/// environment variables" (values.yaml).
const REFERENCE_KEYS: &[&str] = &["secretenv"];

/// Fragments of an (upper-cased) environment variable name that name a credential.
const SENSITIVE_ENV_WORDS: &[&str] = &[
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "SECRET",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "CREDENTIAL",
    "ACCESS_KEY",
    "AUTH",
];

/// Whether a map key names a credential (`password`, `ngc.apiKey`, `basicAuth`, `tls.key`), and
/// not a reference to one (`secretName`, `passwordSecretRef`, `existingSecret`).
pub fn is_sensitive_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let norm: String = lower
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.'))
        .collect();
    if norm.starts_with("existing")
        || REFERENCE_KEYS.contains(&norm.as_str())
        || REFERENCE_SUFFIXES.iter().any(|s| norm.ends_with(s))
    {
        return false;
    }
    // A Secret data key such as `tls.key` or `ssh.key` holds a private key; a bare `key` is a
    // toleration, label or Secret-key reference.
    lower.ends_with(".key")
        || norm == "auth"
        || norm.ends_with("auth")
        || SENSITIVE_KEY_WORDS.iter().any(|w| norm.contains(w))
}

/// Whether an environment variable name looks like a credential (`NGC_API_KEY`, `DB_PASSWORD`).
pub fn is_sensitive_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SENSITIVE_ENV_WORDS.iter().any(|w| upper.contains(w))
}

/// Whether a name in `NAME=value` or `--name=value` text names a credential.
fn is_sensitive_name(name: &str) -> bool {
    is_sensitive_key(name) || (is_env_like(name) && is_sensitive_env_name(name))
}

fn is_env_like(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn maskable(v: &Value) -> bool {
    !matches!(v, Value::Bool(_) | Value::Null)
}

fn mask(v: &mut Value) {
    if maskable(v) {
        *v = Value::String(MASK.into());
    }
}

/// Masks credentials inside `v` in place: under sensitive keys, in sensitive environment entries,
/// in argument lists, and inside strings. A Secret manifest's `data` / `stringData` values are
/// masked whatever their keys.
pub fn redact_value(v: &mut Value) {
    if v["kind"] == "Secret" {
        for field in ["data", "stringData"] {
            if let Some(Value::Object(m)) = v.get_mut(field) {
                m.values_mut().for_each(mask);
            }
        }
    }
    walk(v);
}

/// [`redact_value`] on a copy.
pub fn redacted(v: &Value) -> Value {
    let mut out = v.clone();
    redact_value(&mut out);
    out
}

fn walk(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let env_secret = m
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(is_sensitive_env_name)
                && m.contains_key("value");
            for (k, child) in m.iter_mut() {
                if is_sensitive_key(k) || (env_secret && k == "value") {
                    match child {
                        // A credential's subtree (`basicAuth: {username, password}`) hides every
                        // value but keeps its shape, so a change inside it still reads as one.
                        Value::Object(_) | Value::Array(_) => mask_leaves(child),
                        _ => mask(child),
                    }
                } else {
                    walk(child);
                }
            }
        }
        Value::Array(items) => {
            let mut value_follows = false;
            for item in items.iter_mut() {
                if value_follows
                    && let Value::String(s) = item
                    && !s.starts_with('-')
                {
                    *s = MASK.into();
                    value_follows = false;
                    continue;
                }
                value_follows = item.as_str().is_some_and(is_sensitive_flag);
                walk(item);
            }
        }
        Value::String(s) => {
            if let Some(r) = redact_str(s) {
                *s = r;
            }
        }
        _ => {}
    }
}

fn mask_leaves(v: &mut Value) {
    match v {
        Value::Object(m) => m.values_mut().for_each(mask_leaves),
        Value::Array(items) => items.iter_mut().for_each(mask_leaves),
        _ => mask(v),
    }
}

/// `--token` or `-password` without a value: the next argument is the credential.
fn is_sensitive_flag(s: &str) -> bool {
    let Some(name) = s.strip_prefix('-') else {
        return false;
    };
    let name = name.trim_start_matches('-');
    !name.is_empty() && !name.contains(['=', ' ']) && is_sensitive_name(name)
}

/// `s` with credentials masked, or `None` when it holds none.
pub fn redact_str(s: &str) -> Option<String> {
    if s.contains("-----BEGIN ") && s.contains("PRIVATE KEY-----") {
        return Some(MASK.into());
    }
    let lines = if s.contains('\n') {
        s.split_inclusive('\n').map(redact_config_line).collect()
    } else {
        s.to_string()
    };
    let out = redact_words(&lines);
    (out != s).then_some(out)
}

/// `  password: hunter2` in an embedded config file (a ConfigMap's YAML, an INI file).
fn redact_config_line(line: &str) -> String {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let (item, rest) = match body.strip_prefix("- ") {
        Some(r) => ("- ", r),
        None => ("", body),
    };
    let Some((key, value)) = rest.split_once([':', '=']) else {
        return line.to_string();
    };
    let sep = &rest[key.len()..=key.len()];
    let name = key.trim().trim_matches(['"', '\'']);
    let trimmed = value.trim();
    let newline = if line.ends_with('\n') { "\n" } else { "" };
    if name.is_empty()
        || name.contains(char::is_whitespace)
        || !is_sensitive_name(name)
        || trimmed.is_empty()
        || matches!(trimmed, "true" | "false" | "null" | "~" | "|" | ">")
    {
        return line.to_string();
    }
    format!("{indent}{item}{key}{sep} {MASK}{newline}")
}

/// Word by word (whitespace kept as it was): assignments, flag/value pairs, `Bearer` values, URL
/// userinfo and known token shapes.
fn redact_words(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let (mut value_follows, mut scheme_follows) = (false, false);
    for piece in s.split_inclusive(char::is_whitespace) {
        let word = piece.trim_end_matches(char::is_whitespace);
        let space = &piece[word.len()..];
        if word.is_empty() {
            out.push_str(space);
            continue;
        }
        // `Bearer abc...` / `Basic dXNlcjpw...`: the HTTP Authorization schemes; a short next
        // word is prose ("Basic auth").
        let credential = (value_follows && !word.starts_with('-'))
            || (scheme_follows && word.trim_matches(['"', '\'']).len() >= 8);
        if credential && word != MASK {
            out.push_str(MASK);
            out.push_str(space);
            (value_follows, scheme_follows) = (false, false);
            continue;
        }
        value_follows = is_sensitive_flag(word.trim_matches(['"', '\'']));
        scheme_follows = (word == "Bearer" || word == "Basic") && !space.is_empty();
        out.push_str(&redact_word(word));
        out.push_str(space);
    }
    out
}

fn redact_word(word: &str) -> String {
    if let Some(masked) = redact_assignment(word) {
        return masked;
    }
    redact_tokens(&redact_urls(word))
}

/// `--token=abc`, `-p=abc`, `NGC_API_KEY=abc`, `'--password=abc'`.
fn redact_assignment(word: &str) -> Option<String> {
    let body = word.trim_start_matches(['-', '"', '\'']);
    let prefix = &word[..word.len() - body.len()];
    let (name, value) = body.split_once('=')?;
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    let flag = matches!(value, "true" | "false");
    (valid && !value.is_empty() && !flag && value != MASK && is_sensitive_name(name))
        .then(|| format!("{prefix}{name}={MASK}"))
}

/// `scheme://user:pass@host` keeps the user and masks the password; `scheme://token@host` masks
/// the userinfo when it is a known token.
fn redact_urls(word: &str) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail.find(['/', '?', '#', '"', '\'']).unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.split_once(':') {
                    Some((user, _)) => out.push_str(&format!("{user}:{MASK}")),
                    None if redact_tokens(userinfo) != userinfo => out.push_str(MASK),
                    None => out.push_str(userinfo),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    redact_query(&out)
}

/// `?access_token=abc&page=2` -> `?access_token=(sensitive)&page=2`.
fn redact_query(word: &str) -> String {
    let Some(q) = word.find('?') else {
        return word.to_string();
    };
    let (head, query) = word.split_at(q + 1);
    let (query, fragment) = query.split_at(query.find('#').unwrap_or(query.len()));
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !v.is_empty() && v != MASK && is_sensitive_name(k) => {
                format!("{k}={MASK}")
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{head}{}{fragment}", pairs.join("&"))
}

/// Known credential prefixes and how many token characters must follow for a match (short
/// prefixes need long tails: `sk-` also starts ordinary words).
const TOKEN_PREFIXES: &[(&str, usize)] = &[
    ("nvapi-", 1),      // NVIDIA NGC API keys
    ("github_pat_", 1), // GitHub fine-grained tokens
    ("ghp_", 1),        // GitHub classic tokens (and the app / OAuth ones below)
    ("gho_", 1),
    ("ghu_", 1),
    ("ghs_", 1),
    ("ghr_", 1),
    ("glpat-", 1), // GitLab
    ("xoxb-", 1),  // Slack
    ("xoxp-", 1),
    ("xoxa-", 1),
    ("xoxs-", 1),
    ("hf_", 20),  // Hugging Face
    ("sk-", 20),  // OpenAI-style secret keys
    ("AKIA", 16), // AWS access key ids
    ("ASIA", 16),
];

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+' | '/' | '=')
}

/// Known token shapes inside a word masked where they stand.
fn redact_tokens(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut i = 0;
    while i < word.len() {
        let at_boundary = word[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_');
        if at_boundary && let Some(len) = token_at(&word[i..]) {
            out.push_str(MASK);
            i += len;
            continue;
        }
        let c = word[i..].chars().next().expect("i is a char boundary");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// Length of the token starting `s`, when one does.
fn token_at(s: &str) -> Option<usize> {
    let tail_len = |from: usize| {
        s[from..]
            .find(|c: char| !is_token_char(c))
            .unwrap_or(s.len() - from)
    };
    for (prefix, min) in TOKEN_PREFIXES {
        if s.starts_with(prefix) {
            let n = tail_len(prefix.len());
            let tail = &s[prefix.len()..prefix.len() + n];
            let long_enough = tail.chars().filter(char::is_ascii_alphanumeric).count() >= *min;
            let aws_shape = !prefix.starts_with('A')
                || tail
                    .chars()
                    .take(16)
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
            if long_enough && aws_shape {
                return Some(prefix.len() + n);
            }
        }
    }
    // A JWT: base64url JSON header (`eyJ`), a dot, a payload.
    if s.starts_with("eyJ") {
        let n = tail_len(0);
        let parts: Vec<&str> = s[..n].split('.').collect();
        if parts.len() >= 2 && parts[0].len() >= 10 && !parts[1].is_empty() {
            return Some(n);
        }
    }
    None
}

/// `v` (found at `path`) masked by the keys along `path` and its own content.
pub fn redacted_at(path: &str, v: &Value) -> Value {
    let under_secret = segments(path)
        .unwrap_or_default()
        .iter()
        .any(|s| matches!(s, Segment::Key(k) if is_sensitive_key(k)));
    let mut out = v.clone();
    if under_secret {
        match out {
            Value::Object(_) | Value::Array(_) => mask_leaves(&mut out),
            _ => mask(&mut out),
        }
    } else {
        redact_value(&mut out);
    }
    out
}

/// The value at a change path in a redacted tree: a path that runs into a masked scalar ends
/// there (what is below a masked value is masked too).
pub fn lookup(tree: &Value, path: &str) -> Option<Value> {
    let mut cur = tree;
    for seg in segments(path)? {
        if cur.as_str() == Some(MASK) {
            return Some(cur.clone());
        }
        cur = match seg {
            Segment::Key(k) => cur.get(k.as_str())?,
            Segment::Index(i) => cur.get(i)?,
        };
    }
    Some(cur.clone())
}

#[derive(Debug, PartialEq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// Parses a path written by `diff` (`a.b[0]."c.d"`, keys quoted by `blueprint::yaml::join`).
fn segments(path: &str) -> Option<Vec<Segment>> {
    let mut out = Vec::new();
    let mut chars = path.chars().peekable();
    if path.is_empty() {
        return Some(out);
    }
    loop {
        match chars.peek() {
            Some('"') => {
                chars.next();
                let mut key = String::new();
                loop {
                    match chars.next()? {
                        '\\' if chars.peek() == Some(&'"') => key.push(chars.next()?),
                        '"' => break,
                        c => key.push(c),
                    }
                }
                out.push(Segment::Key(key));
            }
            Some('[') => {}
            _ => {
                let mut key = String::new();
                while let Some(&c) = chars.peek() {
                    if c == '.' || c == '[' {
                        break;
                    }
                    key.push(c);
                    chars.next();
                }
                out.push(Segment::Key(key));
            }
        }
        while chars.peek() == Some(&'[') {
            chars.next();
            let mut n = String::new();
            loop {
                match chars.next()? {
                    ']' => break,
                    c => n.push(c),
                }
            }
            out.push(Segment::Index(n.parse().ok()?));
        }
        match chars.next() {
            None => return Some(out),
            Some('.') => {}
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(s: &str) -> String {
        redact_str(s).unwrap_or_else(|| s.to_string())
    }

    #[test]
    fn keys_that_name_credentials_are_masked_references_are_not() {
        for k in [
            "password",
            "adminPassword",
            "apiKey",
            "api_key",
            "accessKey",
            "AWS_SECRET_ACCESS_KEY",
            "sessionKey",
            "privateKey",
            "token",
            "authToken",
            "auth",
            "basicAuth",
            "bearer",
            "credentials",
            "tls.key",
            ".dockerconfigjson",
        ] {
            assert!(is_sensitive_key(k), "{k} is a credential");
        }
        for k in [
            "secretName",
            "passwordSecretRef",
            "tokenFile",
            "existingSecret",
            "imagePullSecrets",
            "secretEnv",
            "keyName",
            "key",
            "name",
            "certConfig",
            "tls.crt",
            "author",
        ] {
            assert!(!is_sensitive_key(k), "{k} is not a credential");
        }
    }

    #[test]
    fn values_under_sensitive_keys_are_masked_with_their_shape_kept() {
        let mut v = json!({
            "subchart": {"auth": {"password": "hunter2", "enabled": true}},
            "basicAuth": {"username": "u", "password": "p"},
            "licensingConfig": {"secretName": "licence", "nlsEnabled": true},
            "imagePullSecrets": ["ngc-secret"],
            "tokenTTL": 3600,
            "authEnabled": false
        });
        redact_value(&mut v);
        assert_eq!(
            v,
            json!({
                "subchart": {"auth": {"password": "(sensitive)", "enabled": true}},
                "basicAuth": {"username": "(sensitive)", "password": "(sensitive)"},
                "licensingConfig": {"secretName": "licence", "nlsEnabled": true},
                "imagePullSecrets": ["ngc-secret"],
                "tokenTTL": "(sensitive)",
                "authEnabled": false
            })
        );
    }

    #[test]
    fn env_entries_with_credential_names_are_masked() {
        let mut v = json!({"env": [
            {"name": "NGC_API_KEY", "value": "plain"},
            {"name": "DB_PASSWORD", "value": "plain"},
            {"name": "GH_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gh", "key": "token"}}},
            {"name": "DCGM_EXPORTER_INTERVAL", "value": "30000"}
        ]});
        redact_value(&mut v);
        assert_eq!(
            v,
            json!({"env": [
                {"name": "NGC_API_KEY", "value": "(sensitive)"},
                {"name": "DB_PASSWORD", "value": "(sensitive)"},
                {"name": "GH_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gh", "key": "token"}}},
                {"name": "DCGM_EXPORTER_INTERVAL", "value": "30000"}
            ]}),
            "a reference to a Secret is not a secret"
        );
    }

    #[test]
    fn url_userinfo_keeps_the_user_and_masks_the_password() {
        assert_eq!(
            r("http://user:pass@proxy:3128"),
            "http://user:(sensitive)@proxy:3128"
        );
        assert_eq!(
            r("HTTPS_PROXY=http://u:p@proxy:3128/x?y=1"),
            "HTTPS_PROXY=http://u:(sensitive)@proxy:3128/x?y=1"
        );
        assert_eq!(
            r("https://ghp_abcdef@github.com/org/repo"),
            "https://(sensitive)@github.com/org/repo"
        );
        assert_eq!(
            r("https://h/x?access_token=abc&page=2"),
            "https://h/x?access_token=(sensitive)&page=2"
        );
        for plain in [
            "https://nvcr.io/nvidia",
            "ssh://git@github.com/o/r",
            "http://proxy:3128",
        ] {
            assert_eq!(redact_str(plain), None, "{plain}");
        }
        let mut v =
            json!({"env": [{"name": "HTTPS_PROXY", "value": "http://user:pass@proxy:3128"}]});
        redact_value(&mut v);
        assert_eq!(v["env"][0]["value"], "http://user:(sensitive)@proxy:3128");
    }

    #[test]
    fn flag_assignments_and_pairs_in_argument_lists_are_masked() {
        let mut v = json!({"args": [
            "--token=abc123", "--password", "hunter2", "--api-key=k", "-v", "--secret-name=pull",
            "--tls-private-key-file=/etc/tls/key", "NGC_API_KEY=nvkey", "--log-level=debug"
        ]});
        redact_value(&mut v);
        assert_eq!(
            v,
            json!({"args": [
                "--token=(sensitive)", "--password", "(sensitive)", "--api-key=(sensitive)", "-v",
                "--secret-name=pull", "--tls-private-key-file=/etc/tls/key",
                "NGC_API_KEY=(sensitive)", "--log-level=debug"
            ]})
        );
        assert_eq!(
            r("run --token abc --user=x 'Authorization: Bearer eyJhbGciOi'"),
            "run --token (sensitive) --user=x 'Authorization: Bearer (sensitive)"
        );
    }

    #[test]
    fn known_token_prefixes_are_masked_where_they_stand() {
        for (text, want) in [
            ("nvapi-abc", "(sensitive)"),
            ("key is nvapi-abc.", "key is (sensitive)"),
            ("ghp_0123456789abcdef", "(sensitive)"),
            ("github_pat_11AAA_bbb", "(sensitive)"),
            ("glpat-xyz", "(sensitive)"),
            ("xoxb-1-2-abc", "(sensitive)"),
            ("AKIAIOSFODNN7EXAMPLE", "(sensitive)"),
            ("sk-proj0123456789abcdefghij", "(sensitive)"),
            ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", "(sensitive)"),
        ] {
            assert_eq!(r(text), want, "{text}");
        }
        for plain in [
            "disk-pressure",
            "sk-1",
            "AKIA",
            "nvidia.com/gpu",
            "mynvapi-x",
            "eyJ",
            "mask-skip",
        ] {
            assert_eq!(redact_str(plain), None, "{plain}");
        }
    }

    #[test]
    fn pem_private_keys_are_masked_whole_certificates_are_not() {
        let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n";
        assert_eq!(r(key), "(sensitive)");
        let open = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(r(open), "(sensitive)");
        let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        assert_eq!(redact_str(cert), None);
    }

    #[test]
    fn credential_lines_of_embedded_config_files_are_masked() {
        let text = "server:\n  user: admin\n  password: hunter2\n  tls: true\nauth=false\n";
        assert_eq!(
            r(text),
            "server:\n  user: admin\n  password: (sensitive)\n  tls: true\nauth=false\n"
        );
    }

    #[test]
    fn secret_data_is_masked_whatever_the_keys() {
        let mut v = json!({"kind": "Secret", "data": {"ca.crt": "LS0t", "x": "eQ=="},
                           "metadata": {"name": "s"}});
        redact_value(&mut v);
        assert_eq!(
            v["data"],
            json!({"ca.crt": "(sensitive)", "x": "(sensitive)"})
        );
        assert_eq!(v["metadata"]["name"], "s");
    }

    #[test]
    fn paths_parse_as_diff_writes_them() {
        assert_eq!(
            segments(r#"spec.hard."requests.nvidia.com/gpu"[2].x"#),
            Some(vec![
                Segment::Key("spec".into()),
                Segment::Key("hard".into()),
                Segment::Key("requests.nvidia.com/gpu".into()),
                Segment::Index(2),
                Segment::Key("x".into()),
            ])
        );
        assert_eq!(segments(""), Some(vec![]));
        assert_eq!(segments("[0]"), Some(vec![Segment::Index(0)]));
    }

    #[test]
    fn masking_keeps_order_and_is_idempotent() {
        let v = json!({"z": 1, "password": "p", "a": ["--token=t", "x"], "m": {"b": 1, "a": 2}});
        let once = redacted(&v);
        let keys: Vec<&String> = once.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["z", "password", "a", "m"]);
        assert_eq!(redacted(&once), once);
    }
}
