//! The kernel table (`quant::simd::table`) itself, whatever this CPU runs: its size by level
//! and column (so that a kernel is added or removed on purpose), one row per (type, level),
//! each type's rows in level order, and the resolution rule (each column from the highest
//! level at or below the one asked for, capped at this CPU's).

use fathom_quant as quant;
use quant::simd::table::{inventory, Column};
use quant::simd::{kernels, CpuLevel};
use quant::DType;
use std::collections::{BTreeMap, HashSet};

/// Kernels per (level, column): the table as this commit defines it.
#[test]
fn the_table_holds_these_kernels() {
    let mut by = BTreeMap::new();
    for e in inventory() {
        *by.entry((e.level, e.column)).or_insert(0usize) += 1;
    }
    let want = [
        ((CpuLevel::Avx2, Column::Dot), 16),
        ((CpuLevel::Avx2, Column::Rows), 15),
        ((CpuLevel::Avx2, Column::Tile), 5),
        ((CpuLevel::Avx2, Column::Multi), 12),
        ((CpuLevel::Avx2, Column::Split), 1),
        ((CpuLevel::Avx2Vnni, Column::Rows), 1),
        ((CpuLevel::Avx2Vnni, Column::Tile), 8),
        ((CpuLevel::Avx512, Column::Dot), 4),
        ((CpuLevel::Avx512, Column::Rows), 4),
        ((CpuLevel::Avx512, Column::Multi), 1),
        ((CpuLevel::Avx512, Column::Tile), 4),
        ((CpuLevel::Avx512Vnni, Column::Dot), 11),
        ((CpuLevel::Avx512Vnni, Column::Rows), 13),
        ((CpuLevel::Avx512Vnni, Column::Multi), 13),
        ((CpuLevel::Avx512Vnni, Column::Tile), 9),
        ((CpuLevel::Avx512Vnni, Column::Split), 1),
        ((CpuLevel::Avx512Bf16, Column::Tile), 1),
        ((CpuLevel::Amx, Column::Tile), 4),
    ];
    let want: BTreeMap<_, _> = want.into_iter().collect();
    assert_eq!(by, want);
    // every type the V4 GGUFs use has at least an AVX2 dot kernel, but Q2_0_X (made only
    // where its AVX-512 kernels run)
    for t in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q8_0,
        DType::Q2_0,
        DType::MXFP4,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::IQ2_XXS,
        DType::IQ1_S,
        DType::IQ1_M,
    ] {
        assert!(
            inventory()
                .iter()
                .any(|e| e.dtype == t && e.level == CpuLevel::Avx2 && e.column == Column::Dot),
            "{t:?}"
        );
    }
}

/// One row per (type, level), each type's rows lowest level first, and no name twice in one
/// (type, column).
#[test]
fn rows_are_unique_and_in_level_order() {
    let inv = inventory();
    let mut last: BTreeMap<DType, CpuLevel> = BTreeMap::new();
    let mut rows = HashSet::new();
    let mut names = HashSet::new();
    let mut prev: Option<(DType, CpuLevel)> = None;
    for e in &inv {
        if prev != Some((e.dtype, e.level)) {
            assert!(
                rows.insert((e.dtype, e.level)),
                "two rows {:?}",
                (e.dtype, e.level)
            );
            if let Some(&l) = last.get(&e.dtype) {
                assert!(l < e.level, "{:?}: {l} before {}", e.dtype, e.level);
            }
            last.insert(e.dtype, e.level);
            prev = Some((e.dtype, e.level));
        }
        assert!(
            names.insert((e.dtype, e.column, e.name)),
            "{:?} {} {} twice",
            e.dtype,
            e.column.name(),
            e.name
        );
    }
}

