//! Named profiles that imitate real services. Each is a TOML file in `crates/demo-target/profiles/`,
//! embedded at build time; its comment says what it imitates and where its curve peaks.

use crate::error::TargetError;

/// (name, one-line description, TOML text)
const PROFILES: &[(&str, &str, &str)] = &[
    ("basic", "a plain USL curve, no limits: N* ≈ 31 clients, X* ≈ 900 req/s", include_str!("../profiles/basic.toml")),
    (
        "srm",
        "grid storage manager: ~1 req/s per client, peak 50 clients at ~4.3 req/s, pool 600, hangs past 550, stuck after overload",
        include_str!("../profiles/srm.toml"),
    ),
    (
        "srm-fast",
        "srm 100x faster for tests and demos: peak 50 clients at ~432 req/s, pool 600, stuck after 2 s over 500",
        include_str!("../profiles/srm-fast.toml"),
    ),
    (
        "auth",
        "authorization server: S(1) = 5 ms, pool of 250 (503 past it), 504 past 2 s, recovers at once",
        include_str!("../profiles/auth.toml"),
    ),
    (
        "web",
        "web front end: thousands of req/s, 2 ms per new connection (keep-alive sensitive), 2000 connections max",
        include_str!("../profiles/web.toml"),
    ),
];

/// Every profile's name and description.
pub fn profiles() -> Vec<(&'static str, &'static str)> {
    PROFILES.iter().map(|(n, d, _)| (*n, *d)).collect()
}

/// The TOML text of a profile.
pub fn text(name: &str) -> Result<&'static str, TargetError> {
    PROFILES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, t)| *t)
        .ok_or_else(|| TargetError::UnknownProfile {
            name: name.to_string(),
            known: PROFILES.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", "),
        })
}

/// A profile as a TOML table (the base a config's other keys override).
pub(crate) fn table(name: &str) -> Result<toml::Table, TargetError> {
    text(name)?
        .parse()
        .map_err(|e: toml::de::Error| TargetError::Toml(format!("profile {name}: {}", e.message())))
}
