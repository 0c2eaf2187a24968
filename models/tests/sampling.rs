//! Sampler behaviour: greedy, filters, determinism, the drawn distribution, bad logits.

use fathom_models::sampling::{argmax, Sampler, SamplerConfig, SamplingError};

fn cfg(temperature: f32, top_k: usize, top_p: f32, min_p: f32, seed: u64) -> SamplerConfig {
    SamplerConfig {
        temperature,
        top_k,
        top_p,
        min_p,
        seed,
        ..SamplerConfig::greedy()
    }
}

/// Deterministic pseudo-random logits (no RNG crate).
fn logits(n: usize, salt: u64) -> Vec<f32> {
    let mut x = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
        })
        .collect()
}

#[test]
fn greedy_is_argmax_first_on_ties() {
    let mut s = Sampler::new(SamplerConfig::greedy()).unwrap();
    assert_eq!(s.sample(&[0.1, 2.0, -1.0, 2.0]).unwrap(), 1);
    assert_eq!(s.sample(&[f32::NAN, -5.0, f32::NAN]).unwrap(), 1);
    for salt in 0..20 {
        let l = logits(1000, salt);
        assert_eq!(s.sample(&l).unwrap(), argmax(&l).unwrap());
    }
    // Negative temperature is greedy too.
    let mut s = Sampler::new(cfg(-1.0, 0, 1.0, 0.0, 0)).unwrap();
    assert_eq!(s.sample(&[0.0, 0.0, 3.0]).unwrap(), 2);
}

#[test]
fn top_k_1_and_tiny_top_p_equal_greedy() {
    for salt in 0..20 {
        let l = logits(500, salt);
        let want = argmax(&l).unwrap();
        let mut k1 = Sampler::new(cfg(1.5, 1, 1.0, 0.0, salt)).unwrap();
        let mut p0 = Sampler::new(cfg(1.5, 0, 1e-6, 0.0, salt)).unwrap();
        let mut pz = Sampler::new(cfg(1.5, 0, 0.0, 0.0, salt)).unwrap();
        for _ in 0..10 {
            assert_eq!(k1.sample(&l).unwrap(), want);
            assert_eq!(p0.sample(&l).unwrap(), want);
            assert_eq!(pz.sample(&l).unwrap(), want);
        }
    }
    // Ties: the lower id wins under top-k = 1 as in greedy.
    let mut k1 = Sampler::new(cfg(1.0, 1, 1.0, 0.0, 7)).unwrap();
    for _ in 0..50 {
        assert_eq!(k1.sample(&[1.0, 3.0, 3.0, 0.0]).unwrap(), 1);
    }
}

#[test]
fn top_k_restricts_to_the_k_largest() {
    let l = logits(300, 3);
    let mut sorted: Vec<u32> = (0..300).collect();
    sorted.sort_by(|&a, &b| l[b as usize].total_cmp(&l[a as usize]));
    let top5 = &sorted[..5];
    let mut s = Sampler::new(cfg(5.0, 5, 1.0, 0.0, 11)).unwrap();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..2000 {
        let id = s.sample(&l).unwrap();
        assert!(top5.contains(&id), "{id} not in top 5");
        seen.insert(id);
    }
    assert_eq!(seen.len(), 5, "high temperature should reach all 5");
}

#[test]
fn top_p_keeps_the_nucleus() {
    // probabilities ∝ e^l: 0.6439, 0.2369, 0.0871, 0.0321 → top-p 0.8 keeps ids 0 and 1.
    let l = [3.0, 2.0, 1.0, 0.0];
    let mut s = Sampler::new(cfg(1.0, 0, 0.8, 0.0, 5)).unwrap();
    let mut counts = [0usize; 4];
    for _ in 0..4000 {
        counts[s.sample(&l).unwrap() as usize] += 1;
    }
    assert_eq!(counts[2] + counts[3], 0, "{counts:?}");
    assert!(counts[0] > 2 * counts[1] && counts[1] > 500, "{counts:?}");
}

#[test]
fn min_p_filters_relative_to_the_max() {
    // p_i / p_max = e^(l_i - 3): 1, 0.37, 0.135, 0.05 → min-p 0.2 keeps ids 0 and 1 only.
    let l = [3.0, 2.0, 1.0, 0.0];
    let mut s = Sampler::new(cfg(1.0, 0, 1.0, 0.2, 9)).unwrap();
    let mut counts = [0usize; 4];
    for _ in 0..4000 {
        counts[s.sample(&l).unwrap() as usize] += 1;
    }
    assert_eq!(counts[2] + counts[3], 0, "{counts:?}");
    assert!(counts[1] > 0);
    // min-p 0.1 also keeps id 2 (0.135 ≥ 0.1).
    let mut s = Sampler::new(cfg(1.0, 0, 1.0, 0.1, 9)).unwrap();
    let mut counts = [0usize; 4];
    for _ in 0..4000 {
        counts[s.sample(&l).unwrap() as usize] += 1;
    }
    assert_eq!(counts[3], 0, "{counts:?}");
    assert!(counts[2] > 0, "{counts:?}");
    // min-p = 1 keeps only the max.
    let mut s = Sampler::new(cfg(1.0, 0, 1.0, 1.0, 9)).unwrap();
    assert!((0..200).all(|_| s.sample(&l).unwrap() == 0));
}

