//! EXPERT_PREFETCH kernel: thread 0 collects the distinct valid expert ids of the guess and,
//! where the weight's experts are paged, hands them to the source to read ahead; the
//! output is their count.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::expert_prefetch::ExpertPrefetch;
use graph::TensorDesc;
use quant::DType;

/// The distinct ids of `ids` (any strides) inside `0..e`, increasing.
fn guessed(ids: &TensorRef, e: usize) -> Vec<u32> {
    let d = &ids.desc;
    let mut seen = vec![false; e];
    for t in 0..d.ne[1] {
        for u in 0..d.ne[0] {
            let off = u * d.nb[0] + t * d.nb[1];
            let b = &ids.bytes()[off..off + 4];
            let id = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if id >= 0 && (id as usize) < e {
                seen[id as usize] = true;
            }
        }
    }
    (0..e as u32).filter(|&i| seen[i as usize]).collect()
}

fn run(cx: &KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
    if cx.ith != 0 {
        return;
    }
    let experts = guessed(&srcs[1], srcs[0].desc.ne[2]);
    if let Some(src) = cx.experts {
        src.prefetch(&experts);
    }
    dst.row_i32_mut(0)[0] = experts.len() as i32;
}

impl CpuKernel for ExpertPrefetch {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        run(cx, dst, srcs);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        run(cx, dst, srcs);
    }
    fn cases() -> Vec<Case> {
        let mut b = CaseBuilder::new(83);
        let w = b.weight("w", DType::Q8_0, &[32, 3, 5], 0.5).expect("case");
        // repeats, a skip (−1) and ids outside 0..5 are not counted: {0, 1, 4} → 3
        let idd = TensorDesc::new(DType::I32, &[3, 3]).expect("case");
        let ids = b
            .input_data(
                "ids",
                idd,
                bytemuck::cast_slice(&[4i32, 1, -1, 4, 7, 0, -3, 1, 5]).to_vec(),
            )
            .expect("case");
        let out = b.g.expert_prefetch(w, ids).expect("case");
        vec![b
            .finish(
                "EXPERT_PREFETCH Q8_0{32,3,5} ids{3,3}".into(),
                out,
                0.0,
                true,
            )
            .expect("case")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guess_is_the_distinct_valid_ids() {
        let d = TensorDesc::new(DType::I32, &[3, 3]).unwrap();
        let v = [4i32, 1, -1, 4, 7, 0, -3, 1, 5];
        let bytes: &[u8] = bytemuck::cast_slice(&v);
        assert_eq!(guessed(&TensorRef::new(d, bytes), 5), vec![0, 1, 4]);
        assert_eq!(guessed(&TensorRef::new(d, bytes), 8), vec![0, 1, 4, 5, 7]);
    }
}
