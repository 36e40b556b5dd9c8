//! placeholder
use crate::common::{Ctx, Failure};
use gpu_bench::Report;
/// Runs it.
pub fn run(ctx: &Ctx, _c: usize, _n: usize) -> Result<Report, Failure> {
    ctx.report("overlap")
}