#[test]
fn same_seed_same_sequence() {
    let c = SamplerConfig {
        seed: 1234,
        ..SamplerConfig::default()
    };
    let run = |c: SamplerConfig| {
        let mut s = Sampler::new(c).unwrap();
        (0..200)
            .map(|i| s.sample(&logits(2000, i)).unwrap())
            .collect::<Vec<_>>()
    };
    let a = run(c);
    assert_eq!(a, run(c));
    let b = run(SamplerConfig { seed: 1235, ..c });
    assert_ne!(a, b);
    // reset() restarts the same sequence.
    let mut s = Sampler::new(c).unwrap();
    let first: Vec<u32> = (0..50)
        .map(|i| s.sample(&logits(2000, i)).unwrap())
        .collect();
    s.reset();
    let again: Vec<u32> = (0..50)
        .map(|i| s.sample(&logits(2000, i)).unwrap())
        .collect();
    assert_eq!(first, again);
    assert_eq!(first[..], a[..50]);
}

#[test]
fn empirical_distribution_matches_softmax() {
    let l = [1.0f32, 0.5, 0.0, -0.5, 2.0, -1.0, 0.3, 1.5];
    let n = 20_000usize;
    for (temperature, seed) in [(1.0f32, 1u64), (0.7, 2), (1.8, 3)] {
        let w: Vec<f64> = l
            .iter()
            .map(|&x| (f64::from(x) / f64::from(temperature)).exp())
            .collect();
        let z: f64 = w.iter().sum();
        let mut s = Sampler::new(cfg(temperature, 0, 1.0, 0.0, seed)).unwrap();
        let mut counts = [0usize; 8];
        for _ in 0..n {
            counts[s.sample(&l).unwrap() as usize] += 1;
        }
        let chi2: f64 = counts
            .iter()
            .zip(&w)
            .map(|(&c, &wi)| {
                let e = n as f64 * wi / z;
                (c as f64 - e).powi(2) / e
            })
            .sum();
        // 7 degrees of freedom: P(χ² > 29.9) ≈ 1e-4.
        assert!(
            chi2 < 29.9,
            "T={temperature}: chi2 {chi2} counts {counts:?}"
        );
    }
}

#[test]
fn nan_and_infinities() {
    let mut s = Sampler::new(SamplerConfig {
        seed: 3,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        temperature: 1.0,
        ..SamplerConfig::default()
    })
    .unwrap();
    // NaN is never drawn, even at a huge temperature.
    let l = [f32::NAN, 0.0, f32::NAN, 0.0];
    for _ in 0..500 {
        let id = s.sample(&l).unwrap();
        assert!(id == 1 || id == 3);
    }
    // -inf is impossible.
    let l = [f32::NEG_INFINITY, 5.0, f32::NEG_INFINITY];
    assert!((0..100).all(|_| s.sample(&l).unwrap() == 1));
    // +inf dominates (uniformly among the +inf tokens).
    let l = [1.0, f32::INFINITY, 100.0, f32::INFINITY];
    let mut seen = [0usize; 4];
    for _ in 0..400 {
        seen[s.sample(&l).unwrap() as usize] += 1;
    }
    assert_eq!(seen[0] + seen[2], 0);
    assert!(seen[1] > 100 && seen[3] > 100, "{seen:?}");
    let mut g = Sampler::new(SamplerConfig::greedy()).unwrap();
    assert_eq!(g.sample(&l).unwrap(), 1);
    // Nothing selectable is an error, not a panic.
    for bad in [
        &[][..],
        &[f32::NAN, f32::NAN][..],
        &[f32::NEG_INFINITY, f32::NAN][..],
    ] {
        assert_eq!(
            s.sample(bad),
            Err(SamplingError::NoCandidates {
                n_logits: bad.len()
            })
        );
        assert!(g.sample(bad).is_err());
    }
}

#[test]
fn repeat_penalty() {
    let c = SamplerConfig {
        repeat_penalty: 2.0,
        repeat_last_n: 2,
        ..SamplerConfig::greedy()
    };
    let mut s = Sampler::new(c).unwrap();
    let l = [3.0, 2.0, -1.0];
    // 0 is picked, then penalised (3/2 = 1.5 < 2) → 1, then 1 penalised → ...
    assert_eq!(s.sample(&l).unwrap(), 0);
    assert_eq!(s.sample(&l).unwrap(), 1);
    // both 0 and 1 in the window: 1.5 vs 1.0 → 0
    assert_eq!(s.sample(&l).unwrap(), 0);
    // Negative logits are multiplied: with -1 in history, -1 * 2 = -2.
    let mut s = Sampler::new(c).unwrap();
    s.accept(0);
    s.accept(1);
    assert_eq!(s.sample(&[-1.0, -1.5, -1.9]).unwrap(), 2);
}

#[test]
fn invalid_config_is_rejected() {
    let base = SamplerConfig::default();
    for c in [
        SamplerConfig {
            temperature: f32::NAN,
            ..base
        },
        SamplerConfig { top_p: 1.5, ..base },
        SamplerConfig {
            top_p: f32::NAN,
            ..base
        },
        SamplerConfig {
            min_p: -0.1,
            ..base
        },
        SamplerConfig {
            repeat_penalty: 0.0,
            ..base
        },
    ] {
        let e = Sampler::new(c).unwrap_err();
        assert!(matches!(e, SamplingError::InvalidConfig { .. }), "{e}");
    }
    assert!(Sampler::new(base).is_ok());
}