/// `kernels(t, level)` takes each column from the highest row at or below `level` that has
/// it (the scalar reference for the dot otherwise), and never from a level above this CPU's.
#[test]
fn each_column_resolves_to_the_highest_level_that_has_it() {
    let cpu = CpuLevel::detect();
    let inv = inventory();
    let types: HashSet<DType> = inv.iter().map(|e| e.dtype).collect();
    for t in types {
        for level in CpuLevel::ALL {
            let k = kernels(t, level).expect("a weight type");
            let capped = level.min(cpu);
            assert_eq!(k.level, capped, "{t:?} at {level}");
            let best = |col: Column| {
                inv.iter()
                    .filter(|e| e.dtype == t && e.column == col && capped.includes(e.level))
                    .max_by_key(|e| e.level)
                    .map(|e| e.name)
            };
            assert_eq!(
                Some(k.dot.name),
                best(Column::Dot).or(Some("scalar")),
                "{t:?}"
            );
            assert_eq!(k.rows.map(|x| x.name), best(Column::Rows), "{t:?} rows");
            assert_eq!(k.multi.map(|x| x.name), best(Column::Multi), "{t:?} multi");
            assert_eq!(k.tile.map(|x| x.name), best(Column::Tile), "{t:?} tile");
            assert_eq!(
                k.split.map(|x| x.name),
                best(Column::Split),
                "{t:?} split rows"
            );
            assert_eq!(k.has_simd(), k.dot.name != "scalar");
        }
    }
    // types without a dot product have no kernels
    assert!(kernels(DType::Q8_K, cpu).is_none());
    assert!(kernels(DType::I32, cpu).is_none());
    // at the scalar level, every type runs its reference only
    let k = kernels(DType::Q8_0, CpuLevel::Scalar).unwrap();
    assert_eq!(k.dot.name, "scalar");
    assert!(k.rows.is_none() && k.multi.is_none() && k.tile.is_none());
}

/// The detected level is stable and every level's name is distinct.
#[test]
fn levels_have_names_and_an_order() {
    assert_eq!(CpuLevel::detect(), CpuLevel::detect());
    let names: HashSet<_> = CpuLevel::ALL.iter().map(|l| l.name()).collect();
    assert_eq!(names.len(), CpuLevel::ALL.len());
    assert!(CpuLevel::ALL.windows(2).all(|w| w[0] < w[1]));
    // scalar, avx2, avx512, avx512-vnni, and avx2-vnni where the CPU has AVX-VNNI
    let vnni = CpuLevel::Avx512Vnni.includes(CpuLevel::Avx2Vnni);
    assert_eq!(CpuLevel::Avx512Vnni.up_to().count(), 4 + usize::from(vnni));
    eprintln!("this CPU: {}", CpuLevel::detect());
}

/// The AVX2-VNNI rows apply exactly where the CPU has AVX-VNNI (an AVX-512 level does not
/// imply it), and the detected level is never one whose own kernels this CPU cannot run.
#[test]
fn avx2_vnni_rows_need_avx_vnni() {
    #[cfg(target_arch = "x86_64")]
    let has = std::arch::is_x86_feature_detected!("avxvnni");
    #[cfg(not(target_arch = "x86_64"))]
    let has = false;
    for level in CpuLevel::ALL {
        assert_eq!(
            level.includes(CpuLevel::Avx2Vnni),
            has && level >= CpuLevel::Avx2Vnni,
            "{level}"
        );
        assert_eq!(
            level.up_to().any(|l| l == CpuLevel::Avx2Vnni),
            level.includes(CpuLevel::Avx2Vnni)
        );
    }
    let cpu = CpuLevel::detect();
    assert!(cpu.includes(cpu), "{cpu}");
    // resolved at avx2-vnni, a type with such a row gets it only on an AVX-VNNI CPU
    let k = kernels(DType::Q8_0, CpuLevel::Avx2Vnni).expect("a weight type");
    let tile = k.tile.map(|t| t.name);
    if has && cpu >= CpuLevel::Avx2Vnni {
        assert_eq!(tile, Some("avx2-vnni"));
    } else {
        assert_ne!(tile, Some("avx2-vnni"));
    }
}
