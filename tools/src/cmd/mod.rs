//! The `fathom` subcommands, one module each.

pub mod bench;
pub mod bench_matvec;
pub mod inspect;
pub mod kl;
pub mod logits;
pub mod run;
pub mod synth;
pub mod test_ops;

/// Applies `FATHOM_ROWS_KERNEL` (comma-separated `TYPE=KERNEL`, e.g. `iq2_xxs=avx512-lut`):
/// the decode kernel each named type uses instead of the first this CPU lists
/// ([`quant::simd::set_rows_kernel`]; every kernel gives the same bits). Unset or empty: no
/// change. An unknown type or kernel is an error naming the entry.
pub fn rows_kernels_from_env() -> anyhow::Result<()> {
    use anyhow::Context;
    let Ok(spec) = std::env::var("FATHOM_ROWS_KERNEL") else {
        return Ok(());
    };
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (ty, name) = entry
            .split_once('=')
            .with_context(|| format!("FATHOM_ROWS_KERNEL: {entry:?} is not TYPE=KERNEL"))?;
        let t = quant::DType::from_name(ty.trim())
            .with_context(|| format!("FATHOM_ROWS_KERNEL: unknown type {:?}", ty.trim()))?;
        quant::simd::set_rows_kernel(t, Some(name.trim()))
            .with_context(|| format!("FATHOM_ROWS_KERNEL: {entry:?}"))?;
    }
    Ok(())
}
