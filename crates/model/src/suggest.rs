//! "Did you mean" suggestions for misspelt names, fields and references.

/// The candidate closest to `word`, if it is close enough to be a likely typo.
pub fn closest<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, c)| c)
}

/// `"; did you mean `x`?"` or nothing.
pub fn did_you_mean<'a, I>(word: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    closest(word, candidates).map_or_else(String::new, |c| format!("did you mean `{c}`? "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let fields = ["nodePools", "tenants", "priorityClasses"];
        assert_eq!(closest("nodepool", fields), Some("nodePools"));
        assert_eq!(closest("tenant", fields), Some("tenants"));
        assert_eq!(closest("zzz", fields), None);
    }
}
