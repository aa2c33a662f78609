//! Config parsing, profiles, and the one-sentence errors for bad values.

use crate::common;

use common::{assert_rejected, assert_rejected_in_one_line};
use knee_demo_target::{profiles, Config, RecoveryMode};

#[test]
fn every_profile_is_valid_and_documents_its_peak() {
    assert!(profiles().len() >= 5);
    for (name, desc) in profiles() {
        let cfg = Config::profile(name).unwrap_or_else(|e| panic!("profile {name}: {e}"));
        assert_eq!(cfg.name, name);
        assert!(!desc.is_empty());
    }
    let srm = Config::profile("srm").unwrap();
    assert!((srm.n_star().unwrap() - 50.0).abs() < 0.5);
    assert_eq!((srm.pool, srm.recovery.mode), (600, RecoveryMode::Stuck));
    let fast = Config::profile("srm-fast").unwrap();
    let (n, x) = fast.peak().unwrap();
    assert_eq!(n, 50);
    assert!((x / srm.peak().unwrap().1 - 100.0).abs() < 1e-6, "srm-fast is srm x100");
    assert_eq!(Config::profile("auth").unwrap().pool, 250);
}

#[test]
fn profile_keys_are_overridden_by_the_config() {
    let cfg = Config::from_toml("profile = \"srm-fast\"\npool = 20\n[recovery]\nafter_s = 0.5\n").unwrap();
    assert_eq!(cfg.pool, 20);
    assert_eq!(cfg.recovery.after_s, 0.5);
    assert_eq!(cfg.recovery.mode, RecoveryMode::Stuck, "tables merge key by key");
    assert_eq!(cfg.lambda, 100.0);
    assert_eq!(cfg.path_cost("/copy"), (2.0, 10_485_760));
    assert_eq!(cfg.path_cost("/other"), (1.0, 0));
}

#[test]
fn usl_model_helpers() {
    let cfg = Config::from_toml("lambda = 10.0\nsigma = 0.1\nkappa = 0.01").unwrap();
    assert!((cfg.usl_rate(1) - 10.0).abs() < 1e-9);
    assert!((cfg.service_time(1).as_secs_f64() - 0.1).abs() < 1e-9);
    // X(N) = N / S(N)
    assert!((cfg.usl_rate(7) - 7.0 / cfg.service_time(7).as_secs_f64()).abs() < 1e-6);
    assert!((cfg.n_star().unwrap() - 90f64.sqrt()).abs() < 1e-9);
    assert_eq!(Config::from_toml("kappa = 0.0").unwrap().n_star(), None);
}

#[test]
fn bad_values_get_one_sentence_naming_key_value_and_fix() {
    assert_rejected("sigma = -0.1", &["sigma = -0.1", "0 ≤ sigma < 1"]);
    assert_rejected("lambda = 0", &["lambda = 0", "> 0"]);
    assert_rejected("hang_fraction = 1.5", &["hang_fraction = 1.5"]);
    assert_rejected("[recovery]\nmode = \"stuck\"\n", &["recovery.threshold = 0"]);
    assert_rejected("[paths.\"/admin/x\"]\ncost = 1.0\n", &["/admin/x"]);
    assert_rejected("host = \"example\"", &["host = 'example'"]);
    assert_rejected_in_one_line(&["sigma = -0.1", "profile = \"nope\"", "sigmaa = 1.0", "a = \n"]);
}

#[test]
fn workers_warm_up_and_noise_are_checked_and_default_to_off() {
    let cfg = Config::from_toml("").unwrap();
    assert_eq!(
        (cfg.workers, cfg.warmup_for, cfg.warmup_factor, cfg.noise),
        (0, 0.0, 3.0, 0.0)
    );
    assert_rejected("workers = -1", &["workers = -1", "≥ 0", "0 = no limit"]);
    assert_rejected("workers = 2000000", &["workers = 2000000", "0 (no limit) to 1000000"]);
    assert_rejected("pool = -3", &["pool = -3", "0 = no limit"]);
    assert_rejected("warmup_factor = 0.5", &["warmup_factor = 0.5", "≥ 1"]);
    assert_rejected("warmup_for = -2", &["warmup_for = -2", "0 to 86400"]);
    assert_rejected("noise = -0.1", &["noise = -0.1", "from 0 (no noise)"]);
    assert_rejected("noise = 5", &["noise = 5", "to 3"]);
    assert_rejected(
        "body_bytes = 99999999999999",
        &["body_bytes = 99999999999999", "0 to 1073741824"],
    );
    assert_rejected(
        "[paths.\"/big\"]\nbytes = 2000000000",
        &["paths.\"/big\".bytes = 2000000000", "0 to 1073741824"],
    );
    assert_rejected("seed = -1", &["seed = -1"]);
    assert_rejected_in_one_line(&["workers = -1", "warmup_factor = 0.5", "noise = -0.1"]);
    // With workers the curve stops at X(workers): the plateau every level from there on gets.
    let w = Config::from_toml("lambda = 50.0\nsigma = 0.0\nkappa = 0.0\nworkers = 8").unwrap();
    assert_eq!(w.plateau_rate(), Some(400.0));
    assert_eq!(Config::from_toml("").unwrap().plateau_rate(), None);
    let capped = Config::from_toml("lambda = 10.0\nsigma = 0.1\nkappa = 0.01\nworkers = 4").unwrap();
    assert_eq!(
        capped.peak().unwrap().0,
        4,
        "N* ≈ 9.5, but no more than 4 are ever served"
    );
}

#[test]
fn unknown_names_and_syntax_errors_are_reported() {
    assert_rejected("profile = \"nope\"", &["'nope'", "srm-fast"]);
    assert_rejected("sigmaa = 1.0", &["sigmaa"]);
    assert_rejected("lambda = 1.0\npool = \n", &["line 2"]);
    assert_rejected("[recovery]\nmode = \"sometimes\"\n", &["sometimes"]);
    assert_rejected("lambda = \"fast\"", &["key lambda", "fast"]);
    assert_rejected("[recovery]\nmode = \"sometimes\"\n", &["key recovery.mode"]);
}
