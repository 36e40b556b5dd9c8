//! placeholder
use crate::common::{Ctx, Failure};
use gpu_bench::Report;
/// Runs it.
pub fn run(ctx: &Ctx, _max_mib: usize) -> Result<Report, Failure> {
    ctx.report("bandwidth")
}
